/* A shared library: exported and static functions, a loop. */
static int mix(int a, int b) { return (a * 31) ^ b; }

int shlib_sum(const int *v, int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s = mix(s, v[i]);
    return s;
}
