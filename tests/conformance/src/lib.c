/* A shared library with a hot function (conformance suite). */
__attribute__((noinline)) long lib_hot(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += (i ^ (i >> 3)) * 7;
    return s;
}
