/*
 * fakecuda.c: a stand-in for the CUDA driver (libcuda.so.1) for gpucheck.c on a machine with no
 * GPU. Its "device memory" is host memory the process cannot touch (PROT_NONE) except inside
 * the driver's own copies, so a library that dereferenced a device address on the host would
 * fault: the test proves the library stages device ranges rather than reading them in place.
 * It implements only the calls libmooncake_store uses (cmd/libmooncake_store/cuda.c) plus
 * fake_* helpers for the test program.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;

#define ARENA (256u << 20)
#define MAX_ALLOCS 256
static unsigned char *arena;
static size_t used;
static struct { CUdeviceptr start; size_t size; int noctx; } allocs[MAX_ALLOCS];
static int nallocs, inits, copies;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static __thread CUcontext current;
static char ctx_token;

int cuInit(unsigned flags) {
    (void)flags;
    pthread_mutex_lock(&mu);
    if (!arena) arena = mmap(NULL, ARENA, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    inits++;
    pthread_mutex_unlock(&mu);
    return arena == MAP_FAILED ? 100 : 0;
}

static int find(CUdeviceptr p) {
    for (int i = 0; i < nallocs; i++)
        if (p >= allocs[i].start && p < allocs[i].start + allocs[i].size) return i;
    return -1;
}

int cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
    pthread_mutex_lock(&mu);
    int i = find(p);
    for (unsigned k = 0; k < n; k++) {
        switch (attrs[k]) {
        case 1: *(CUcontext *)data[k] = i >= 0 && !allocs[i].noctx ? &ctx_token : NULL; break;
        case 2: *(unsigned *)data[k] = i >= 0 ? 2 : 0; break;
        case 9: *(int *)data[k] = i >= 0 && !allocs[i].noctx ? 0 : -1; break;
        case 11: *(CUdeviceptr *)data[k] = i >= 0 ? allocs[i].start : 0; break;
        case 12: *(size_t *)data[k] = i >= 0 ? allocs[i].size : 0; break;
        }
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

int cuCtxGetCurrent(CUcontext *c) { *c = current; return 0; }
int cuCtxSetCurrent(CUcontext c) { current = c; return 0; }
int cuDevicePrimaryCtxRetain(CUcontext *c, int dev) { *c = &ctx_token; return dev == 0 ? 0 : 101; }
int cuStreamCreate(CUstream *s, unsigned flags) { (void)flags; *s = &ctx_token; return 0; }
int cuStreamSynchronize(CUstream s) { (void)s; return 0; }
int cuGetErrorString(int r, const char **s) { *s = r ? "fake error" : "no error"; return 0; }

/* copy checks that the device side is one allocation and that a context is current, then
 * opens the arena for the copy only. */
static int copy(void *dst, const void *src, CUdeviceptr dev, size_t n) {
    pthread_mutex_lock(&mu);
    int i = find(dev);
    int r = 0;
    if (i < 0 || dev + n > allocs[i].start + allocs[i].size) r = 1; /* CUDA_ERROR_INVALID_VALUE */
    else if (current != &ctx_token) r = 201;                         /* CUDA_ERROR_INVALID_CONTEXT */
    if (!r) {
        mprotect(arena, ARENA, PROT_READ | PROT_WRITE);
        memcpy(dst, src, n);
        mprotect(arena, ARENA, PROT_NONE);
        copies++;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

int cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    (void)s;
    return copy(dst, (const void *)src, src, n);
}

int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    (void)s;
    return copy((void *)dst, src, dst, n);
}

/* Pinned host memory: ordinary mappings, counted (the library pools them: staging.go). */
#define MAX_PINNED 64
static struct { void *p; size_t n; } pinned[MAX_PINNED];
static int npinned, pinned_allocs;

int cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    if (current == NULL) return 201; /* CUDA_ERROR_INVALID_CONTEXT: no context current */
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_mutex_lock(&mu);
    int ok = m != MAP_FAILED && npinned < MAX_PINNED;
    if (ok) pinned[npinned].p = m, pinned[npinned++].n = n, pinned_allocs++;
    pthread_mutex_unlock(&mu);
    if (!ok) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *p = m;
    return 0;
}

int cuMemFreeHost(void *p) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < npinned; i++)
        if (pinned[i].p == p) {
            munmap(p, pinned[i].n);
            pinned[i] = pinned[--npinned];
            pthread_mutex_unlock(&mu);
            return 0;
        }
    pthread_mutex_unlock(&mu);
    return 1; /* CUDA_ERROR_INVALID_VALUE */
}

int fake_pinned_allocs(void) { return pinned_allocs; }

/* The test's helpers: allocate device memory (noctx: memory with no context, as another
 * process's would look), write and read it, and count. */
void *fake_alloc(size_t n, int noctx) {
    pthread_mutex_lock(&mu);
    void *p = NULL;
    n = (n + 4095) & ~(size_t)4095;
    if (arena && used + n <= ARENA && nallocs < MAX_ALLOCS) {
        p = arena + used;
        allocs[nallocs].start = (CUdeviceptr)p, allocs[nallocs].size = n, allocs[nallocs++].noctx = noctx;
        used += n;
    }
    pthread_mutex_unlock(&mu);
    return p;
}

static void raw(void *dst, const void *src, size_t n) {
    pthread_mutex_lock(&mu);
    mprotect(arena, ARENA, PROT_READ | PROT_WRITE);
    memcpy(dst, src, n);
    mprotect(arena, ARENA, PROT_NONE);
    pthread_mutex_unlock(&mu);
}

void fake_write(void *dev, const void *src, size_t n) { raw(dev, src, n); }
void fake_read(void *dst, const void *dev, size_t n) { raw(dst, dev, n); }
int fake_inits(void) { return inits; }
int fake_copies(void) { return copies; }
