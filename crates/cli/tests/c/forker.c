/* Process-set fixture: the parent works in parent_work(), a forked child in child_work()
   (about as long); the parent waits for the child. The exact backends count the parent
   only; `audit` must compare the parent's samples only and say what it left out. */
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

volatile unsigned long sink;

__attribute__((noinline)) void parent_work(long n) {
    unsigned long x = 1;
    for (long i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL;
    sink += x;
}

__attribute__((noinline)) void child_work(long n) {
    unsigned long x = 7;
    for (long i = 0; i < n; i++) x ^= x * 6364136223846793005UL + (unsigned long)i;
    sink += x;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000000L;
    pid_t c = fork();
    if (c == 0) {
        child_work(3 * n);
        _exit(0);
    }
    parent_work(n);
    waitpid(c, 0, 0);
    return 0;
}
