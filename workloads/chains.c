/* Dependency-chain kernels for the time model (docs/audit.md, "The time model"): each kernel
 * is a function of its own that times its loop with clock_gettime (the thread's CPU time,
 * CLOCK_THREAD_CPUTIME_ID: a loaded machine deschedules it) and prints nanoseconds per
 * iteration, so the model's cycles per iteration can be held against native time.
 *
 *   chains [SIZE]   (SIZE scales the iterations; default 100)
 *
 * The loop bodies are inline assembly so that the instructions timed are the ones named,
 * whatever the compiler: calib (8 dependent adds: 8 cycles per iteration on every modelled
 * core, the clock's calibration), adds (8 independent adds), idiv (a chain of 32-bit
 * divisions), divsd (a chain of double divisions), divsd_indep (4 independent chains), chase
 * (a pointer chase around an L1-resident ring), stfwd (a store-forwarding round trip: load,
 * add, store to the same address), branchy (a branch on a random bit). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void report(const char *name, double ns, long iters, uint64_t check) {
    printf("%-12s %10.4f ns/iter  (%ld iterations, check %llu)\n", name, ns / iters, iters,
           (unsigned long long)check);
}

__attribute__((noinline)) static void k_calib(long n) {
    uint64_t x = 1, y = 3;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                         "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                         : "+r"(x)
                         : "r"(y));
    report("calib", now_ns() - t, n, x);
}

__attribute__((noinline)) static void k_adds(long n) {
    uint64_t a = 1, b = 2, c = 3, d = 4, y = 5;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add %4, %0\n\tadd %4, %1\n\tadd %4, %2\n\tadd %4, %3\n\t"
                         "add %4, %0\n\tadd %4, %1\n\tadd %4, %2\n\tadd %4, %3"
                         : "+r"(a), "+r"(b), "+r"(c), "+r"(d)
                         : "r"(y));
    report("adds", now_ns() - t, n, a + b + c + d);
}

__attribute__((noinline)) static void k_idiv(long n) {
    uint32_t x = 12345, k = 1000000007u;
    double t = now_ns();
    for (long i = 0; i < n; i++) {
        /* edx:eax = k; eax = k / x; x = eax | 1 (never 0): each division waits for the last. */
        uint32_t q, r;
        __asm__ volatile("xor %%edx, %%edx\n\tmov %3, %%eax\n\tdiv %2\n\tor $1, %%eax"
                         : "=&a"(q), "=&d"(r)
                         : "r"(x), "r"(k));
        x = q;
    }
    report("idiv", now_ns() - t, n, x);
}

__attribute__((noinline)) static void k_divsd(long n) {
    double x = 1e300, y = 1.0000001;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("divsd %1, %0\n\tdivsd %1, %0" : "+x"(x) : "x"(y));
    report("divsd", now_ns() - t, n, (uint64_t)(x > 0));
}

__attribute__((noinline)) static void k_divsd_indep(long n) {
    double a = 1e300, b = 1e299, c = 1e298, d = 1e297, y = 1.0000001;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("divsd %4, %0\n\tdivsd %4, %1\n\tdivsd %4, %2\n\tdivsd %4, %3"
                         : "+x"(a), "+x"(b), "+x"(c), "+x"(d)
                         : "x"(y));
    report("divsd_indep", now_ns() - t, n, (uint64_t)(a + b + c + d > 0));
}

#define RING 512
__attribute__((noinline)) static void k_chase(long n) {
    static void *ring[RING];
    /* A ring visiting the slots in a scrambled order (stride 97, coprime with 512). */
    for (int i = 0; i < RING; i++) ring[(i * 97) % RING] = &ring[((i + 1) * 97) % RING];
    void **p = &ring[0];
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("mov (%0), %0\n\tmov (%0), %0\n\tmov (%0), %0\n\tmov (%0), %0"
                         : "+r"(p));
    report("chase", now_ns() - t, n, (uint64_t)(p != 0));
}

__attribute__((noinline)) static void k_stfwd(long n) {
    uint64_t slot[2] = {1, 0};
    uint64_t *s = slot;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("mov (%0), %%rax\n\tadd $3, %%rax\n\tmov %%rax, (%0)" : : "r"(s)
                         : "rax", "memory");
    report("stfwd", now_ns() - t, n, slot[0]);
}

__attribute__((noinline)) static void k_branchy(long n) {
    uint64_t r = 88172645463325252ull, s = 0;
    double t = now_ns();
    for (long i = 0; i < n; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17; /* xorshift64: the branch's bit is random */
        __asm__ volatile("test $1, %1\n\tjz 1f\n\tadd %1, %0\n1:" : "+r"(s) : "r"(r));
    }
    report("branchy", now_ns() - t, n, s);
}

/* The front end: 8 taken jumps per iteration, each over nothing to the next instruction
 * group (an independent add), so the loop's cost is the rate at which the core follows
 * taken branches. */
__attribute__((noinline)) static void k_jumps(long n) {
    uint64_t a = 1, b = 2, y = 3;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("jmp 1f\n1:\tadd %2, %0\n\tjmp 2f\n2:\tadd %2, %1\n\t"
                         "jmp 3f\n3:\tadd %2, %0\n\tjmp 4f\n4:\tadd %2, %1\n\t"
                         "jmp 5f\n5:\tadd %2, %0\n\tjmp 6f\n6:\tadd %2, %1\n\t"
                         "jmp 7f\n7:\tadd %2, %0\n\tjmp 8f\n8:\tadd %2, %1"
                         : "+r"(a), "+r"(b)
                         : "r"(y));
    report("jumps", now_ns() - t, n, a + b);
}

/* Calls: 4 calls per iteration of a 2-instruction leaf (an independent add and ret). */
__attribute__((noinline)) static void k_calls(long n) {
    uint64_t a = 1, y = 3;
    double t = now_ns();
    for (long i = 0; i < n; i++)
        __asm__ volatile("call 1f\n\tcall 1f\n\tcall 1f\n\tcall 1f\n\tjmp 2f\n"
                         "1:\tadd %1, %0\n\tret\n2:"
                         : "+r"(a)
                         : "r"(y)
                         : "memory");
    report("calls", now_ns() - t, n, a);
}

int main(int argc, char **argv) {
    long size = argc > 1 ? atol(argv[1]) : 100;
    long n = size * 200000;
    k_calib(n);
    k_adds(n);
    k_idiv(n / 4);
    k_divsd(n / 4);
    k_divsd_indep(n / 4);
    k_chase(n);
    k_stfwd(n);
    k_branchy(n);
    k_jumps(n);
    k_calls(n);
    return 0;
}
