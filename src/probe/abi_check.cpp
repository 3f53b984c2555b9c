// Compile-time proof that abi.h declares what NVIDIA's headers declare. Built only where CMake
// finds cuda.h, cuda_runtime_api.h and cudnn.h (the CUDA toolkit is extra, never required).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <catch2/catch.hpp>
#include <type_traits>

#include "probe/abi.h"

namespace {

namespace abi = imgcheck::probe::abi;

// One parameter or result matches when the types are the same, or when NVIDIA's is a C enum and
// ours the int that the C ABI passes it as.
template <class Theirs, class Ours>
constexpr bool SameAbi() {
  if constexpr (std::is_enum_v<Theirs>)
    return std::is_same_v<Ours, int> && sizeof(Theirs) == sizeof(int);
  else
    return std::is_same_v<Theirs, Ours>;
}

template <class Theirs, class Ours>
struct Matches : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct Matches<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool Check() {
    if constexpr (sizeof...(A1) != sizeof...(A2))
      return false;
    else
      return SameAbi<R1, R2>() && (SameAbi<A1, A2>() && ...);
  }
  static constexpr bool value = Check();
};

#define IMGCHECK_CHECK_ABI(function, ours) \
  static_assert(Matches<decltype(&(function)), abi::ours>::value, #function " differs from abi.h")

IMGCHECK_CHECK_ABI(cuInit, CuInit);
IMGCHECK_CHECK_ABI(cuDriverGetVersion, CuDriverGetVersion);
IMGCHECK_CHECK_ABI(cuDeviceGetCount, CuDeviceGetCount);
IMGCHECK_CHECK_ABI(cuDeviceGet, CuDeviceGet);
IMGCHECK_CHECK_ABI(cuDeviceGetName, CuDeviceGetName);
IMGCHECK_CHECK_ABI(cuDeviceGetAttribute, CuDeviceGetAttribute);
IMGCHECK_CHECK_ABI(cuDeviceTotalMem_v2, CuDeviceTotalMem);

IMGCHECK_CHECK_ABI(cudaRuntimeGetVersion, CudaRuntimeGetVersion);
IMGCHECK_CHECK_ABI(cudaDriverGetVersion, CudaDriverGetVersion);
IMGCHECK_CHECK_ABI(cudaMalloc, CudaMalloc);
IMGCHECK_CHECK_ABI(cudaMemcpy, CudaMemcpy);
IMGCHECK_CHECK_ABI(cudaFree, CudaFree);
IMGCHECK_CHECK_ABI(cudaDeviceSynchronize, CudaDeviceSynchronize);
IMGCHECK_CHECK_ABI(cudaGetErrorName, CudaGetErrorName);

IMGCHECK_CHECK_ABI(cudnnGetVersion, CudnnGetVersion);
IMGCHECK_CHECK_ABI(cudnnGetCudartVersion, CudnnGetCudartVersion);
IMGCHECK_CHECK_ABI(cudnnGetErrorString, CudnnGetErrorString);
IMGCHECK_CHECK_ABI(cudnnCreate, CudnnCreate);
IMGCHECK_CHECK_ABI(cudnnDestroy, CudnnDestroy);
IMGCHECK_CHECK_ABI(cudnnCreateTensorDescriptor, CudnnCreateTensorDescriptor);
IMGCHECK_CHECK_ABI(cudnnSetTensor4dDescriptor, CudnnSetTensor4dDescriptor);
IMGCHECK_CHECK_ABI(cudnnDestroyTensorDescriptor, CudnnDestroyTensorDescriptor);
IMGCHECK_CHECK_ABI(cudnnCreateFilterDescriptor, CudnnCreateFilterDescriptor);
IMGCHECK_CHECK_ABI(cudnnSetFilter4dDescriptor, CudnnSetFilter4dDescriptor);
IMGCHECK_CHECK_ABI(cudnnDestroyFilterDescriptor, CudnnDestroyFilterDescriptor);
IMGCHECK_CHECK_ABI(cudnnCreateConvolutionDescriptor, CudnnCreateConvolutionDescriptor);
IMGCHECK_CHECK_ABI(cudnnSetConvolution2dDescriptor, CudnnSetConvolution2dDescriptor);
IMGCHECK_CHECK_ABI(cudnnDestroyConvolutionDescriptor, CudnnDestroyConvolutionDescriptor);
IMGCHECK_CHECK_ABI(cudnnGetConvolutionForwardWorkspaceSize,
                   CudnnGetConvolutionForwardWorkspaceSize);
IMGCHECK_CHECK_ABI(cudnnConvolutionForward, CudnnConvolutionForward);
// cuDNN 9 sub-library checks; the cuDNN 8 ones (cudnnOpsInferVersionCheck, ...) have the same
// type, cudnnStatus_t(void), but are not in cuDNN 9's headers.
IMGCHECK_CHECK_ABI(cudnnGraphVersionCheck, CudnnVersionCheck);
IMGCHECK_CHECK_ABI(cudnnOpsVersionCheck, CudnnVersionCheck);
IMGCHECK_CHECK_ABI(cudnnCnnVersionCheck, CudnnVersionCheck);
IMGCHECK_CHECK_ABI(cudnnAdvVersionCheck, CudnnVersionCheck);

static_assert(std::is_same_v<cudnnHandle_t, abi::CudnnHandle>);
static_assert(std::is_same_v<cudnnTensorDescriptor_t, abi::CudnnTensorDesc>);
static_assert(std::is_same_v<cudnnFilterDescriptor_t, abi::CudnnFilterDesc>);
static_assert(std::is_same_v<cudnnConvolutionDescriptor_t, abi::CudnnConvDesc>);
static_assert(std::is_same_v<CUdevice, abi::CuDevice>);

static_assert(CUDA_SUCCESS == abi::kCudaSuccess);
static_assert(CUDA_ERROR_NO_DEVICE == abi::kCudaErrorNoDevice);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == abi::kAttrComputeCapabilityMajor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == abi::kAttrComputeCapabilityMinor);
static_assert(cudaSuccess == abi::kCudaRtSuccess);
static_assert(cudaErrorInsufficientDriver == abi::kCudaRtInsufficientDriver);
static_assert(cudaErrorNoDevice == abi::kCudaRtNoDevice);
static_assert(cudaMemcpyHostToDevice == abi::kMemcpyHostToDevice);
static_assert(cudaMemcpyDeviceToHost == abi::kMemcpyDeviceToHost);
static_assert(CUDNN_STATUS_SUCCESS == abi::kCudnnSuccess);
static_assert(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH == abi::kCudnnSublibraryVersionMismatch);
static_assert(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED == abi::kCudnnSublibraryLoadingFailed);
static_assert(CUDNN_TENSOR_NCHW == abi::kCudnnTensorNchw);
static_assert(CUDNN_DATA_FLOAT == abi::kCudnnDataFloat);
static_assert(CUDNN_CROSS_CORRELATION == abi::kCudnnCrossCorrelation);
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM == abi::kCudnnFwdAlgoImplicitGemm);

// The checker itself must be able to fail: a wrong declaration is caught.
using WrongCreate = abi::CudnnStatus (*)(void** handle);
static_assert(!Matches<decltype(&cudnnCreate), WrongCreate>::value);
using WrongArity = abi::CuResult (*)(int* value, int attribute);
static_assert(!Matches<decltype(&cuDeviceGetAttribute), WrongArity>::value);

}  // namespace

TEST_CASE("abi.h matches the CUDA toolkit's cuda.h, cuda_runtime_api.h and cudnn.h") {
  // Everything above is checked by the compiler; this records that the check was built.
  SUCCEED("checked against CUDA " << CUDA_VERSION << ", cuDNN " << CUDNN_VERSION);
}
