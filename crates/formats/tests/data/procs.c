/* Test workload for the perf.data counters: threads, a forked child that runs, then execs
 * this program again (argv[2] = "child"). argv[1] = iterations per spin. Compiled at test
 * time with gcc -O2 -g -pthread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;
static unsigned long n;

__attribute__((noinline)) unsigned long spin(unsigned long k) {
    unsigned long x = k;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i;
    return x;
}
__attribute__((noinline)) void *thread_work(void *a) { sink += spin((unsigned long)a); return 0; }
__attribute__((noinline)) void child_work(void) { sink += spin(7); }
__attribute__((noinline)) void after_exec(void) { sink += spin(9); }

int main(int argc, char **argv) {
    n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000;
    if (argc > 2 && !strcmp(argv[2], "child")) {
        after_exec();
        return 0;
    }
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, thread_work, (void *)i);
    pid_t p = fork();
    if (p == 0) {
        child_work();
        execl("/proc/self/exe", argv[0], argv[1], "child", (char *)0);
        _exit(99);
    }
    sink += spin(1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    waitpid(p, 0, 0);
    return 0;
}
