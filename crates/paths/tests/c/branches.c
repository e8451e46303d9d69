/* Path-profile test program (proftrust-paths). classify() has two independent branches;
 * main calls it for x = 0..99, so its four acyclic paths run (hand-derived):
 *   x%3==0 && x%5==0 : multiples of 15 in 0..99          ->  7
 *   x%3==0 && x%5!=0 : 34 multiples of 3, minus 7        -> 27
 *   x%3!=0 && x%5==0 : 20 multiples of 5, minus 7        -> 13
 *   neither          : 100 - 27 - 13 - 7                 -> 53
 * Volatile stores keep the branches from being if-converted at -O2.
 * Build: gcc -O2 -g branches.c -o branches */
#include <stdio.h>

volatile int sink_a, sink_b, sink_c;

__attribute__((noinline)) int classify(int x) {
    int r = 0;
    if (x % 3 == 0) {
        sink_a = x;
        r += 1;
    } else {
        sink_b = x;
        r += 2;
    }
    if (x % 5 == 0) {
        sink_c = x;
        r *= 3;
    }
    return r;
}

int main(void) {
    int s = 0;
    for (int i = 0; i < 100; i++)
        s += classify(i);
    printf("%d\n", s);
    return 0;
}
