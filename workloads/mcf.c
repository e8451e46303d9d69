/* mcf-like: a strided loop over an array of arcs with an inlined predicate deciding which
 * arcs are candidates (seed 000 §4, mcf: primal_bea_mpp's arc scan). */
#include "common.h"

struct arc {
    long cost;
    long tail_pot;
    long head_pot;
    int ident;
    int flow;
};

static inline int is_candidate(const struct arc *a) {
    long red = a->cost - a->tail_pot + a->head_pot;
    return (a->ident == 1 && red < 0) || (a->ident == 2 && red > 0);
}

__attribute__((noinline)) static void init(struct arc *arcs, long n) {
    for (long i = 0; i < n; i++) {
        arcs[i].cost = (long)(lcg_next() % 200) - 100;
        arcs[i].tail_pot = (long)(lcg_next() % 100);
        arcs[i].head_pot = (long)(lcg_next() % 100);
        arcs[i].ident = (int)(lcg_next() % 3);
        arcs[i].flow = 0;
    }
}

__attribute__((noinline)) static long scan(struct arc *arcs, long n, long stride, long off) {
    long found = 0;
    for (long i = off; i < n; i += stride) {
        if (is_candidate(&arcs[i])) {
            arcs[i].flow++;
            found++;
        }
    }
    return found;
}

__attribute__((noinline)) static void refresh(struct arc *arcs, long n, long round) {
    for (long i = round % 97; i < n; i += 97)
        arcs[i].tail_pot = (arcs[i].tail_pot + round) % 100;
}

int main(int argc, char **argv) {
    long scale = workload_scale(argc, argv);
    long n = 1L << 20;
    struct arc *arcs = malloc(sizeof(struct arc) * (size_t)n);
    if (!arcs)
        return 1;
    init(arcs, n);
    long total = 0;
    long rounds = scale / 2 + 1;
    for (long r = 0; r < rounds; r++) {
        for (long off = 0; off < 3; off++)
            total += scan(arcs, n, 3, off);
        refresh(arcs, n, r);
    }
    printf("mcf checksum %ld\n", total);
    free(arcs);
    return 0;
}
