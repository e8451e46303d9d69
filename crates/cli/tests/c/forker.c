/* Process-set fixture: the parent works in parent_work(n), a forked child in
   child_work(3n); the parent waits for the child. Both sides of an audit count the child
   (rows per process); a truth file that counts the parent alone (callgrind without
   --trace-children) gets the child's samples left out and named. */
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
