/* The control transfers whose targets the instruction bytes do not give: returns from a
   function with two exits to several call sites, a tail call, calls through a table (one
   target also called directly), a computed-goto interpreter (indirect jumps), longjmp
   and a signal handler. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;
static jmp_buf env;
static volatile int hits;

__attribute__((noinline)) static unsigned two_exits(unsigned x)
{
    if (x & 1) {
        sink += x;
        return x * 3;
    }
    return x / 2 + 1;
}

__attribute__((noinline)) static unsigned leaf_a(unsigned x) { return x + 1; }
__attribute__((noinline)) static unsigned leaf_b(unsigned x) { return x ^ 5; }
__attribute__((noinline)) static unsigned leaf_c(unsigned x) { return x * 7; }

/* gcc -O2 makes the call a jump: two_exits returns straight to tail's caller. */
__attribute__((noinline)) static unsigned tail(unsigned x) { return two_exits(x + 2); }

static unsigned (*const table[3])(unsigned) = {leaf_a, leaf_b, leaf_c};

__attribute__((noinline)) static unsigned interp(const unsigned char *code, unsigned n,
                                                 unsigned acc)
{
    static void *const ops[] = {&&op_add, &&op_mul, &&op_xor};
    unsigned pc = 0;
    goto *ops[code[pc]];
op_add:
    acc += 3;
    if (++pc >= n)
        return acc;
    goto *ops[code[pc]];
op_mul:
    acc *= 5;
    if (++pc >= n)
        return acc;
    goto *ops[code[pc]];
op_xor:
    acc ^= 0x33;
    if (++pc >= n)
        return acc;
    goto *ops[code[pc]];
}

static void on_usr1(int s)
{
    (void)s;
    hits++;
}

__attribute__((noinline)) static void jump_out(unsigned x)
{
    if (x % 3 == 0)
        longjmp(env, 1);
    sink += x;
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    volatile unsigned acc = 0;
    unsigned char code[16];
    for (int i = 0; i < 16; i++)
        code[i] = (unsigned char)((i * 7 + 3) % 3);
    signal(SIGUSR1, on_usr1);
    for (unsigned i = 0; i < n; i++) {
        acc += two_exits(i);
        acc += two_exits(acc);
        acc += leaf_a(acc) + tail(i);
        acc += table[i % 3](acc);
        acc += table[(i / 3) % 3](i);
        acc = interp(code, 16, acc);
        if (setjmp(env) == 0)
            jump_out(i);
        if (i % 100 == 0)
            raise(SIGUSR1);
    }
    printf("%u %u %d\n", acc, sink, hits);
    return 0;
}
