/* A period-locked loop (issue 35): a() and b() alternate in a strict 100 µs cycle timed by the
   TSC, a() for the first 20 µs of each cycle and b() for the other 80. Sampled with a fixed
   100 µs period (perf record -e cpu-clock:u -c 100000), every sample of an uninterrupted
   stretch sees the cycle at the same phase, so a stretch is all a() or all b() instead of 20%
   a(); with a randomised period a() gets its 20%. Argument: seconds to run (default 1).
   Built with -O2 -g, the TSC read (__rdtsc, an inline function of <x86intrin.h>) is inlined
   into both functions: most of their samples are in it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

__attribute__((noinline)) void a(uint64_t until) {
  while (__rdtsc() < until)
    sink++;
}

__attribute__((noinline)) void b(uint64_t until) {
  while (__rdtsc() < until)
    sink++;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 1.0;
  /* TSC ticks per ns, against the monotonic clock over 50 ms. */
  uint64_t t0 = now_ns(), c0 = __rdtsc();
  while (now_ns() - t0 < 50000000)
    ;
  double per_ns = (double)(__rdtsc() - c0) / (double)(now_ns() - t0);
  uint64_t cycle = (uint64_t)(100000 * per_ns), first = (uint64_t)(20000 * per_ns);
  uint64_t start = __rdtsc();
  uint64_t n = (uint64_t)(secs * 10000);
  for (uint64_t i = 0; i < n; i++) {
    a(start + first);
    b(start + cycle);
    start += cycle;
  }
  printf("%llu cycles\n", (unsigned long long)n);
  return 0;
}
