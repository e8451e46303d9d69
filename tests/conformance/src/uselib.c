#include <stdio.h>
#include <stdlib.h>
long lib_hot(long n);
__attribute__((noinline)) long main_hot(long n) {
    long s = 0; for (long i = 0; i < n; i++) s += i % 7; return s;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    printf("%ld %ld\n", lib_hot(n), main_hot(n));
    return 0;
}
