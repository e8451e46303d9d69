/* Deterministic mix of calls, recursion, a switch and data-dependent branches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static unsigned fib(unsigned n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) static unsigned step(unsigned x)
{
    switch (x % 5) {
    case 0: return x * 3 + 1;
    case 1: return x / 2;
    case 2: return x ^ 0x55;
    case 3: return x + 17;
    default: return x - 1;
    }
}

static int cmp(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 2000;
    unsigned *v = malloc(n * sizeof *v);
    unsigned x = 7, acc = 0;
    for (unsigned i = 0; i < n; i++) {
        x = step(x) + i;
        v[i] = x % 1000;
        if (v[i] & 1)
            acc += v[i];
    }
    qsort(v, n, sizeof *v, cmp);
    acc += fib(18);
    printf("%u %u\n", acc, v[n / 2]);
    free(v);
    return 0;
}
