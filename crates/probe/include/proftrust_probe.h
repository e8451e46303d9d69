/* proftrust_probe.h: path-timing probes for variational path profiling
 * (`proftrust vpp --source probe`; seed 004, Perelman, Chilimbi & Calder).
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 *
 * Header-only. Include it in the ONE translation unit that holds the hot loops, then write
 * each hot loop with PT_FOR (bursty tracing's code duplication, seed 004 §4.1):
 *
 *     PT_FOR(long i = 0, i < n, i++, {       // for (long i = 0; i < n; i++) { ... }
 *         if (PT_BRANCH(key[i] & 1))         // a branch whose outcome belongs to the path
 *             ...
 *     })
 *
 * PT_FOR compiles the body twice. The clean copy runs nearly all iterations: its only
 * addition is a countdown kept in a register (one decrement and branch per iteration) and
 * its PT_BRANCH(c) conditions are just (c); no call is in it, so the compiler keeps the
 * loop's variables and globals in registers as it would without probes. When the countdown
 * runs out, one iteration runs in the probed copy: a path boundary (the timing), then the
 * body with its branch outcomes recorded. Each iteration is one path boundary. The body may
 * use break, continue and return as in a for loop (the countdown is written back by a
 * cleanup handler on every way out); its init, cond and step are single macro arguments
 * (no top-level commas: declare a second variable before the loop); a preprocessor
 * directive cannot sit in the body (a macro argument). PT_FOR is for INNERMOST loops: while
 * the clean copy runs, the thread's countdown is in its register, so a probe inside the
 * body (a nested PT_FOR, a PT_BOUNDARY, a call to a probed function) would count against a
 * stale value; the header detects it when the loop ends and says so at exit.
 *
 * PT_BOUNDARY() marks a boundary by hand (a function entry, an outer loop, a loop PT_FOR
 * cannot express): put it at the top of the loop body or function, seed 004 §4.2, "all of
 * our acyclic paths either start at a procedure entry or a loop backward branch and also
 * end at one of these points". It is one thread-local decrement and compare, but the call
 * to the slow path sits in the caller's code, so the caller's globals stay in memory around
 * it, and its PT_BRANCH conditions test a flag: on vpp.c's few-nanosecond loop bodies that
 * costs 1.16x CPU time against 1.02x with PT_FOR (docs/fidelity.md, seed 004).
 *
 * Build with -DPT_DISABLE to compile the probes out (PT_FOR is then a plain for loop,
 * PT_BRANCH(c) is (c)).
 *
 * Bursty tracing (seed 004 §4.1): each boundary is a dispatch check. In the clean code it
 * is a countdown; when nCheck reaches zero the next nInstr paths are timed (TSC read at
 * both ends, branch outcomes recorded), then nCheck restarts. The state machine and its
 * optional jitter are those of proftrust_probe::Bursty (Rust), so both time the same paths
 * for the same settings and seed.
 *
 * Timing: the TSC is read first thing when a timed path ends (rdtscp) and last thing when
 * one starts (rdtsc; lfence). At start-up, `calibration` empty paths are timed through a
 * PT_FOR loop with an empty body (a PT_BOUNDARY() path costs a few instructions less),
 * and again at exit; `proftrust vpp` estimates the bias from them and subtracts it (seed
 * 004 §4.2).
 *
 * Settings (environment, read at start-up): PROFTRUST_PROBE_NCHECK (default 10000; 0 = time
 * every path), PROFTRUST_PROBE_NINSTR (1), PROFTRUST_PROBE_RANDOMIZE (0), PROFTRUST_PROBE_SEED
 * (0), PROFTRUST_PROBE_CAPACITY (1048576 timed paths), PROFTRUST_PROBE_CALIBRATE (10000),
 * PROFTRUST_PROBE_OUT (the output file). The probes record only when PROFTRUST_PROBE_OUT is
 * set (`proftrust vpp --source probe` sets it); otherwise they stay in the clean code for
 * good and write nothing. The file (format in docs/vpp.md) is written at exit() through a
 * temporary file renamed into place; a program killed by a signal or ending with _exit()
 * writes none.
 *
 * Limits: one recording thread (the one that ran the constructors, normally the main
 * thread); other threads pay one decrement per boundary and are counted as `foreign`. A
 * second translation unit including this header disables its own copy with a warning.
 * GCC or Clang on x86-64 Linux.
 */
#ifndef PROFTRUST_PROBE_H
#define PROFTRUST_PROBE_H

#ifdef PT_DISABLE
#define PT_BOUNDARY() ((void)0)
#define PT_BRANCH(c) (c)
#define PT_FOR(init, cond, step, ...) for (init; cond; step) { __VA_ARGS__ }
#else

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define PT_MAX_SITES 256
#define PT_MAX_BITS 64

#if defined(__clang__)
#define PT_NOINLINE __attribute__((noinline, cold))
#else
#define PT_NOINLINE __attribute__((noinline, noclone, cold))
#endif

typedef struct {
    uint64_t entry;
    uint64_t bits;
    uint32_t nbits;
    uint64_t ticks;
} pt_sample;

typedef struct {
    uint64_t addr;
    const char *file;
    int line;
} pt_site;

static __thread struct {
    uint64_t countdown; /* boundaries until the slow path, this one included (1 = the next
                           boundary is slow: a thread that never met a probe starts there) */
    int rec;            /* a path is being timed */
    uint64_t bits;
    uint32_t nbits;
} pt_fast = {1, 0, 0, 0};

static struct {
    int enabled;
    long owner;
    uint64_t n_check, n_instr, seed, rng, capacity, calibration;
    int randomize;
    uint64_t load_bias;
    int timing, calibrating;
    uint64_t instr_left, set_value, boundaries;
    uint64_t entry, t_in;
    pt_sample *samples;
    uint64_t nsamples, dropped, foreign, nested;
    uint64_t *calib, *calib_exit;
    uint64_t ncalib;
    pt_site sites[PT_MAX_SITES];
    uint32_t nsites;
    uint64_t start_tsc, start_ns;
    char out[4096];
} pt_state;

/* Shared by every translation unit of the program: the first copy to start wins. */
__attribute__((weak)) int proftrust_probe_instances;

static uint64_t pt_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t pt_reset_value(void) {
    uint64_t c = pt_state.n_check;
    if (c == 0)
        return 1;
    if (pt_state.randomize && c >= 8)
        return c + pt_splitmix64(&pt_state.rng) % (c / 8 + 1);
    return c;
}

static void pt_set(uint64_t v) {
    pt_state.set_value = v;
    pt_fast.countdown = v;
}

static uint64_t pt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void pt_start(uint64_t at, const char *file, int line) {
    pt_state.entry = at;
    if (!pt_state.calibrating) {
        uint32_t k;
        for (k = 0; k < pt_state.nsites && pt_state.sites[k].addr != at; k++)
            ;
        if (k == pt_state.nsites && k < PT_MAX_SITES) {
            pt_state.sites[k].addr = at;
            pt_state.sites[k].file = file;
            pt_state.sites[k].line = line;
            pt_state.nsites++;
        }
    }
    pt_fast.bits = 0;
    pt_fast.nbits = 0;
    pt_fast.rec = 1;
    pt_set(1);
    pt_state.timing = 1;
}

/* The slow path: this boundary ends nCheck's countdown or a timed path. */
static PT_NOINLINE void pt_slow(const char *file, int line) {
    unsigned aux;
    uint64_t t_end = __rdtscp(&aux);
    uint64_t at = (uint64_t)(uintptr_t)__builtin_return_address(0) - pt_state.load_bias;
    int started = 0;
    if (!pt_state.enabled || syscall(SYS_gettid) != pt_state.owner) {
        if (pt_state.enabled)
            __atomic_fetch_add(&pt_state.foreign, 1, __ATOMIC_RELAXED);
        pt_fast.countdown = UINT64_MAX; /* stay in the clean code for good */
        return;
    }
    pt_state.boundaries += pt_state.set_value;
    if (!pt_state.timing) {
        pt_state.instr_left = pt_state.n_instr;
        pt_start(at, file, line);
        started = 1;
    } else {
        uint64_t ticks = t_end - pt_state.t_in;
        if (pt_state.calibrating) {
            if (pt_state.ncalib < pt_state.calibration)
                pt_state.calib[pt_state.ncalib++] = ticks;
        } else if (pt_state.nsamples < pt_state.capacity) {
            pt_sample *s = &pt_state.samples[pt_state.nsamples++];
            s->entry = pt_state.entry;
            s->bits = pt_fast.bits;
            s->nbits = pt_fast.nbits;
            s->ticks = ticks;
        } else {
            pt_state.dropped++;
        }
        if (pt_state.n_check == 0 || pt_state.calibrating) {
            pt_start(at, file, line);
            started = 1;
        } else if (--pt_state.instr_left == 0) {
            pt_state.timing = 0;
            pt_fast.rec = 0;
            pt_set(pt_reset_value());
        } else {
            pt_start(at, file, line);
            started = 1;
        }
    }
    if (started) {
        pt_state.t_in = __rdtsc();
        _mm_lfence();
    }
}

static inline __attribute__((always_inline)) void pt_boundary(const char *file, int line) {
    if (__builtin_expect(pt_fast.countdown > 1, 1)) {
        pt_fast.countdown--;
        return;
    }
    pt_slow(file, line);
    /* Keeps the call from becoming a tail call (the return address names the site). */
    __asm__ __volatile__("" ::: "memory");
}

static inline __attribute__((always_inline)) int pt_branch(int c) {
    if (__builtin_expect(pt_fast.rec, 0)) {
        if (pt_fast.nbits < PT_MAX_BITS)
            pt_fast.bits |= (uint64_t)c << pt_fast.nbits;
        if (pt_fast.nbits != UINT32_MAX)
            pt_fast.nbits++;
    }
    return c;
}

/* Which copy of a PT_FOR body this is: 1 (probed) outside PT_FOR, so a PT_BRANCH() there
 * records as it always did; PT_FOR's clean copy shadows it with 0 and its PT_BRANCH()
 * conditions compile to the bare condition. */
enum { pt_probed_ = 1 };

#define PT_BOUNDARY() pt_boundary(__FILE__, __LINE__)
#define PT_BRANCH(c) (pt_probed_ ? pt_branch(!!(c)) : !!(c))

/* The clean copy's hold on the countdown: loaded once when the clean copy starts, kept in a
 * register while it runs, written back when it ends (normally, by break, return or goto:
 * the cleanup attribute). `held` is the value it loaded: when the thread's countdown is
 * not that value any more at write-back, another probe ran inside the clean copy. */
typedef struct {
    uint64_t n, held;
} pt_hold;

static inline __attribute__((always_inline)) void pt_release(pt_hold *h) {
    if (__builtin_expect(pt_fast.countdown != h->held, 0))
        pt_state.nested++;
    pt_fast.countdown = h->n;
}

#define PT_FOR(init, cond, step, ...)                                                      \
    for (init;;) {                                                                         \
        int pt_more_ = 0;                                                                  \
        {                                                                                  \
            pt_hold pt_h_ __attribute__((cleanup(pt_release))) = {pt_fast.countdown,       \
                                                                  pt_fast.countdown};      \
            for (; cond; step) {                                                           \
                if (__builtin_expect(--pt_h_.n == 0, 0)) {                                 \
                    pt_more_ = 1;                                                          \
                    break;                                                                 \
                }                                                                          \
                {                                                                          \
                    enum { pt_probed_ = 0 };                                               \
                    __VA_ARGS__                                                            \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        if (!pt_more_)                                                                     \
            break;                                                                         \
        pt_slow(__FILE__, __LINE__);                                                       \
        __asm__ __volatile__("" ::: "memory");                                             \
        {                                                                                  \
            int pt_k_;                                                                     \
            for (pt_k_ = 0; pt_k_ < 1; pt_k_++) {                                          \
                enum { pt_probed_ = 1 };                                                   \
                __VA_ARGS__                                                                \
            }                                                                              \
            if (pt_k_ == 0)                                                                \
                break;                                                                     \
        }                                                                                  \
        step;                                                                              \
    }

static int pt_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Writes a sorted histogram as `KEY TICKS COUNT` lines; returns how many. */
static uint64_t pt_write_hist(FILE *f, const char *key, const uint64_t *v, uint64_t n) {
    uint64_t k, lines = 0;
    for (k = 0; k < n;) {
        uint64_t j = k;
        while (j < n && v[j] == v[k])
            j++;
        fprintf(f, "%s %llu %llu\n", key, (unsigned long long)v[k], (unsigned long long)(j - k));
        lines++;
        k = j;
    }
    return lines;
}

static void pt_write(void) {
    uint64_t end_tsc, end_ns, ticks, ns, k, nlines = 0, nstart, nexit;
    uint64_t *start_calib;
    unsigned aux;
    char tmp[4200];
    FILE *f;
    if (!pt_state.enabled || syscall(SYS_gettid) != pt_state.owner)
        return;
    end_tsc = __rdtscp(&aux);
    if (pt_state.nested)
        fprintf(stderr,
                "proftrust-probe: %llu time(s) a PT_FOR loop's clean copy met another probe "
                "in its body (a nested PT_FOR, a PT_BOUNDARY() or a probed function): the "
                "timed paths and boundaries around it are not exact; use PT_FOR on innermost "
                "loops only and PT_BOUNDARY() for the outer ones\n",
                (unsigned long long)pt_state.nested);
    end_ns = pt_now_ns();
    ticks = end_tsc - pt_state.start_tsc;
    ns = end_ns - pt_state.start_ns;
    if (pt_fast.countdown >= 1 && pt_fast.countdown <= pt_state.set_value)
        pt_state.boundaries += pt_state.set_value - pt_fast.countdown;
    /* The calibration again, at exit (`ce` lines): empty paths timed now that the CPU runs
     * as it ran the program's paths (a cold start or a low clock speed at start-up makes
     * them dearer there). The start-up histogram is kept aside first. */
    qsort(pt_state.calib, pt_state.ncalib, sizeof(uint64_t), pt_cmp_u64);
    start_calib = pt_state.calib;
    nstart = pt_state.ncalib;
    pt_state.calib = pt_state.calib_exit;
    pt_state.ncalib = 0;
    if (pt_state.calib && pt_state.calibration) {
        uint64_t boundaries = pt_state.boundaries;
        pt_state.calibrating = 1;
        pt_state.timing = 0;
        pt_set(1);
        PT_FOR(k = 0, k <= pt_state.calibration, k++, {})
        pt_state.calibrating = 0;
        pt_state.boundaries = boundaries;
        qsort(pt_state.calib, pt_state.ncalib, sizeof(uint64_t), pt_cmp_u64);
    }
    nexit = pt_state.ncalib;
    pt_state.enabled = 0;
    pt_fast.countdown = UINT64_MAX;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", pt_state.out, (long)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "proftrust-probe: cannot write %s\n", tmp);
        return;
    }
    {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        fprintf(f, "proftrust-probe 1\npid %ld\nexe %s\nload_bias 0x%llx\n", (long)getpid(), exe,
                (unsigned long long)pt_state.load_bias);
    }
    fprintf(f, "tsc_per_ns %.6f\n", ns ? (double)ticks / (double)ns : 0.0);
    fprintf(f, "n_check %llu\nn_instr %llu\nrandomize %d\nseed %llu\n",
            (unsigned long long)pt_state.n_check, (unsigned long long)pt_state.n_instr,
            pt_state.randomize, (unsigned long long)pt_state.seed);
    fprintf(f, "boundaries %llu\nprogram_ticks %llu\ndropped %llu\nforeign %llu\n",
            (unsigned long long)pt_state.boundaries, (unsigned long long)ticks,
            (unsigned long long)pt_state.dropped, (unsigned long long)pt_state.foreign);
    for (k = 0; k < pt_state.nsites; k++)
        fprintf(f, "site 0x%llx %s:%d\n", (unsigned long long)pt_state.sites[k].addr,
                pt_state.sites[k].file, pt_state.sites[k].line);
    nlines += pt_write_hist(f, "c", start_calib, nstart);
    nlines += pt_write_hist(f, "ce", pt_state.calib, nexit);
    for (k = 0; k < pt_state.nsamples; k++) {
        const pt_sample *s = &pt_state.samples[k];
        uint32_t b, nb = s->nbits < PT_MAX_BITS ? s->nbits : PT_MAX_BITS;
        char bits[PT_MAX_BITS + 1];
        for (b = 0; b < nb; b++)
            bits[b] = (s->bits >> b & 1) ? '1' : '0';
        bits[nb] = 0;
        fprintf(f, "s 0x%llx %u %s %llu\n", (unsigned long long)s->entry, s->nbits,
                nb ? bits : "-", (unsigned long long)s->ticks);
    }
    fprintf(f, "end %llu %llu\n", (unsigned long long)pt_state.nsamples,
            (unsigned long long)nlines);
    if (fclose(f) != 0 || rename(tmp, pt_state.out) != 0) {
        fprintf(stderr, "proftrust-probe: cannot write %s\n", pt_state.out);
        remove(tmp);
    }
}

/* Load bias of the executable: runtime address of its program headers (AT_PHDR) minus
 * their link-time address (PT_PHDR's p_vaddr), as the dynamic loader computes it. Without
 * PT_PHDR (static non-PIE programs) the executable runs at its link addresses: 0. */
static uint64_t pt_load_bias(void) {
    const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
    unsigned long n = getauxval(AT_PHNUM), k;
    for (k = 0; ph && k < n; k++)
        if (ph[k].p_type == PT_PHDR)
            return (uint64_t)(uintptr_t)ph - ph[k].p_vaddr;
    return 0;
}

static uint64_t pt_env(const char *name, uint64_t def) {
    const char *v = getenv(name);
    char *end;
    unsigned long long x;
    if (!v || !*v)
        return def;
    x = strtoull(v, &end, 10);
    if (*end) {
        fprintf(stderr, "proftrust-probe: %s=%s is not a number; using %llu\n", name, v,
                (unsigned long long)def);
        return def;
    }
    return (uint64_t)x;
}

__attribute__((constructor)) static void pt_init(void) {
    const char *out = getenv("PROFTRUST_PROBE_OUT");
    uint64_t k;
    if (__atomic_fetch_add(&proftrust_probe_instances, 1, __ATOMIC_SEQ_CST) != 0) {
        fprintf(stderr, "proftrust-probe: %s also includes proftrust_probe.h; its probes are "
                        "off (include the header in one translation unit)\n", __BASE_FILE__);
        pt_fast.countdown = UINT64_MAX;
        return;
    }
    pt_state.n_check = pt_env("PROFTRUST_PROBE_NCHECK", 10000);
    pt_state.n_instr = pt_env("PROFTRUST_PROBE_NINSTR", 1);
    if (pt_state.n_instr == 0)
        pt_state.n_instr = 1;
    pt_state.randomize = pt_env("PROFTRUST_PROBE_RANDOMIZE", 0) != 0;
    pt_state.seed = pt_state.rng = pt_env("PROFTRUST_PROBE_SEED", 0);
    pt_state.capacity = pt_env("PROFTRUST_PROBE_CAPACITY", 1u << 20);
    pt_state.calibration = pt_env("PROFTRUST_PROBE_CALIBRATE", 10000);
    if (!out || !*out) {
        pt_fast.countdown = UINT64_MAX; /* not asked to record */
        return;
    }
    snprintf(pt_state.out, sizeof pt_state.out, "%s", out);
    pt_state.samples = (pt_sample *)calloc(pt_state.capacity ? pt_state.capacity : 1,
                                           sizeof(pt_sample));
    pt_state.calib = (uint64_t *)calloc(pt_state.calibration ? pt_state.calibration : 1,
                                        sizeof(uint64_t));
    pt_state.calib_exit = (uint64_t *)calloc(pt_state.calibration ? pt_state.calibration : 1,
                                             sizeof(uint64_t));
    if (!pt_state.samples || !pt_state.calib || !pt_state.calib_exit) {
        fprintf(stderr, "proftrust-probe: cannot allocate %llu samples; probes are off "
                        "(lower PROFTRUST_PROBE_CAPACITY)\n",
                (unsigned long long)pt_state.capacity);
        pt_fast.countdown = UINT64_MAX;
        return;
    }
    pt_state.load_bias = pt_load_bias();
    pt_state.owner = syscall(SYS_gettid);
    pt_state.enabled = 1;
    /* Calibration: empty paths through the same code as real ones. */
    pt_state.calibrating = 1;
    pt_set(1);
    PT_FOR(k = 0, k <= pt_state.calibration, k++, {})
    pt_state.calibrating = 0;
    pt_state.timing = 0;
    pt_fast.rec = 0;
    pt_state.boundaries = 0;
    pt_state.nsamples = 0;
    pt_set(pt_reset_value());
    atexit(pt_write);
    pt_state.start_ns = pt_now_ns();
    pt_state.start_tsc = __rdtsc();
}

#endif /* PT_DISABLE */
#endif /* PROFTRUST_PROBE_H */
