/* A steady program (docs/check.md, "Intervals for another run"): f1(), f2() and f3() called
   in turn in a tight loop, each for a fraction of a microsecond: a fine-grained mix without
   phases. Argument: iterations (default 700000, about 2 s). */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) void f1(void) {
  for (int i = 0; i < 300; i++)
    sink += (unsigned long)i;
}

__attribute__((noinline)) void f2(void) {
  for (int i = 0; i < 500; i++)
    sink ^= (unsigned long)i * 3;
}

__attribute__((noinline)) void f3(void) {
  for (int i = 0; i < 200; i++)
    sink += sink >> 1;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 700000;
  for (long i = 0; i < n; i++) {
    f1();
    f2();
    f3();
  }
  printf("%lu\n", sink);
  return 0;
}
