/* One program, many endings: faults MODE N
 *   exit3 | segv | kill | spin | threads | fork | exec
 * Each first runs kernel(N) (a counted loop of N iterations) in the main thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) unsigned long kernel(unsigned long n)
{
    unsigned long s = 1;
    for (unsigned long i = 0; i < n; i++)
        s = s * 31 + (i ^ (s >> 3));
    return s;
}

static unsigned long n;
static volatile unsigned long sink;

static void *worker(void *arg)
{
    (void)arg;
    sink += kernel(n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit3";
    n = argc > 2 ? strtoul(argv[2], 0, 10) : 1000;
    sink = kernel(n);
    if (!strcmp(mode, "exit3"))
        return 3;
    if (!strcmp(mode, "segv")) {
        volatile int *p = (int *)8;
        return *p;
    }
    if (!strcmp(mode, "kill"))
        raise(SIGKILL);
    if (!strcmp(mode, "spin"))
        for (;;)
            sink++;
    if (!strcmp(mode, "threads")) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], 0, worker, 0);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], 0);
        return 0;
    }
    if (!strcmp(mode, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            sink += kernel(n * 5);
            execl("/bin/true", "true", (char *)0);
            _exit(1);
        }
        int st;
        waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
    }
    if (!strcmp(mode, "exec")) {
        execl("/bin/sh", "sh", "-c", "exit 4", (char *)0);
        return 1;
    }
    return 2;
}
