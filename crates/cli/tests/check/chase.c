/* A pointer chase (docs/check.md, "Intervals for another run"; the program of issue 35):
   chase() walks a shuffled list of 1 Mi nodes (64 MiB, far beyond the caches), arith() does
   register arithmetic between walks, main() builds the list. Argument: rounds (default 100,
   about 2 s). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
  struct node *next;
  long pad[7];
};

static uint64_t x = 88172645463325252ull;
static uint64_t rnd(void) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

__attribute__((noinline)) long chase(struct node *p, long steps) {
  long s = 0;
  while (steps--) {
    p = p->next;
    s += (long)((uintptr_t)p & 1);
  }
  return s;
}

__attribute__((noinline)) long arith(long n) {
  long a = 1;
  for (long i = 0; i < n; i++)
    a = a * 6364136223846793005L + i;
  return a;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 100;
  long n = 1L << 20;
  struct node *v = malloc(sizeof *v * (size_t)n);
  long *perm = malloc(sizeof *perm * (size_t)n);
  if (!v || !perm)
    return 1;
  for (long i = 0; i < n; i++)
    perm[i] = i;
  for (long i = n - 1; i > 0; i--) {
    long j = (long)(rnd() % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (long i = 0; i < n; i++)
    v[perm[i]].next = &v[perm[(i + 1) % n]];
  long s = 0;
  for (long r = 0; r < rounds; r++) {
    s += chase(&v[0], 2000000);
    s += arith(3000000);
  }
  printf("%ld\n", s);
  return 0;
}
