// The small, stable C ABI of the CUDA driver, the CUDA runtime and cuDNN that imgcheck-probe
// calls through dlsym. Declared here so the probe builds without the CUDA toolkit (it is not in
// Debian main); abi_check.cpp compares every line with NVIDIA's headers where they exist.
//
// Enumerations are passed as `int`: every enum below is a C enum whose values fit in an int, which
// the x86-64 and AArch64 C ABIs pass exactly like an int. Opaque handles keep NVIDIA's struct tags
// so that the pointer types are the very same types as the headers'.
#pragma once

#include <cstddef>

struct CUctx_st;
struct cudnnContext;
struct cudnnTensorStruct;
struct cudnnFilterStruct;
struct cudnnConvolutionStruct;

namespace imgcheck::probe::abi {

using CuResult = int;     ///< CUresult (cuda.h)
using CuDevice = int;     ///< CUdevice (cuda.h)
using CudaError = int;    ///< cudaError_t (driver_types.h)
using CudnnStatus = int;  ///< cudnnStatus_t (cudnn_graph.h; cudnn.h in cuDNN 8)
using CudnnHandle = cudnnContext*;
using CudnnTensorDesc = cudnnTensorStruct*;
using CudnnFilterDesc = cudnnFilterStruct*;
using CudnnConvDesc = cudnnConvolutionStruct*;

// cuda.h
constexpr CuResult kCudaSuccess = 0;             ///< CUDA_SUCCESS
constexpr CuResult kCudaErrorNoDevice = 100;     ///< CUDA_ERROR_NO_DEVICE
constexpr int kAttrComputeCapabilityMajor = 75;  ///< CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;  ///< CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
// driver_types.h
constexpr CudaError kCudaRtSuccess = 0;              ///< cudaSuccess
constexpr CudaError kCudaRtInsufficientDriver = 35;  ///< cudaErrorInsufficientDriver
constexpr CudaError kCudaRtNoDevice = 100;           ///< cudaErrorNoDevice
constexpr int kMemcpyHostToDevice = 1;               ///< cudaMemcpyHostToDevice
constexpr int kMemcpyDeviceToHost = 2;               ///< cudaMemcpyDeviceToHost
// cudnn_graph.h (cuDNN 9); cuDNN 8 numbers its statuses 0..14 and 14 is VERSION_MISMATCH.
constexpr CudnnStatus kCudnnSuccess = 0;                       ///< CUDNN_STATUS_SUCCESS
constexpr CudnnStatus kCudnnSublibraryVersionMismatch = 1002;  ///< ..._SUBLIBRARY_VERSION_MISMATCH
constexpr CudnnStatus kCudnnSublibraryLoadingFailed = 1008;    ///< ..._SUBLIBRARY_LOADING_FAILED
constexpr CudnnStatus kCudnn8VersionMismatch = 14;  ///< cuDNN 8 CUDNN_STATUS_VERSION_MISMATCH
constexpr int kCudnnTensorNchw = 0;                 ///< CUDNN_TENSOR_NCHW
constexpr int kCudnnDataFloat = 0;                  ///< CUDNN_DATA_FLOAT
constexpr int kCudnnCrossCorrelation = 1;           ///< CUDNN_CROSS_CORRELATION
constexpr int kCudnnFwdAlgoImplicitGemm = 0;        ///< CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM

// Driver API (libcuda.so.1).
using CuInit = CuResult (*)(unsigned int flags);
using CuDriverGetVersion = CuResult (*)(int* version);
using CuDeviceGetCount = CuResult (*)(int* count);
using CuDeviceGet = CuResult (*)(CuDevice* device, int ordinal);
using CuDeviceGetName = CuResult (*)(char* name, int len, CuDevice device);
using CuDeviceGetAttribute = CuResult (*)(int* value, int attribute, CuDevice device);
using CuDeviceTotalMem = CuResult (*)(size_t* bytes, CuDevice device);  ///< cuDeviceTotalMem_v2

// Runtime API (libcudart.so.N).
using CudaRuntimeGetVersion = CudaError (*)(int* version);
using CudaDriverGetVersion = CudaError (*)(int* version);
using CudaMalloc = CudaError (*)(void** pointer, size_t size);
using CudaMemcpy = CudaError (*)(void* dst, const void* src, size_t count, int kind);
using CudaFree = CudaError (*)(void* pointer);
using CudaDeviceSynchronize = CudaError (*)();
using CudaGetErrorName = const char* (*)(CudaError error);

// cuDNN (libcudnn.so.N and its sub-libraries).
using CudnnGetVersion = size_t (*)();
using CudnnGetCudartVersion = size_t (*)();
using CudnnGetErrorString = const char* (*)(CudnnStatus status);
using CudnnVersionCheck = CudnnStatus (*)();  ///< cudnnOpsVersionCheck and its siblings
using CudnnCreate = CudnnStatus (*)(CudnnHandle* handle);
using CudnnDestroy = CudnnStatus (*)(CudnnHandle handle);
using CudnnCreateTensorDescriptor = CudnnStatus (*)(CudnnTensorDesc* desc);
using CudnnSetTensor4dDescriptor = CudnnStatus (*)(CudnnTensorDesc desc, int format, int data_type,
                                                   int n, int c, int h, int w);
using CudnnDestroyTensorDescriptor = CudnnStatus (*)(CudnnTensorDesc desc);
using CudnnCreateFilterDescriptor = CudnnStatus (*)(CudnnFilterDesc* desc);
using CudnnSetFilter4dDescriptor = CudnnStatus (*)(CudnnFilterDesc desc, int data_type, int format,
                                                   int k, int c, int h, int w);
using CudnnDestroyFilterDescriptor = CudnnStatus (*)(CudnnFilterDesc desc);
using CudnnCreateConvolutionDescriptor = CudnnStatus (*)(CudnnConvDesc* desc);
using CudnnSetConvolution2dDescriptor = CudnnStatus (*)(CudnnConvDesc desc, int pad_h, int pad_w,
                                                        int u, int v, int dilation_h,
                                                        int dilation_w, int mode, int compute_type);
using CudnnDestroyConvolutionDescriptor = CudnnStatus (*)(CudnnConvDesc desc);
using CudnnGetConvolutionForwardWorkspaceSize =
    CudnnStatus (*)(CudnnHandle handle, CudnnTensorDesc x_desc, CudnnFilterDesc w_desc,
                    CudnnConvDesc conv_desc, CudnnTensorDesc y_desc, int algo, size_t* bytes);
using CudnnConvolutionForward = CudnnStatus (*)(CudnnHandle handle, const void* alpha,
                                                CudnnTensorDesc x_desc, const void* x,
                                                CudnnFilterDesc w_desc, const void* w,
                                                CudnnConvDesc conv_desc, int algo, void* workspace,
                                                size_t workspace_bytes, const void* beta,
                                                CudnnTensorDesc y_desc, void* y);

/// cuDNN's per-sub-library version checks, by major version: which sub-libraries exist and the
/// symbol that checks each one (NVIDIA cuDNN API reference, "cudnnOpsVersionCheck" and, for 8.x,
/// "cudnnOpsInferVersionCheck").
struct SublibraryCheck {
  const char* sublibrary;  ///< "ops", "cnn", ... (the file is libcudnn_<sublibrary>.so.<major>)
  const char* symbol;
};
constexpr SublibraryCheck kCudnn9Checks[] = {
    {"graph", "cudnnGraphVersionCheck"},
    {"ops", "cudnnOpsVersionCheck"},
    {"cnn", "cudnnCnnVersionCheck"},
    {"adv", "cudnnAdvVersionCheck"},
};
constexpr SublibraryCheck kCudnn8Checks[] = {
    {"ops_infer", "cudnnOpsInferVersionCheck"}, {"ops_train", "cudnnOpsTrainVersionCheck"},
    {"cnn_infer", "cudnnCnnInferVersionCheck"}, {"cnn_train", "cudnnCnnTrainVersionCheck"},
    {"adv_infer", "cudnnAdvInferVersionCheck"}, {"adv_train", "cudnnAdvTrainVersionCheck"},
};

}  // namespace imgcheck::probe::abi
