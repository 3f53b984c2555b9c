#include "fake_stack.h"

#include <mutex>

#include "probe/abi.h"
#include "support.h"

namespace imgcheck::probe::testing {
namespace {

namespace fs = std::filesystem;
using imgcheck::testing::Compile;
using imgcheck::testing::ReadFile;
using imgcheck::testing::SharedObject;
using imgcheck::testing::SourceDir;
using imgcheck::testing::TempDir;

// One compile per distinct (source, soname, flags): the scenarios share most of their objects.
fs::path Cached(const std::string& source, const std::string& soname,
                const std::vector<std::string>& flags) {
  static TempDir cache;
  static std::map<std::string, fs::path> built;
  static std::mutex mu;
  std::lock_guard lock(mu);
  std::string key = source + "|" + soname;
  for (const auto& f : flags) key += "|" + f;
  if (auto it = built.find(key); it != built.end()) return it->second;
  SharedObject so;
  so.soname = soname;
  so.source = ReadFile(SourceDir() / "tests/support/fakes" / source);
  so.runpath = "$ORIGIN";
  so.extra_flags = flags;
  so.extra_flags.push_back("-ldl");
  fs::path out = cache / (std::to_string(built.size()) + "-" + soname);
  Compile(so, out);
  built.emplace(key, out);
  return out;
}

std::string Define(const std::string& name, int value) {
  return "-D" + name + "=" + std::to_string(value);
}

}  // namespace

std::vector<std::string> Sublibraries(int cudnn_version) {
  std::vector<std::string> out;
  if (cudnn_version >= 90000) {
    for (const auto& c : abi::kCudnn9Checks) out.push_back(c.sublibrary);
  } else {
    for (const auto& c : abi::kCudnn8Checks) out.push_back(c.sublibrary);
  }
  return out;
}

BuiltStack Build(const FakeStack& s, const fs::path& dir) {
  BuiltStack b;
  b.lib_dir = dir / "lib";
  fs::create_directories(b.lib_dir);
  fs::create_directories(dir / "driver");
  std::vector<std::string> driver_flags = {Define("FAKE_DRIVER_VERSION", s.driver_version)};
  if (s.no_device) driver_flags.push_back("-DFAKE_NO_DEVICE");
  b.libcuda = dir / "driver/libcuda.so.1";
  fs::copy_file(Cached("fake_libcuda.c", "libcuda.so.1", driver_flags), b.libcuda);

  auto place = [&](const fs::path& built, const std::string& soname, const std::string& role) {
    fs::copy_file(built, b.lib_dir / soname);
    b.libraries.emplace_back(role, (b.lib_dir / soname).string());
  };
  int cuda_major = s.runtime_version / 1000;
  place(Cached("fake_libcudart.c", "libcudart.so." + std::to_string(cuda_major),
               {Define("FAKE_RUNTIME_VERSION", s.runtime_version)}),
        "libcudart.so." + std::to_string(cuda_major), "cudart");

  bool v9 = s.cudnn_version >= 90000;
  std::string major = std::to_string(v9 ? s.cudnn_version / 10000 : s.cudnn_version / 1000);
  const auto* checks = v9 ? std::begin(abi::kCudnn9Checks) : std::begin(abi::kCudnn8Checks);
  const auto* end = v9 ? std::end(abi::kCudnn9Checks) : std::end(abi::kCudnn8Checks);
  for (const auto* c = checks; c != end; ++c) {
    if (s.missing.count(c->sublibrary)) continue;
    auto v = s.sublibrary_versions.find(c->sublibrary);
    int version = v == s.sublibrary_versions.end() ? s.cudnn_version : v->second;
    std::string soname = "libcudnn_" + std::string(c->sublibrary) + ".so." + major;
    place(Cached(
              "fake_cudnn_sublibrary.c", soname,
              {std::string("-DFAKE_CHECK_SYMBOL=") + c->symbol, Define("FAKE_SUB_VERSION", version),
               Define("FAKE_MISMATCH_STATUS",
                      v9 ? abi::kCudnnSublibraryVersionMismatch : abi::kCudnn8VersionMismatch)}),
          soname, "cudnn_" + std::string(c->sublibrary));
  }
  std::vector<std::string> flags = {Define("FAKE_CUDNN_VERSION", s.cudnn_version),
                                    Define("FAKE_CUDNN_CUDART", s.cudnn_cudart_version)};
  if (s.wrong_result) flags.push_back("-DFAKE_WRONG_RESULT");
  if (s.crash) flags.push_back("-DFAKE_CRASH");
  if (s.hang) flags.push_back("-DFAKE_HANG");
  if (s.conv_status) flags.push_back(Define("FAKE_CONV_STATUS", s.conv_status));
  place(Cached("fake_libcudnn.c", "libcudnn.so." + major, flags), "libcudnn.so." + major, "cudnn");
  return b;
}

}  // namespace imgcheck::probe::testing
