/* omnet-like: a pointer chase through a shuffled linked list of events, reading each
 * node through a tiny static inline accessor (seed 000 §4, omnet: the load of the chase
 * stalls and samples land in the inlined accessor's neighbours). */
#include "common.h"

struct node {
    struct node *next;
    long key;
    long payload[6]; /* one node per 64-byte line */
};

static inline long node_key(const struct node *n) { return n->key; }

__attribute__((noinline)) static struct node *build(long n) {
    struct node *nodes = malloc(sizeof(struct node) * (size_t)n);
    long *perm = malloc(sizeof(long) * (size_t)n);
    if (!nodes || !perm)
        exit(1);
    for (long i = 0; i < n; i++)
        perm[i] = i;
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates with the LCG */
        long j = (long)(lcg_next() % (uint32_t)(i + 1));
        long t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (long i = 0; i < n; i++) {
        nodes[perm[i]].next = &nodes[perm[(i + 1) % n]];
        nodes[perm[i]].key = (long)(lcg_next() % 1000);
    }
    free(perm);
    return nodes;
}

__attribute__((noinline)) static long chase(const struct node *start, long steps) {
    long sum = 0;
    const struct node *p = start;
    for (long s = 0; s < steps; s++) {
        long k = node_key(p);
        if (k > 500)
            sum += k;
        else
            sum -= 1;
        p = p->next;
    }
    return sum;
}

int main(int argc, char **argv) {
    long scale = workload_scale(argc, argv);
    long n = 1L << 18; /* 16 MiB of nodes */
    struct node *start = build(n);
    long total = chase(start, scale * 60000);
    printf("omnet checksum %ld\n", total);
    free(start);
    return 0;
}
