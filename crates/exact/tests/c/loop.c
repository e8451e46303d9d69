/* A counted loop: kernel(n) runs its loop body exactly n times.
 * main calls kernel(n), kernel(n+1), kernel(n+2): 3n+3 body executions, 3n taken back-edges. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned long kernel(unsigned long n)
{
    unsigned long s = 1;
    for (unsigned long i = 0; i < n; i++)
        s = s * 31 + (i ^ (s >> 3));
    return s;
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
    unsigned long r = 0;
    for (unsigned long k = 0; k < 3; k++)
        r += kernel(n + k);
    printf("%lu\n", r);
    return 0;
}
