/* fork + exec + threads (conformance suite): the parent runs two threads, then forks a
   child that execs the program given as argv[1]. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) long spin(long n) {
    long s = 0; for (long i = 0; i < n; i++) s += i * 3 + (s >> 5); return s;
}
static void *thread_main(void *arg) { (void)arg; return (void *)spin(30000000); }
int main(int argc, char **argv) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_main, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pid_t p = fork();
    if (p == 0) {
        if (argc > 1) execl(argv[1], argv[1], "20000000", (char *)NULL);
        _exit(1);
    }
    int st; waitpid(p, &st, 0);
    printf("%ld\n", spin(10000000));
    return 0;
}
