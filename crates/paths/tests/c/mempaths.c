/* Hardware metrics per path (proftrust-paths): step() has two paths, one loads from a 1 MiB
 * array with a stride of one 64-byte line, the other does arithmetic only. main calls
 * step(i, i & 1) for i = 0..32767, so (hand-derived, under the default simulated caches:
 * 32 KiB L1D, 8 MiB LLC, 64-byte lines, LRU, no prefetcher):
 *   load path: 16384 executions (odd i), each loading line (i * 64) mod 1 MiB. The odd i
 *     below 16384 touch 8192 distinct lines (512 KiB) once each, the odd i from 16384 on
 *     touch the same 8192 lines again in the same order. 512 KiB is 16x the L1D, so every
 *     load misses L1D: 16384 L1D misses. It fits the LLC: only the first touch of each
 *     line misses it: 8192 LLC misses.
 *   arithmetic path: 16384 executions, no data access, no miss.
 * The array is volatile: the load stays a load, and stays on its own path.
 * Build: gcc -O2 -g mempaths.c -o mempaths */
#include <stdio.h>

#define N (1L << 20)
static volatile char buf[N];

__attribute__((noinline)) long step(long i, long load) {
    long s;
    if (load)
        s = buf[(i * 64) & (N - 1)];
    else
        s = i * 3;
    return s;
}

int main(void) {
    long s = 0;
    for (long i = 0; i < 32768; i++)
        s += step(i, i & 1);
    printf("%ld\n", s);
    return 0;
}
