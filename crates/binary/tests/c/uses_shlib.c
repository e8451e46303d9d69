#include <stdio.h>
int shlib_sum(const int *v, int n);
int main(void) {
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = i;
    printf("%d\n", shlib_sum(v, 64));
    return 0;
}
