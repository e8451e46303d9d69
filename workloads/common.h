/* Shared helpers of the bundled proftrust workloads: a seeded LCG (deterministic inputs)
 * and the size argument. Every workload takes an optional first argument, a size scale
 * (default 100 = about 0.5 s natively on a 2020s x86-64 core); tests pass small values. */
#ifndef PROFTRUST_WORKLOAD_COMMON_H
#define PROFTRUST_WORKLOAD_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t lcg_state = 0x9e3779b97f4a7c15ULL;

/* Knuth's MMIX LCG constants; high bits returned. */
static inline uint32_t lcg_next(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(lcg_state >> 33);
}

static long workload_scale(int argc, char **argv) {
    long s = 100;
    if (argc > 1) {
        char *end = NULL;
        s = strtol(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || s <= 0) {
            fprintf(stderr, "usage: %s [SCALE>0] (default 100)\n", argv[0]);
            exit(2);
        }
    }
    return s;
}
#endif
