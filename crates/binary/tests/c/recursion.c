/* Recursion: fib calls itself; the CFG has no loop for the recursion (calls do not end
 * blocks), but gcc may turn one of the calls into a loop. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long fib(long n) {
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20;
    printf("%ld\n", fib(n));
    return 0;
}
