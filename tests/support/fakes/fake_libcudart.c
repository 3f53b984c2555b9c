/* A fake CUDA runtime (libcudart.so.N) for imgcheck-probe's tests. "Device" memory is host
 * memory, so the fake cuDNN can compute on it.
 *   FAKE_RUNTIME_VERSION  what cudaRuntimeGetVersion reports (default 12080)
 * Like the real runtime, the first call that needs a context fails with
 * cudaErrorInsufficientDriver (35) when the driver (found as the real runtime finds it, in the
 * process) reports an older CUDA version than the runtime's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAKE_RUNTIME_VERSION
#define FAKE_RUNTIME_VERSION 12080
#endif

static int DriverVersion(void) {
  int (*get)(int*) = (int (*)(int*))dlsym(RTLD_DEFAULT, "cuDriverGetVersion");
  int v = 0;
  if (!get || get(&v) != 0) return 0;
  return v;
}

int cudaRuntimeGetVersion(int* v) {
  *v = FAKE_RUNTIME_VERSION;
  return 0;
}
int cudaDriverGetVersion(int* v) {
  *v = DriverVersion();
  return 0;
}
int cudaMalloc(void** p, size_t n) {
  if (DriverVersion() < FAKE_RUNTIME_VERSION) return 35;
  *p = calloc(1, n ? n : 1);
  return *p ? 0 : 2;
}
int cudaMemcpy(void* dst, const void* src, size_t n, int kind) {
  (void)kind;
  memcpy(dst, src, n);
  return 0;
}
int cudaFree(void* p) {
  free(p);
  return 0;
}
int cudaDeviceSynchronize(void) { return 0; }
const char* cudaGetErrorName(int e) {
  switch (e) {
    case 0:
      return "cudaSuccess";
    case 35:
      return "cudaErrorInsufficientDriver";
    default:
      return "cudaErrorUnknown";
  }
}
