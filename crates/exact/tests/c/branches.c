/* Two loops of N iterations, each with one data-dependent branch: in random_branch its
 * outcome is a bit of a xorshift generator (no pattern: any predictor mispredicts about
 * half), in periodic_branch it is taken every 4th iteration (a pattern a history-based
 * predictor learns: about none mispredicted). The empty volatile asm in each arm keeps
 * gcc from turning the branch into a conditional move. Usage: branches N */
#include <stdlib.h>

static unsigned long long state = 88172645463325252ull;

__attribute__((noinline)) long random_branch(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if ((state >> 40) & 1) {
            __asm__ volatile("");
            s += 3;
        } else {
            __asm__ volatile("");
            s ^= 5;
        }
    }
    return s;
}

__attribute__((noinline)) long periodic_branch(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        if ((i & 3) == 0) {
            __asm__ volatile("");
            s += 3;
        } else {
            __asm__ volatile("");
            s ^= 5;
        }
    }
    return s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    return (int)((random_branch(n) + periodic_branch(n)) & 1);
}
