// imgcheck-probe driven through RunProbe against fake CUDA stacks: every path of the probe.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "fake_stack.h"
#include "probe/abi.h"
#include "probe/probe.h"
#include "support.h"

namespace imgcheck::probe {
namespace {

using testing::Build;
using testing::FakeStack;
using Outcome = Observation::Outcome;

Observation Probe(const FakeStack& stack, int wall_seconds = 60) {
  imgcheck::testing::TempDir dir;
  auto built = Build(stack, dir.path());
  RunOptions o;
  o.executable = imgcheck::testing::BinaryDir() / "imgcheck-probe";
  o.libcuda = built.libcuda.string();
  o.wall_seconds = wall_seconds;
  return RunProbe(built.libraries, o);
}

const Observation::Check* FindCheck(const Observation& o, const std::string& sub) {
  for (const auto& c : o.sublibraries)
    if (c.sublibrary == sub) return &c;
  return nullptr;
}

TEST_CASE("a consistent stack: versions, sub-libraries, handle and a correct convolution") {
  Observation o = Probe(FakeStack{});
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  CHECK(o.driver_version == 12080);
  CHECK(o.gpu == "Fake GPU");
  CHECK(o.sm == "90");
  CHECK(o.memory_bytes == (int64_t{80} << 30));
  REQUIRE(o.libraries.size() == 6);
  for (const auto& l : o.libraries) CHECK(l.loaded);
  CHECK(o.runtime_version == 12080);
  CHECK(o.runtime_driver_version == 12080);
  CHECK(o.first_call == 0);
  CHECK(o.cudnn_version == 91900);
  CHECK(o.cudnn_cudart_version == 12080);
  REQUIRE(o.sublibraries.size() == 4);
  for (const auto& c : o.sublibraries) {
    CHECK(c.status == 0);
    CHECK(c.status_name == "CUDNN_STATUS_SUCCESS");
  }
  CHECK(o.create_status == 0);
  CHECK(o.convolution.ran);
  CHECK(o.convolution.passed);
  CHECK(o.convolution.max_abs_error == 0.0);
  CHECK(o.convolution.tolerance == Approx(1e-3));
  CHECK(o.convolution.mean_ms >= 0.0);
  // Every library it was given is among the objects the process really loaded.
  for (const auto& l : o.libraries)
    CHECK(std::find(o.loaded_objects.begin(), o.loaded_objects.end(), l.path) !=
          o.loaded_objects.end());
}

TEST_CASE("no driver library: no GPU, probe skipped, exit status 3") {
  imgcheck::testing::TempDir dir;
  auto built = Build(FakeStack{}, dir.path());
  RunOptions o;
  o.executable = imgcheck::testing::BinaryDir() / "imgcheck-probe";
  o.libcuda = (dir / "absent/libcuda.so.1").string();
  Observation obs = RunProbe(built.libraries, o);
  CHECK(obs.outcome == Outcome::kNoGpu);
  CHECK_THAT(obs.reason, Catch::Contains("no NVIDIA driver"));
  // Nothing of the image was loaded.
  CHECK(obs.libraries.empty());
  auto r = imgcheck::testing::Run("'" + o.executable.string() + "' --libcuda '" + o.libcuda +
                                  "' --lib cudart=" + built.libraries[0].second);
  CHECK(r.status == 3);
  CHECK_THAT(r.output, Catch::Contains("\"status\":\"no_gpu\""));
}

TEST_CASE("a driver that sees no GPU: no GPU, probe skipped") {
  FakeStack s;
  s.no_device = true;
  Observation o = Probe(s);
  CHECK(o.outcome == Outcome::kNoGpu);
  CHECK(o.reason == "the driver sees no GPU");
}

TEST_CASE("driver too old for the image's runtime: cudaErrorInsufficientDriver") {
  FakeStack s;
  s.driver_version = 11080;
  Observation o = Probe(s);
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  CHECK(o.driver_version == 11080);
  CHECK(o.first_call == 35);
  CHECK(o.first_call_name == "cudaErrorInsufficientDriver");
  CHECK(o.create_status == 3005);
  CHECK_FALSE(o.convolution.ran);
}

TEST_CASE("a sub-library of another version: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH") {
  FakeStack s;
  s.sublibrary_versions["ops"] = 91800;
  Observation o = Probe(s);
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  REQUIRE(FindCheck(o, "ops"));
  CHECK(FindCheck(o, "ops")->status == 1002);
  CHECK(FindCheck(o, "ops")->status_name == "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH");
  CHECK(FindCheck(o, "cnn")->status == 0);
}

TEST_CASE("a missing sub-library: CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED") {
  FakeStack s;
  s.missing = {"cnn"};
  Observation o = Probe(s);
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  CHECK(FindCheck(o, "cnn")->status == 1008);
  CHECK(FindCheck(o, "ops")->status == 0);
}

TEST_CASE("cuDNN 8: the six infer/train checks, VERSION_MISMATCH") {
  FakeStack s;
  s.cudnn_version = 8902;
  s.sublibrary_versions["cnn_train"] = 8600;
  Observation o = Probe(s);
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  REQUIRE(o.sublibraries.size() == 6);
  CHECK(FindCheck(o, "cnn_train")->status == 14);
  CHECK(FindCheck(o, "cnn_train")->symbol == "cudnnCnnTrainVersionCheck");
  CHECK(FindCheck(o, "ops_infer")->status == 0);
  CHECK(o.convolution.passed);
}

TEST_CASE("a wrong convolution result is caught by the CPU reference") {
  FakeStack s;
  s.wrong_result = true;
  Observation o = Probe(s);
  INFO(o.json);
  REQUIRE(o.outcome == Outcome::kRan);
  CHECK(o.convolution.ran);
  CHECK_FALSE(o.convolution.passed);
  CHECK(o.convolution.max_abs_error == Approx(0.5));
  CHECK(o.convolution.got == Approx(o.convolution.expected + 0.5));
}

TEST_CASE("a failing convolution reports the cuDNN status") {
  FakeStack s;
  s.conv_status = 3007;
  Observation o = Probe(s);
  INFO(o.json);
  CHECK_FALSE(o.convolution.ran);
  CHECK(o.convolution.failed_at == "cudnnConvolutionForward");
  CHECK(o.convolution.status_name == "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH");
}

TEST_CASE("a library that crashes the probe is an outcome with its stage, not a crash of ours") {
  FakeStack s;
  s.crash = true;
  Observation o = Probe(s);
  CHECK(o.outcome == Outcome::kCrashed);
  CHECK(o.last_stage == "cudnnCreate");
  CHECK_THAT(o.reason, Catch::Contains("signal 11"));
}

TEST_CASE("a library that hangs is killed at the wall-clock limit") {
  FakeStack s;
  s.hang = true;
  Observation o = Probe(s, 2);
  CHECK(o.outcome == Outcome::kTimedOut);
  CHECK(o.last_stage == "cudnnCreate");
}

TEST_CASE("a library that cannot be loaded is reported with the loader's error") {
  imgcheck::testing::TempDir dir;
  auto built = Build(FakeStack{}, dir.path());
  built.libraries.insert(built.libraries.begin(),
                         {"cublasLt", (dir / "lib/libcublasLt.so.12").string()});
  RunOptions o;
  o.executable = imgcheck::testing::BinaryDir() / "imgcheck-probe";
  o.libcuda = built.libcuda.string();
  Observation obs = RunProbe(built.libraries, o);
  REQUIRE(obs.outcome == Outcome::kRan);
  REQUIRE_FALSE(obs.libraries.empty());
  CHECK_FALSE(obs.libraries[0].loaded);
  CHECK_THAT(obs.libraries[0].error, Catch::Contains("libcublasLt.so.12"));
  CHECK(obs.convolution.passed);  // the rest still ran
}

TEST_CASE("the probe rejects relative library paths and unknown options") {
  auto exe = (imgcheck::testing::BinaryDir() / "imgcheck-probe").string();
  CHECK(imgcheck::testing::Run("'" + exe + "' --lib cudnn=libcudnn.so.9").status == 2);
  CHECK(imgcheck::testing::Run("'" + exe + "' --bogus x").status == 2);
  CHECK(imgcheck::testing::Run("'" + exe + "' --lib").status == 2);
}

TEST_CASE("the probe rejects limits that are not whole seconds it can set") {
  auto exe = (imgcheck::testing::BinaryDir() / "imgcheck-probe").string();
  for (std::string bad : {"", "0", "-5", "5x", "+5", "1000001", "99999999999999999999999"}) {
    auto r = imgcheck::testing::Run("'" + exe + "' --cpu-seconds '" + bad + "'");
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::StartsWith("imgcheck-probe: --cpu-seconds: '" + bad +
                                           "' is not a whole number from 1 to 1000000\n"));
  }
  auto r = imgcheck::testing::Run("'" + exe + "' --wall-seconds 1e3");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Catch::Contains("--wall-seconds: '1e3' is not a whole number"));
}

TEST_CASE("the host's own driver: no GPU here, or a real result, never a crash") {
  // The default: libcuda.so.1 through this host's loader, as on a user's machine.
  RunOptions o;
  o.executable = imgcheck::testing::BinaryDir() / "imgcheck-probe";
  Observation obs = RunProbe({}, o);
  CHECK((obs.outcome == Outcome::kNoGpu || obs.outcome == Outcome::kRan));
  if (obs.outcome == Outcome::kNoGpu) WARN("no GPU on this machine: " << obs.reason);
}

TEST_CASE("malformed probe output is an outcome") {
  CHECK(ParseObservation("").outcome == Outcome::kBadOutput);
  CHECK(ParseObservation("{\"probe\":\"other\"}").outcome == Outcome::kBadOutput);
  CHECK(ParseObservation("{\"probe\":\"imgcheck-probe\",\"status\":\"ran\",\"host\":[1],"
                         "\"libraries\":{}}")
            .outcome == Outcome::kRan);
  CHECK(ParseObservation("{\"probe\":\"imgcheck-probe\",\"status\":\"ran\"").outcome ==
        Outcome::kBadOutput);
}

TEST_CASE("load order: dependencies first, plan order otherwise") {
  Plan p;
  p.libraries = {
      {"cudnn", "libcudnn.so.9", "/a", 0, "", {}},
      {"cudnn_cnn", "libcudnn_cnn.so.9", "/b", 0, "", {"libcudnn_ops.so.9", "libc.so.6"}},
      {"cudnn_ops", "libcudnn_ops.so.9", "/c", 0, "", {"libcudnn_graph.so.9"}},
      {"cudnn_graph", "libcudnn_graph.so.9", "/d", 0, "", {"libcudnn_cnn.so.9"}}};
  std::vector<std::string> order;
  for (const auto& l : LoadOrder(p)) order.push_back(l.soname);
  // graph -> cnn is a cycle; it is broken where it is found, and nothing is lost.
  CHECK(order == std::vector<std::string>{"libcudnn.so.9", "libcudnn_graph.so.9",
                                          "libcudnn_ops.so.9", "libcudnn_cnn.so.9"});
  CHECK(RoleOf("libcudnn_ops.so.9") == "cudnn_ops");
  CHECK(RoleOf("libcublasLt.so.12") == "cublasLt");
  CHECK(RoleOf("libcudart.so.12.8.90") == "cudart");
}

}  // namespace
}  // namespace imgcheck::probe

namespace imgcheck::probe {
namespace {

// The toolkit's cudnn_version.h: "#define CUDNN_MAJOR 9" and so on.
int HeaderDefine(const std::string& header, const std::string& name) {
  std::string key = "#define " + name + " ";
  size_t at = header.find(key);
  return at == std::string::npos ? -1 : std::atoi(header.c_str() + at + key.size());
}

TEST_CASE(
    "the real libcudnn, where the CUDA toolkit is installed, reports its version without a GPU") {
  const std::filesystem::path lib = "/usr/local/cuda/lib/libcudnn.so.9";
  const std::filesystem::path header = "/usr/local/cuda/include/cudnn_version.h";
  if (!std::filesystem::exists(lib) || !std::filesystem::exists(header))
    return imgcheck::testing::Skip("no CUDA toolkit cuDNN 9 at " + lib.string());
  std::string h = imgcheck::testing::ReadFile(header);
  int major = HeaderDefine(h, "CUDNN_MAJOR"), minor = HeaderDefine(h, "CUDNN_MINOR"),
      patch = HeaderDefine(h, "CUDNN_PATCHLEVEL");
  REQUIRE(major == 9);
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle != nullptr);
  void* sym = dlsym(handle, "cudnnGetVersion");
  REQUIRE(sym != nullptr);
  abi::CudnnGetVersion get_version;
  std::memcpy(&get_version, &sym, sizeof sym);
  auto version = static_cast<int64_t>(get_version());  // needs no driver and no GPU
  CHECK(version == major * 10000 + minor * 100 + patch);
  dlclose(handle);
}

}  // namespace
}  // namespace imgcheck::probe
