/* Test workload for proftrust-formats: two hot loops (fa, fb), a branchy loop with a
 * static inline helper (work), recursion (rec). Iterations come from argv so the
 * compiler cannot fold them. Compiled at test time with gcc -O2 -g. */
#include <stdio.h>
#include <stdlib.h>

static inline long sq(long x) { return x * x; }

__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (i % 3)
            s += sq(i);
        else
            s -= i;
    }
    return s;
}

__attribute__((noinline)) long rec(long n) { return n <= 1 ? 1 : n + rec(n - 1); }

__attribute__((noinline)) double fa(long n) {
    double s = 0;
    for (long i = 0; i < n; i++)
        s += i * 0.5;
    return s;
}

__attribute__((noinline)) double fb(long n) {
    double s = 0;
    for (long i = 0; i < n; i++)
        s += i * 0.25 + 1;
    return s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long calls = argc > 2 ? atol(argv[2]) : 3;
    long s = 0;
    for (long k = 0; k < calls; k++)
        s += work(n + k);
    s += rec(50);
    double d = fa(n) + fb(n / 2);
    printf("%ld %f\n", s, d);
    return 0;
}
