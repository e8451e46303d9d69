/* inner <- middle <- main, all with frames (a volatile local forces one in inner), for the
   frame-pointer call-chain test. Build with -fno-omit-frame-pointer. */
#include <stdlib.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long inner(unsigned long n) {
    volatile unsigned long acc[2] = {1, 2};
    for (unsigned long i = 0; i < n; i++) acc[i & 1] = acc[i & 1] * 2862933555777941757UL + i;
    return acc[0] + acc[1];
}

__attribute__((noinline)) unsigned long middle(unsigned long n) {
    unsigned long r = inner(n);
    sink += r;
    return r + 1;
}

int main(int argc, char **argv) {
    unsigned long scale = argc > 1 ? strtoul(argv[1], 0, 10) : 20;
    for (unsigned long r = 0; r < scale; r++) sink += middle(3000000 + (r & 1));
    return 0;
}
