/* stage.c - see stage.h. */
#include "stage.h"

#include <stdio.h>

#ifdef INAGG_NCCL_CUDA
#include <cuda_runtime_api.h>

int stage_available(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, whylen, "no CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    return 1;
}

void *stage_alloc(size_t bytes, char *err, size_t errlen)
{
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaHostAlloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void stage_free(void *host)
{
    if (host)
        cudaFreeHost(host);
}

static int copy(void *to, const void *from, size_t bytes, const char *what, char *err,
                size_t errlen)
{
    cudaError_t e = cudaMemcpy(to, from, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cudaMemcpy %s of %zu bytes: %s", what, bytes, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int stage_down(void *host, const void *dev, size_t bytes, char *err, size_t errlen)
{
    return copy(host, dev, bytes, "device to host", err, errlen);
}

int stage_up(void *dev, const void *host, size_t bytes, char *err, size_t errlen)
{
    return copy(dev, host, bytes, "host to device", err, errlen);
}

#else /* built without the CUDA runtime */

static const char *const no_cuda = "built without the CUDA runtime (cuda_runtime_api.h and "
                                   "libcudart were not found at build time)";

int stage_available(char *why, size_t whylen)
{
    snprintf(why, whylen, "%s", no_cuda);
    return 0;
}

void *stage_alloc(size_t bytes, char *err, size_t errlen)
{
    (void)bytes;
    snprintf(err, errlen, "%s", no_cuda);
    return NULL;
}

void stage_free(void *host) { (void)host; }

int stage_down(void *host, const void *dev, size_t bytes, char *err, size_t errlen)
{
    (void)host, (void)dev, (void)bytes;
    snprintf(err, errlen, "%s", no_cuda);
    return -1;
}

int stage_up(void *dev, const void *host, size_t bytes, char *err, size_t errlen)
{
    (void)dev, (void)host, (void)bytes;
    snprintf(err, errlen, "%s", no_cuda);
    return -1;
}
#endif
