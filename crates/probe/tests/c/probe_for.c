/* PT_FOR loops for the C header tests (crates/probe/tests/c_header.rs). Built with and
 * without -DPT_DISABLE (a plain for loop), the program prints the same numbers: the probed
 * build must not change what the loop computes.
 *
 *   probe_for loop N     iterations 0..N-1; iteration i takes the first branch when
 *                        i % 3 == 0 and the second when i % 2 == 0 (as probe_loop.c)
 *   probe_for exits N    continue, break and return inside PT_FOR bodies
 *   probe_for nested N   a PT_FOR inside a PT_FOR's body (misuse: the header says so) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proftrust_probe.h"

__attribute__((noinline)) static long work(long n) {
    long acc = 0;
    PT_FOR(long i = 0, i < n, i++, { /* the site */
        if (PT_BRANCH(i % 3 == 0))
            acc += i;
        if (PT_BRANCH(i % 2 == 0))
            acc ^= i;
    })
    return acc;
}

/* Returns from inside the body at i == stop: iterations 0..stop are boundaries. */
__attribute__((noinline)) static long first_at(long n, long stop) {
    PT_FOR(long i = 0, i < n, i++, {
        if (i == stop)
            return i;
    })
    return -1;
}

/* continue skips odd i, break ends the loop at i == stop: iterations 0..stop. */
__attribute__((noinline)) static long skip_and_stop(long n, long stop) {
    long s = 0;
    PT_FOR(long i = 0, i < n, i++, {
        if (i % 2)
            continue;
        if (i == stop)
            break;
        s += i;
    })
    return s;
}

__attribute__((noinline)) static long nested(long n) {
    long s = 0;
    PT_FOR(long i = 0, i < n, i++, {
        PT_FOR(long j = 0, j < 10, j++, { s += i ^ j; })
    })
    return s;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    long n = argc > 2 ? atol(argv[2]) : 1000;
    if (!strcmp(mode, "loop"))
        printf("%ld\n", work(n));
    else if (!strcmp(mode, "exits"))
        /* boundaries: (n/2 + 1) + (n/2 + 1) + n */
        printf("%ld %ld %ld\n", first_at(n, n / 2), skip_and_stop(n, n / 2), work(n));
    else if (!strcmp(mode, "nested"))
        printf("%ld\n", nested(n));
    return 0;
}
