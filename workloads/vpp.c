/* vpp: the variational path profiling workload (seed 004). Three loops, each a set of
 * acyclic paths, written with PT_FOR (crates/probe/include/proftrust_probe.h): bursty
 * tracing's two copies of each loop body, a clean one with a countdown on the back edge and a
 * probed one with the timing and the PT_BRANCH outcomes (seed 004 §4.1):
 *
 *   score()  compute-bound, branchy, the most frequent paths: every execution takes about
 *            the same time (the "already optimised hot path" of seed 004 §1);
 *   lookup() memory-bound: a random gather from a table much larger than the caches; the
 *            same path hits or misses, so its time varies (the variational path);
 *   stream() a sequential pass over a cache-sized array: frequent, little variation.
 *
 * Built with -DVPP_PREFETCH (workloads/vpp_prefetch.c), lookup() prefetches the entry it
 * will need VPP_DISTANCE iterations later: seed 004 §5.4's recipe ("insert a prefetch to the
 * data to be accessed in the next iteration of the loop, or two iterations in advance ...
 * insert an if clause before the prefetch ... to avoid prefetching beyond the bounds").
 *
 *   gcc -O2 -g -fno-omit-frame-pointer -o vpp workloads/vpp.c
 *   add -DPT_DISABLE to compile the probes out
 *
 * Arguments: [SCALE] [TABLE_MB] [SEED]. SCALE (default 100, about 0.5 s natively) scales
 * the iterations of every loop (100000, 50000 and 100000 per unit); TABLE_MB (default 64)
 * is the size of the gathered table; SEED (default 1) picks the input data (train and
 * reference inputs differ by it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
/* Relative to this file, so a plain `gcc workloads/vpp.c` finds it. */
#include "../crates/probe/include/proftrust_probe.h"

#ifndef VPP_DISTANCE
#define VPP_DISTANCE 16
#endif
/* (A directive cannot sit inside PT_FOR's body, a macro argument: the prefetch is a macro.) */
#ifdef VPP_PREFETCH
#define VPP_PREFETCH_AHEAD(k)                                                              \
    do {                                                                                   \
        if ((k) + VPP_DISTANCE < m)                                                        \
            __builtin_prefetch(&table[idx[(k) + VPP_DISTANCE]]);                           \
    } while (0)
#else
#define VPP_PREFETCH_AHEAD(k) ((void)0)
#endif

struct entry {
    int32_t val;
    int32_t flag;
};

__attribute__((noinline)) static long score(long n) {
    long hits = 0;
    PT_FOR(long i = 0, i < n, i++, {
        uint32_t x = lcg_next();
        uint32_t v;
        if (PT_BRANCH(x & 1))
            v = (x * 2654435761u) ^ (x >> 7);
        else
            v = x >> 3;
        if (PT_BRANCH(v > 0x40000000u))
            hits++;
    })
    return hits;
}

__attribute__((noinline)) static long lookup(const struct entry *table, const uint32_t *idx,
                                             long m) {
    long s = 0;
    PT_FOR(long k = 0, k < m, k++, {
        VPP_PREFETCH_AHEAD(k);
        const struct entry *e = &table[idx[k]];
        if (PT_BRANCH(e->flag))
            s += e->val;
        else
            s -= 1;
    })
    return s;
}

__attribute__((noinline)) static long stream(const int32_t *a, long len, long reps) {
    long s = 0;
    for (long r = 0; r < reps; r++) {
        PT_FOR(long j = 0, j < len, j++, {
            if (PT_BRANCH(a[j] < 0))
                s -= a[j];
            else
                s += a[j];
        })
    }
    return s;
}

int main(int argc, char **argv) {
    long scale = workload_scale(argc, argv);
    long table_mb = argc > 2 ? strtol(argv[2], NULL, 10) : 64;
    long seed = argc > 3 ? strtol(argv[3], NULL, 10) : 1;
    if (table_mb <= 0 || seed < 0) {
        fprintf(stderr, "usage: %s [SCALE>0] [TABLE_MB>0] [SEED>=0]\n", argv[0]);
        return 2;
    }
    lcg_state ^= (uint64_t)seed * 0x9e3779b97f4a7c15ULL;
    long entries = table_mb * 1024 * 1024 / (long)sizeof(struct entry);
    long n = 100000 * scale; /* score() iterations */
    long m = 50000 * scale;  /* lookup() iterations */
    long len = 4000;         /* stream() array: 16 KB, stays in L1D */
    long reps = 25 * scale;  /* stream() passes */
    struct entry *table = malloc(sizeof(struct entry) * (size_t)entries);
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)m);
    int32_t *a = malloc(sizeof(int32_t) * (size_t)len);
    if (!table || !idx || !a) {
        fprintf(stderr, "vpp: out of memory (TABLE_MB %ld)\n", table_mb);
        return 1;
    }
    for (long j = 0; j < entries; j++) {
        table[j].val = (int32_t)(lcg_next() % 1000);
        table[j].flag = (int32_t)(lcg_next() & 1);
    }
    for (long k = 0; k < m; k++)
        idx[k] = lcg_next() % (uint32_t)entries;
    for (long j = 0; j < len; j++)
        a[j] = (int32_t)(lcg_next() % 2001) - 1000;
    long total = score(n);
    total += lookup(table, idx, m);
    total += stream(a, len, reps);
    printf("vpp checksum %ld\n", total);
    free(table);
    free(idx);
    free(a);
    return 0;
}
