/* Two small functions called in turn (docs/check.md, "Hardware time"; issue 34): step()
   follows a pointer through a shuffled 4 MiB list (one load, its address from the last
   load), mix() does eight dependent multiply-adds. Their time and instruction shares differ,
   so an event that is not time (instructions) puts step's samples elsewhere than its time.
   Argument: rounds of 10000 calls each (default 100). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
  struct node *next;
  long pad[7];
};

__attribute__((noinline)) struct node *step(struct node *p) { return p->next; }

__attribute__((noinline)) long mix(long a, long i) {
  for (int k = 0; k < 8; k++)
    a = a * 6364136223846793005L + i + k;
  return a;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 100;
  long n = 1L << 16;
  struct node *v = malloc(sizeof *v * (size_t)n);
  long *perm = malloc(sizeof *perm * (size_t)n);
  if (!v || !perm)
    return 1;
  uint64_t x = 88172645463325252ull;
  for (long i = 0; i < n; i++)
    perm[i] = i;
  for (long i = n - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    long j = (long)(x % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (long i = 0; i < n; i++)
    v[perm[i]].next = &v[perm[(i + 1) % n]];
  struct node *p = &v[0];
  long a = 1;
  for (long r = 0; r < rounds * 10000; r++) {
    p = step(p);
    a = mix(a, (long)(uintptr_t)p);
  }
  printf("%ld\n", a);
  return 0;
}
