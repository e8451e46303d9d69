/* Hostile-names fixture. Each function below is named by a macro the test defines
   (-DN_ESC=...): a placeholder identifier exactly as long as the hostile name that replaces
   it, byte for byte, in the compiled object (symbol table and DWARF alike) before linking.
   So the executable's symbols and its DWARF names (DW_AT_name of the functions and of the
   inlined one) hold ESC, OSC, BEL, CR, newline, ';', quotes, bytes that are not UTF-8,
   bidirectional overrides and C1 controls; N_LONG is a 10 kB name, kept as it is; COMM
   (a C string) becomes the thread's name.
   See crates/cli/tests/hostile.rs. */
#include <stdlib.h>
#include <sys/prctl.h>

volatile long sink;

#define WORK(name, op)                                                                  \
    __attribute__((noinline, noclone)) long name(long n) {                              \
        long s = 1;                                                                     \
        for (long i = 0; i < n; i++) s op i * 3 + (s >> 5);                             \
        return s;                                                                       \
    }

WORK(N_ESC, +=)
WORK(N_NL, ^=)
WORK(N_HTML, +=)
WORK(N_CLEAR, -=)
WORK(N_OSC8, ^=)
WORK(N_CR, +=)
WORK(N_SEMI, -=)
WORK(N_BYTES, ^=)
WORK(N_BIDI, +=)
WORK(N_C1, -=)
WORK(N_LONG, ^=)

/* Only in DWARF: an inlined function's name (DW_TAG_inlined_subroutine's origin). */
static inline __attribute__((always_inline)) long N_INL(long n) {
    long s = 7;
    for (long i = 0; i < n; i++) s += (s << 1) ^ i;
    return s;
}

__attribute__((noinline, noclone)) long host(long n) { return N_INL(n) + 1; }

int main(int c, char **v) {
    long n = c > 1 ? atol(v[1]) : 3000000;
#ifdef COMM
    /* The thread's name (comm), as perf and the recorder see it from here on. */
    prctl(PR_SET_NAME, COMM);
#endif
    sink = N_ESC(n) + N_NL(n) + N_HTML(n) + N_CLEAR(n) + N_OSC8(n) + N_CR(n) + N_SEMI(n) +
           N_BYTES(n) + N_BIDI(n) + N_C1(n) + N_LONG(n) + host(n);
    return 0;
}
