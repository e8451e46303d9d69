/* A loop with two probed branches, for the C header tests (crates/probe/tests/c_header.rs).
 * Iteration i takes the first branch when i % 3 == 0 and the second when i % 2 == 0, so
 * the branch history of the path timed in iteration i is known: bits (i%3==0, i%2==0). */
#include <stdio.h>
#include <stdlib.h>

#include "proftrust_probe.h"

__attribute__((noinline)) static long work(long n) {
    volatile long acc = 0;
    for (long i = 0; i < n; i++) {
        PT_BOUNDARY(); /* the site */
        if (PT_BRANCH(i % 3 == 0))
            acc += i;
        if (PT_BRANCH(i % 2 == 0))
            acc ^= i;
    }
    return acc;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    printf("%ld\n", work(n));
    return 0;
}
