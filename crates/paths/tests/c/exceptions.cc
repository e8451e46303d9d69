// Exceptions and hot/cold splitting (proftrust-paths). main calls thrower(4) three times;
// thrower recurses to thrower(0), which throws (GCC moves the throw into the cold part
// `thrower(int) [clone .cold]`); the exception unwinds the five thrower activations and the
// C++ runtime's frames and lands in main's cold part (`main.cold`), which jumps back into
// main. Hand-derived: one record of main; thrower called 3 times from main with 12
// recursive calls (3 x 4) folded into its record; 15 thrower activations of which the 12
// above thrower(0) are unwound mid-path in the hot part and the 3 throws mid-path in the
// cold part; leaf called 3 times from main; no transfer the profiler cannot explain.
// Build: g++ -O2 -g -fno-omit-frame-pointer exceptions.cc -o exceptions
#include <cstdio>
#include <stdexcept>

#define OPAQUE(v) __asm__ volatile("" : "+r"(v))

__attribute__((noinline)) int thrower(int n) {
    if (n == 0)
        throw std::runtime_error("bottom");
    int r = thrower(n - 1);
    OPAQUE(r);
    return r + 1;
}

__attribute__((noinline)) int leaf(int x) {
    OPAQUE(x);
    return x * 2;
}

int main() {
    int caught = 0, s = 0;
    for (int i = 0; i < 3; i++) {
        try {
            s += thrower(4);
        } catch (const std::exception &) {
            caught++;
        }
        s += leaf(i);
    }
    std::printf("%d %d\n", caught, s);
    return 0;
}
