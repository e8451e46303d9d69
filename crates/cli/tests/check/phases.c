/* A program with phases (docs/check.md, "Intervals for another run"): parse() for about 4 ms,
   solve() for about 6 ms, report() for a fraction of a millisecond, in turn, CPU-bound.
   Argument: rounds (default 60, about 2 s). */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) void parse(long n) {
  for (long i = 0; i < n; i++)
    sink += (unsigned long)i * 7;
}

__attribute__((noinline)) void solve(long n) {
  for (long i = 0; i < n; i++)
    sink ^= (unsigned long)i * 13 + (sink >> 3);
}

__attribute__((noinline)) void report(long n) {
  for (long i = 0; i < n; i++)
    sink += (unsigned long)i;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 60;
  for (long r = 0; r < rounds; r++) {
    parse(4000000);
    solve(6000000);
    report(400000);
  }
  printf("%lu\n", sink);
  return 0;
}
