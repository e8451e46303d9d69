/* A second translation unit that includes the header too: its copy must switch itself off. */
#include "proftrust_probe.h"

long other(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        PT_BOUNDARY();
        s += i;
    }
    return s;
}
