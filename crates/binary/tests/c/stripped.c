/* Static (file-local) functions, one with a cold part split off by gcc -O2 (`.cold`),
 * called from main: after `strip --strip-all` none of them has a symbol, but each keeps its
 * .eh_frame FDE, so proftrust recovers them as MODULE!sub_ADDR (tests/binary.rs). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long mix(long x) {
    return (x * 2654435761L) ^ (x >> 7);
}

__attribute__((noinline, cold)) static void complain(long v) {
    fprintf(stderr, "odd value %ld\n", v);
}

__attribute__((noinline)) static long check(long v) {
    if (__builtin_expect(v == -12345, 0)) {
        complain(v);
        fprintf(stderr, "giving up\n");
        exit(3);
    }
    return v + 1;
}

__attribute__((noinline)) static long sum(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += check(mix(i));
    return s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    printf("%ld\n", sum(n));
    return 0;
}
