/* Hostile-names fixture: functions whose symbols hold a terminal escape (OSC "set title"
   and BEL), HTML markup, and (renamed after compiling, with objcopy --redefine-sym) a
   newline followed by a fake table row. GAS takes quoted symbol names. */
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) long esc(long n) __asm__("\"\x1b]0;pwned\x07\"");
__attribute__((noinline)) long esc(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += i * 3;
    return s;
}

__attribute__((noinline)) long nl(long n) __asm__("hostile_newline");
__attribute__((noinline)) long nl(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s ^= i * 7;
    return s;
}

__attribute__((noinline)) long html(long n) __asm__("\"<script>alert(1)</script>&amp;\"");
__attribute__((noinline)) long html(long n) {
    long s = 1;
    for (long i = 0; i < n; i++) s += s >> 3;
    return s;
}

int main(int c, char **v) {
    long n = c > 1 ? atol(v[1]) : 3000000;
    sink = esc(n) + nl(n) + html(n);
    return 0;
}
