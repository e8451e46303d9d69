/* A loop of exactly five instructions (four adds/subs and the branch), for the aliasing test
   of `proftrust check` (crates/cli/tests/check_coverage.rs): under an instructions event whose
   period is a multiple of 5, every sample of the loop lands on the same instruction. */
#include <stdlib.h>

static void spin(long n) {
  __asm__ volatile("1:\n\t"
                   "add $1, %%rax\n\t"
                   "add $1, %%rdx\n\t"
                   "add $1, %%rcx\n\t"
                   "sub $1, %0\n\t"
                   "jnz 1b\n\t"
                   : "+r"(n)
                   :
                   : "rax", "rdx", "rcx", "cc");
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  spin(n);
  return 0;
}
