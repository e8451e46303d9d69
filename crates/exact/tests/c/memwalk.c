/* A known data access pattern, for the memory trace and the cache model.
 *
 *   memwalk BYTES PASSES
 *
 * fill() stores one 8-byte long to the start of every 64-byte line of the first BYTES bytes
 * of buf (BYTES/64 stores, in address order); walk() then loads the same longs PASSES times
 * (BYTES/64 * PASSES loads, in address order). Nothing else touches buf. `volatile` keeps
 * every access a single scalar access (no vectorisation, nothing hoisted). Exit status 0 when
 * the sum is the expected one. */
#include <stdlib.h>

#define LINE_LONGS 8
#define MAX_BYTES (1 << 20)

long buf[MAX_BYTES / sizeof(long)] __attribute__((aligned(64)));

__attribute__((noinline)) void fill(volatile long *a, long lines)
{
    for (long i = 0; i < lines; i++)
        a[i * LINE_LONGS] = i;
}

__attribute__((noinline)) long walk(volatile long *a, long lines, long passes)
{
    long s = 0;
    for (long p = 0; p < passes; p++)
        for (long i = 0; i < lines; i++)
            s += a[i * LINE_LONGS];
    return s;
}

int main(int argc, char **argv)
{
    long bytes = argc > 1 ? atol(argv[1]) : 4096;
    long passes = argc > 2 ? atol(argv[2]) : 1;
    if (bytes > MAX_BYTES)
        bytes = MAX_BYTES;
    long lines = bytes / 64;
    fill(buf, lines);
    long s = walk(buf, lines, passes);
    return s == lines * (lines - 1) / 2 * passes ? 0 : 1;
}
