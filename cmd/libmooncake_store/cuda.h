/*
 * cuda.h: the C library's run-time view of the CUDA driver API (cuda.c). No CUDA header is
 * needed at build time: cuda.c declares the few types and enums it uses from the public
 * driver API documentation and finds the functions with dlopen/dlsym.
 */
#ifndef MOONCAKE_CUDA_H
#define MOONCAKE_CUDA_H
#include <stddef.h>
#include <stdint.h>

/* mc_cuda_classify's answers. */
enum {
    MC_MEM_HOST = 0,        /* not device memory the driver knows: use it in place */
    MC_MEM_DEVICE = 1,      /* device memory of a context in this process: stage it */
    MC_MEM_CROSSES = -1,    /* [p, p+n) starts in a device allocation and runs past its end */
    MC_MEM_NO_CONTEXT = -2, /* device memory with no usable context (another process's, destroyed) */
    MC_MEM_DRIVER = -3,     /* the driver failed: message in mc_cuda_error */
};

/* mc_cuda_classify says whether [p, p+n) is host or device memory. Without a driver loaded
 * in the process (libcuda.so.1 not mapped, no override) it answers HOST after one dlopen
 * with RTLD_NOLOAD, which maps nothing. */
int mc_cuda_classify(uintptr_t p, size_t n);

/* mc_cuda_copy copies n bytes between device memory dev and host memory host (to_device:
 * host -> dev, else dev -> host) on the library's own stream of dev's context, and waits for
 * it. It returns 0 or a CUresult (message in mc_cuda_error). */
int mc_cuda_copy(uintptr_t dev, void *host, size_t n, int to_device);

/* mc_cuda_copy_many is mc_cuda_copy for count ranges (devs[i] <-> hosts[i], ns[i] bytes):
 * every copy is queued, then each stream used is waited for once. It returns 0 or the first
 * failure's CUresult (message in mc_cuda_error); it returns only when no copy runs. */
int mc_cuda_copy_many(const uintptr_t *devs, const uintptr_t *hosts, const size_t *ns, size_t count, int to_device);

/* mc_cuda_host_alloc allocates n bytes of pinned host memory, usable by every context, with
 * the context of device address dev current; NULL when the driver has no such call or refuses
 * (the caller stages through ordinary memory then). mc_cuda_host_free frees it. */
void *mc_cuda_host_alloc(uintptr_t dev, size_t n);
void mc_cuda_host_free(void *p);

/* mc_cuda_loads counts the drivers loaded (0 or 1): tests check that none was. */
int mc_cuda_loads(void);

/* mc_cuda_error writes the last failure's text of the calling thread into buf. */
void mc_cuda_error(char *buf, size_t len);
#endif
