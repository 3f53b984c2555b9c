/* A fake libcudnn.so.N for imgcheck-probe's tests: the shim that, like cuDNN 8 and 9, loads its
 * sub-libraries by name (dlopen, its RUNPATH is $ORIGIN) when a version check asks for them, and
 * the legacy convolution API computed on the fake runtime's host memory.
 *   FAKE_CUDNN_VERSION  cudnnGetVersion (default 91900; 8902 makes it a cuDNN 8 shim)
 *   FAKE_CUDNN_CUDART   cudnnGetCudartVersion (default 12080)
 *   FAKE_WRONG_RESULT   the convolution returns one wrong element
 *   FAKE_CONV_STATUS    cudnnConvolutionForward fails with this status
 *   FAKE_CRASH          cudnnCreate dereferences a null pointer
 *   FAKE_HANG           cudnnCreate never returns, nor does the helper process it forks */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FAKE_CUDNN_VERSION
#define FAKE_CUDNN_VERSION 91900
#endif
#ifndef FAKE_CUDNN_CUDART
#define FAKE_CUDNN_CUDART 12080
#endif

size_t fake_cudnn_shim_version(void) { return FAKE_CUDNN_VERSION; }
size_t cudnnGetVersion(void) { return FAKE_CUDNN_VERSION; }
size_t cudnnGetCudartVersion(void) { return FAKE_CUDNN_CUDART; }

const char* cudnnGetErrorString(int s) {
  switch (s) {
    case 0:
      return "CUDNN_STATUS_SUCCESS";
    case 14:
      return "CUDNN_STATUS_VERSION_MISMATCH";
    case 1002:
      return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case 1008:
      return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case 3005:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case 3007:
      return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    default:
      return "CUDNN_STATUS_UNKNOWN";
  }
}

static int Check(const char* sublibrary, const char* symbol) {
  char name[64];
  int major = FAKE_CUDNN_VERSION >= 90000 ? FAKE_CUDNN_VERSION / 10000 : FAKE_CUDNN_VERSION / 1000;
  snprintf(name, sizeof name, "libcudnn_%s.so.%d", sublibrary, major);
  void* h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
  if (!h) return FAKE_CUDNN_VERSION >= 90000 ? 1008 : 14;
  int (*check)(void) = (int (*)(void))dlsym(h, symbol);
  return check ? check() : 1008;
}

int cudnnGraphVersionCheck(void) { return Check("graph", "cudnnGraphVersionCheck"); }
int cudnnOpsVersionCheck(void) { return Check("ops", "cudnnOpsVersionCheck"); }
int cudnnCnnVersionCheck(void) { return Check("cnn", "cudnnCnnVersionCheck"); }
int cudnnAdvVersionCheck(void) { return Check("adv", "cudnnAdvVersionCheck"); }
int cudnnOpsInferVersionCheck(void) { return Check("ops_infer", "cudnnOpsInferVersionCheck"); }
int cudnnOpsTrainVersionCheck(void) { return Check("ops_train", "cudnnOpsTrainVersionCheck"); }
int cudnnCnnInferVersionCheck(void) { return Check("cnn_infer", "cudnnCnnInferVersionCheck"); }
int cudnnCnnTrainVersionCheck(void) { return Check("cnn_train", "cudnnCnnTrainVersionCheck"); }
int cudnnAdvInferVersionCheck(void) { return Check("adv_infer", "cudnnAdvInferVersionCheck"); }
int cudnnAdvTrainVersionCheck(void) { return Check("adv_train", "cudnnAdvTrainVersionCheck"); }

struct cudnnContext {
  int unused;
};
typedef struct {
  int n, c, h, w;
} Dims;
typedef struct {
  int pad_h, pad_w, u, v, dil_h, dil_w, mode;
} Conv;

int cudnnCreate(struct cudnnContext** h) {
#ifdef FAKE_CRASH
  volatile int* p = NULL;
  *p = 1;
#endif
#ifdef FAKE_HANG
  fork(); /* a helper, as real libraries start them: only killing the group ends both */
  for (;;) pause();
#endif
  /* Creating a handle creates the CUDA context: an old driver fails here, as with real cuDNN. */
  int (*cuda_malloc)(void**, size_t) = (int (*)(void**, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
  int (*cuda_free)(void*) = (int (*)(void*))dlsym(RTLD_DEFAULT, "cudaFree");
  void* probe = NULL;
  if (!cuda_malloc || cuda_malloc(&probe, 1) != 0) return 3005;
  cuda_free(probe);
  *h = calloc(1, sizeof **h);
  return 0;
}
int cudnnDestroy(struct cudnnContext* h) {
  free(h);
  return 0;
}

int cudnnCreateTensorDescriptor(Dims** d) {
  *d = calloc(1, sizeof **d);
  return 0;
}
int cudnnDestroyTensorDescriptor(Dims* d) {
  free(d);
  return 0;
}
int cudnnSetTensor4dDescriptor(Dims* d, int format, int type, int n, int c, int h, int w) {
  if (format != 0 || type != 0) return 2000;
  d->n = n;
  d->c = c;
  d->h = h;
  d->w = w;
  return 0;
}
int cudnnCreateFilterDescriptor(Dims** d) { return cudnnCreateTensorDescriptor(d); }
int cudnnDestroyFilterDescriptor(Dims* d) {
  free(d);
  return 0;
}
int cudnnSetFilter4dDescriptor(Dims* d, int type, int format, int k, int c, int h, int w) {
  return cudnnSetTensor4dDescriptor(d, format, type, k, c, h, w);
}
int cudnnCreateConvolutionDescriptor(Conv** d) {
  *d = calloc(1, sizeof **d);
  return 0;
}
int cudnnDestroyConvolutionDescriptor(Conv* d) {
  free(d);
  return 0;
}
int cudnnSetConvolution2dDescriptor(Conv* d, int pad_h, int pad_w, int u, int v, int dil_h,
                                    int dil_w, int mode, int compute) {
  if (compute != 0) return 2000;
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->u = u;
  d->v = v;
  d->dil_h = dil_h;
  d->dil_w = dil_w;
  d->mode = mode;
  return 0;
}
int cudnnGetConvolutionForwardWorkspaceSize(void* h, Dims* x, Dims* w, Conv* c, Dims* y, int algo,
                                            size_t* bytes) {
  (void)h;
  (void)x;
  (void)w;
  (void)c;
  (void)y;
  *bytes = algo == 0 ? 64 : 0;
  return 0;
}

int cudnnConvolutionForward(void* h, const void* alpha, Dims* xd, const void* xp, Dims* wd,
                            const void* wp, Conv* cd, int algo, void* ws, size_t ws_bytes,
                            const void* beta, Dims* yd, void* yp) {
  (void)h;
  (void)algo;
  (void)ws;
  (void)ws_bytes;
#ifdef FAKE_CONV_STATUS
  return FAKE_CONV_STATUS;
#endif
  const float* x = xp;
  const float* w = wp;
  float* y = yp;
  float a = *(const float*)alpha, b = *(const float*)beta;
  for (int n = 0; n < yd->n; ++n)
    for (int k = 0; k < yd->c; ++k)
      for (int oh = 0; oh < yd->h; ++oh)
        for (int ow = 0; ow < yd->w; ++ow) {
          float sum = 0;
          for (int c = 0; c < xd->c; ++c)
            for (int r = 0; r < wd->h; ++r)
              for (int s = 0; s < wd->w; ++s) {
                int ih = oh * cd->u + r * cd->dil_h - cd->pad_h;
                int iw = ow * cd->v + s * cd->dil_w - cd->pad_w;
                if (ih < 0 || ih >= xd->h || iw < 0 || iw >= xd->w) continue;
                int rr = cd->mode == 1 ? r : wd->h - 1 - r, ss = cd->mode == 1 ? s : wd->w - 1 - s;
                sum += x[((n * xd->c + c) * xd->h + ih) * xd->w + iw] *
                       w[((k * wd->c + c) * wd->h + rr) * wd->w + ss];
              }
          float* out = &y[((n * yd->c + k) * yd->h + oh) * yd->w + ow];
          *out = a * sum + b * *out;
        }
#ifdef FAKE_WRONG_RESULT
  y[7] += 0.5f;
#endif
  return 0;
}
