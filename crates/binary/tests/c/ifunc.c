/* A GNU indirect function: `nm` lists `twice` as `i` at the resolver's address, and perf
 * names samples there `twice`. */
#include <stdio.h>
static long twice_plain(long x) { return 2 * x; }
static long (*resolve_twice(void))(long) { return twice_plain; }
long twice(long) __attribute__((ifunc("resolve_twice")));
int main(int argc, char **argv) {
    (void)argv;
    printf("%ld\n", twice(argc));
    return 0;
}
