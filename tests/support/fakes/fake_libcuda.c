/* A fake CUDA driver (libcuda.so.1) for imgcheck-probe's tests: the driver API calls the probe
 * makes, with the behaviour chosen at compile time.
 *   FAKE_DRIVER_VERSION  what cuDriverGetVersion reports (default 12080, CUDA 12.8)
 *   FAKE_NO_DEVICE       cuInit fails with CUDA_ERROR_NO_DEVICE (100), as on a host without GPU */
#include <stddef.h>
#include <string.h>

#ifndef FAKE_DRIVER_VERSION
#define FAKE_DRIVER_VERSION 12080
#endif

int cuInit(unsigned int flags) {
  (void)flags;
#ifdef FAKE_NO_DEVICE
  return 100;
#else
  return 0;
#endif
}
int cuDriverGetVersion(int* v) {
  *v = FAKE_DRIVER_VERSION;
  return 0;
}
int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
int cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return ordinal == 0 ? 0 : 101;
}
int cuDeviceGetName(char* name, int len, int dev) {
  (void)dev;
  strncpy(name, "Fake GPU", (size_t)len);
  return 0;
}
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : 0;
  return 0;
}
int cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  (void)dev;
  *bytes = (size_t)80 << 30;
  return 0;
}
