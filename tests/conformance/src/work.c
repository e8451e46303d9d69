/* Hot functions with known names for the conformance suite (tests/conformance/gen.sh). */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) { if (i % 3) s += i * i; else s -= i; }
    return s;
}
__attribute__((noinline)) double fa(long n) {
    double s = 0; for (long i = 0; i < n; i++) s += i * 0.5; return s;
}
__attribute__((noinline)) double fb(long n) {
    double s = 0; for (long i = 0; i < n; i++) s += i * 0.25 + 1; return s;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    printf("%ld %f\n", work(n), fa(n) + fb(n / 2));
    return 0;
}
