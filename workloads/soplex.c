/* soplex-like: a sparse dot product (a tiny static inline function) inlined into a loop
 * over rows, with heavy indirect loads into a large dense vector (seed 000 §4, soplex:
 * samples of the heavy load skid into the inlined code). */
#include "common.h"

#define DENSE (1 << 21) /* 16 MiB of doubles: loads miss the caches */
#define NNZ 16

static double dense[DENSE];
static double penalty[4096];

static inline double sparse_dot(const int *idx, const double *val, int n) {
    double s = 0.0;
    for (int j = 0; j < n; j++)
        s += val[j] * dense[idx[j]];
    return s;
}

__attribute__((noinline)) static void fill(int *idx, double *val, int rows) {
    for (int i = 0; i < DENSE; i++)
        dense[i] = (double)(lcg_next() % 1000) / 1000.0;
    for (int i = 0; i < rows * NNZ; i++) {
        idx[i] = (int)(lcg_next() % DENSE);
        val[i] = (double)(lcg_next() % 100) / 50.0;
    }
}

__attribute__((noinline)) static double price_rows(const int *idx, const double *val, int rows) {
    double best = 0.0;
    for (int i = 0; i < rows; i++) {
        double d = sparse_dot(idx + (long)i * NNZ, val + (long)i * NNZ, NNZ);
        double p = d * d / (1.0 + penalty[i & 4095]);
        if (p > best)
            best = p;
    }
    return best;
}

__attribute__((noinline)) static void update_penalty(double best) {
    for (int i = 0; i < 4096; i++)
        penalty[i] = penalty[i] * 0.5 + best * 1e-6 * (double)(i & 7);
}

int main(int argc, char **argv) {
    long scale = workload_scale(argc, argv);
    int rows = 65536;
    int *idx = malloc(sizeof(int) * (size_t)rows * NNZ);
    double *val = malloc(sizeof(double) * (size_t)rows * NNZ);
    if (!idx || !val)
        return 1;
    fill(idx, val, rows);
    double acc = 0.0;
    long passes = scale + 1;
    for (long p = 0; p < passes; p++) {
        double b = price_rows(idx, val, rows);
        update_penalty(b);
        acc += b;
    }
    printf("soplex checksum %.6f\n", acc);
    free(idx);
    free(val);
    return 0;
}
