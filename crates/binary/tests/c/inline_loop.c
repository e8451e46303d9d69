/* A static inline helper called in a hot loop (seed 000's case studies: small inlined
 * functions next to heavy loads). Built with gcc -O2 -g; `scale` is inlined into `work`. */
#include <stdio.h>
#include <stdlib.h>

static inline long scale(long x, long k) {
    if (x & 1)
        return x * k + 3;
    return x / 2 + k;
}

__attribute__((noinline)) long work(const long *v, long n, long k) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += scale(v[i], k);
    return s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long *v = malloc(sizeof(long) * (size_t)n);
    if (!v)
        return 1;
    for (long i = 0; i < n; i++)
        v[i] = i * 7 + argc;
    printf("%ld\n", work(v, n, argc));
    free(v);
    return 0;
}
