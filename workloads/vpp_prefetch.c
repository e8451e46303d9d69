/* vpp with a software prefetch at the memory-bound path (seed 004 §5.4); see vpp.c. */
#define VPP_PREFETCH 1
#include "vpp.c"
