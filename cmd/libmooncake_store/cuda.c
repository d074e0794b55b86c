/*
 * cuda.c: the CUDA driver API loaded at run time (see cuda.h and docs/clib.md "GPU memory").
 *
 * Loading: the driver is used only if the process has already loaded it (a CUDA program,
 * e.g. torch, did): dlopen("libcuda.so.1", RTLD_NOLOAD) maps nothing when it is absent, so a
 * process without CUDA never gets the driver from us and every pointer is host memory.
 * MOONCAKE_CUDA_DRIVER_PATH names another driver file, loaded outright (tests use a fake one).
 * The first successful load resolves the symbols and calls cuInit once; it is never unloaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

/* From the CUDA driver API reference (cuda.h of the toolkit), the values used here. */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
enum { CUDA_SUCCESS = 0 };
enum { /* CUpointer_attribute */
    CU_POINTER_ATTRIBUTE_CONTEXT = 1,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};
enum { /* CUmemorytype */
    CU_MEMORYTYPE_HOST = 1,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_ARRAY = 3,
    CU_MEMORYTYPE_UNIFIED = 4,
};
/* CU_STREAM_DEFAULT: a blocking stream, ordered after the legacy default stream's work (where
 * torch runs unless told otherwise), as Mooncake's cudaMemcpy is. */
enum { CU_STREAM_DEFAULT = 0 };
enum { CU_MEMHOSTALLOC_PORTABLE = 0x01 }; /* pinned memory usable from every context */

static struct {
    CUresult (*init)(unsigned);
    CUresult (*getAttributes)(unsigned, int *, void **, CUdeviceptr);
    CUresult (*ctxGetCurrent)(CUcontext *);
    CUresult (*ctxSetCurrent)(CUcontext);
    CUresult (*streamCreate)(CUstream *, unsigned);
    CUresult (*streamSynchronize)(CUstream);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*primaryCtxRetain)(CUcontext *, int);
    CUresult (*errorString)(CUresult, const char **);
    CUresult (*memHostAlloc)(void **, size_t, unsigned); /* optional: staging.go's pinned pool */
    CUresult (*memFreeHost)(void *);
} cu;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;       /* 1 once the driver is loaded and cuInit succeeded; read unlocked */
static int failed;       /* the override could not be loaded: never try again */
static int loads;
static __thread char err[256];

/* One stream per context, created on first use (a context is a GPU of this process). */
#define MAX_CTX 64
static struct { CUcontext ctx; CUstream stream; } streams[MAX_CTX];
static int nstreams;

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) snprintf(err, sizeof err, "CUDA driver: no symbol %s", name);
    return p;
}

/* firstAdds stops dl_iterate_phdr at its first object and reads the loader's count of
 * objects ever loaded. */
static int firstAdds(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

static unsigned long long seenAdds; /* the count when libcuda.so.1 was last looked for */

/* load returns 1 when the driver is usable. Called on every classification until it is: the
 * cheap check is the loader's count of loaded objects (one callback, no name walk), and the
 * driver is looked for only when it has changed since the last look. */
static int load(void) {
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) return 1;
    const char *path = getenv("MOONCAKE_CUDA_DRIVER_PATH");
    if (path && *path && __atomic_load_n(&failed, __ATOMIC_ACQUIRE)) return 0;
    if (!(path && *path)) {
        unsigned long long adds = 0;
        dl_iterate_phdr(firstAdds, &adds);
        if (adds == __atomic_load_n(&seenAdds, __ATOMIC_ACQUIRE)) return 0;
        __atomic_store_n(&seenAdds, adds, __ATOMIC_RELEASE);
    }
    void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL)
                            : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) {
        if (path && *path) __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
        return 0;
    }
    pthread_mutex_lock(&mu);
    if (!loaded) {
        int ok = (cu.init = sym(h, "cuInit")) && (cu.getAttributes = sym(h, "cuPointerGetAttributes")) &&
                 (cu.ctxGetCurrent = sym(h, "cuCtxGetCurrent")) && (cu.ctxSetCurrent = sym(h, "cuCtxSetCurrent")) &&
                 (cu.streamCreate = sym(h, "cuStreamCreate")) &&
                 (cu.streamSynchronize = sym(h, "cuStreamSynchronize")) &&
                 (cu.dtoh = sym(h, "cuMemcpyDtoHAsync_v2")) && (cu.htod = sym(h, "cuMemcpyHtoDAsync_v2")) &&
                 (cu.primaryCtxRetain = sym(h, "cuDevicePrimaryCtxRetain"));
        cu.errorString = dlsym(h, "cuGetErrorString");
        cu.memHostAlloc = dlsym(h, "cuMemHostAlloc");
        cu.memFreeHost = dlsym(h, "cuMemFreeHost");
        if (ok && cu.init(0) == CUDA_SUCCESS) {
            loads++;
            __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
        } else {
            __atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&mu);
    /* The handle stays open: the driver is never unloaded (cheap: the process had it). */
    return loaded;
}

int mc_cuda_loads(void) { return loads; }

void mc_cuda_error(char *buf, size_t len) { snprintf(buf, len, "%s", err); }

static int cuerr(CUresult r, const char *what) {
    const char *s = NULL;
    if (cu.errorString) cu.errorString(r, &s);
    snprintf(err, sizeof err, "CUDA driver: %s: error %d (%s)", what, r, s ? s : "unknown");
    return r;
}

static CUcontext primaries[MAX_CTX];

/* primary returns device ordinal's primary context, retained on first use (NULL: none). */
static CUcontext primary(int ordinal) {
    pthread_mutex_lock(&mu);
    CUcontext c = primaries[ordinal];
    if (!c && cu.primaryCtxRetain(&c, ordinal) != CUDA_SUCCESS) c = NULL;
    primaries[ordinal] = c;
    pthread_mutex_unlock(&mu);
    return c;
}

/* attrs reads p's memory type, context and allocation range. Memory mapped with the virtual
 * memory calls (cuMemMap: PyTorch's expandable segments) has no context attribute: its
 * device's primary context serves (retained once, kept for the process's life). */
static CUresult attrs(uintptr_t p, unsigned *type, CUcontext *ctx, CUdeviceptr *start, size_t *size) {
    int which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                   CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    int ordinal = -1;
    void *out[] = {type, ctx, start, size, &ordinal};
    *type = 0, *ctx = NULL, *start = 0, *size = 0;
    CUresult r = cu.getAttributes(5, which, out, (CUdeviceptr)p);
    if (r == CUDA_SUCCESS && *type == CU_MEMORYTYPE_DEVICE && *ctx == NULL && ordinal >= 0 && ordinal < MAX_CTX)
        *ctx = primary(ordinal);
    return r;
}

int mc_cuda_classify(uintptr_t p, size_t n) {
    if (!load()) return MC_MEM_HOST;
    unsigned type;
    CUcontext ctx;
    CUdeviceptr start;
    size_t size;
    CUresult r = attrs(p, &type, &ctx, &start, &size);
    /* An address the driver does not know is host memory (cuPointerGetAttributes answers
     * type 0 for it, older drivers CUDA_ERROR_INVALID_VALUE). */
    if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE) return MC_MEM_HOST;
    if (ctx == NULL) {
        snprintf(err, sizeof err, "device address %#lx has no context in this process", (unsigned long)p);
        return MC_MEM_NO_CONTEXT;
    }
    if (start && size && (p + n < p || p + n > start + size)) {
        snprintf(err, sizeof err, "[%#lx, +%zu) runs past its device allocation [%#llx, +%zu)", (unsigned long)p, n,
                 start, size);
        return MC_MEM_CROSSES;
    }
    return MC_MEM_DEVICE;
}

/* streamOf returns the library's stream of ctx, made current on this thread. */
static CUresult streamOf(CUcontext ctx, CUstream *s) {
    CUresult r = cu.ctxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nstreams; i++)
        if (streams[i].ctx == ctx) {
            *s = streams[i].stream;
            pthread_mutex_unlock(&mu);
            return CUDA_SUCCESS;
        }
    r = cu.streamCreate(s, CU_STREAM_DEFAULT);
    if (r == CUDA_SUCCESS && nstreams < MAX_CTX) streams[nstreams].ctx = ctx, streams[nstreams++].stream = *s;
    pthread_mutex_unlock(&mu);
    return r;
}

int mc_cuda_copy(uintptr_t dev, void *host, size_t n, int to_device) {
    unsigned type;
    CUcontext ctx, prev = NULL;
    CUdeviceptr start;
    size_t size;
    CUresult r = attrs(dev, &type, &ctx, &start, &size);
    if (r != CUDA_SUCCESS) return cuerr(r, "cuPointerGetAttributes");
    cu.ctxGetCurrent(&prev);
    CUstream s;
    if ((r = streamOf(ctx, &s)) != CUDA_SUCCESS) return cuerr(r, "stream");
    r = to_device ? cu.htod((CUdeviceptr)dev, host, n, s) : cu.dtoh(host, (CUdeviceptr)dev, n, s);
    if (r == CUDA_SUCCESS) r = cu.streamSynchronize(s);
    /* The thread is a Go runtime thread shared by goroutines: leave its context as found. */
    cu.ctxSetCurrent(prev);
    return r == CUDA_SUCCESS ? 0 : cuerr(r, to_device ? "copy to device" : "copy from device");
}

void *mc_cuda_host_alloc(uintptr_t dev, size_t n) {
    if (!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE) || !cu.memHostAlloc || !cu.memFreeHost) return NULL;
    unsigned type;
    CUcontext ctx, prev = NULL;
    CUdeviceptr start;
    size_t size;
    if (attrs(dev, &type, &ctx, &start, &size) != CUDA_SUCCESS || ctx == NULL) return NULL;
    cu.ctxGetCurrent(&prev);
    if (cu.ctxSetCurrent(ctx) != CUDA_SUCCESS) return NULL;
    void *p = NULL;
    if (cu.memHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) p = NULL;
    cu.ctxSetCurrent(prev); /* as mc_cuda_copy: leave the Go thread's context as found */
    return p;
}

void mc_cuda_host_free(void *p) {
    if (p && cu.memFreeHost) cu.memFreeHost(p);
}

int mc_cuda_copy_many(const uintptr_t *devs, const uintptr_t *hosts, const size_t *ns, size_t count, int to_device) {
    CUcontext prev = NULL, ctxs[MAX_CTX];
    CUstream used[MAX_CTX];
    int nused = 0;
    CUresult r = CUDA_SUCCESS;
    cu.ctxGetCurrent(&prev);
    for (size_t i = 0; i < count; i++) {
        unsigned type;
        CUcontext ctx;
        CUdeviceptr start;
        size_t size;
        CUstream s;
        if ((r = attrs(devs[i], &type, &ctx, &start, &size)) != CUDA_SUCCESS) {
            cuerr(r, "cuPointerGetAttributes");
            break;
        }
        if ((r = streamOf(ctx, &s)) != CUDA_SUCCESS) {
            cuerr(r, "stream");
            break;
        }
        int seen = 0;
        for (int j = 0; j < nused; j++) seen |= ctxs[j] == ctx;
        if (!seen && nused < MAX_CTX) ctxs[nused] = ctx, used[nused++] = s;
        r = to_device ? cu.htod((CUdeviceptr)devs[i], (const void *)hosts[i], ns[i], s)
                      : cu.dtoh((void *)hosts[i], (CUdeviceptr)devs[i], ns[i], s);
        if (r != CUDA_SUCCESS) {
            cuerr(r, to_device ? "copy to device" : "copy from device");
            break;
        }
    }
    /* Wait on every stream used, after a failure too: no copy may still run into or out of
     * memory the caller reuses once this returns. */
    for (int j = 0; j < nused; j++) {
        cu.ctxSetCurrent(ctxs[j]);
        CUresult w = cu.streamSynchronize(used[j]);
        if (r == CUDA_SUCCESS && w != CUDA_SUCCESS) r = cuerr(w, to_device ? "copy to device" : "copy from device");
    }
    cu.ctxSetCurrent(prev); /* as mc_cuda_copy: leave the Go thread's context as found */
    return r == CUDA_SUCCESS ? 0 : r;
}
