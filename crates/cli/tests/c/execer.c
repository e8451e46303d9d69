/* Exec fixture: works in before_exec(), then execs argv[2] (another program) with argv[3]
   as its argument. The exact run stops at the exec; `audit` must leave the samples of the
   exec'd image out and name it. */
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void before_exec(long n) {
    unsigned long x = 1;
    for (long i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL;
    sink += x;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000000L;
    before_exec(n);
    if (argc > 3) execl(argv[2], argv[2], argv[3], (char *)0);
    return 0;
}
