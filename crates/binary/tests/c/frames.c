/* Frame-pointer prologues and call sites for Binary::{frame_established, direct_call_before}. */
__attribute__((noinline)) int leaf(int x) { return x * 3; }
__attribute__((noinline)) int framed(int x) {
  volatile int a[4];
  a[0] = x;
  return leaf(a[0]) + 1;
}
int (*volatile fp)(int) = leaf;
int main(int argc, char **argv) {
  (void)argv;
  return framed(argc) + fp(argc);
}
