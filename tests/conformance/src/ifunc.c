/* A static program spending part of its time in the PLT stubs of IFUNC functions
 * (strlen, memcpy): glibc's static binaries call them through `.plt` entries filled by
 * R_X86_64_IRELATIVE relocations. perf 6.1 counts those samples under `_init`. */
#include <stdlib.h>
#include <string.h>

char buf[64], dst[64];

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    size_t t = 0;
    for (long i = 0; i < n; i++) {
        buf[i & 31] = (char)('a' + (i & 7));
        t += strlen(buf);
        memcpy(dst, buf, 8);
    }
    return (int)(t & 1) + dst[0] - dst[0];
}
