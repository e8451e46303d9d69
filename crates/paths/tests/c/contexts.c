/* Calling-context test program (proftrust-paths): indirect calls, call sites, the gprof
 * problem, and frameless leaves (work and the ops: GCC 12 gives a leaf that uses no stack
 * no frame even with -fno-omit-frame-pointer, so frame-pointer call chains skip its
 * caller). `contexts [REPS]` (default 1) runs main's round REPS times; hand-derived counts
 * per round:
 *   heavy() calls work(2000) 5 times, light() calls work(10) 1000 times:
 *     work: 1005 calls, its loop runs 5*2000 + 1000*10 = 20000 iterations,
 *     10000 from each caller. gprof splits work's cost by call counts: heavy;work gets
 *     5/1005 of it. Exactly, the two contexts run the same iterations and differ only by
 *     light's 995 extra call overheads: heavy;work holds less than half of work's cost,
 *     but far more than 5/1005 of it.
 *   dispatch(i) calls ops[i % 3] through one indirect call site, for i = 0..299:
 *     op_add, op_mul, op_xor: 100 calls each, all from that one call site.
 * So over REPS rounds: work 1005*REPS calls (5*REPS from heavy, 1000*REPS from light),
 * heavy REPS, light REPS, dispatch 300*REPS, each op 100*REPS.
 * Every call continues one dependency chain through s (work's loop is serial in s), so
 * run time follows instruction counts closely in both contexts: a time-based sampled CCT
 * is comparable with the instruction-weighted exact one. (With an independent chain per
 * call the out-of-order core overlaps light's 1000 short calls and light runs ~2x faster
 * per instruction than heavy: time and instructions part.)
 * Build: gcc -O2 -g -fno-omit-frame-pointer contexts.c -o contexts */
#include <stdio.h>
#include <stdlib.h>

#define OPAQUE(v) __asm__ volatile("" : "+r"(v))

__attribute__((noinline)) long work(long n, long s) {
    for (long i = 0; i < n; i++) {
        s += i ^ (s >> 3);
        OPAQUE(s);
    }
    return s;
}

__attribute__((noinline)) long heavy(long s) {
    for (int k = 0; k < 5; k++) {
        s = work(2000, s);
        OPAQUE(s);
    }
    return s;
}

__attribute__((noinline)) long light(long s) {
    for (int k = 0; k < 1000; k++) {
        s = work(10, s);
        OPAQUE(s);
    }
    return s;
}

__attribute__((noinline)) long op_add(long x) { return x + 3; }
__attribute__((noinline)) long op_mul(long x) { return x * 5; }
__attribute__((noinline)) long op_xor(long x) { return x ^ 0x55; }

long (*volatile ops[3])(long) = {op_add, op_mul, op_xor};

__attribute__((noinline)) long dispatch(long i, long x) {
    long (*f)(long) = ops[i % 3];
    long r = f(x);
    OPAQUE(r);
    return r;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    long s = 0;
    for (long r = 0; r < reps; r++) {
        s = heavy(s);
        s = light(s);
        for (long i = 0; i < 300; i++)
            s = dispatch(i, s);
    }
    printf("%ld\n", s);
    return 0;
}
