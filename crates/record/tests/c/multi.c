/* Follow-me workload: `threads`, `fork`, `exec` (fork + exec self with `spin`), `segv`,
   `kill9` (raises SIGKILL), `exit3`, `sleep` (forks a child that sleeps forever, writes its
   own pid and the child's to argv[2], one per line, then sleeps forever). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;

static unsigned long spin(unsigned long n, unsigned long k) {
    unsigned long x = k;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i;
    return x;
}

__attribute__((noinline)) void main_work(unsigned long n) { sink += spin(n, 1); }
__attribute__((noinline)) void *thread_work(void *arg) {
    sink += spin((unsigned long)arg, 2);
    return 0;
}
__attribute__((noinline)) void child_work(unsigned long n) { sink += spin(n, 3); }
__attribute__((noinline)) void exec_work(unsigned long n) { sink += spin(n, 4); }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "threads";
    unsigned long n = 60000000UL;
    if (!strcmp(mode, "threads")) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, thread_work, (void *)n);
        main_work(n / 2);
        for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    } else if (!strcmp(mode, "fork")) {
        pid_t p = fork();
        if (p == 0) { child_work(n); _exit(0); }
        main_work(n / 2);
        waitpid(p, 0, 0);
    } else if (!strcmp(mode, "exec")) {
        pid_t p = fork();
        if (p == 0) { execl("/proc/self/exe", argv[0], "spin", (char *)0); _exit(99); }
        main_work(n / 2);
        waitpid(p, 0, 0);
    } else if (!strcmp(mode, "spin")) {
        exec_work(n);
    } else if (!strcmp(mode, "segv")) {
        main_work(n / 4);
        raise(SIGSEGV);
    } else if (!strcmp(mode, "kill9")) {
        main_work(n / 4);
        raise(SIGKILL);
    } else if (!strcmp(mode, "exit3")) {
        main_work(n / 4);
        return 3;
    } else if (!strcmp(mode, "sleep")) {
        pid_t c = fork();
        if (c == 0) { for (;;) pause(); }
        if (argc > 2) {
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
            FILE *f = fopen(tmp, "w");
            fprintf(f, "%d\n%d\n", getpid(), c);
            fclose(f);
            rename(tmp, argv[2]);
        }
        for (;;) pause();
    }
    return 0;
}
