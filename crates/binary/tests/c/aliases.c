/* Aliases at one address; perf report names samples there by perf's choose_best_symbol:
 * non-weak before weak, global before local, fewer leading underscores, longer name. */
#include <stdio.h>
__attribute__((noinline)) long base(long x) { return x * 3 + 1; }
extern long __base(long) __attribute__((alias("base")));
extern long base_weak_and_longest(long) __attribute__((weak, alias("base")));
static long base_local_longer(long) __attribute__((alias("base"), used));

__attribute__((noinline)) static long g2(long x) { return x * 5 + 2; }
static long g2_longer(long) __attribute__((alias("g2"), used));

int main(int argc, char **argv) {
    (void)argv;
    printf("%ld\n", base(argc) + g2(argc));
    return 0;
}
