// Load-to-use latency per working-set size: a random pointer chase, one load per 64-byte
// line, 20 M dependent loads per size (docs/audit.md, "Cache misses": the latencies of
// `--time-caches`). gcc -O2 scripts/cache-latency.c -o cache-latency && ./cache-latency
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <stdint.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t sizes[]={16<<10,256<<10,512<<10,1<<20,3<<20,4<<20,6<<20,8<<20,64<<20};
  for(int s=0;s<9;s++){
    size_t n=sizes[s]/64; size_t*perm=malloc(n*sizeof(size_t)); char*buf=aligned_alloc(64,sizes[s]);
    for(size_t i=0;i<n;i++)perm[i]=i;
    srand(1); for(size_t i=n-1;i>0;i--){size_t j=((size_t)rand()*RAND_MAX+rand())%(i+1);size_t t=perm[i];perm[i]=perm[j];perm[j]=t;}
    for(size_t i=0;i<n;i++) *(void**)(buf+perm[i]*64)=buf+perm[(i+1)%n]*64;
    void*p=buf; long iters=20000000;
    for(long i=0;i<n*2;i++)p=*(void**)p;
    double t0=now(); for(long i=0;i<iters;i++)p=*(void**)p; double t1=now();
    printf("%8zu KiB %.3f ns/load %p\n",sizes[s]>>10,(t1-t0)/iters*1e9,p);
    free(perm);free(buf);
  }
}
