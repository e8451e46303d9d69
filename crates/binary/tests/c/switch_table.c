/* A dense switch that gcc -O2 compiles to a jump table. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long dispatch(unsigned op, long x) {
    switch (op) {
    case 0: return x + 11;
    case 1: return x * 3;
    case 2: return x - 7;
    case 3: return x ^ 0x55;
    case 4: return x << 2;
    case 5: return x / 5;
    case 6: return x % 9;
    case 7: return -x;
    default: return 0;
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
    for (long i = 0; i < n; i++)
        s += dispatch((unsigned)(i % 10), i);
    printf("%ld\n", s);
    return 0;
}
