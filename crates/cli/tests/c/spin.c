/* Interrupt fixture: `spin SECS [fork] [daemon]` works in spin_work() until SECS seconds of
   wall-clock time have passed (so it lasts as long natively, under QEMU and under valgrind).
   `fork`: a forked child spins too (same process group). `daemon`: a double-forked,
   setsid() grandchild spins for 60 s (a daemon that outlives the program). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

volatile unsigned long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) void spin_work(double secs) {
    double end = now() + secs;
    unsigned long x = 1;
    while (now() < end)
        for (int i = 0; i < 20000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    int fork_child = 0, daemon = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "fork")) fork_child = 1;
        if (!strcmp(argv[i], "daemon")) daemon = 1;
    }
    if (daemon && fork() == 0) {
        setsid();
        if (fork() == 0) {
            spin_work(60.0);
            _exit(0);
        }
        _exit(0);
    }
    pid_t child = -1;
    if (fork_child) {
        child = fork();
        if (child == 0) {
            spin_work(secs);
            _exit(0);
        }
    }
    spin_work(secs);
    if (child > 0) waitpid(child, 0, 0);
    return 0;
}
