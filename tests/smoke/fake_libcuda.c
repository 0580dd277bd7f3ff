/* A stand-in libcuda.so.1 for tests: the few driver-API entry points the driver-level smoke
 * calls, with memory in host RAM and the "kernel" run on the CPU.  FAKE_CUDA_MODE picks a
 * failure: "no_device" (cuInit), "invalid_ptx" (cuModuleLoadData), "wrong" (one bad element),
 * "stub" (the CUDA toolkit's lib64/stubs/libcuda.so: cuInit, and even cuGetErrorName, answer
 * CUDA_ERROR_STUB_LIBRARY = 34, cuda.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static int mode_is(const char *name) {
    const char *mode = getenv("FAKE_CUDA_MODE");
    return mode != NULL && strcmp(mode, name) == 0;
}

CUresult cuInit(unsigned flags) {
    (void)flags;
    if (mode_is("stub")) return 34;
    return mode_is("no_device") ? 100 : 0;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *c) { *c = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
CUresult cuDeviceGetName(char *name, int len, int d) { (void)d; strncpy(name, "Fake GPU", len); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) { (void)d; *v = attr == 75 ? 9 : 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)d; *ctx = (void *)1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuModuleLoadData(void **module, const void *image) {
    (void)image;
    if (mode_is("invalid_ptx")) return 218;
    *module = (void *)1;
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; (void)name; *f = (void *)1; return 0; }
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuMemAlloc_v2(uint64_t *p, size_t size) { *p = (uint64_t)(uintptr_t)malloc(size); return 0; }
CUresult cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { memcpy((void *)(uintptr_t)dst, src, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { memcpy(dst, (const void *)(uintptr_t)src, n); return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)stream; (void)extra;
    float *a = *(float **)params[0];
    float *b = *(float **)params[1];
    float *c = *(float **)params[2];
    unsigned n = *(unsigned *)params[3];
    for (unsigned i = 0; i < n; i++) c[i] = a[i] + b[i];
    if (mode_is("wrong") && n > 7) c[7] += 1.0f;
    return 0;
}
CUresult cuGetErrorName(CUresult e, const char **s) {
    if (mode_is("stub")) return 34;
    if (e == 100) { *s = "CUDA_ERROR_NO_DEVICE"; return 0; }
    if (e == 218) { *s = "CUDA_ERROR_INVALID_PTX"; return 0; }
    return 1;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    if (mode_is("stub")) return 34;
    if (e == 100) { *s = "no CUDA-capable device is detected"; return 0; }
    if (e == 218) { *s = "a PTX JIT compilation failed"; return 0; }
    return 1;
}
