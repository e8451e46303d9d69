/* Calling-context test program (proftrust-paths). Hand-derived call counts:
 *   fib(10): 177 activations = 1 call from main + 176 recursive calls
 *            (C(n) = 1 + C(n-1) + C(n-2), C(0) = C(1) = 1).
 *   is_even(7) from call site 1: is_even 7,5,3,1 and is_odd 6,4,2,0:
 *            is_odd called 4 times from is_even, is_even 3 times from is_odd.
 *   is_even(4) from call site 2: is_even 4,2,0 and is_odd 3,1:
 *            is_odd called 2 times, is_even 2 times from is_odd.
 *   deep(5): 6 activations (1 + 5 recursive), then longjmp back to main.
 * The empty asm statements keep the recursive calls out of tail position (no sibling-call
 * or accumulator optimisation at -O2).
 * Build: gcc -O2 -g recursion.c -o recursion */
#include <setjmp.h>
#include <stdio.h>

#define OPAQUE(v) __asm__ volatile("" : "+r"(v))

__attribute__((noinline)) long fib(int n) {
    if (n < 2)
        return n;
    long a = fib(n - 1);
    long b = fib(n - 2);
    OPAQUE(b);
    return a + b;
}

__attribute__((noinline)) int is_odd(int n);

__attribute__((noinline)) int is_even(int n) {
    if (n == 0)
        return 1;
    int r = is_odd(n - 1);
    OPAQUE(r);
    return r;
}

__attribute__((noinline)) int is_odd(int n) {
    if (n == 0)
        return 0;
    int r = is_even(n - 1);
    OPAQUE(r);
    return r;
}

static jmp_buf jb;

__attribute__((noinline)) void deep(int n) {
    if (n == 0)
        longjmp(jb, 1);
    deep(n - 1);
    __asm__ volatile("" ::: "memory");
}

int main(void) {
    long f = fib(10);
    int e1 = is_even(7);
    OPAQUE(e1);
    if (!setjmp(jb))
        deep(5);
    int e2 = is_even(4);
    printf("%ld %d %d\n", f, e1, e2);
    return 0;
}
