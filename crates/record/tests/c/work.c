/* Two CPU-bound functions with a known 2:1 work ratio; argv[1] scales the run time. */
#include <stdlib.h>
#include <stdio.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long hot_a(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i;
    return x;
}

__attribute__((noinline)) unsigned long hot_b(unsigned long n) {
    unsigned long x = 3;
    for (unsigned long i = 0; i < n; i++) x = (x ^ i) * 2862933555777941757UL;
    return x;
}

int main(int argc, char **argv) {
    unsigned long scale = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long r = 0; r < scale; r++) {
        sink += hot_a(2000000 + (r & 1) + sink % 2);
        sink += hot_b(1000000 + (r & 1) + sink % 2);
    }
    return 0;
}
