// imgcheck-probe: loads an image's CUDA libraries (materialised by the host side into a private
// directory) on this host with this host's driver, as the NVIDIA container runtime would, runs a
// tiny cuDNN convolution, and prints what it saw as one JSON object on stdout.
//
// It links no CUDA library: the ABI it calls is declared in probe/abi.h and every function is
// found with dlsym. It runs untrusted code, so it is a separate process under CPU and wall-clock
// limits, is built without exceptions, and never trusts a library's strings (json_out.cpp escapes).
//
// Usage: imgcheck-probe [--libcuda PATH] [--cpu-seconds N] [--wall-seconds N] --lib ROLE=PATH...
//   --lib      an absolute path to load, in the order given (dependency order); ROLE "cudart" and
//              "cudnn" name the libraries whose API is called, any other role is loaded only.
//   --libcuda  the driver library; by default "libcuda.so.1" through the host's loader. Tests
//              point it at a fake driver.
// Exit: 0 the probe ran (the JSON says what passed), 3 no driver or no GPU, 2 usage error.
#include <dlfcn.h>
#include <link.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probe/abi.h"
#include "probe/child/json_out.h"
#include "util/text.h"

namespace imgcheck::probe::child {
namespace {

constexpr int kExitRan = 0;
constexpr int kExitUsage = 2;
constexpr int kExitNoGpu = 3;

// The convolution: NCHW float, 1x2x6x6 input, 3 filters of 2x3x3, padding 1, stride 1. Inputs are
// small integers and weights multiples of 1/4: exact in fp32 and in TF32 (which cuDNN may use by
// default on Ampere and later), so every correct algorithm returns the exact sums.
constexpr int kN = 1, kC = 2, kH = 6, kW = 6, kK = 3, kR = 3, kS = 3, kPad = 1;
constexpr double kTolerance = 1e-3;  // absolute, per output element
constexpr int kTimedRuns = 10;

struct Lib {
  std::string role, path;
  void* handle = nullptr;
};

struct Options {
  std::string libcuda = "libcuda.so.1";
  long cpu_seconds = 60;
  long wall_seconds = 120;
  std::vector<Lib> libs;
};

// Progress on stderr, so that the parent can say where a crash or a hang happened.
void Stage(const char* name) {
  std::fprintf(stderr, "imgcheck-probe: stage %s\n", name);
  std::fflush(stderr);
}

double NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

std::string DlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlerror";
}

template <class Fn>
Fn Sym(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  Fn fn;
  static_assert(sizeof fn == sizeof p);
  std::memcpy(&fn, &p, sizeof fn);  // POSIX guarantees object and function pointers convert
  return fn;
}

// The longest limit accepted: setrlimit and alarm take it as it is, without overflow.
constexpr long kMaxSeconds = 1000000;

// Empty when the arguments are usable, else what is wrong with them.
std::string ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (i + 1 >= argc) return "no value after " + std::string(a);
    std::string_view v = argv[++i];
    if (a == "--libcuda") {
      o.libcuda = v;
    } else if (a == "--cpu-seconds" || a == "--wall-seconds") {
      std::optional<long> n = imgcheck::util::ParseInt<long>(v);
      if (!n || *n < 1 || *n > kMaxSeconds)
        return std::string(a) + ": '" + std::string(v) + "' is not a whole number from 1 to " +
               std::to_string(kMaxSeconds);
      (a == "--cpu-seconds" ? o.cpu_seconds : o.wall_seconds) = *n;
    } else if (a == "--lib") {
      size_t eq = v.find('=');
      if (eq == std::string_view::npos || eq + 1 >= v.size() || v[eq + 1] != '/')
        return "--lib: '" + std::string(v) + "' is not ROLE=/ABSOLUTE/PATH";
      o.libs.push_back({std::string(v.substr(0, eq)), std::string(v.substr(eq + 1))});
    } else {
      return "unknown argument " + std::string(a);
    }
  }
  return "";
}

void SetLimits(const Options& o) {
  // No RLIMIT_AS: the CUDA driver reserves a very large virtual address range (unified addressing).
  rlimit cpu{static_cast<rlim_t>(o.cpu_seconds), static_cast<rlim_t>(o.cpu_seconds + 1)};
  setrlimit(RLIMIT_CPU, &cpu);
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  alarm(static_cast<unsigned>(o.wall_seconds));  // the parent kills us too; this is a backstop
}

const Lib* FindRole(const Options& o, std::string_view role) {
  for (const auto& l : o.libs)
    if (l.role == role) return &l;
  return nullptr;
}

// --- host driver ------------------------------------------------------------------------------

// Returns false when there is no usable driver or GPU: the probe then stops with exit 3.
bool ProbeHost(const Options& o, JsonOut& j, std::string& no_gpu_reason) {
  Stage("host");
  j.BeginObject("host");
  j.String("libcuda", o.libcuda);
  void* cuda = dlopen(o.libcuda.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!cuda) {
    no_gpu_reason = "no NVIDIA driver: " + DlError();
    j.String("error", no_gpu_reason);
    j.EndObject();
    return false;
  }
  auto cu_init = Sym<abi::CuInit>(cuda, "cuInit");
  auto get_version = Sym<abi::CuDriverGetVersion>(cuda, "cuDriverGetVersion");
  auto get_count = Sym<abi::CuDeviceGetCount>(cuda, "cuDeviceGetCount");
  auto get_device = Sym<abi::CuDeviceGet>(cuda, "cuDeviceGet");
  auto get_name = Sym<abi::CuDeviceGetName>(cuda, "cuDeviceGetName");
  auto get_attr = Sym<abi::CuDeviceGetAttribute>(cuda, "cuDeviceGetAttribute");
  auto total_mem = Sym<abi::CuDeviceTotalMem>(cuda, "cuDeviceTotalMem_v2");
  if (!cu_init || !get_version || !get_count || !get_device) {
    no_gpu_reason = "the driver library lacks the CUDA driver API (cuInit)";
    j.String("error", no_gpu_reason);
    j.EndObject();
    return false;
  }
  int version = 0;
  if (get_version(&version) == abi::kCudaSuccess) j.Int("driver_version", version);
  abi::CuResult r = cu_init(0);
  j.Int("cu_init", r);
  int count = 0;
  if (r == abi::kCudaSuccess) r = get_count(&count);
  if (r != abi::kCudaSuccess || count == 0) {
    no_gpu_reason = r == abi::kCudaErrorNoDevice || (r == abi::kCudaSuccess && count == 0)
                        ? "the driver sees no GPU"
                        : "the driver failed to initialise (CUresult " + std::to_string(r) + ")";
    j.String("error", no_gpu_reason);
    j.EndObject();
    return false;
  }
  j.Int("device_count", count);
  abi::CuDevice dev = 0;
  if (get_device(&dev, 0) == abi::kCudaSuccess) {
    char name[256] = {};
    if (get_name && get_name(name, sizeof name - 1, dev) == abi::kCudaSuccess)
      j.String("gpu", name);
    int major = 0, minor = 0;
    if (get_attr && get_attr(&major, abi::kAttrComputeCapabilityMajor, dev) == abi::kCudaSuccess &&
        get_attr(&minor, abi::kAttrComputeCapabilityMinor, dev) == abi::kCudaSuccess)
      j.String("sm", std::to_string(major) + std::to_string(minor));
    size_t bytes = 0;
    if (total_mem && total_mem(&bytes, dev) == abi::kCudaSuccess)
      j.Int("memory_bytes", static_cast<int64_t>(bytes));
  }
  j.EndObject();
  return true;
}

// --- the image's libraries -----------------------------------------------------------------------

void LoadLibraries(Options& o, JsonOut& j) {
  Stage("load");
  j.BeginArray("libraries");
  for (auto& l : o.libs) {
    l.handle = dlopen(l.path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    j.BeginObject();
    j.String("role", l.role);
    j.String("path", l.path);
    j.Bool("loaded", l.handle != nullptr);
    if (!l.handle) j.String("error", DlError());
    j.EndObject();
  }
  j.EndArray();
}

// Every object in the process after loading, so the host can tell which file really served each
// soname (cuDNN 9 dlopens its sub-libraries by name, behind our back).
void ListLoadedObjects(JsonOut& j) {
  j.BeginArray("loaded_objects");
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        if (info->dlpi_name && info->dlpi_name[0] == '/') {
          auto* out = static_cast<JsonOut*>(data);
          out->String({}, info->dlpi_name);
        }
        return 0;
      },
      &j);
  j.EndArray();
}

struct Runtime {
  abi::CudaMalloc malloc_fn = nullptr;
  abi::CudaMemcpy memcpy_fn = nullptr;
  abi::CudaFree free_fn = nullptr;
  abi::CudaDeviceSynchronize sync_fn = nullptr;
  abi::CudaGetErrorName error_name = nullptr;
  bool usable = false;
  std::string Name(abi::CudaError e) const {
    const char* n = error_name ? error_name(e) : nullptr;
    return n ? n : "cudaError " + std::to_string(e);
  }
};

Runtime ProbeCudart(const Options& o, JsonOut& j) {
  Stage("cudart");
  Runtime rt;
  j.BeginObject("cudart");
  const Lib* lib = FindRole(o, "cudart");
  if (!lib || !lib->handle) {
    j.String("error", lib ? "not loaded" : "no cudart given");
    j.EndObject();
    return rt;
  }
  auto runtime_version = Sym<abi::CudaRuntimeGetVersion>(lib->handle, "cudaRuntimeGetVersion");
  auto driver_version = Sym<abi::CudaDriverGetVersion>(lib->handle, "cudaDriverGetVersion");
  rt.malloc_fn = Sym<abi::CudaMalloc>(lib->handle, "cudaMalloc");
  rt.memcpy_fn = Sym<abi::CudaMemcpy>(lib->handle, "cudaMemcpy");
  rt.free_fn = Sym<abi::CudaFree>(lib->handle, "cudaFree");
  rt.sync_fn = Sym<abi::CudaDeviceSynchronize>(lib->handle, "cudaDeviceSynchronize");
  rt.error_name = Sym<abi::CudaGetErrorName>(lib->handle, "cudaGetErrorName");
  int v = 0;
  if (runtime_version && runtime_version(&v) == abi::kCudaRtSuccess) j.Int("runtime_version", v);
  if (driver_version && driver_version(&v) == abi::kCudaRtSuccess) j.Int("driver_version", v);
  if (!rt.malloc_fn || !rt.memcpy_fn || !rt.free_fn || !rt.sync_fn) {
    j.String("error", "the library lacks the CUDA runtime API (cudaMalloc)");
    j.EndObject();
    return rt;
  }
  // The first runtime call creates the context: this is where an old driver is refused
  // (cudaErrorInsufficientDriver), exactly as the framework's first CUDA call would be.
  void* p = nullptr;
  abi::CudaError e = rt.malloc_fn(&p, 256);
  j.Int("first_call", e);
  j.String("first_call_name", rt.Name(e));
  if (e == abi::kCudaRtSuccess) {
    rt.free_fn(p);
    rt.usable = true;
  }
  j.EndObject();
  return rt;
}

struct Cudnn {
  void* handle = nullptr;
  abi::CudnnGetErrorString error_string = nullptr;
  std::string Name(abi::CudnnStatus s) const {
    const char* n = error_string ? error_string(s) : nullptr;
    return n ? n : "cudnnStatus " + std::to_string(s);
  }
  template <class Fn>
  Fn Get(const char* name) const {
    // The symbol may live in the libcudnn shim or in a sub-library it loaded (cuDNN 8 exports
    // the legacy API from both).
    Fn fn = Sym<Fn>(handle, name);
    return fn ? fn : Sym<Fn>(RTLD_DEFAULT, name);
  }
};

void StatusFields(JsonOut& j, const Cudnn& dnn, abi::CudnnStatus s) {
  j.Int("status", s);
  j.String("status_name", dnn.Name(s));
}

// Returns the cuDNN handle, or null when cuDNN cannot be used.
abi::CudnnHandle ProbeCudnn(const Options& o, JsonOut& j, Cudnn& dnn) {
  Stage("cudnn");
  j.BeginObject("cudnn");
  const Lib* lib = FindRole(o, "cudnn");
  if (!lib || !lib->handle) {
    j.String("error", lib ? "not loaded" : "no cudnn given");
    j.EndObject();
    return nullptr;
  }
  dnn.handle = lib->handle;
  dnn.error_string = dnn.Get<abi::CudnnGetErrorString>("cudnnGetErrorString");
  auto get_version = dnn.Get<abi::CudnnGetVersion>("cudnnGetVersion");
  auto get_cudart = dnn.Get<abi::CudnnGetCudartVersion>("cudnnGetCudartVersion");
  size_t version = get_version ? get_version() : 0;
  if (get_version) j.Int("version", static_cast<int64_t>(version));
  if (get_cudart) j.Int("cudart_version", static_cast<int64_t>(get_cudart()));

  // cuDNN 9 encodes major*10000+minor*100+patch; cuDNN 8 major*1000+minor*100+patch.
  bool v9 = version >= 90000;
  const abi::SublibraryCheck* begin =
      v9 ? std::begin(abi::kCudnn9Checks) : std::begin(abi::kCudnn8Checks);
  const abi::SublibraryCheck* end =
      v9 ? std::end(abi::kCudnn9Checks) : std::end(abi::kCudnn8Checks);
  j.BeginArray("sublibraries");
  for (const auto* c = begin; c != end; ++c) {
    Stage(c->symbol);
    j.BeginObject();
    j.String("sublibrary", c->sublibrary);
    j.String("symbol", c->symbol);
    auto check = dnn.Get<abi::CudnnVersionCheck>(c->symbol);
    if (check) {
      StatusFields(j, dnn, check());
    } else {
      j.String("error", "symbol not found");
    }
    j.EndObject();
  }
  j.EndArray();

  Stage("cudnnCreate");
  abi::CudnnHandle h = nullptr;
  auto create = dnn.Get<abi::CudnnCreate>("cudnnCreate");
  j.BeginObject("create");
  if (!create) {
    j.String("error", "symbol not found");
  } else {
    abi::CudnnStatus s = create(&h);
    StatusFields(j, dnn, s);
    if (s != abi::kCudnnSuccess) h = nullptr;
  }
  j.EndObject();
  j.EndObject();
  return h;
}

// --- the convolution
// -------------------------------------------------------------------------------

float InputAt(int i) { return static_cast<float>((i * 7) % 9 - 4); }
float WeightAt(int i) { return static_cast<float>((i * 5) % 9 - 4) * 0.25f; }

std::vector<double> CpuConvolution(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<double> y(static_cast<size_t>(kN * kK * kH * kW), 0.0);
  for (int k = 0; k < kK; ++k)
    for (int oh = 0; oh < kH; ++oh)
      for (int ow = 0; ow < kW; ++ow) {
        double sum = 0;
        for (int c = 0; c < kC; ++c)
          for (int r = 0; r < kR; ++r)
            for (int s = 0; s < kS; ++s) {
              int ih = oh + r - kPad, iw = ow + s - kPad;
              if (ih < 0 || ih >= kH || iw < 0 || iw >= kW) continue;
              int xi = (c * kH + ih) * kW + iw, wi = ((k * kC + c) * kR + r) * kS + s;
              sum += static_cast<double>(x[static_cast<size_t>(xi)]) * w[static_cast<size_t>(wi)];
            }
        int yi = (k * kH + oh) * kW + ow;
        y[static_cast<size_t>(yi)] = sum;
      }
  return y;
}

struct DeviceBuffers {
  const Runtime& rt;
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* ws = nullptr;
  ~DeviceBuffers() {
    for (void* p : {x, w, y, ws})
      if (p) rt.free_fn(p);
  }
};

void ProbeConvolution(JsonOut& j, const Runtime& rt, const Cudnn& dnn, abi::CudnnHandle h) {
  Stage("convolution");
  j.BeginObject("convolution");
  j.String("shape", "x 1x2x6x6, w 3x2x3x3, pad 1, stride 1, float, IMPLICIT_GEMM");
  j.Double("tolerance", kTolerance);
  auto fail = [&](const char* step, abi::CudnnStatus s) {
    j.String("failed_at", step);
    StatusFields(j, dnn, s);
    j.Bool("ran", false);
    j.EndObject();
  };
  auto cuda_fail = [&](const char* step, abi::CudaError e) {
    j.String("failed_at", step);
    j.Int("cuda_error", e);
    j.String("cuda_error_name", rt.Name(e));
    j.Bool("ran", false);
    j.EndObject();
  };
  auto create_t = dnn.Get<abi::CudnnCreateTensorDescriptor>("cudnnCreateTensorDescriptor");
  auto set_t = dnn.Get<abi::CudnnSetTensor4dDescriptor>("cudnnSetTensor4dDescriptor");
  auto destroy_t = dnn.Get<abi::CudnnDestroyTensorDescriptor>("cudnnDestroyTensorDescriptor");
  auto create_f = dnn.Get<abi::CudnnCreateFilterDescriptor>("cudnnCreateFilterDescriptor");
  auto set_f = dnn.Get<abi::CudnnSetFilter4dDescriptor>("cudnnSetFilter4dDescriptor");
  auto destroy_f = dnn.Get<abi::CudnnDestroyFilterDescriptor>("cudnnDestroyFilterDescriptor");
  auto create_c =
      dnn.Get<abi::CudnnCreateConvolutionDescriptor>("cudnnCreateConvolutionDescriptor");
  auto set_c = dnn.Get<abi::CudnnSetConvolution2dDescriptor>("cudnnSetConvolution2dDescriptor");
  auto destroy_c =
      dnn.Get<abi::CudnnDestroyConvolutionDescriptor>("cudnnDestroyConvolutionDescriptor");
  auto ws_size = dnn.Get<abi::CudnnGetConvolutionForwardWorkspaceSize>(
      "cudnnGetConvolutionForwardWorkspaceSize");
  auto forward = dnn.Get<abi::CudnnConvolutionForward>("cudnnConvolutionForward");
  if (!create_t || !set_t || !destroy_t || !create_f || !set_f || !destroy_f || !create_c ||
      !set_c || !destroy_c || !ws_size || !forward) {
    j.String("failed_at", "symbols");
    j.String("error", "the legacy convolution API is not exported");
    j.Bool("ran", false);
    j.EndObject();
    return;
  }

  abi::CudnnTensorDesc xd = nullptr, yd = nullptr;
  abi::CudnnFilterDesc wd = nullptr;
  abi::CudnnConvDesc cd = nullptr;
  struct Descriptors {  // destroyed on every path out
    abi::CudnnTensorDesc& xd;
    abi::CudnnTensorDesc& yd;
    abi::CudnnFilterDesc& wd;
    abi::CudnnConvDesc& cd;
    abi::CudnnDestroyTensorDescriptor dt;
    abi::CudnnDestroyFilterDescriptor df;
    abi::CudnnDestroyConvolutionDescriptor dc;
    ~Descriptors() {
      if (xd) dt(xd);
      if (yd) dt(yd);
      if (wd) df(wd);
      if (cd) dc(cd);
    }
  } guard{xd, yd, wd, cd, destroy_t, destroy_f, destroy_c};

  abi::CudnnStatus s = create_t(&xd);
  if (s == abi::kCudnnSuccess) s = create_t(&yd);
  if (s == abi::kCudnnSuccess) s = create_f(&wd);
  if (s == abi::kCudnnSuccess) s = create_c(&cd);
  if (s != abi::kCudnnSuccess) return fail("create descriptors", s);
  s = set_t(xd, abi::kCudnnTensorNchw, abi::kCudnnDataFloat, kN, kC, kH, kW);
  if (s == abi::kCudnnSuccess)
    s = set_t(yd, abi::kCudnnTensorNchw, abi::kCudnnDataFloat, kN, kK, kH, kW);
  if (s == abi::kCudnnSuccess)
    s = set_f(wd, abi::kCudnnDataFloat, abi::kCudnnTensorNchw, kK, kC, kR, kS);
  if (s == abi::kCudnnSuccess)
    s = set_c(cd, kPad, kPad, 1, 1, 1, 1, abi::kCudnnCrossCorrelation, abi::kCudnnDataFloat);
  if (s != abi::kCudnnSuccess) return fail("set descriptors", s);
  size_t ws_bytes = 0;
  s = ws_size(h, xd, wd, cd, yd, abi::kCudnnFwdAlgoImplicitGemm, &ws_bytes);
  if (s != abi::kCudnnSuccess) return fail("workspace size", s);

  std::vector<float> x(size_t{kN} * kC * kH * kW), w(size_t{kK} * kC * kR * kS),
      y(size_t{kN} * kK * kH * kW, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = InputAt(static_cast<int>(i));
  for (size_t i = 0; i < w.size(); ++i) w[i] = WeightAt(static_cast<int>(i));
  DeviceBuffers d{rt};
  abi::CudaError e = rt.malloc_fn(&d.x, x.size() * sizeof(float));
  if (e == abi::kCudaRtSuccess) e = rt.malloc_fn(&d.w, w.size() * sizeof(float));
  if (e == abi::kCudaRtSuccess) e = rt.malloc_fn(&d.y, y.size() * sizeof(float));
  if (e == abi::kCudaRtSuccess && ws_bytes) e = rt.malloc_fn(&d.ws, ws_bytes);
  if (e == abi::kCudaRtSuccess)
    e = rt.memcpy_fn(d.x, x.data(), x.size() * sizeof(float), abi::kMemcpyHostToDevice);
  if (e == abi::kCudaRtSuccess)
    e = rt.memcpy_fn(d.w, w.data(), w.size() * sizeof(float), abi::kMemcpyHostToDevice);
  if (e == abi::kCudaRtSuccess)
    e = rt.memcpy_fn(d.y, y.data(), y.size() * sizeof(float), abi::kMemcpyHostToDevice);
  if (e != abi::kCudaRtSuccess) return cuda_fail("device memory", e);

  const float alpha = 1.0f, beta = 0.0f;
  auto run_once = [&] {
    return forward(h, &alpha, xd, d.x, wd, d.w, cd, abi::kCudnnFwdAlgoImplicitGemm, d.ws, ws_bytes,
                   &beta, yd, d.y);
  };
  double t0 = NowMs();
  s = run_once();
  e = rt.sync_fn();
  double first_ms = NowMs() - t0;
  if (s != abi::kCudnnSuccess) return fail("cudnnConvolutionForward", s);
  if (e == abi::kCudaRtSuccess)
    e = rt.memcpy_fn(y.data(), d.y, y.size() * sizeof(float), abi::kMemcpyDeviceToHost);
  if (e != abi::kCudaRtSuccess) return cuda_fail("synchronize", e);
  t0 = NowMs();
  for (int i = 0; i < kTimedRuns && s == abi::kCudnnSuccess; ++i) s = run_once();
  rt.sync_fn();
  double mean_ms = (NowMs() - t0) / kTimedRuns;

  std::vector<double> ref = CpuConvolution(x, w);
  double max_err = 0;
  size_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::fabs(static_cast<double>(y[i]) - ref[i]);
    if (!(err <= max_err)) {  // also catches NaN
      max_err = err;
      worst = i;
    }
  }
  j.Bool("ran", true);
  j.Double("max_abs_error", max_err);
  j.Int("worst_index", static_cast<int64_t>(worst));
  j.Double("expected", ref[worst]);
  j.Double("got", y[worst]);
  j.Bool("passed", max_err <= kTolerance);
  j.Double("first_ms", first_ms);
  j.Double("mean_ms", mean_ms);
  j.Int("timed_runs", kTimedRuns);
  j.EndObject();
}

int Main(int argc, char** argv) {
  Options o;
  if (std::string error = ParseArgs(argc, argv, o); !error.empty()) {
    std::fprintf(stderr,
                 "imgcheck-probe: %s\n"
                 "usage: imgcheck-probe [--libcuda PATH] [--cpu-seconds N] [--wall-seconds N] "
                 "--lib ROLE=/ABSOLUTE/PATH...\n",
                 error.c_str());
    return kExitUsage;
  }
  SetLimits(o);
  JsonOut j;
  j.BeginObject();
  j.String("probe", "imgcheck-probe");
  j.Int("schema", 1);
  std::string no_gpu;
  if (!ProbeHost(o, j, no_gpu)) {
    j.String("status", "no_gpu");
    j.String("reason", no_gpu);
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
    return kExitNoGpu;
  }
  LoadLibraries(o, j);
  Runtime rt = ProbeCudart(o, j);
  Cudnn dnn;
  abi::CudnnHandle h = ProbeCudnn(o, j, dnn);
  if (h && rt.usable) {
    ProbeConvolution(j, rt, dnn, h);
  } else {
    j.BeginObject("convolution");
    j.Bool("ran", false);
    j.String("failed_at", h ? "cuda runtime unusable" : "no cuDNN handle");
    j.EndObject();
  }
  if (h) {
    if (auto destroy = dnn.Get<abi::CudnnDestroy>("cudnnDestroy")) destroy(h);
  }
  Stage("done");
  ListLoadedObjects(j);
  j.String("status", "ran");
  j.EndObject();
  std::printf("%s\n", j.str().c_str());
  std::fflush(stdout);
  // Skip the image libraries' static destructors: they are untrusted and have no work to do.
  _exit(kExitRan);
}

}  // namespace
}  // namespace imgcheck::probe::child

int main(int argc, char** argv) { return imgcheck::probe::child::Main(argc, argv); }
