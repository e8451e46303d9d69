/* libsvm-like: an RBF kernel that calls a dot product and exp() (libm), evaluated over
 * pairs of training vectors (seed 000 §4, libsvm: Kernel::k_function / dot). */
#include "common.h"
#include <math.h>

#define DIM 32
#define VECS 512

static double x[VECS][DIM];
static double sq[VECS];

__attribute__((noinline)) static double dot(const double *a, const double *b) {
    double s = 0.0;
    for (int i = 0; i < DIM; i++)
        s += a[i] * b[i];
    return s;
}

__attribute__((noinline)) static double kernel_rbf(int i, int j, double gamma) {
    return exp(-gamma * (sq[i] + sq[j] - 2.0 * dot(x[i], x[j])));
}

__attribute__((noinline)) static void init(void) {
    for (int i = 0; i < VECS; i++) {
        for (int d = 0; d < DIM; d++)
            x[i][d] = (double)(lcg_next() % 1000) / 1000.0;
        sq[i] = dot(x[i], x[i]);
    }
}

int main(int argc, char **argv) {
    long scale = workload_scale(argc, argv);
    init();
    double acc = 0.0;
    long sweeps = scale * 6;
    for (long s = 0; s < sweeps; s++)
        for (int i = 0; i < VECS; i++)
            for (int j = i % 8; j < VECS; j += 8)
                acc += kernel_rbf(i, j, 0.5 + 0.001 * (double)(s & 7));
    printf("libsvm checksum %.6f\n", acc);
    return 0;
}
