/* hmmer-like: a Viterbi-style dynamic-programming loop whose max() choices are
 * data-dependent branches (seed 000 case studies; SPEC hmmer's P7Viterbi pattern). */
#include "common.h"

#define M 256

static int tsc_mm[M], tsc_im[M], tsc_dm[M], msc[M];
static int mmx[2][M + 1], imx[2][M + 1], dmx[2][M + 1];

__attribute__((noinline)) static void make_scores(void) {
    for (int k = 0; k < M; k++) {
        tsc_mm[k] = (int)(lcg_next() % 64) - 32;
        tsc_im[k] = (int)(lcg_next() % 64) - 40;
        tsc_dm[k] = (int)(lcg_next() % 64) - 36;
        msc[k] = (int)(lcg_next() % 32) - 8;
    }
}

__attribute__((noinline)) static int viterbi_row(int cur, int prev) {
    int best = -1000000;
    for (int k = 1; k <= M; k++) {
        int sc = mmx[prev][k - 1] + tsc_mm[k - 1];
        int t = imx[prev][k - 1] + tsc_im[k - 1];
        if (t > sc) /* data-dependent */
            sc = t;
        t = dmx[prev][k - 1] + tsc_dm[k - 1];
        if (t > sc)
            sc = t;
        sc += msc[k - 1];
        if (sc < -100000)
            sc = -100000;
        mmx[cur][k] = sc;
        t = mmx[cur][k - 1] - 11;
        dmx[cur][k] = t > dmx[cur][k - 1] - 2 ? t : dmx[cur][k - 1] - 2;
        imx[cur][k] = (mmx[prev][k] - 7 > imx[prev][k] - 3) ? mmx[prev][k] - 7 : imx[prev][k] - 3;
        if (sc > best)
            best = sc;
    }
    return best;
}

__attribute__((noinline)) static void perturb(int row) {
    for (int k = 0; k < M; k += 8)
        msc[k] = (int)((lcg_next() + (uint32_t)row) % 32) - 8;
}

int main(int argc, char **argv) {
    long rows = workload_scale(argc, argv) * 5000;
    make_scores();
    long long total = 0;
    for (long r = 0; r < rows; r++) {
        int cur = (int)(r & 1);
        total += viterbi_row(cur, cur ^ 1);
        if ((r & 63) == 0)
            perturb((int)r);
    }
    printf("hmmer checksum %lld\n", total);
    return 0;
}
