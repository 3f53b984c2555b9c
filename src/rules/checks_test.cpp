// The checks on hand-made images: merged trees written in memory, libraries written field by
// field (no compiler, no layer on disk), then the scan's own pipeline. For each rule, a case that
// fires it and its nearest neighbour that must not. tests/scan_cli_test.cpp runs the same rules
// through the binary on images built from recipes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>

#include "catalog/catalog.h"
#include "catalog/metadata.h"
#include "elf/elf.h"
#include "elf_builder.h"
#include "fake_image.h"
#include "rules/scan.h"
#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::rules {
namespace {

using testing::FakeImage;

const std::string kLib = "/opt/cuda/lib";
const std::string kSite = "/usr/local/lib/python3.10/dist-packages/";

// A shared object with `soname` that needs `needed`.
std::string So(const std::string& soname, std::vector<std::string> needed = {},
               std::string fatbin = "") {
  elf::fixture::ElfSpec spec;
  spec.soname = soname;
  spec.needed = std::move(needed);
  spec.exported = {"imgcheck_fixture_symbol"};
  spec.fatbin = std::move(fatbin);
  return elf::fixture::BuildElf(spec);
}

// An image whose loader path is kLib, holding `libs` there ({file name, bytes}).
FakeImage WithLibs(const std::vector<std::pair<std::string, std::string>>& libs) {
  FakeImage f;
  f.image().config.env = {"PATH=/usr/bin", "LD_LIBRARY_PATH=" + kLib};
  f.Dir(kLib);
  for (const auto& [name, bytes] : libs) f.File(kLib + "/" + name, bytes);
  return f;
}

// A pip distribution under kSite owning `files` (relative to it).
void Dist(FakeImage& f, const std::string& name, const std::string& version,
          const std::vector<std::string>& requires_dist, const std::vector<std::string>& files) {
  for (const auto& [path, text] : testing::DistInfo(name, version, requires_dist, files))
    f.File(kSite + path, text);
}

struct TorchStack {
  std::string version = "2.3.0";
  std::string cuda = "12.1";        // torch/version.py's build CUDA
  std::string cudart = "12.1.105";  // the nvidia-cuda-runtime-cu12 wheel
  std::string cudnn_pkg = "nvidia-cudnn-cu12";
};

// PyTorch 2.3.0 as its wheels lay it out: torch/lib/libtorch_cuda.so with a RUNPATH into the
// nvidia-* wheels (cuDNN 8.9.2.26, CUDA runtime 12.1.105), which torch's METADATA pins.
FakeImage Torch(const TorchStack& s = {}) {
  FakeImage f = WithLibs({});
  f.File(kSite + "torch/version.py", "__version__ = '" + s.version +
                                         "+cu121'\ndebug = False\ncuda = '" + s.cuda +
                                         "'\ngit_version = '0000'\nhip = None\n");
  elf::fixture::ElfSpec torch;
  torch.soname = "libtorch_cuda.so";
  torch.needed = {"libcudnn.so.8", "libcudart.so.12"};
  torch.runpath = "$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/cuda_runtime/lib";
  f.File(kSite + "torch/lib/libtorch_cuda.so", elf::fixture::BuildElf(torch));
  Dist(f, "torch", s.version, {s.cudnn_pkg + "==8.9.2.26", "nvidia-cuda-runtime-cu12==" + s.cudart},
       {"torch/version.py", "torch/lib/libtorch_cuda.so"});
  f.File(kSite + "nvidia/cudnn/lib/libcudnn.so.8", So("libcudnn.so.8"));
  Dist(f, s.cudnn_pkg, "8.9.2.26", {}, {"nvidia/cudnn/lib/libcudnn.so.8"});
  f.File(kSite + "nvidia/cuda_runtime/lib/libcudart.so.12", So("libcudart.so.12"));
  Dist(f, "nvidia-cuda-runtime-cu12", s.cudart, {}, {"nvidia/cuda_runtime/lib/libcudart.so.12"});
  return f;
}

void SetEnv(FakeImage& f, const std::string& key, const std::string& value) {
  auto& env = f.image().config.env;
  std::erase_if(env, [&](const std::string& e) { return e.rfind(key + "=", 0) == 0; });
  env.push_back(key + "=" + value);
}

// What the scan finds in `f` for `target`, by rule.
std::map<std::string, std::vector<Finding>> Scan(FakeImage& f, const Target& target = {}) {
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  catalog::Catalog cat = catalog::Build(f.image(), k.libraries());
  ScanInput in;
  in.image = &f.image();
  in.catalog = &cat;
  in.knowledge = &k;
  in.target = target;
  util::Expected<loader::Options> options = loader::ImageOptions(f.image(), cat, k.dlopen());
  REQUIRE(options);
  in.session = loader::Session::Build(f.image(), cat, ConsumerRulesOf(k), std::move(*options));
  std::map<std::string, std::vector<Finding>> out;
  std::vector<Finding> findings = RunChecks(in);
  SortFindings(findings);  // as scan::Run orders them
  for (Finding& finding : findings) out[finding.rule].push_back(std::move(finding));
  return out;
}

// The paths of `rule`'s findings, one string per finding.
std::vector<std::string> Paths(const std::map<std::string, std::vector<Finding>>& found,
                               const std::string& rule) {
  std::vector<std::string> out;
  if (auto it = found.find(rule); it != found.end())
    for (const Finding& f : it->second) out.push_back(f.paths.empty() ? "" : f.paths[0]);
  return out;
}

Target Driver(const std::string& version) {
  Target t;
  t.driver = Version::Parse(version);
  t.driver_from = "--driver";
  return t;
}

Target Gpu(int sm) {
  Target t;
  t.sm = sm;
  t.gpu_from = "--gpu sm_" + std::to_string(sm);
  return t;
}

}  // namespace

TEST_CASE("IC012: a CUDA library's DT_NEEDED that nothing provides", "[checks]") {
  FakeImage bad = WithLibs({{"libcublas.so.12", So("libcublas.so.12", {"libcublasLt.so.12"})}});
  CHECK(Paths(Scan(bad), "IC012") == std::vector<std::string>{kLib + "/libcublas.so.12"});
  FakeImage ok = WithLibs({{"libcublas.so.12", So("libcublas.so.12", {"libcublasLt.so.12"})},
                           {"libcublasLt.so.12", So("libcublasLt.so.12")}});
  CHECK(Paths(Scan(ok), "IC012").empty());
}

TEST_CASE("IC012: one finding per requester and search path, with the fix the evidence gives",
          "[checks]") {
  // Two libraries libcublas cannot reach through the one search path: one finding naming both.
  FakeImage f = WithLibs(
      {{"libcublas.so.12", So("libcublas.so.12", {"libcublasLt.so.12", "libcudart.so.12"})}});
  auto found = Scan(f);
  REQUIRE(found["IC012"].size() == 1);
  const Finding& both = found["IC012"][0];
  CHECK(both.message.rfind("libcublasLt.so.12 and libcudart.so.12 (DT_NEEDED of", 0) == 0);
  // Truly absent: what provides them, never "installed elsewhere".
  CHECK(both.remediation.find("no file of the image provides libcublasLt.so.12") !=
        std::string::npos);
  // The wheels that ship them, of the CUDA major libcublas.so.12 is.
  CHECK(both.remediation.find("nvidia-cublas-cu12") != std::string::npos);
  CHECK(both.remediation.find("nvidia-cuda-runtime-cu12") != std::string::npos);
  // Names one provider serves are said once, with it (the text report showed cuDNN's seven
  // sub-libraries each with the same install line).
  FakeImage same = WithLibs(
      {{"libcusolver.so.11", So("libcusolver.so.11", {"libcublas.so.12", "libcublasLt.so.12"})}});
  auto one = Scan(same);
  REQUIRE(one["IC012"].size() == 1);
  const std::string& grouped = one["IC012"][0].remediation;
  CHECK(grouped.rfind("no file of the image provides libcublas.so.12 and libcublasLt.so.12: ", 0) ==
        0);
  CHECK(grouped.find("provides", grouped.find("provides") + 1) == std::string::npos);
  // Present elsewhere, outside the search path: the ENV line and ld.so.conf.d that reach it.
  f.File("/opt/other/libcublasLt.so.12", So("libcublasLt.so.12"));
  f.File("/opt/other/libcudart.so.12", So("libcudart.so.12"));
  auto elsewhere = Scan(f);
  REQUIRE(elsewhere["IC012"].size() == 1);
  const std::string& fix = elsewhere["IC012"][0].remediation;
  CHECK(fix.find("libcublasLt.so.12 is at /opt/other/libcublasLt.so.12 (unowned in /opt/other)") !=
        std::string::npos);
  CHECK(fix.find("ENV LD_LIBRARY_PATH=/opt/other:" + kLib) != std::string::npos);
  CHECK(fix.find("/etc/ld.so.conf.d/") != std::string::npos);
  CHECK(fix.find("no file of the image provides") == std::string::npos);
}

TEST_CASE("IC012: a wheel's library nothing loads, whose needs the image has, is no repair",
          "[checks]") {
  // nvidia-cusolver's libcusolverMg.so.12 NEEDS libcublas.so.13 with no RUNPATH; the file is in
  // the same directory, and nothing in a stock torch install loads libcusolverMg (a consumer
  // that did would load cuBLAS first). Unowned, the same file draws info with the fix.
  auto image = [&](bool wheel) {
    FakeImage f = WithLibs({});
    const std::string dir = wheel ? kSite + "nvidia/cu13/lib/" : "/opt/mg/";
    f.File(dir + "libcusolverMg.so.12", So("libcusolverMg.so.12", {"libcublas.so.13"}));
    f.File(dir + "libcublas.so.13", So("libcublas.so.13"));
    if (wheel)
      Dist(f, "nvidia-cusolver", "12.0.4.66", {},
           {"nvidia/cu13/lib/libcusolverMg.so.12", "nvidia/cu13/lib/libcublas.so.13"});
    return f;
  };
  FakeImage wheel = image(true);
  CHECK(Paths(Scan(wheel), "IC012").empty());
  FakeImage unowned = image(false);
  auto found = Scan(unowned);
  REQUIRE(found["IC012"].size() == 1);
  CHECK(found["IC012"][0].severity == Severity::kInfo);
  CHECK(found["IC012"][0].message.find("(the image has /opt/mg/libcublas.so.13)") !=
        std::string::npos);
}

TEST_CASE("IC012: onnxruntime's preload_dlls() among the fixes where its release has it",
          "[checks]") {
  // The CUDA provider of onnxruntime-gpu needs libcudnn.so.9; the cuDNN wheel's copy is in
  // site-packages/nvidia/cudnn/lib, off the provider's search path.
  auto image = [&](const std::string& version) {
    const std::string provider = "onnxruntime/capi/libonnxruntime_providers_cuda.so";
    const std::string info = "onnxruntime_gpu-" + version + ".dist-info/";
    FakeImage f;
    f.File(kSite + info + "METADATA",
           "Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: " + version + "\n");
    f.File(kSite + info + "RECORD", provider + ",,\n" + info + "RECORD,,\n");
    f.File(kSite + provider, So("libonnxruntime_providers_cuda.so", {"libcudnn.so.9"}));
    f.File(kSite + "nvidia/cudnn/lib/libcudnn.so.9", So("libcudnn.so.9"));
    // (The wheel's libcudnn.so.9 misses its own sub-libraries here: another finding.)
    std::vector<std::string> fixes;
    auto found = Scan(f);
    for (const Finding& finding : found["IC012"])
      if (finding.message.rfind("libcudnn.so.9 (DT_NEEDED of", 0) == 0)
        fixes.push_back(finding.remediation);
    REQUIRE(fixes.size() == 1);
    return fixes[0];
  };
  std::string with = image("1.21.0");
  CHECK(with.find("ENV LD_LIBRARY_PATH=" + kSite + "nvidia/cudnn/lib") != std::string::npos);
  CHECK(with.find(", or onnxruntime.preload_dlls() before the first InferenceSession "
                  "(onnxruntime-gpu 1.21.0 loads them from there)") != std::string::npos);
  // 1.19 has no such call: the path changes only.
  std::string without = image("1.19.0");
  CHECK(without.find("ENV LD_LIBRARY_PATH=") != std::string::npos);
  CHECK(without.find("preload_dlls") == std::string::npos);
}

TEST_CASE("IC012: cuDNN 9's sub-libraries by the dlopen sequence of rules/dlopen.json",
          "[checks]") {
  // libcudnn.so.9.1.0 opens libcudnn_graph.so.9.1.0, .so.9.1, then .so.9; libcudnn_graph opens
  // the engines and heuristic libraries the same way. Names it misses before one loads are not
  // findings; a sub-library none of whose names loads is one finding, under the major's name.
  const std::vector<std::string> subs = {"libcudnn_graph",
                                         "libcudnn_ops",
                                         "libcudnn_cnn",
                                         "libcudnn_adv",
                                         "libcudnn_engines_precompiled",
                                         "libcudnn_heuristic",
                                         "libcudnn_engines_runtime_compiled"};
  auto image = [&](const std::string& missing) {
    FakeImage f = WithLibs({{"libcudnn.so.9.1.0", So("libcudnn.so.9")}});
    f.Link(kLib + "/libcudnn.so.9", "libcudnn.so.9.1.0");
    for (const std::string& base : subs)
      if (base != missing) f.File(kLib + "/" + base + ".so.9", So(base + ".so.9"));
    return f;
  };
  auto unresolved = [](FakeImage& f) {
    std::vector<std::string> names;
    auto found = Scan(f);
    for (const Finding& finding : found["IC012"])
      names.push_back(finding.message.substr(0, finding.message.find(' ')));
    return names;
  };
  FakeImage whole = image("");
  CHECK(unresolved(whole).empty());
  // Only libcudnn_graph.so.9.1 (the shim's major.minor) is there: the sequence's second name.
  FakeImage minor = image("libcudnn_graph");
  minor.File(kLib + "/libcudnn_graph.so.9.1", So("libcudnn_graph.so.9"));
  CHECK(unresolved(minor).empty());
  FakeImage no_heuristic = image("libcudnn_heuristic");
  CHECK(unresolved(no_heuristic) == std::vector<std::string>{"libcudnn_heuristic.so.9"});
}

TEST_CASE("IC014: a CUDA soname link whose target is gone", "[checks]") {
  FakeImage bad = WithLibs({});
  bad.Link(kLib + "/libcudnn.so.8", "libcudnn.so.8.9.2");
  CHECK(Paths(Scan(bad), "IC014") == std::vector<std::string>{kLib + "/libcudnn.so.8"});
  FakeImage ok = WithLibs({{"libcudnn.so.8.9.2", So("libcudnn.so.8")}});
  ok.Link(kLib + "/libcudnn.so.8", "libcudnn.so.8.9.2");
  CHECK(Paths(Scan(ok), "IC014").empty());
}

TEST_CASE("IC020: the toolkit's driver stub on the loader path", "[checks]") {
  const std::string stubs = "/usr/local/cuda/lib64/stubs";
  auto image = [&](const std::string& llp) {
    FakeImage f = WithLibs({{"libcudnn.so.8", So("libcudnn.so.8", {"libcuda.so.1"})}});
    f.File(stubs + "/libcuda.so.1", So("libcuda.so.1"));
    SetEnv(f, "LD_LIBRARY_PATH", llp);
    return f;
  };
  FakeImage bad = image(kLib + ":" + stubs);
  CHECK(Paths(Scan(bad), "IC020") == std::vector<std::string>{stubs + "/libcuda.so.1"});
  FakeImage ok = image(kLib);
  CHECK(Paths(Scan(ok), "IC020").empty());
  // The fix is the ENV line without the stubs directory.
  auto found = Scan(bad);
  REQUIRE(found["IC020"].size() == 1);
  CHECK(found["IC020"][0].remediation.rfind("ENV LD_LIBRARY_PATH=" + kLib + " (drops", 0) == 0);
  CHECK(found["IC020"][0].env == "LD_LIBRARY_PATH");
}

TEST_CASE("IC020: one stub copied under two names is one finding", "[checks]") {
  const std::string stubs = "/usr/local/cuda/lib64/stubs";
  FakeImage f = WithLibs({{"libcudnn.so.8", So("libcudnn.so.8", {"libcuda.so.1"})}});
  f.File(stubs + "/libcuda.so.1", So("libcuda.so.1"));
  f.File(stubs + "/libcuda.so", So("libcuda.so.1"));
  SetEnv(f, "LD_LIBRARY_PATH", kLib + ":" + stubs);
  CHECK(Paths(Scan(f), "IC020") == std::vector<std::string>{stubs + "/libcuda.so.1"});
}

TEST_CASE("IC021: user-mode driver libraries baked into the image", "[checks]") {
  const std::string driver = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05";
  FakeImage bad = WithLibs({});
  bad.File(driver, So("libcuda.so.1"));
  CHECK(Paths(Scan(bad), "IC021") == std::vector<std::string>{driver});
  FakeImage ok = WithLibs({});  // the same library as the toolkit's link-time stub
  ok.File("/usr/local/cuda/lib64/stubs/libcuda.so", So("libcuda.so.1"));
  CHECK(Paths(Scan(ok), "IC021").empty());
}

TEST_CASE("IC021: a driver copy renamed by auditwheel is baked in only when something loads it",
          "[checks]") {
  // pynvvideocodec 2.0.4's wheel vendors pynvvideocodec.libs/libcuda-40d19bb1.so (SONAME the
  // same), but its modules NEED libcuda.so.1: the host's driver loads, the copy never does.
  // `needs`: what the module NEEDS of the driver.
  const std::string copy = kSite + "pynvvideocodec.libs/libcuda-40d19bb1.so";
  auto image = [&](const std::string& needs) {
    FakeImage f = WithLibs({});
    elf::fixture::ElfSpec module;
    module.needed = {needs};
    module.rpath = "$ORIGIN/../pynvvideocodec.libs";
    const std::string name = "pynvvideocodec/PyNvVideoCodec_130.cpython-310-x86_64-linux-gnu.so";
    f.File(kSite + name, elf::fixture::BuildElf(module));
    f.File(copy, So("libcuda-40d19bb1.so"));
    Dist(f, "pynvvideocodec", "2.0.4", {}, {name, "pynvvideocodec.libs/libcuda-40d19bb1.so"});
    return f;
  };
  FakeImage dead = image("libcuda.so.1");
  auto found = Scan(dead);
  REQUIRE(Paths(found, "IC021") == std::vector<std::string>{copy});
  CHECK(found["IC021"][0].severity == Severity::kInfo);
  CHECK(found["IC021"][0].message.find("never loaded") != std::string::npos);
  // auditwheel rewrote the module's DT_NEEDED to the copy: the image's driver is what loads.
  FakeImage live = image("libcuda-40d19bb1.so");
  auto live_found = Scan(live);
  REQUIRE(Paths(live_found, "IC021") == std::vector<std::string>{copy});
  CHECK(live_found["IC021"][0].severity == Severity::kError);
  CHECK(live_found["IC021"][0].message.find("baked into the image") != std::string::npos);
}

TEST_CASE("IC022: forward-compatibility libraries on the loader path", "[checks]") {
  const std::string compat = "/usr/local/cuda-12.1/compat";
  auto image = [&](const std::string& llp) {
    FakeImage f = WithLibs({});
    f.File(compat + "/libcuda.so.530.30.02", So("libcuda.so.1"));
    SetEnv(f, "LD_LIBRARY_PATH", llp);
    return f;
  };
  FakeImage bad = image(compat + ":" + kLib);
  CHECK(Paths(Scan(bad), "IC022") == std::vector<std::string>{compat + "/libcuda.so.530.30.02"});
  FakeImage ok = image(kLib);
  CHECK(Paths(Scan(ok), "IC022").empty());
}

TEST_CASE("IC030: a target driver too old for the image's CUDA runtime", "[checks]") {
  FakeImage f = WithLibs({{"libcudart.so.12.1.105", So("libcudart.so.12")}});
  f.Link(kLib + "/libcudart.so.12", "libcudart.so.12.1.105");
  CHECK(Paths(Scan(f, Driver("470.57.02")), "IC030").size() == 1);
  CHECK(Paths(Scan(f, Driver("535.104.05")), "IC030").empty());
  CHECK(Paths(Scan(f), "IC030").empty());  // no target driver: nothing to say
}

TEST_CASE("IC031: NVIDIA_REQUIRE_CUDA lower than the CUDA the image needs", "[checks]") {
  FakeImage f = WithLibs({{"libcudart.so.12.1.105", So("libcudart.so.12")}});
  f.Link(kLib + "/libcudart.so.12", "libcudart.so.12.1.105");
  SetEnv(f, "NVIDIA_REQUIRE_CUDA", "cuda>=11.8");
  CHECK(Paths(Scan(f), "IC031").size() == 1);
  SetEnv(f, "NVIDIA_REQUIRE_CUDA", "cuda>=12.1");
  CHECK(Paths(Scan(f), "IC031").empty());
}

TEST_CASE("IC040: device code for other GPUs only", "[checks]") {
  std::string fatbin = elf::fixture::BuildFatbin({{false, 80}});  // sm_80 SASS
  FakeImage f = WithLibs({{"libcublasLt.so.12", So("libcublasLt.so.12", {}, fatbin)}});
  CHECK(Paths(Scan(f, Gpu(75)), "IC040") == std::vector<std::string>{kLib + "/libcublasLt.so.12"});
  CHECK(Paths(Scan(f, Gpu(86)), "IC040").empty());  // sm_80 SASS runs on 8.6
  CHECK(Paths(Scan(f), "IC040").empty());           // no target GPU
}

TEST_CASE("IC051: CUDA libraries no package owns", "[checks]") {
  FakeImage f = WithLibs({{"libcudnn.so.8", So("libcudnn.so.8")}});
  CHECK(Paths(Scan(f), "IC051") == std::vector<std::string>{kLib + "/libcudnn.so.8"});
  f.File("/var/lib/dpkg/status",
         "Package: libcudnn8\nStatus: install ok installed\nArchitecture: amd64\n"
         "Version: 8.9.2.26-1+cuda12.1\n");
  f.File("/var/lib/dpkg/info/libcudnn8:amd64.list", kLib + "/libcudnn.so.8\n");
  CHECK(Paths(Scan(f), "IC051").empty());
}

TEST_CASE("IC051: quiet where the layout is an NVIDIA release archive's", "[checks]") {
  FakeImage f;
  f.image().config.env = {"LD_LIBRARY_PATH=/usr/local/cuda/lib64"};
  f.File("/usr/local/cuda/lib64/libcudnn.so.9", So("libcudnn.so.9"));
  f.File("/opt/vendor/libcublas.so.12", So("libcublas.so.12"));
  auto found = Scan(f);
  REQUIRE(found["IC051"].size() == 2);
  for (const Finding& finding : found["IC051"])
    CHECK(finding.quiet == (finding.paths[0] == "/usr/local/cuda/lib64/libcudnn.so.9"));
}

TEST_CASE("IC060: LD_LIBRARY_PATH with empty, relative or missing elements", "[checks]") {
  FakeImage f = WithLibs({});
  SetEnv(f, "LD_LIBRARY_PATH", kLib + "::lib:/nowhere");
  auto found = Scan(f);
  REQUIRE(found["IC060"].size() == 1);
  const std::string& m = found["IC060"][0].message;
  CHECK(m.find("element 2 is empty") != std::string::npos);
  CHECK(m.find("\"lib\" is relative") != std::string::npos);
  CHECK(m.find("\"/nowhere\" does not exist") != std::string::npos);
  CHECK(found["IC060"][0].severity == Severity::kWarning);
  // Only a missing absolute directory: a dead entry, info (loader-diff cupy11-apt-cuda11-ldlp).
  SetEnv(f, "LD_LIBRARY_PATH", kLib + ":/usr/local/cuda/lib64");
  auto missing = Scan(f);
  REQUIRE(missing["IC060"].size() == 1);
  CHECK(missing["IC060"][0].severity == Severity::kInfo);
  SetEnv(f, "LD_LIBRARY_PATH", kLib);
  CHECK(Paths(Scan(f), "IC060").empty());
}

TEST_CASE("IC050: two cuDNN installations", "[checks]") {
  const std::string other = "/usr/local/cudnn/lib64";
  FakeImage bad = WithLibs({{"libcudnn.so.8.9.2", So("libcudnn.so.8")}});
  bad.File(other + "/libcudnn.so.8.5.0", So("libcudnn.so.8"));
  auto found = Scan(bad);
  REQUIRE(found["IC050"].size() == 1);
  const std::string& m = found["IC050"][0].message;
  CHECK(m.find("2 cuDNN installations") != std::string::npos);
  CHECK(m.find(kLib + "/libcudnn.so.8.9.2 (8.9.2") != std::string::npos);
  CHECK(m.find(other + "/libcudnn.so.8.5.0 (8.5.0") != std::string::npos);
  FakeImage ok = WithLibs({{"libcudnn.so.8.9.2", So("libcudnn.so.8")}});
  CHECK(Paths(Scan(ok), "IC050").empty());
}

TEST_CASE("IC011: an older copy of a CUDA library", "[checks]") {
  const std::string old = "/opt/old/lib";
  auto image = [&](const std::string& old_version) {
    FakeImage f = WithLibs({{"libcublas.so.12.4.5.8", So("libcublas.so.12")}});
    f.File(old + "/libcublas.so." + old_version, So("libcublas.so.12"));
    return f;
  };
  FakeImage bad = image("12.1.3.1");
  auto found = Scan(bad);
  CHECK(Paths(found, "IC011") == std::vector<std::string>{old + "/libcublas.so.12.1.3.1"});
  REQUIRE(found["IC011"].size() == 1);
  CHECK(found["IC011"][0].message.find("is older than 12.4.5.8 at " + kLib +
                                       "/libcublas.so.12.4.5.8") != std::string::npos);
  FakeImage ok = image("12.4.5.8");  // the same version twice: a copy, not a stale one
  CHECK(Paths(Scan(ok), "IC011").empty());
}

TEST_CASE("IC011: an older copy loaded in place of the newer one still fires", "[checks]") {
  // The older copy is on LD_LIBRARY_PATH and an application's library loads it.
  FakeImage f = WithLibs({{"libcublas.so.12.1.3.1", So("libcublas.so.12")},
                          {"libapp.so", So("libapp.so", {"libcublas.so.12"})}});
  f.Link(kLib + "/libcublas.so.12", "libcublas.so.12.1.3.1");
  f.File("/opt/new/lib/libcublas.so.12.4.5.8", So("libcublas.so.12"));
  auto found = Scan(f);
  REQUIRE(Paths(found, "IC011") == std::vector<std::string>{kLib + "/libcublas.so.12.1.3.1"});
  CHECK(found["IC011"][0].message.find("reachable: " + kLib + "/libapp.so loads it") !=
        std::string::npos);
}

TEST_CASE("IC011: versions of two lines do not compare", "[checks]") {
  // CUPTI's calendar versions (libraries.json version_lines) and its CUDA component versions.
  FakeImage f = WithLibs({{"libcupti.so.12.4.127", So("libcupti.so.12")}});
  f.File("/opt/cupti/lib/libcupti.so.2024.1.0", So("libcupti.so.12"));
  CHECK(Paths(Scan(f), "IC011").empty());
  // Within the calendar line they do.
  f.File("/opt/old/lib/libcupti.so.2023.3.1", So("libcupti.so.12"));
  CHECK(Paths(Scan(f), "IC011") == std::vector<std::string>{"/opt/old/lib/libcupti.so.2023.3.1"});
}

namespace {

const std::string kTritonCupti = "triton/backends/nvidia/lib/cupti/";

// torch 2.6.0 as pip installs it: libtorch_cuda.so needs libcupti.so.12 through its RUNPATH into
// the nvidia-cuda-cupti-cu12 wheel (CUPTI 12.4.127, which torch requires), and triton 3.2.0
// vendors its own CUPTI as libcupti.so.`triton_cupti` for its own use.
FakeImage TorchWithTriton(const std::string& triton_cupti, const std::string& torch_runpath = "") {
  FakeImage f = WithLibs({});
  elf::fixture::ElfSpec torch;
  torch.soname = "libtorch_cuda.so";
  torch.needed = {"libcupti.so.12"};
  torch.runpath = torch_runpath.empty() ? "$ORIGIN/../../nvidia/cuda_cupti/lib" : torch_runpath;
  f.File(kSite + "torch/lib/libtorch_cuda.so", elf::fixture::BuildElf(torch));
  Dist(f, "torch", "2.6.0",
       {"nvidia-cuda-cupti-cu12==12.4.127; platform_system == \"Linux\"", "triton==3.2.0"},
       {"torch/lib/libtorch_cuda.so"});
  f.File(kSite + "nvidia/cuda_cupti/lib/libcupti.so.12", So("libcupti.so.12"));
  Dist(f, "nvidia-cuda-cupti-cu12", "12.4.127", {}, {"nvidia/cuda_cupti/lib/libcupti.so.12"});
  elf::fixture::ElfSpec proton;
  proton.needed = {"libcupti.so.12"};
  proton.runpath = "$ORIGIN/../backends/nvidia/lib/cupti";
  f.File(kSite + "triton/_C/libproton.so", elf::fixture::BuildElf(proton));
  f.File(kSite + kTritonCupti + "libcupti.so." + triton_cupti, So("libcupti.so.12"));
  f.Link(kSite + kTritonCupti + "libcupti.so.12", "libcupti.so." + triton_cupti);
  Dist(f, "triton", "3.2.0", {},
       {"triton/_C/libproton.so", kTritonCupti + "libcupti.so." + triton_cupti,
        kTritonCupti + "libcupti.so.12"});
  return f;
}

}  // namespace

TEST_CASE("IC011: a copy another distribution vendors for itself is its own", "[checks]") {
  // triton's CUPTI 2024.1.0 beside the wheel's 12.4.127: another line, and triton's own.
  FakeImage stock = TorchWithTriton("2024.1.0");
  auto found = Scan(stock);
  for (const Finding& f : found["IC011"]) UNSCOPED_INFO(f.message);
  CHECK(Paths(found, "IC011").empty());
  CHECK(Paths(found, "IC050").empty());
  // In the same line and older, vendored for triton alone: still triton's.
  FakeImage same_line = TorchWithTriton("12.1.105");
  CHECK(Paths(Scan(same_line), "IC011").empty());
  // Loaded by torch in place of the wheel's copy, it is a stale copy again.
  FakeImage loaded = TorchWithTriton("12.1.105", "$ORIGIN/../../" + kTritonCupti);
  CHECK(Paths(Scan(loaded), "IC011") ==
        std::vector<std::string>{kSite + kTritonCupti + "libcupti.so.12.1.105"});
}

TEST_CASE("IC011: the fix never removes a distribution another one requires", "[checks]") {
  // triton vendors a newer CUPTI of the component line, which torch loads: the wheel's copy is
  // older, but torch requires its wheel.
  auto image = [](bool required) {
    FakeImage f = TorchWithTriton("12.8.90", "$ORIGIN/../../" + kTritonCupti);
    if (!required)  // the same image without torch's requirement of the wheel
      Dist(f, "torch", "2.6.0", {"triton==3.2.0"}, {"torch/lib/libtorch_cuda.so"});
    return f;
  };
  FakeImage bad = image(true);
  auto found = Scan(bad);
  REQUIRE(Paths(found, "IC011") ==
          std::vector<std::string>{kSite + "nvidia/cuda_cupti/lib/libcupti.so.12"});
  const std::string& fix = found["IC011"][0].remediation;
  INFO(fix);
  CHECK(fix.find("uninstall") == std::string::npos);
  CHECK(fix.find("Keep nvidia-cuda-cupti-cu12, which torch 2.6.0 requires "
                 "(nvidia-cuda-cupti-cu12==12.4.127), and make sure no loader path reaches " +
                 kSite + "nvidia/cuda_cupti/lib/libcupti.so.12") != std::string::npos);
  FakeImage free = image(false);
  auto unrequired = Scan(free);
  REQUIRE(unrequired["IC011"].size() == 1);
  CHECK(unrequired["IC011"][0].remediation.find("Pip uninstall nvidia-cuda-cupti-cu12 (it "
                                                "installed the older copy)") != std::string::npos);
}

TEST_CASE("IC011: a requirement under an extra protects only when the extra was asked for",
          "[checks]") {
  // torch 2.10's form: torch requires cuda-toolkit[extras], which requires the component wheels
  // under those extras.
  auto fix = [](const std::string& extras) {
    FakeImage f = TorchWithTriton("12.8.90", "$ORIGIN/../../" + kTritonCupti);
    Dist(f, "torch", "2.6.0", {"cuda-toolkit[" + extras + "]==12.4.1", "triton==3.2.0"},
         {"torch/lib/libtorch_cuda.so"});
    Dist(f, "cuda-toolkit", "12.4.1",
         {"nvidia-cuda-cupti-cu12==12.4.127.*; sys_platform == 'linux' and extra == 'cupti'"}, {});
    auto found = Scan(f);
    REQUIRE(found["IC011"].size() == 1);
    return found["IC011"][0].remediation;
  };
  CHECK(fix("cublas,cupti")
            .starts_with("Keep nvidia-cuda-cupti-cu12, which cuda-toolkit 12.4.1 "
                         "requires (nvidia-cuda-cupti-cu12==12.4.127.*)"));
  CHECK(fix("cublas").starts_with("Pip uninstall nvidia-cuda-cupti-cu12"));
}

namespace {

// cuDNN `version` in `dir`: libcudnn.so.VERSION and its soname link.
void CudnnIn(FakeImage& f, const std::string& dir, const std::string& version) {
  f.File(dir + "/libcudnn.so." + version, So("libcudnn.so.8"));
  f.Link(dir + "/libcudnn.so.8", "libcudnn.so." + version);
}

// libapp.so: needs libcudnn.so.8 and ships its own, which its RUNPATH $ORIGIN finds.
std::string AppLib() {
  elf::fixture::ElfSpec spec;
  spec.soname = "libapp.so";
  spec.needed = {"libcudnn.so.8"};
  spec.runpath = "$ORIGIN";
  return elf::fixture::BuildElf(spec);
}

}  // namespace

TEST_CASE("IC010: the loader finds another cuDNN before the consumer's own", "[checks]") {
  const std::string app = "/opt/app/lib";
  auto image = [&](const std::string& found_version) {
    FakeImage f = WithLibs({});
    CudnnIn(f, kLib, found_version);
    f.File(app + "/libapp.so", AppLib());
    CudnnIn(f, app, "8.9.2");
    return f;
  };
  FakeImage bad = image("8.5.0");  // LD_LIBRARY_PATH comes before RUNPATH
  auto found = Scan(bad);
  CHECK(Paths(found, "IC010") == std::vector<std::string>{kLib + "/libcudnn.so.8.5.0"});
  REQUIRE(found["IC010"].size() == 1);
  CHECK(found["IC010"][0].message.find(app + "/libapp.so ships libcudnn.so.8 8.9.2") !=
        std::string::npos);
  FakeImage ok = image("8.9.2");  // the same version either way
  CHECK(Paths(Scan(ok), "IC010").empty());
}

TEST_CASE("IC010: $ORIGIN of a library opened through a symlink is the symlink's directory",
          "[checks]") {
  // libapp.so is opened as /opt/app/lib/libapp.so, a link to /opt/real/libapp.so. glibc takes
  // l_origin from the path it opened (_dl_new_object; no realpath), so its RUNPATH $ORIGIN is
  // /opt/app/lib, where it ships cuDNN 8.9.2; the real directory holds the 8.5.0 that
  // LD_LIBRARY_PATH loads anyway. With $ORIGIN taken from the real path the check would
  // compare 8.5.0 with 8.5.0 and see nothing.
  const std::string app = "/opt/app/lib", real = "/opt/real";
  // `real_version` empty: no cuDNN next to the real libapp.so.
  auto image = [&](const std::string& app_version, const std::string& real_version) {
    FakeImage f = WithLibs({});
    SetEnv(f, "LD_LIBRARY_PATH", kLib + ":" + app);
    CudnnIn(f, kLib, "8.5.0");
    CudnnIn(f, app, app_version);
    if (!real_version.empty()) CudnnIn(f, real, real_version);
    f.File(real + "/libapp.so", AppLib());
    f.Link(app + "/libapp.so", "../../real/libapp.so");
    // The consumer that opens libapp.so by its link (found on LD_LIBRARY_PATH, after cuDNN).
    // Its path sorts before /opt/real, so its link map is the one the checks read libapp.so's
    // requests from (rules::Context keeps the first per object and name).
    f.File("/opt/app/bin/libtool.so", So("libtool.so", {"libcudnn.so.8", "libapp.so"}));
    return f;
  };
  FakeImage bad = image("8.9.2", "8.5.0");
  auto found = Scan(bad);
  REQUIRE(Paths(found, "IC010") == std::vector<std::string>{kLib + "/libcudnn.so.8.5.0"});
  CHECK_THAT(found["IC010"][0].message,
             Catch::Contains(real + "/libapp.so ships libcudnn.so.8 8.9.2 at " + app +
                             "/libcudnn.so.8.9.2"));
  // Its neighbour: the copy ld.so searches is the version it loads.
  FakeImage ok = image("8.5.0", "");
  CHECK(Paths(Scan(ok), "IC010").empty());
}

TEST_CASE("IC015: a pip package's library replaced by a file of another size", "[checks]") {
  const std::string lib = "nvidia/cudnn/lib/libcudnn_graph.so.9";
  const std::string info = "nvidia_cudnn_cu12-9.19.0.56.dist-info/";
  const std::string wheel = So("libcudnn_graph.so.9");
  // `layer`: the one that writes the library (the RECORD's is 0).
  auto image = [&](const std::string& later, int layer = 1) {
    FakeImage f(2);
    f.File(kSite + info + "METADATA",
           "Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.19.0.56\n");
    f.File(kSite + info + "RECORD",
           lib + ",sha256=x," + std::to_string(wheel.size()) + "\n" + info + "RECORD,,\n");
    f.File(kSite + lib, later, layer, layer ? std::vector<int>{0} : std::vector<int>{});
    return f;
  };
  const std::string other = wheel + std::string(64, '\0');  // another build, 64 bytes longer
  FakeImage bad = image(other);
  auto found = Scan(bad);
  CHECK(Paths(found, "IC015") == std::vector<std::string>{kSite + lib});
  REQUIRE(found["IC015"].size() == 1);
  CHECK(found["IC015"][0].message.find("its RECORD says " + std::to_string(wheel.size())) !=
        std::string::npos);
  CHECK(found["IC015"][0].message.find("replaced by layer 1") != std::string::npos);
  FakeImage ok = image(wheel);  // the same bytes copied again
  CHECK(Paths(Scan(ok), "IC015").empty());
  // In the RECORD's own layer the wheel's RECORD may be the wrong one (pynvvideocodec 2.0.4's
  // states 2402945 bytes for a 2439136-byte module, and pip checks none): not judged.
  FakeImage own = image(other, 0);
  CHECK(Paths(Scan(own), "IC015").empty());
}

TEST_CASE("IC015: a dpkg package's library whose MD5 differs from its md5sums", "[checks]") {
  // libcudnn9-cuda-12 installs libcudnn_graph.so.9.1.0 and states its MD5; a later layer writes
  // other bytes there (another release's sub-library), or the same bytes again.
  const std::string dir = "/usr/lib/x86_64-linux-gnu/";
  const std::string graph = So("libcudnn_graph.so.9"), helper = So("libhelper.so.1");
  auto image = [&](const std::string& later_graph, const std::string& later_helper, int layer) {
    FakeImage f(2);
    f.File("/var/lib/dpkg/status",
           "Package: libcudnn9-cuda-12\nStatus: install ok installed\nVersion: 9.1.0.70-1\n\n"
           "Package: libhelper1\nStatus: install ok installed\nVersion: 1.0-1\n");
    f.File("/var/lib/dpkg/info/libcudnn9-cuda-12.list", dir + "libcudnn_graph.so.9.1.0\n");
    f.File("/var/lib/dpkg/info/libcudnn9-cuda-12.md5sums",
           util::Md5Hex(graph) + "  " + dir.substr(1) + "libcudnn_graph.so.9.1.0\n");
    f.File("/var/lib/dpkg/info/libhelper1.md5sums",
           util::Md5Hex(helper) + "  " + dir.substr(1) + "libhelper.so.1\n");
    f.File(dir + "libcudnn_graph.so.9.1.0", later_graph, layer,
           layer ? std::vector<int>{0} : std::vector<int>{});
    f.File(dir + "libhelper.so.1", later_helper, layer,
           layer ? std::vector<int>{0} : std::vector<int>{});
    return f;
  };
  const std::string other_graph = graph + std::string(64, '\0');  // another build
  const std::string other_helper = helper + std::string(64, '\0');
  FakeImage bad = image(other_graph, other_helper, 1);
  auto found = Scan(bad);
  REQUIRE(found["IC015"].size() == 2);
  for (const Finding& f : found["IC015"]) {
    bool cuda = f.paths[0] == dir + "libcudnn_graph.so.9.1.0";
    INFO(f.message);
    CHECK(f.severity == (cuda ? Severity::kError : Severity::kWarning));
    CHECK(f.layer.index == 1);
    CHECK(f.message.find(cuda ? "dpkg libcudnn9-cuda-12 9.1.0.70-1" : "dpkg libhelper1 1.0-1") !=
          std::string::npos);
    CHECK(f.message.find("its md5sums says " + util::Md5Hex(cuda ? graph : helper)) !=
          std::string::npos);
  }
  CHECK(Paths(found, "IC004") == std::vector<std::string>{dir + "libcudnn_graph.so.9.1.0"});

  FakeImage same = image(graph, helper, 1);  // the same bytes copied again
  CHECK(Paths(Scan(same), "IC015").empty());
  // Other bytes from dpkg's own layer: nothing later replaced them.
  FakeImage own = image(other_graph, other_helper, 0);
  auto own_found = Scan(own);
  CHECK(Paths(own_found, "IC015").empty());
  CHECK(Paths(own_found, "IC004").empty());
}

TEST_CASE("preload: torch loads its global deps, and the nvidia wheels only when those fail",
          "[checks]") {
  // libtorch_cuda.so NEEDS libcudnn.so.8 with no RUNPATH. torch/__init__.py loads
  // libtorch_global_deps.so (RTLD_GLOBAL) first; only when that fails on a CUDA library does it
  // preload nvidia/cudnn/lib/libcudnn.so.8 and try again.
  auto image = [&](const std::string& global_needs, const std::string& global_runpath,
                   bool has_global = true) {
    FakeImage f = WithLibs({});
    elf::fixture::ElfSpec ext;
    ext.soname = "libtorch_cuda.so";
    ext.needed = {"libcudnn.so.8"};
    f.File(kSite + "torch/lib/libtorch_cuda.so", elf::fixture::BuildElf(ext));
    elf::fixture::ElfSpec global;
    global.soname = "libtorch_global_deps.so";
    global.needed = {global_needs};
    global.runpath = global_runpath;
    if (has_global)
      f.File(kSite + "torch/lib/libtorch_global_deps.so", elf::fixture::BuildElf(global));
    Dist(f, "torch", "2.1.2", {},
         {"torch/lib/libtorch_cuda.so", "torch/lib/libtorch_global_deps.so"});
    f.File(kSite + "nvidia/cudnn/lib/libcudnn.so.8", So("libcudnn.so.8"));
    Dist(f, "nvidia-cudnn-cu12", "8.9.2.26", {}, {"nvidia/cudnn/lib/libcudnn.so.8"});
    return f;
  };
  const std::string cuda = kSite + "torch/lib/libtorch_cuda.so";
  // IC012 on torch's own files (the fixture's cuDNN has no sub-libraries: those are not at issue).
  auto torch_unresolved = [&](FakeImage& f) {
    std::vector<std::string> out;
    for (const std::string& p : Paths(Scan(f), "IC012"))
      if (p.rfind(kSite + "torch/", 0) == 0) out.push_back(p);
    return out;
  };
  // Global deps reach cuDNN through their RUNPATH: loaded first, libtorch_cuda finds it loaded.
  FakeImage global = image("libcudnn.so.8", "$ORIGIN/../../nvidia/cudnn/lib");
  CHECK(torch_unresolved(global).empty());
  // Global deps miss cuDNN: torch preloads it from the wheel, then loads them again.
  FakeImage fallback = image("libcudnn.so.8", "");
  CHECK(torch_unresolved(fallback).empty());
  // Global deps fail on a library that is not CUDA's: torch re-raises, nothing is preloaded.
  FakeImage other = image("libgomp.so.1", "");
  CHECK(torch_unresolved(other) == std::vector<std::string>{cuda});
  // No global deps (a build without them): libtorch_cuda's own search misses cuDNN.
  FakeImage none = image("", "", false);
  CHECK(torch_unresolved(none) == std::vector<std::string>{cuda});
}

namespace {

// torch as `import torch` loads it: torch/_C (RUNPATH $ORIGIN/lib) NEEDS libtorch_python.so,
// which NEEDS libtorch_cpu.so and libc10.so (each defining a few C++ symbols); `python_needs`
// adds to libtorch_python's DT_NEEDED. torchvision (Requires-Dist: torch) ships _C.so, which
// NEEDS libc10.so and libtorch_cpu.so with no RPATH and references `vision_imports` (and
// `vision_weak`, weak). The image's libc is in kLib, on LD_LIBRARY_PATH.
const std::string kCpu = "_ZN2at4_ops3mul4callEv";   // at::_ops::mul::call(), in libtorch_cpu
const std::string kGone = "_ZN2at4_ops3add4callEv";  // at::_ops::add::call(), in no library
const std::string kC10 = "_ZN3c106detail14torchCheckFailEv";  // in libc10

struct TorchProcess {
  std::vector<std::string> python_needs = {};
  std::vector<std::string> vision_imports = {kC10, kCpu};
  std::vector<std::string> vision_weak = {};
  std::vector<std::string> vision_needs = {};       // added to torchvision/_C.so's DT_NEEDED
  std::string torch_version = "2.3.0";              // torch's METADATA
  std::string vision_requires = "torch (==2.3.0)";  // torchvision's
};

FakeImage TorchImport(const TorchProcess& p) {
  FakeImage f = WithLibs({{"libc.so.6", So("libc.so.6")}});
  f.File(kSite + "torch/version.py",
         "__version__ = '2.3.0+cu121'\ndebug = False\ncuda = '12.1'\ngit_version = '0'\n");
  auto lib = [](const std::string& soname, std::vector<std::string> needed,
                std::vector<std::string> exported) {
    elf::fixture::ElfSpec spec;
    spec.soname = soname;
    spec.needed = std::move(needed);
    spec.needed.push_back("libc.so.6");
    spec.runpath = "$ORIGIN";
    spec.exported = std::move(exported);
    return spec;
  };
  elf::fixture::ElfSpec c = lib("", {"libtorch_python.so"}, {"PyInit__C"});
  c.runpath = "$ORIGIN/lib";
  f.File(kSite + "torch/_C.cpython-310-x86_64-linux-gnu.so", elf::fixture::BuildElf(c));
  std::vector<std::string> python_needs = {"libtorch_cpu.so", "libc10.so"};
  python_needs.insert(python_needs.end(), p.python_needs.begin(), p.python_needs.end());
  f.File(kSite + "torch/lib/libtorch_python.so",
         elf::fixture::BuildElf(lib("libtorch_python.so", python_needs, {"THPVariable_Wrap"})));
  f.File(kSite + "torch/lib/libtorch_cpu.so",
         elf::fixture::BuildElf(lib("libtorch_cpu.so", {"libc10.so"}, {kCpu})));
  f.File(kSite + "torch/lib/libc10.so",
         elf::fixture::BuildElf(lib("libc10.so", {}, {kC10, "_ZN3c104impl3tlsEv"})));
  Dist(f, "torch", p.torch_version, {},
       {"torch/version.py", "torch/_C.cpython-310-x86_64-linux-gnu.so",
        "torch/lib/libtorch_python.so", "torch/lib/libtorch_cpu.so", "torch/lib/libc10.so"});
  elf::fixture::ElfSpec vision;
  vision.needed = {"libc10.so", "libtorch_cpu.so", "libc.so.6"};
  vision.needed.insert(vision.needed.end(), p.vision_needs.begin(), p.vision_needs.end());
  vision.imported = p.vision_imports;
  vision.weak_imported = p.vision_weak;
  vision.exported = {"PyInit__C"};
  f.File(kSite + "torchvision/_C.so", elf::fixture::BuildElf(vision));
  Dist(f, "torchvision", "0.18.0", {p.vision_requires}, {"torchvision/_C.so"});
  return f;
}

const std::string kVision = kSite + "torchvision/_C.so";

// How torchvision/_C.so's DT_NEEDED `name` resolved in its consumer's link map: "reason path",
// "" when it is no consumer.
std::string VisionNeeds(FakeImage& f, const std::string& name) {
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  catalog::Catalog cat = catalog::Build(f.image(), k.libraries());
  util::Expected<loader::Options> options = loader::ImageOptions(f.image(), cat, k.dlopen());
  REQUIRE(options);
  loader::Session s =
      loader::Session::Build(f.image(), cat, ConsumerRulesOf(k), std::move(*options));
  for (const loader::Consumer& c : s.consumers())
    if (c.path == kVision)
      for (const loader::Resolution& r : c.graph.objects[0].resolutions)
        if (r.name == name)
          return std::string(loader::ReasonName(r.reason)) + " " + r.real_path +
                 (r.found() ? "" : " (not found)");
  return "";
}

// The findings of `rule` whose paths name `path`.
std::vector<Finding> Naming(const std::map<std::string, std::vector<Finding>>& found,
                            const std::string& rule, const std::string& path) {
  std::vector<Finding> out;
  if (auto it = found.find(rule); it != found.end())
    for (const Finding& f : it->second)
      if (std::find(f.paths.begin(), f.paths.end(), path) != f.paths.end()) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("process: an extension built against torch loads into torch's process and binds",
          "[checks]") {
  // torchvision/_C.so finds libc10.so and libtorch_cpu.so already loaded by `import torch`
  // (glibc matches a loaded object's name before any search), and binds to them: silent. Today's
  // main never loaded it (no consumer), so nothing in it was checked.
  FakeImage f = TorchImport({});
  CHECK(VisionNeeds(f, "libc10.so") == "already-loaded " + kSite + "torch/lib/libc10.so");
  CHECK(VisionNeeds(f, "libtorch_cpu.so") ==
        "already-loaded " + kSite + "torch/lib/libtorch_cpu.so");
  auto found = Scan(f);
  CHECK(Naming(found, "IC012", kVision).empty());
  CHECK(Naming(found, "IC013", kVision).empty());
}

TEST_CASE("IC013: a missing C++ symbol names a library only when they share its namespace",
          "[checks]") {
  // Every C++ library's names begin "_ZN": that alone named libc10 as the provider of a
  // symbol of a namespace none of the needed libraries has.
  const std::string other = "_ZN5vtune3runEv";  // vtune::run(), in no library here
  FakeImage f = TorchImport({.vision_imports = {kC10, other}});
  std::vector<Finding> missing = Naming(Scan(f), "IC013", kVision);
  REQUIRE(missing.size() == 1);
  INFO(missing[0].message);
  CHECK(missing[0].message.find("vtune::run()") != std::string::npos);
  CHECK(missing[0].message.find("should provide") == std::string::npos);
  // A const member of a namespace libc10 has ("_ZNK3c10"): libc10 is named.
  const std::string member = "_ZNK3c1010TensorImpl4sizeEv";  // c10::TensorImpl::size() const
  FakeImage g = TorchImport({.vision_imports = {member}});
  std::vector<Finding> named = Naming(Scan(g), "IC013", kVision);
  REQUIRE(named.size() == 1);
  INFO(named[0].message);
  CHECK(named[0].message.find("libc10.so should provide it") != std::string::npos);
}

TEST_CASE("IC013: an extension misses a C++ symbol of the framework it was built against",
          "[checks]") {
  // pip moved torch under torchvision: at::_ops::add::call() is gone from libtorch_cpu.so
  // ("undefined symbol: _ZN2at4_ops3add4callEv" at import).
  FakeImage f = TorchImport({.vision_imports = {kC10, kGone}});
  auto found = Scan(f);
  std::vector<Finding> missing = Naming(found, "IC013", kVision);
  REQUIRE(missing.size() == 1);
  const Finding& m = missing[0];
  INFO(m.message);
  CHECK(m.severity == Severity::kError);
  CHECK(m.message.rfind(kVision + " (torchvision 0.18.0) needs symbol at::_ops::add::call(),", 0) ==
        0);
  CHECK(m.message.find("libtorch_cpu.so should provide it and resolves to " + kSite +
                       "torch/lib/libtorch_cpu.so (torch 2.3.0)") != std::string::npos);
  CHECK(m.message.find("pins torch==2.3.0") == std::string::npos);  // the pin holds
  // A local build label is no other release: torch==2.3.0 holds for 2.3.0+cu121 (PEP 440).
  FakeImage local = TorchImport({.vision_imports = {kC10, kGone}, .torch_version = "2.3.0+cu121"});
  std::vector<Finding> local_missing = Naming(Scan(local), "IC013", kVision);
  REQUIRE(local_missing.size() == 1);
  CHECK(local_missing[0].message.find(" pins torch") == std::string::npos);
  // Another release is named, with what the image has.
  FakeImage moved = TorchImport({.vision_imports = {kC10, kGone}, .torch_version = "2.4.0"});
  std::vector<Finding> moved_missing = Naming(Scan(moved), "IC013", kVision);
  REQUIRE(moved_missing.size() == 1);
  CHECK(moved_missing[0].message.find(
            "torchvision 0.18.0 pins torch==2.3.0, the image has 2.4.0") != std::string::npos);
  // Defined: silent.
  FakeImage ok = TorchImport({});
  CHECK(Naming(Scan(ok), "IC013", kVision).empty());
}

TEST_CASE("IC012: an extension that NEEDS the host's driver is whole, and its C++ symbols bind",
          "[checks]") {
  // vllm's modules NEED libcuda.so.1, which the NVIDIA Container Toolkit mounts from the host:
  // the image has none and `import` works on a GPU host (loader-diff vllm). The driver defines
  // C names only (the CUDA 13 stub: 637 symbols, no _Z), so a C++ symbol torch lacks is still
  // an error while cuInit goes unjudged.
  FakeImage ok = TorchImport({.vision_imports = {kC10, kCpu, "cuInit"},
                              .vision_needs = {"libcuda.so.1", "libnvidia-ml.so.1"}});
  auto found = Scan(ok);
  CHECK(Naming(found, "IC012", kVision).empty());
  CHECK(Naming(found, "IC013", kVision).empty());
  FakeImage moved =
      TorchImport({.vision_imports = {kC10, kGone, "cuInit"}, .vision_needs = {"libcuda.so.1"}});
  std::vector<Finding> missing = Naming(Scan(moved), "IC013", kVision);
  REQUIRE(missing.size() == 1);
  INFO(missing[0].message);
  CHECK(missing[0].severity == Severity::kError);
  CHECK(missing[0].message.find("at::_ops::add::call()") != std::string::npos);
  CHECK(missing[0].message.find("cuInit") == std::string::npos);
  // Any other library it NEEDS and the image lacks stays an error, and hides its C names.
  FakeImage other = TorchImport({.vision_imports = {kC10, kCpu, "cuInit"},
                                 .vision_needs = {"libcuda.so.1", "libnvjpeg.so.13"}});
  std::vector<Finding> unresolved = Naming(Scan(other), "IC012", kVision);
  REQUIRE(unresolved.size() == 1);
  CHECK(unresolved[0].severity == Severity::kError);
  CHECK(unresolved[0].message.rfind("libnvjpeg.so.13 (DT_NEEDED of " + kVision, 0) == 0);
}

TEST_CASE("IC013: a weak reference nothing defines is never missing", "[checks]") {
  FakeImage f = TorchImport({.vision_weak = {kGone}});
  CHECK(VisionNeeds(f, "libtorch_cpu.so") ==
        "already-loaded " + kSite + "torch/lib/libtorch_cpu.so");
  auto found = Scan(f);
  CHECK(Naming(found, "IC013", kVision).empty());
  CHECK(Naming(found, "IC012", kVision).empty());
}

TEST_CASE("IC013: a library binds in the scope of the load that brings it, not its own",
          "[checks]") {
  // torch 2.10: libtorch_cuda.so NEEDS libtorch_nvshmem.so, whose c10::cuda references only a
  // sibling in torch._C's load defines (it does not NEED libc10_cuda.so): glibc binds them in the
  // dlopen root's search list, so `import torch` works. Scanned as a root of its own, the
  // library would miss them.
  auto image = [](bool c10_defines) {
    FakeImage f = TorchImport({.python_needs = {"libfw_nvshmem.so"}});
    elf::fixture::ElfSpec lib;
    lib.soname = "libfw_nvshmem.so";
    lib.needed = {"libc.so.6"};
    lib.runpath = "$ORIGIN";
    lib.imported = {c10_defines ? kC10 : std::string("_ZN3c104cuda9getStreamEv")};
    f.File(kSite + "torch/lib/libfw_nvshmem.so", elf::fixture::BuildElf(lib));
    return f;
  };
  const std::string nvshmem = kSite + "torch/lib/libfw_nvshmem.so";
  FakeImage ok = image(true);
  CHECK(Naming(Scan(ok), "IC013", nvshmem).empty());
  FakeImage bad = image(false);  // nothing in the load defines it: still an error
  auto missing = Naming(Scan(bad), "IC013", nvshmem);
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].severity == Severity::kError);
}

TEST_CASE("IC016: an extension pins another release of the framework it loads into", "[checks]") {
  // torchvision 0.19.1 on torch 2.5.1 (scripts/loader-diff tv-of-24-on-torch25): every symbol
  // binds, and its nms fails at run time. Only the pin says so.
  const std::string torch_info = kSite + "torch-2.3.0.dist-info";
  const std::string vision_info = kSite + "torchvision-0.18.0.dist-info";
  FakeImage f = TorchImport({.vision_requires = "torch (==2.2.0)"});
  auto found = Scan(f);
  CHECK(Naming(found, "IC013", kVision).empty());
  std::vector<Finding> pin = Naming(found, "IC016", vision_info);
  REQUIRE(pin.size() == 1);
  INFO(pin[0].message);
  CHECK(pin[0].severity == Severity::kError);
  CHECK(pin[0].message ==
        "torchvision 0.18.0 pins torch==2.2.0 and its extension modules load "
        "into torch's process, but the image has torch 2.3.0");
  CHECK(pin[0].paths == std::vector<std::string>{vision_info, torch_info});
  CHECK(std::any_of(pin[0].evidence.begin(), pin[0].evidence.end(), [](const Evidence& e) {
    return e.label == "extension module" && e.value == kVision;
  }));
  // Another patch of the same release: a warning.
  FakeImage patch = TorchImport({.vision_requires = "torch (==2.3.1)"});
  std::vector<Finding> near = Naming(Scan(patch), "IC016", vision_info);
  REQUIRE(near.size() == 1);
  CHECK(near[0].severity == Severity::kWarning);
}

TEST_CASE("IC016: a pin holds for the local build of its release", "[checks]") {
  // PEP 440: ==2.3.0 matches 2.3.0+cu121 (PyTorch's own index) and 2.3 matches 2.3.0.
  for (const char* installed : {"2.3.0+cu121", "2.3"}) {
    FakeImage f = TorchImport({.torch_version = installed});
    INFO(installed);
    CHECK(Scan(f)["IC016"].empty());
  }
  // A pin naming another local build of the same release (cu121 for cu118): the numbers agree,
  // and the label alone is no finding.
  FakeImage other =
      TorchImport({.torch_version = "2.3.0+cu118", .vision_requires = "torch (==2.3.0+cu121)"});
  CHECK(Scan(other)["IC016"].empty());
  // A distribution without extension modules is no extension: its pin is pip's business.
  FakeImage pure = TorchImport({});
  Dist(pure, "app", "1.0", {"torch (==2.2.0)"}, {"app/__init__.py"});
  pure.File(kSite + "app/__init__.py", "import torch\n");
  CHECK(Scan(pure)["IC016"].empty());
}

TEST_CASE("process: a package whose __init__ imports torch first runs in torch's process",
          "[checks]") {
  // torchaudio 2.11 has no Requires-Dist; torchaudio/__init__.py imports torch, then loads
  // lib/libtorchaudio.abi3.so (RTLD_LOCAL) and imports lib/_torchaudio.abi3.so (NEEDS
  // libtorchaudio.abi3.so, libc10.so, libcudart.so.12): dlopen.json's imports row names it in
  // imported_by, so libc10.so is the copy torch._C's import loaded (two levels down, before
  // torchaudio's own load begins). Read as a process of its own, the module (a consumer for its
  // libcudart) would miss libc10.so: IC012 error, and the import works.
  const std::string audio = kSite + "torchaudio/lib/_torchaudio.abi3.so";
  auto image = [&](const std::string& name) {
    FakeImage f = TorchImport({});
    f.File(kLib + "/libcudart.so.12", So("libcudart.so.12"));
    elf::fixture::ElfSpec lib;
    lib.soname = "libtorchaudio.abi3.so";
    lib.needed = {"libc10.so", "libc.so.6"};
    lib.imported = {kC10};
    f.File(kSite + name + "/lib/libtorchaudio.abi3.so", elf::fixture::BuildElf(lib));
    elf::fixture::ElfSpec module;
    module.needed = {"libtorchaudio.abi3.so", "libc10.so", "libcudart.so.12", "libc.so.6"};
    module.imported = {kC10};
    module.exported = {"PyInit__torchaudio"};
    f.File(kSite + name + "/lib/_torchaudio.abi3.so", elf::fixture::BuildElf(module));
    Dist(f, name, "2.11.0", {},
         {name + "/lib/libtorchaudio.abi3.so", name + "/lib/_torchaudio.abi3.so"});
    return f;
  };
  FakeImage f = image("torchaudio");
  auto found = Scan(f);
  CHECK(found["IC012"].empty());
  CHECK(Naming(found, "IC013", audio).empty());
  // The same layout under a name no row names: its NEEDED libc10.so, which only torch's
  // objects provide, places it in torch's process all the same (the evidence is the files), so
  // libc10.so is found loaded; its own library, which no row says the package loads first, is
  // still missing.
  const std::string other = kSite + "otheraudio/lib/_torchaudio.abi3.so";
  FakeImage alone = image("otheraudio");
  std::vector<Finding> unresolved = Naming(Scan(alone), "IC012", other);
  REQUIRE(unresolved.size() == 1);
  INFO(unresolved[0].message);
  CHECK(unresolved[0].severity == Severity::kError);
  CHECK(unresolved[0].message.rfind("libtorchaudio.abi3.so (DT_NEEDED of " + other, 0) == 0);
}

TEST_CASE("IC012: a library an import needs does not resolve, whatever its name", "[checks]") {
  // libtorch_python.so (on torch._C's import path) NEEDS libcusparseLt.so.0; the wheel's copy
  // sits in a directory no search reaches: `import torch` fails with ImportError.
  const std::string unknown = "libcusparseLt.so.0";
  const std::string python = kSite + "torch/lib/libtorch_python.so";
  FakeImage f = TorchImport({.python_needs = {unknown}});
  f.File(kSite + "nvidia/cusparselt/lib/" + unknown, So(unknown));
  auto found = Scan(f);
  std::vector<Finding> unresolved = Naming(found, "IC012", python);
  REQUIRE(unresolved.size() == 1);
  INFO(unresolved[0].message);
  CHECK(unresolved[0].severity == Severity::kError);
  CHECK(unresolved[0].message.rfind(unknown + " (DT_NEEDED of " + python, 0) == 0);
  CHECK(unresolved[0].remediation.find(unknown + " is at " + kSite + "nvidia/cusparselt/lib/" +
                                       unknown) != std::string::npos);
  // Not also "not runnable as shipped" (info) for the library the import loads.
  for (const Finding& i : found["IC012"])
    CHECK(i.message.find("not runnable") == std::string::npos);
  // Reached: no finding.
  FakeImage ok = TorchImport({.python_needs = {unknown}});
  ok.File(kSite + "torch/lib/" + unknown, So(unknown));
  CHECK(Naming(Scan(ok), "IC012", python).empty());
}

TEST_CASE("IC012: a library of no known family that no file provides names the wheel that ships it",
          "[checks]") {
  // libtorch_python.so NEEDS libcusparseLt.so.0 (a family libraries.json does not classify) and
  // the image has no copy: the fix names the NVIDIA wheel of its CUDA major that ships it
  // (wheel_libraries, read from the wheels), not a family's placeholder.
  const std::string unknown = "libcusparseLt.so.0";
  const std::string python = kSite + "torch/lib/libtorch_python.so";
  for (const auto& [cudart, wheel] : std::vector<std::pair<std::string, std::string>>{
           {"libcudart.so.12", "nvidia-cusparselt-cu12"},
           {"libcudart.so.13", "nvidia-cusparselt-cu13"}}) {
    FakeImage f = TorchImport({.python_needs = {unknown, cudart}});
    f.File(kSite + "torch/lib/" + cudart, So(cudart));
    auto found = Scan(f);
    std::vector<Finding> unresolved = Naming(found, "IC012", python);
    REQUIRE(unresolved.size() == 1);
    INFO(unresolved[0].remediation);
    CHECK(unresolved[0].severity == Severity::kError);
    CHECK(unresolved[0].remediation == "no file of the image provides " + unknown +
                                           ": install the pip wheel " + wheel +
                                           ", which ships it.");
  }
}

TEST_CASE("IC012: a lib*.so that defines its PyInit is a module an import loads", "[checks]") {
  // paddlepaddle-gpu 2.6.2: paddle/base/libpaddle.so is the module paddle.base.libpaddle
  // (PyInit_libpaddle); its libcommon.so NEEDS libgomp.so.1, which a Debian 12 root without
  // libgomp1 lacks: `import paddle` fails. A lib*.so without a PyInit stays a library.
  auto image = [](const std::string& init) {
    FakeImage f = WithLibs({{"libc.so.6", So("libc.so.6")}});
    elf::fixture::ElfSpec module;
    module.soname = "libpaddle.so";
    module.needed = {"libcommon.so", "libc.so.6"};
    module.runpath = "$ORIGIN/../libs/";
    module.exported = {init};
    f.File(kSite + "paddle/base/libpaddle.so", elf::fixture::BuildElf(module));
    f.File(kSite + "paddle/libs/libcommon.so", So("libcommon.so", {"libgomp.so.1", "libc.so.6"}));
    Dist(f, "paddlepaddle-gpu", "2.6.2", {},
         {"paddle/base/libpaddle.so", "paddle/libs/libcommon.so"});
    return f;
  };
  FakeImage module = image("PyInit_libpaddle");
  auto found = Scan(module);
  std::vector<Finding> missing = Naming(found, "IC012", kSite + "paddle/libs/libcommon.so");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].severity == Severity::kError);
  CHECK(missing[0].message.rfind("libgomp.so.1 (DT_NEEDED of " + kSite + "paddle/libs/libcommon.so",
                                 0) == 0);
  FakeImage library = image("paddle_init");
  auto as_library = Scan(library);
  for (const Finding& f : as_library["IC012"]) CHECK(f.severity != Severity::kError);
}

TEST_CASE("IC012: what a dlopen rule loads is not on the import path", "[checks]") {
  // jax's plugin module NEEDS libcudnn.so.9, which dlopens its sub-libraries on use;
  // libcudnn_engines_runtime_compiled.so.9 NEEDS libcuda.so.1, the driver the container runtime
  // mounts. `import jax` works in an image without a driver (scripts/loader-diff jax092): the
  // driver is no import's DT_NEEDED. A DT_NEEDED of the module itself is one, but of the host's
  // driver: no image has it, and the import works where the runtime mounts it (vllm's modules).
  auto image = [](const std::string& module_needs) {
    elf::fixture::ElfSpec engines;
    engines.soname = "libcudnn_engines_runtime_compiled.so.9";
    engines.needed = {"libcuda.so.1", "libc.so.6"};
    FakeImage f =
        WithLibs({{"libc.so.6", So("libc.so.6")},
                  {"libcudnn.so.9.1.0", So("libcudnn.so.9")},
                  {"libcudnn_graph.so.9.1.0", So("libcudnn_graph.so.9")},
                  {"libcudnn_engines_runtime_compiled.so.9.1.0", elf::fixture::BuildElf(engines)}});
    for (const char* soname :
         {"libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_engines_runtime_compiled.so.9"})
      f.Link(kLib + "/" + soname, std::string(soname) + ".1.0");
    elf::fixture::ElfSpec module;
    module.needed = {"libcudnn.so.9", "libc.so.6"};
    if (!module_needs.empty()) module.needed.push_back(module_needs);
    module.exported = {"PyInit__plugin"};
    f.File(kSite + "plug/_plugin.so", elf::fixture::BuildElf(module));
    Dist(f, "plug", "1.0", {}, {"plug/_plugin.so"});
    return f;
  };
  FakeImage f = image("");
  auto found = Scan(f);
  for (const Finding& x : found["IC012"])
    CHECK(x.message.find("libcuda.so.1") == std::string::npos);
  FakeImage own = image("libcuda.so.1");  // the module itself NEEDS the driver
  CHECK(Naming(Scan(own), "IC012", kSite + "plug/_plugin.so").empty());
  FakeImage other = image("libnvjpeg.so.13");  // any other library it NEEDS: its import fails
  std::vector<Finding> unresolved = Naming(Scan(other), "IC012", kSite + "plug/_plugin.so");
  REQUIRE(unresolved.size() == 1);
  CHECK(unresolved[0].message.rfind("libnvjpeg.so.13 (DT_NEEDED of " + kSite + "plug/_plugin.so",
                                    0) == 0);
}

TEST_CASE("IC012: a library only an optional module needs is info, with the citation", "[checks]") {
  // torchvision/image.so NEEDS the same unreachable library; torchvision/io/image.py loads it
  // inside try/except and warns (dlopen.json optional): `import torchvision` succeeds.
  const std::string unknown = "libcusparseLt.so.0";
  FakeImage f = TorchImport({});
  f.File(kSite + "nvidia/cusparselt/lib/" + unknown, So(unknown));
  elf::fixture::ElfSpec image;
  image.needed = {"libc10.so", unknown, "libc.so.6"};
  f.File(kSite + "torchvision/image.so", elf::fixture::BuildElf(image));
  Dist(f, "torchvision", "0.18.0", {"torch (==2.3.0)"},
       {"torchvision/_C.so", "torchvision/image.so"});
  auto found = Scan(f);
  std::vector<Finding> unresolved = Naming(found, "IC012", kSite + "torchvision/image.so");
  REQUIRE(unresolved.size() == 1);
  INFO(unresolved[0].message);
  CHECK(unresolved[0].severity == Severity::kInfo);
  CHECK(unresolved[0].message.find("(optional: torchvision loads it when torchvision.io decodes "
                                   "or encodes an image") != std::string::npos);
}

TEST_CASE("process: a package's own RTLD_LOCAL load satisfies its module's DT_NEEDED", "[checks]") {
  // torchaudio/lib/_torchaudio.so NEEDS libtorchaudio.so with no RUNPATH: torchaudio loads
  // lib/libtorchaudio.so itself first (torch.ops.load_library, dlopen.json preload, RTLD_LOCAL),
  // and glibc matches the name against the loaded object. Its SoX module loads only on use.
  auto image = [](bool with_lib) {
    FakeImage f = TorchImport({});
    elf::fixture::ElfSpec ext;
    ext.needed = {"libtorchaudio.so", "libc10.so", "libc.so.6"};
    f.File(kSite + "torchaudio/lib/_torchaudio.so", elf::fixture::BuildElf(ext));
    elf::fixture::ElfSpec sox;
    sox.needed = {"libsox.so.3", "libc.so.6"};
    f.File(kSite + "torchaudio/lib/_torchaudio_sox.so", elf::fixture::BuildElf(sox));
    std::vector<std::string> files = {"torchaudio/lib/_torchaudio.so",
                                      "torchaudio/lib/_torchaudio_sox.so"};
    if (with_lib) {
      f.File(kSite + "torchaudio/lib/libtorchaudio.so", So("libtorchaudio.so", {"libc10.so"}));
      files.push_back("torchaudio/lib/libtorchaudio.so");
    }
    Dist(f, "torchaudio", "2.3.0", {"torch (==2.3.0)"}, files);
    return f;
  };
  FakeImage ok = image(true);
  auto found = Scan(ok);
  CHECK(Naming(found, "IC012", kSite + "torchaudio/lib/_torchaudio.so").empty());
  std::vector<Finding> sox = Naming(found, "IC012", kSite + "torchaudio/lib/_torchaudio_sox.so");
  REQUIRE(sox.size() == 1);
  CHECK(sox[0].severity == Severity::kInfo);
  FakeImage bad = image(false);
  auto missing = Naming(Scan(bad), "IC012", kSite + "torchaudio/lib/_torchaudio.so");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].severity == Severity::kError);
  CHECK(missing[0].message.find("libtorchaudio.so") != std::string::npos);
}

TEST_CASE("process: faiss-gpu preloads the CUDA runtime its SWIG module NEEDS", "[checks]") {
  // faiss-gpu-cu12's _swigfaiss.so NEEDS libcudart.so.12 with an RPATH only into its .libs:
  // faiss/loader.py loads the nvidia wheels' libcudart, libcublas, libcublasLt RTLD_GLOBAL
  // first (dlopen.json preload), so glibc finds it already loaded. Without the wheel it fails.
  auto image = [](bool runtime_wheel) {
    FakeImage f;
    elf::fixture::ElfSpec swig;
    swig.needed = {"libcudart.so.12"};
    swig.rpath = "$ORIGIN/../faiss_gpu_cu12.libs";
    f.File(kSite + "faiss/_swigfaiss.so", elf::fixture::BuildElf(swig));
    if (runtime_wheel)
      f.File(kSite + "nvidia/cuda_runtime/lib/libcudart.so.12", So("libcudart.so.12"));
    Dist(f, "faiss-gpu-cu12", "1.14.1.post1", {"nvidia-cuda-runtime-cu12>=12.1.105"},
         {"faiss/_swigfaiss.so"});
    return f;
  };
  FakeImage ok = image(true);
  CHECK(Naming(Scan(ok), "IC012", kSite + "faiss/_swigfaiss.so").empty());
  FakeImage bad = image(false);
  auto missing = Naming(Scan(bad), "IC012", kSite + "faiss/_swigfaiss.so");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].severity == Severity::kError);
  CHECK(missing[0].remediation.find("nvidia-cuda-runtime-cu12") != std::string::npos);
}

TEST_CASE("IC001: a framework loads a cuDNN its run-time check rejects", "[checks]") {
  auto image = [&](const std::string& found_version) {
    FakeImage f = Torch();  // compiled with cuDNN 8.9.2.26
    f.File(kLib + "/libcudnn.so." + found_version, So("libcudnn.so.8"));
    f.Link(kLib + "/libcudnn.so.8", "libcudnn.so." + found_version);
    return f;
  };
  FakeImage bad = image("8.5.0");  // LD_LIBRARY_PATH before torch's RUNPATH
  auto found = Scan(bad);
  CHECK(Paths(found, "IC001") == std::vector<std::string>{kLib + "/libcudnn.so.8.5.0"});
  REQUIRE(found["IC001"].size() == 1);
  CHECK(found["IC001"][0].message.find("compiled  against (8, 9, 2) but found runtime version "
                                       "(8, 5, 0)") != std::string::npos);
  FakeImage ok = image("8.9.2");
  CHECK(Paths(Scan(ok), "IC001").empty());
}

TEST_CASE("IC002: a CUDA runtime older than the framework's build", "[checks]") {
  const std::string cudart = kSite + "nvidia/cuda_runtime/lib/libcudart.so.12";
  FakeImage bad = Torch({.cuda = "12.4"});
  CHECK(Paths(Scan(bad), "IC002") == std::vector<std::string>{cudart});
  FakeImage ok = Torch({.cuda = "12.1"});
  CHECK(Paths(Scan(ok), "IC002").empty());
}

TEST_CASE("IC003: cuDNN built for another CUDA major than the runtime", "[checks]") {
  const std::string cudnn = kSite + "nvidia/cudnn/lib/libcudnn.so.8";
  FakeImage bad = Torch({.cudnn_pkg = "nvidia-cudnn-cu11"});
  auto found = Scan(bad);
  CHECK(Paths(found, "IC003") == std::vector<std::string>{cudnn});
  REQUIRE(found["IC003"].size() == 1);
  CHECK(found["IC003"][0].message.find("was built for CUDA 11") != std::string::npos);
  FakeImage ok = Torch({.cudnn_pkg = "nvidia-cudnn-cu12"});
  CHECK(Paths(Scan(ok), "IC003").empty());
}

TEST_CASE("IC041: a cuDNN release that does not support the target GPU", "[checks]") {
  FakeImage f = WithLibs({{"libcudnn.so.8.9.2", So("libcudnn.so.8")}});
  auto found = Scan(f, Gpu(37));  // Kepler; cuDNN 8.9 starts at Maxwell (SM 50)
  CHECK(Paths(found, "IC041") == std::vector<std::string>{kLib + "/libcudnn.so.8.9.2"});
  REQUIRE(found["IC041"].size() == 1);
  CHECK(found["IC041"][0].message.find("supports GPUs from SM 50") != std::string::npos);
  CHECK(Paths(Scan(f, Gpu(50)), "IC041").empty());
}

TEST_CASE("IC004: a cuDNN sub-library of another release than the shim", "[checks]") {
  auto image = [&](const std::string& graph_version) {
    FakeImage f = WithLibs({{"libcudnn.so.9.1.0", So("libcudnn.so.9")},
                            {"libcudnn_graph.so." + graph_version, So("libcudnn_graph.so.9")}});
    f.Link(kLib + "/libcudnn.so.9", "libcudnn.so.9.1.0");
    f.Link(kLib + "/libcudnn_graph.so.9", "libcudnn_graph.so." + graph_version);
    return f;
  };
  FakeImage bad = image("9.5.1");  // the shim dlopens it by name
  auto found = Scan(bad);
  CHECK(Paths(found, "IC004") == std::vector<std::string>{kLib + "/libcudnn_graph.so.9.5.1"});
  REQUIRE(found["IC004"].size() == 1);
  CHECK(found["IC004"][0].message.find("cuDNN 9.5.1 while libcudnn is 9.1.0") != std::string::npos);
  // Unowned: the file goes (libcudnn's own directory is the one on the path).
  CHECK(found["IC004"][0].remediation.rfind("Delete " + kLib + "/libcudnn_graph.so.9.5.1", 0) == 0);
  FakeImage ok = image("9.1.0");
  CHECK(Paths(Scan(ok), "IC004").empty());
}

TEST_CASE("IC061: a library in a loader directory that ld.so.cache does not list", "[checks]") {
  auto image = [&](bool add_later) {
    FakeImage f = WithLibs({{"libcufft.so.11.2.1.3", So("libcufft.so.11")}});
    f.Link(kLib + "/libcufft.so.11", "libcufft.so.11.2.1.3");
    f.File("/etc/ld.so.conf", kLib + "\n");
    f.File("/etc/ld.so.cache",
           testing::OldCache({{"libcufft.so.11", kLib + "/libcufft.so.11"}}, 0x0303));
    if (add_later) f.File(kLib + "/libcurand.so.10.3.5.147", So("libcurand.so.10"));
    return f;
  };
  FakeImage bad = image(true);  // ldconfig not run after libcuRAND was added
  auto found = Scan(bad);
  CHECK(Paths(found, "IC061") == std::vector<std::string>{kLib + "/libcurand.so.10.3.5.147"});
  REQUIRE(found["IC061"].size() == 1);
  CHECK(found["IC061"][0].message.find("/etc/ld.so.cache has no entry for it") !=
        std::string::npos);
  FakeImage ok = image(false);
  CHECK(Paths(Scan(ok), "IC061").empty());
}

TEST_CASE("IC013: a symbol version the loaded library does not define", "[checks]") {
  auto image = [&](const std::string& defined) {
    elf::fixture::ElfSpec user;
    user.soname = "libcublas.so.12";
    user.needed = {"libcublasLt.so.12"};
    user.version_needs = {{"libcublasLt.so.12", {"CUBLASLT_12.4"}}};
    elf::fixture::ElfSpec lt;
    lt.soname = "libcublasLt.so.12";
    lt.version_definitions = {"libcublasLt.so.12", defined};
    return WithLibs({{"libcublas.so.12", elf::fixture::BuildElf(user)},
                     {"libcublasLt.so.12", elf::fixture::BuildElf(lt)}});
  };
  FakeImage bad = image("CUBLASLT_12.1");  // an older cuBLASLt
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") == std::vector<std::string>{kLib + "/libcublasLt.so.12"});
  REQUIRE(found["IC013"].size() == 1);
  CHECK(found["IC013"][0].message.find(kLib + "/libcublas.so.12 needs version `CUBLASLT_12.4'") !=
        std::string::npos);
  FakeImage ok = image("CUBLASLT_12.4");
  CHECK(Paths(Scan(ok), "IC013").empty());
}

TEST_CASE("IC013: a versioned symbol the library defines at another version only", "[checks]") {
  // cuBLAS linked against cuBLASLt 12.4 references cublasLtMatmul@libcublasLt.so.12.4; a
  // cuBLASLt that has that version node (so the version check passes) but defines the symbol
  // only at 12.1 fails it, as glibc's check_match does ("symbol cublasLtMatmul version
  // libcublasLt.so.12.4 not defined in file libcublasLt.so.12 with link time reference"). A
  // hidden (non-default, "@") definition at 12.4 binds: only unversioned references skip those.
  auto image = [&](const std::string& defined) {
    elf::fixture::ElfSpec user;
    user.soname = "libcublas.so.12";
    user.needed = {"libcublasLt.so.12"};
    user.version_needs = {{"libcublasLt.so.12", {"libcublasLt.so.12.4"}}};
    user.imported = {"cublasLtMatmul@libcublasLt.so.12.4"};
    elf::fixture::ElfSpec lt;
    lt.soname = "libcublasLt.so.12";
    lt.version_definitions = {"libcublasLt.so.12", "libcublasLt.so.12.1", "libcublasLt.so.12.4"};
    lt.exported = {defined};
    return WithLibs({{"libcublas.so.12", elf::fixture::BuildElf(user)},
                     {"libcublasLt.so.12", elf::fixture::BuildElf(lt)}});
  };
  FakeImage bad = image("cublasLtMatmul@@libcublasLt.so.12.1");
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") == std::vector<std::string>{kLib + "/libcublasLt.so.12"});
  REQUIRE(found["IC013"].size() == 1);
  CHECK(found["IC013"][0].message.find(
            kLib + "/libcublas.so.12 (unowned in " + kLib +
            ") needs symbol cublasLtMatmul@libcublasLt.so.12.4, which no object in its lookup "
            "scope defines; libcublasLt.so.12 should provide it") != std::string::npos);
  FakeImage ok = image("cublasLtMatmul@@libcublasLt.so.12.4");
  CHECK(Paths(Scan(ok), "IC013").empty());
  FakeImage hidden = image("cublasLtMatmul@libcublasLt.so.12.4");
  CHECK(Paths(Scan(hidden), "IC013").empty());
}

// ---- IC013's binding: every undefined, non-weak symbol of each link map, in glibc's scope

namespace {

// PyTorch 2.4.0's libtorch_cuda.so importing NCCL's unversioned symbols from the wheel its
// RUNPATH reaches; torch pins nvidia-nccl-cu12==2.20.5, the image has `nccl` exporting
// `exports`. `weak`: ncclCommRegister is a weak reference.
FakeImage TorchNccl(const std::string& nccl, const std::vector<std::string>& exports,
                    bool weak = false) {
  FakeImage f = WithLibs({});
  f.File(
      kSite + "torch/version.py",
      "__version__ = '2.4.0+cu121'\ndebug = False\ncuda = '12.1'\ngit_version = '0'\nhip = None\n");
  elf::fixture::ElfSpec torch;
  torch.soname = "libtorch_cuda.so";
  torch.needed = {"libnccl.so.2"};
  torch.runpath = "$ORIGIN/../../nvidia/nccl/lib";
  torch.imported = {"ncclCommInitRank"};
  (weak ? torch.weak_imported : torch.imported).push_back("ncclCommRegister");
  f.File(kSite + "torch/lib/libtorch_cuda.so", elf::fixture::BuildElf(torch));
  Dist(f, "torch", "2.4.0", {"nvidia-nccl-cu12==2.20.5; platform_system == \"Linux\""},
       {"torch/version.py", "torch/lib/libtorch_cuda.so"});
  elf::fixture::ElfSpec lib;
  lib.soname = "libnccl.so.2";
  lib.exported = exports;
  f.File(kSite + "nvidia/nccl/lib/libnccl.so.2", elf::fixture::BuildElf(lib));
  Dist(f, "nvidia-nccl-cu12", nccl, {}, {"nvidia/nccl/lib/libnccl.so.2"});
  return f;
}

const std::string kNccl = kSite + "nvidia/nccl/lib/libnccl.so.2";

}  // namespace

TEST_CASE("IC013: an unversioned symbol the resolved library does not define", "[checks]") {
  FakeImage bad = TorchNccl("2.18.1", {"ncclCommInitRank"});  // NCCL before ncclCommRegister
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") == std::vector<std::string>{kNccl});
  REQUIRE(found["IC013"].size() == 1);
  const Finding& f = found["IC013"][0];
  CHECK(f.severity == Severity::kError);
  CHECK(f.message.find(kSite +
                       "torch/lib/libtorch_cuda.so (torch 2.4.0) needs symbol "
                       "ncclCommRegister, which no object in its lookup scope defines; "
                       "libnccl.so.2 should provide it and resolves to " +
                       kNccl + " (nvidia-nccl-cu12 2.18.1)") != std::string::npos);
  CHECK(f.message.find("torch 2.4.0 pins nvidia-nccl-cu12==2.20.5, the image has 2.18.1") !=
        std::string::npos);
  FakeImage ok = TorchNccl("2.20.5", {"ncclCommInitRank", "ncclCommRegister"});
  CHECK(Paths(Scan(ok), "IC013").empty());
}

namespace {

// What the streaming capturer keeps of `bytes` when it keeps at most `prefix` bytes of the
// file's start whole (elf::CaptureLimits: 4 KiB here stands for the 16 MiB that TensorFlow's
// 50 MiB string table passes).
std::shared_ptr<util::SparseFile> Captured(const std::string& bytes, uint64_t prefix) {
  std::unique_ptr<util::Capturer> c = elf::MakeCapturer(elf::CaptureLimits{prefix});
  for (size_t pos = 0; pos < bytes.size(); pos += 256)
    c->Feed(std::string_view(bytes).substr(pos, 256));
  return std::make_shared<util::SparseFile>(c->Finish(bytes.size()));
}

// TorchNccl with a libnccl.so.2 whose string table (80 long names first) runs past the capture:
// its last names are known by their hashes alone. `odd`: one name holds a control character.
FakeImage TorchNcclLongStrings(bool has_register, bool odd = false) {
  std::vector<std::string> exports;
  exports.reserve(84);
  for (int i = 0; i < 80; ++i)
    exports.push_back("ncclFiller" + std::to_string(i) + "_" + std::string(100, 'x'));
  if (odd) exports.push_back(std::string(5000, 'z') + "\x01z");
  exports.push_back("ncclCommInitRank");
  if (has_register) exports.push_back("ncclCommRegister");
  FakeImage f = TorchNccl(has_register ? "2.20.5" : "2.18.1", exports);
  elf::fixture::ElfSpec lib;
  lib.soname = "libnccl.so.2";
  lib.exported = exports;
  std::string bytes = elf::fixture::BuildElf(lib);
  testing::AddFile(f.image().tree, kNccl, bytes).content = Captured(bytes, 4096);
  return f;
}

}  // namespace

TEST_CASE("IC013: a library whose string table runs past the capture still binds", "[checks]") {
  FakeImage bad = TorchNcclLongStrings(false);
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") == std::vector<std::string>{kNccl});
  REQUIRE(found["IC013"].size() == 1);
  CHECK(found["IC013"][0].severity == Severity::kError);
  CHECK_THAT(found["IC013"][0].message, Catch::Contains("needs symbol ncclCommRegister"));
  FakeImage ok = TorchNcclLongStrings(true);
  // The names past the capture were hashed, not kept: binding read the hashes.
  catalog::Catalog cat =
      catalog::Build(ok.image(), Knowledge::Load({IMGCHECK_RULES_DIR}).libraries());
  REQUIRE(cat.Elf(kNccl));
  CHECK(cat.Elf(kNccl)->has_export_keys);
  CHECK(cat.Elf(kNccl)->exported.size() < 82);
  CHECK(Paths(Scan(ok), "IC013").empty());
}

TEST_CASE("IC013: a library of no family, its strings moved by patchelf, binds like any other",
          "[checks]") {
  // torch 2.10's libcusparseLt.so.0 (no family of libraries.json): patchelf moved its .dynstr,
  // with the dynamic section, into a PT_LOAD at the end of the file, too large to keep; the
  // layer reader's capture hashes those strings as they stream.
  elf::fixture::ElfSpec lt;
  lt.soname = "libcusparseLt.so.0";
  lt.exported = {"cusparseLtInit"};
  for (int i = 0; i < 700; ++i)
    lt.exported.push_back("cusparseLt_" + std::to_string(i) + "_" + std::string(8000, 'x'));
  lt.tables_at = 1u << 20;
  lt.section_headers = true;
  const std::string bytes = elf::fixture::BuildElf(lt);
  auto image = [&](const std::string& import) {
    elf::fixture::ElfSpec app;
    app.soname = "libapp.so";
    app.needed = {"libcusparseLt.so.0", "libcudart.so.12"};
    app.imported = {import};
    FakeImage f = WithLibs(
        {{"libapp.so", elf::fixture::BuildElf(app)}, {"libcudart.so.12", So("libcudart.so.12")}});
    // The file as a layer's reading keeps it (a 4 KiB prefix, so the small file is not kept
    // whole), not its whole bytes.
    auto capturer = elf::MakeCapturer(elf::CaptureLimits{4096});
    for (size_t pos = 0; pos < bytes.size(); pos += 65536)
      if (!capturer->Feed(std::string_view(bytes).substr(pos, 65536))) break;
    image::Node& n = testing::AddFile(f.image().tree, kLib + "/libcusparseLt.so.0");
    n.size = bytes.size();
    n.content = std::make_shared<util::SparseFile>(capturer->Finish(bytes.size()));
    return f;
  };
  FakeImage ok = image("cusparseLtInit");
  auto found = Scan(ok);
  for (const Finding& f : found["IC013"]) UNSCOPED_INFO(f.message);
  CHECK(found["IC013"].empty());  // no error, and no "could not be read whole"
  FakeImage bad = image("cusparseLtMatmulPlanInit");
  found = Scan(bad);
  REQUIRE(found["IC013"].size() == 1);
  const Finding& missing = found["IC013"][0];
  INFO(missing.message);
  CHECK(missing.severity == Severity::kError);
  CHECK(missing.message.find("needs symbol cusparseLtMatmulPlanInit") != std::string::npos);
  CHECK(missing.message.find("libcusparseLt.so.0 should provide it and resolves to " + kLib +
                             "/libcusparseLt.so.0") != std::string::npos);
}

TEST_CASE("IC013: symbols that could not be read whole are said to be unbound (info)", "[checks]") {
  FakeImage odd = TorchNcclLongStrings(false, true);
  auto found = Scan(odd);
  REQUIRE(found["IC013"].size() == 1);
  const Finding& f = found["IC013"][0];
  CHECK(f.severity == Severity::kInfo);
  CHECK(f.paths == std::vector<std::string>{kNccl});
  CHECK_THAT(f.message, Catch::Contains("its dynamic symbols could not be read whole") &&
                            Catch::Contains("were not bound"));
}

TEST_CASE("IC013: a weak undefined symbol binds to nothing without error", "[checks]") {
  FakeImage weak = TorchNccl("2.18.1", {"ncclCommInitRank"}, true);
  CHECK(Paths(Scan(weak), "IC013").empty());
}

TEST_CASE("IC013: a framework library's C++ symbol, demangled", "[checks]") {
  // flash-attn's extension built against another torch: c10::cuda::getCurrentCUDAStream took
  // a signed char device index where the installed libc10_cuda.so takes an int.
  auto image = [&](const std::string& defined) {
    FakeImage f = WithLibs({{"libcudart.so.12", So("libcudart.so.12")}});
    elf::fixture::ElfSpec ext;
    ext.needed = {"libc10_cuda.so", "libcudart.so.12"};
    ext.rpath = "$ORIGIN/torch/lib";
    ext.imported = {"_ZN3c104cuda20getCurrentCUDAStreamEa"};
    f.File(kSite + "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
           elf::fixture::BuildElf(ext));
    Dist(f, "flash-attn", "2.5.8", {}, {"flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"});
    elf::fixture::ElfSpec c10;
    c10.soname = "libc10_cuda.so";
    c10.exported = {defined};
    f.File(kSite + "torch/lib/libc10_cuda.so", elf::fixture::BuildElf(c10));
    return f;
  };
  FakeImage bad = image("_ZN3c104cuda20getCurrentCUDAStreamEi");
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") == std::vector<std::string>{kSite + "torch/lib/libc10_cuda.so"});
  REQUIRE(found["IC013"].size() == 1);
  CHECK(found["IC013"][0].message.find(
            "(flash-attn 2.5.8) needs symbol c10::cuda::getCurrentCUDAStream(signed char), ") !=
        std::string::npos);
  FakeImage ok = image("_ZN3c104cuda20getCurrentCUDAStreamEa");
  CHECK(Paths(Scan(ok), "IC013").empty());
}

TEST_CASE("IC013: the Python interpreter's symbols bind in the image's own python3", "[checks]") {
  // `python`: the exports of /usr/bin/python3.10, or no interpreter in the image.
  auto image = [&](std::optional<std::string> python) {
    FakeImage f = WithLibs({{"libcudart.so.12", So("libcudart.so.12")}});
    elf::fixture::ElfSpec ext;
    ext.needed = {"libcudart.so.12"};
    ext.imported = {"PyModule_Create2"};
    const std::string module = "cupy/cuda/memory.cpython-310-x86_64-linux-gnu.so";
    f.File(kSite + module, elf::fixture::BuildElf(ext));
    Dist(f, "cupy-cuda12x", "13.3.0", {}, {module});
    if (python) {
      elf::fixture::ElfSpec exe;
      exe.type = 2;  // ET_EXEC
      exe.interpreter = "/lib64/ld-linux-x86-64.so.2";
      exe.exported = {"Py_Initialize", *python};
      f.File("/usr/bin/python3.10", elf::fixture::BuildElf(exe));
    }
    return f;
  };
  FakeImage none = image(std::nullopt);  // the interpreter that imports it provides them
  CHECK(Paths(Scan(none), "IC013").empty());
  FakeImage ok = image("PyModule_Create2");
  CHECK(Paths(Scan(ok), "IC013").empty());
  FakeImage bad = image("PyModule_FromDefAndSpec2");  // a Python without PyModule_Create2
  auto found = Scan(bad);
  CHECK(Paths(found, "IC013") ==
        std::vector<std::string>{kSite + "cupy/cuda/memory.cpython-310-x86_64-linux-gnu.so"});
}

// ---- auditwheel-vendored CUDA libraries

namespace {

// ctranslate2 4.5.0 as its wheel lays it out: _ext -> ctranslate2.libs/libctranslate2-<hash>
// -> ctranslate2.libs/libcudnn-<hash>.so.9.1.0 (SONAME renamed too, RPATH "ctranslate2.libs"),
// over PyTorch's cuDNN 9.1 wheel, which only torch's RUNPATH reaches.
FakeImage Ctranslate2() {
  FakeImage f = WithLibs({});
  const std::string libs = "ctranslate2.libs/";
  elf::fixture::ElfSpec ext;
  ext.needed = {"libctranslate2-bc15bf3f.so.4.5.0"};
  ext.rpath = "$ORIGIN/../ctranslate2.libs";
  f.File(kSite + "ctranslate2/_ext.cpython-310-x86_64-linux-gnu.so", elf::fixture::BuildElf(ext));
  elf::fixture::ElfSpec ct2;
  ct2.soname = "libctranslate2-bc15bf3f.so.4.5.0";
  ct2.needed = {"libcudnn-74a4c495.so.9.1.0"};
  f.File(kSite + libs + "libctranslate2-bc15bf3f.so.4.5.0", elf::fixture::BuildElf(ct2));
  elf::fixture::ElfSpec cudnn;
  cudnn.soname = "libcudnn-74a4c495.so.9.1.0";
  cudnn.rpath = "ctranslate2.libs";
  f.File(kSite + libs + "libcudnn-74a4c495.so.9.1.0", elf::fixture::BuildElf(cudnn));
  Dist(f, "ctranslate2", "4.5.0", {},
       {"ctranslate2/_ext.cpython-310-x86_64-linux-gnu.so",
        libs + "libctranslate2-bc15bf3f.so.4.5.0", libs + "libcudnn-74a4c495.so.9.1.0"});
  std::vector<std::string> files;
  for (const char* base : {"libcudnn", "libcudnn_graph", "libcudnn_engines_precompiled",
                           "libcudnn_engines_runtime_compiled", "libcudnn_heuristic",
                           "libcudnn_ops", "libcudnn_cnn", "libcudnn_adv"}) {
    std::string name = std::string(base) + ".so.9";
    f.File(kSite + "nvidia/cudnn/lib/" + name, So(name));
    files.push_back("nvidia/cudnn/lib/" + name);
  }
  Dist(f, "nvidia-cudnn-cu12", "9.1.0.70", {}, files);
  return f;
}

const std::string kVendored = kSite + "ctranslate2.libs/libcudnn-74a4c495.so.9.1.0";

}  // namespace

TEST_CASE("catalog: an auditwheel-vendored cuDNN is cuDNN, owned by the vendoring package",
          "[checks]") {
  FakeImage f = Ctranslate2();
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  catalog::Catalog cat = catalog::Build(f.image(), k.libraries());
  const catalog::Component* vendored = nullptr;
  for (const catalog::Component& c : cat.components)
    if (c.path == kVendored) vendored = &c;
  REQUIRE(vendored);
  CHECK(vendored->family == "cudnn");
  CHECK(vendored->name == "libcudnn");
  CHECK(vendored->version == "9.1.0");
  REQUIRE(vendored->owner);
  CHECK(vendored->owner->name == "ctranslate2");
  // A hashed name of no family stays unclassified.
  CHECK(catalog::LibraryBaseName("libctranslate2-bc15bf3f.so.4.5.0") == "libctranslate2");
  CHECK(catalog::UnvendoredName("libcudnn-74a4c495.so.9.1.0") == "libcudnn.so.9.1.0");
  CHECK(catalog::UnvendoredName("libcudnn-7.so.9") == "libcudnn-7.so.9");
}

TEST_CASE("IC050: a cuDNN a distribution vendors for itself is no second installation",
          "[checks]") {
  FakeImage own = Ctranslate2();  // ctranslate2's cuDNN 9.1.0 beside the wheel's 9.1.0.70
  auto found = Scan(own);
  CHECK(Paths(found, "IC050").empty());
  CHECK(Paths(found, "IC011").empty());
  // Something outside ctranslate2 loads that copy: it is another installation again.
  FakeImage shared = Ctranslate2();
  elf::fixture::ElfSpec app;
  app.needed = {"libcudnn-74a4c495.so.9.1.0"};
  app.runpath = kSite + "ctranslate2.libs";
  shared.File("/app/libapp.so", elf::fixture::BuildElf(app));
  found = Scan(shared);
  CHECK(found["IC050"].size() == 1);
}

TEST_CASE("IC012: a vendored cuDNN's sub-libraries, searched from its own path", "[checks]") {
  FakeImage bad = Ctranslate2();  // torch's RUNPATH reaches nvidia/cudnn/lib, ctranslate2's not
  auto found = Scan(bad);
  const Finding* graph = nullptr;
  for (const Finding& f : found["IC012"]) {
    UNSCOPED_INFO(f.message);
    // One finding per requester and search path (it lists every name that path misses).
    if (f.message.find("libcudnn_graph.so.9") != std::string::npos &&
        f.message.find(kVendored) != std::string::npos &&
        f.message.find("ctranslate2 4.5.0") != std::string::npos)
      graph = &f;
  }
  REQUIRE(graph);
  INFO(graph->message);
  CHECK(graph->severity == Severity::kError);
  // faster-whisper's documented fix: LD_LIBRARY_PATH to the cuDNN wheel's directory.
  FakeImage ok = Ctranslate2();
  SetEnv(ok, "LD_LIBRARY_PATH", kSite + "nvidia/cudnn/lib");
  auto clean = Scan(ok);
  for (const Finding& f : clean["IC012"])
    CHECK(std::find(f.paths.begin(), f.paths.end(), kVendored) == f.paths.end());
}

// ---- optional modules (dlopen.json optional)

TEST_CASE("IC012: what cuda-bindings loads on its first call through cuda-pathfinder", "[checks]") {
  // cuda/bindings/_internal/nvrtc*.so NEEDS nothing: its first call loads libnvrtc.so.13 from
  // nvidia/cu13/lib, else by bare name. `where`: the directory holding it ("" for none).
  const std::string module = "cuda/bindings/_internal/nvrtc.cpython-310-x86_64-linux-gnu.so";
  auto image = [&](const std::string& where) {
    FakeImage f = WithLibs({});
    f.File(kSite + module, So(""));
    Dist(f, "cuda-bindings", "13.4.4", {}, {module});
    if (!where.empty()) f.File(where + "/libnvrtc.so.13", So("libnvrtc.so.13"));
    return f;
  };
  FakeImage none = image("");  // pip install cuda-python, without [all]
  auto found = Scan(none);
  REQUIRE(found["IC012"].size() == 1);
  const Finding& f = found["IC012"][0];
  CHECK(f.severity == Severity::kInfo);
  CHECK(f.paths[0] == kSite + module);
  CHECK(f.message.find("libnvrtc.so.13 (dlopen of") != std::string::npos);
  CHECK(
      f.message.find("(optional: cuda-bindings loads it when an NVRTC function is first called") !=
      std::string::npos);
  // The wheel's directory, and the system search (LD_LIBRARY_PATH): both load.
  for (const std::string& where : {kSite + "nvidia/cu13/lib", kLib}) {
    FakeImage ok = image(where);
    INFO(where);
    CHECK(Paths(Scan(ok), "IC012").empty());
  }
  // A library of no CUDA family (libnvvm.so.4) is checked too: the row is the evidence.
  FakeImage nvvm = image(kLib);
  const std::string nvvm_module = "cuda/bindings/_internal/nvvm.cpython-310-x86_64-linux-gnu.so";
  nvvm.File(kSite + nvvm_module, So(""));
  Dist(nvvm, "cuda-bindings", "13.4.4", {}, {module, nvvm_module});
  auto nvvm_found = Scan(nvvm);
  REQUIRE(nvvm_found["IC012"].size() == 1);
  CHECK(nvvm_found["IC012"][0].paths[0] == kSite + nvvm_module);
  CHECK(nvvm_found["IC012"][0].severity == Severity::kInfo);
  CHECK(nvvm_found["IC012"][0].message.find("libnvvm.so.4 (dlopen of") != std::string::npos);
}

TEST_CASE("IC012: numba-cuda without the runtime, NVRTC and NVVM that pathfinder finds",
          "[checks]") {
  // `import numba.cuda` loads libcudart (cuda-bindings 13's runtime module), its first compile
  // libnvrtc and libnvvm, all through cuda-pathfinder: NVIDIA's wheels, the system search,
  // $CUDA_HOME, or for NVVM the toolkit root of the libcudart the system search finds. Without
  // them: one error, the extra's fix.
  const std::string module =
      "numba_cuda/numba/cuda/cext/_dispatcher.cpython-310-x86_64-linux-gnu.so";
  auto image = [&](const std::vector<std::string>& libs, const std::string& bindings = "13.5.0") {
    FakeImage f = WithLibs({});
    f.File(kSite + module, So(""));
    Dist(f, "numba-cuda", "0.30.4", {"cuda-bindings"}, {module});
    Dist(f, "cuda-bindings", bindings, {}, {});
    for (const std::string& lib : libs) f.File(lib, So(std::string(util::BaseName(lib))));
    return f;
  };
  FakeImage plain = image({});  // pip install numba-cuda
  auto found = Scan(plain);
  REQUIRE(found["IC012"].size() == 1);
  const Finding& f = found["IC012"][0];
  INFO(f.message);
  CHECK(f.severity == Severity::kError);
  CHECK(f.paths[0] == kSite + module);
  CHECK(f.message.find("libcudart.so.12, libnvrtc.so.12 and libnvvm.so (dlopen of") !=
        std::string::npos);
  CHECK(f.message.find(": numba-cuda needs the CUDA runtime, NVRTC and NVVM") != std::string::npos);
  CHECK(f.remediation.find("pip install 'numba-cuda[cu12]'") != std::string::npos);
  // What loads: NVIDIA's cu12 wheels (nvvm's file there is libnvvm.so), the cu13 ones, a
  // toolkit on the loader path with NVVM under its root (the canary), or under $CUDA_HOME.
  const std::vector<std::vector<std::string>> working = {
      {kSite + "nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so",
       kSite + "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
       kSite + "nvidia/cuda_runtime/lib/libcudart.so.12"},
      {kSite + "nvidia/cu13/lib/libnvvm.so.4", kSite + "nvidia/cu13/lib/libnvrtc.so.13",
       kSite + "nvidia/cu13/lib/libcudart.so.13"},
      {kLib + "/libnvrtc.so.12", kLib + "/libcudart.so.12", "/opt/cuda/nvvm/lib64/libnvvm.so.4"}};
  for (const auto& libs : working) {
    FakeImage ok = image(libs);
    INFO(libs[0]);
    CHECK(Paths(Scan(ok), "IC012").empty());
  }
  FakeImage home = image({kLib + "/libnvrtc.so.12", kLib + "/libcudart.so.12",
                          "/usr/local/cuda-12/nvvm/lib64/libnvvm.so.4"});
  SetEnv(home, "CUDA_HOME", "/usr/local/cuda-12");
  CHECK(Paths(Scan(home), "IC012").empty());
  // Without the canary or CUDA_HOME, a toolkit's NVVM off the loader path is not found.
  FakeImage lost = image({kLib + "/libnvrtc.so.12", "/usr/local/cuda-12/nvvm/lib64/libnvvm.so.4"},
                         "12.9.10");  // cuda-bindings 12: its runtime is static, no libcudart
  auto lost_found = Scan(lost);
  REQUIRE(lost_found["IC012"].size() == 1);
  CHECK(lost_found["IC012"][0].message.find("libnvvm.so (dlopen of") != std::string::npos);
  // Debian's CUDA 11.8 packages: NVVM is found; runtime 11.0 and NVRTC 11.2 are not among
  // pathfinder's names (with cuda-bindings 13, `import numba.cuda` fails on the runtime).
  FakeImage apt =
      image({kLib + "/libnvvm.so.4", kLib + "/libnvrtc.so.11.2", kLib + "/libcudart.so.11.0"});
  auto apt_found = Scan(apt);
  REQUIRE(apt_found["IC012"].size() == 1);
  CHECK(apt_found["IC012"][0].severity == Severity::kError);
  CHECK(apt_found["IC012"][0].message.find("libcudart.so.12 and libnvrtc.so.12 (dlopen of") !=
        std::string::npos);
}

TEST_CASE("IC012: the JAX CUDA plugin without the CUDA libraries its version checks load",
          "[checks]") {
  // jax_cuda12_plugin/_versions.so NEEDS no CUDA library; initialize() makes it dlopen each one
  // and raises at the first that fails (JAX then runs on the CPU). jax[cuda12] brings them.
  const std::string module = "jax_cuda12_plugin/_versions.so";
  const std::vector<std::pair<std::string, std::string>> wheels = {
      {"cuda_runtime", "libcudart.so.12"}, {"cudnn", "libcudnn.so.9"},
      {"cufft", "libcufft.so.11"},         {"cuda_cupti", "libcupti.so.12"},
      {"cublas", "libcublas.so.12"},       {"cusparse", "libcusparse.so.12"}};
  auto image = [&](bool nvidia) {
    FakeImage f = WithLibs({});
    f.File(kSite + module, So(""));
    Dist(f, "jax-cuda12-plugin", "0.10.2", {}, {module});
    if (nvidia)
      for (const auto& [dir, lib] : wheels)
        f.File(kSite + "nvidia/" + dir + "/lib/" + lib, So(lib));
    return f;
  };
  FakeImage bare = image(false);  // pip install jax jax-cuda12-plugin, or jax[cuda12-local]
  auto found = Scan(bare);
  REQUIRE(found["IC012"].size() == 1);
  const Finding& f = found["IC012"][0];
  INFO(f.message);
  CHECK(f.severity == Severity::kError);
  for (const auto& [dir, lib] : wheels) CHECK(f.message.find(lib) != std::string::npos);
  CHECK(f.message.find("JAX cannot use the GPU") != std::string::npos);
  CHECK(f.remediation.find("pip install 'jax[cuda12]'") != std::string::npos);
  FakeImage ok = image(true);
  // (cuDNN's own sub-libraries, which this fake lacks, are another finding's.)
  for (const std::string& p : Paths(Scan(ok), "IC012")) CHECK(p != kSite + module);
  // The cuda13 plugin's: CUDA 13's runtime, cuBLAS and cuPTI, cuFFT 12, cuSPARSE 12, cuDNN 9.
  FakeImage bare13 = WithLibs({});
  bare13.File(kSite + "jax_cuda13_plugin/_versions.so", So(""));
  Dist(bare13, "jax-cuda13-plugin", "0.10.2", {}, {"jax_cuda13_plugin/_versions.so"});
  auto found13 = Scan(bare13);
  REQUIRE(found13["IC012"].size() == 1);
  CHECK(found13["IC012"][0].severity == Severity::kError);
  CHECK(found13["IC012"][0].message.find("libcudart.so.13") != std::string::npos);
  CHECK(found13["IC012"][0].remediation.find("pip install 'jax[cuda13]'") != std::string::npos);
}

TEST_CASE("IC012: nccl-extensions' library binds the NCCL that nccl4py loaded", "[checks]") {
  // libnccl_ep.so NEEDS libnccl.so.2 with no RUNPATH; nccl4py (which nccl-extensions requires)
  // loads nvidia/nccl/lib/libnccl.so.2 through cuda-pathfinder first. `nccl`: whether the
  // nvidia-nccl wheel's library is there.
  const std::string lib = "nccl/ep/lib/cu13/libnccl_ep.so";
  auto image = [&](bool nccl) {
    FakeImage f = WithLibs({});
    f.File(kSite + lib, So("libnccl_ep.so.0", {"libnccl.so.2"}));
    Dist(f, "nccl-extensions", "0.1.0", {"nccl4py"}, {lib});
    Dist(f, "nccl4py", "0.6.0", {}, {});
    Dist(f, "cuda-bindings", "13.4.4", {}, {});
    if (nccl) f.File(kSite + "nvidia/nccl/lib/libnccl.so.2", So("libnccl.so.2"));
    return f;
  };
  FakeImage ok = image(true);
  CHECK(Paths(Scan(ok), "IC012").empty());
  FakeImage bad = image(false);
  auto found = Scan(bad);
  REQUIRE(found["IC012"].size() == 1);
  CHECK(found["IC012"][0].paths[0] == kSite + lib);
  CHECK(found["IC012"][0].severity == Severity::kError);
}

TEST_CASE(
    "IC013: of a package's per-torch files, only the one the installed torch selects is bound",
    "[checks]") {
  // torch-c-dlpack-ext ships libtorch_c_dlpack_addon_torch<major><minor>-<cuda|cpu>.so for torch
  // 2.4 to 2.9 and loads the installed torch's file only; each needs c10 symbols of its own
  // release. `torch`: the installed release.
  auto image = [&](const std::string& torch) {
    FakeImage f = WithLibs({});
    std::vector<std::string> files;
    elf::fixture::ElfSpec c10;
    c10.soname = "libc10.so";
    c10.exported = {"_ZN3c106detail16torch_2_6_symbolEv"};
    f.File(kSite + "torch/lib/libc10.so", elf::fixture::BuildElf(c10));
    files.push_back("torch/lib/libc10.so");
    Dist(f, "torch", torch, {}, files);
    std::vector<std::string> own;
    for (const std::string minor : {"4", "5", "6"}) {
      elf::fixture::ElfSpec addon;
      addon.needed = {"libc10.so"};
      addon.runpath = "$ORIGIN/../torch/lib";
      addon.imported = {"_ZN3c106detail16torch_2_" + minor + "_symbolEv"};
      std::string rel = "torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch2" + minor + "-cuda.so";
      f.File(kSite + rel, elf::fixture::BuildElf(addon));
      own.push_back(rel);
    }
    Dist(f, "torch-c-dlpack-ext", "0.1.5", {"torch"}, own);
    return f;
  };
  // torch 2.6: the 2.6 file binds; the 2.4 and 2.5 ones are never loaded.
  FakeImage six = image("2.6.0");
  CHECK(Paths(Scan(six), "IC013").empty());
  // torch 2.14 (vllm 0.33's): no file is loaded, none is an error.
  FakeImage fourteen = image("2.14.0");
  auto found = Scan(fourteen);
  for (const Finding& f : found["IC013"]) CHECK(f.severity != Severity::kError);
}

TEST_CASE(
    "IC012: of a package's per-CUDA variants, the one the installed release selects is checked",
    "[checks]") {
  // nccl-extensions loads nccl/ep/lib/cu<N>/libnccl_ep.so, N the major of cuda.bindings; the
  // other variant is never loaded. `bindings`: the cuda-bindings release ("" for none).
  const std::string lib = "nccl/ep/lib/cu12/libnccl_ep.so";
  auto image = [&](const std::string& bindings) {
    FakeImage f = WithLibs({});
    f.File(kSite + lib, So("libnccl_ep.so.0", {"libnccl.so.2"}));
    Dist(f, "nccl-extensions", "0.1.0", {"cuda-core"}, {lib});
    if (!bindings.empty()) Dist(f, "cuda-bindings", bindings, {}, {});
    return f;
  };
  FakeImage other = image("13.0.3");
  auto found = Scan(other);
  REQUIRE(found["IC012"].size() == 1);
  CHECK(found["IC012"][0].severity == Severity::kInfo);
  CHECK(
      found["IC012"][0].message.find(
          "(optional: nccl-extensions loads it when cuda.bindings is of that file's CUDA major") !=
      std::string::npos);
  CHECK(found["IC012"][0].message.find(
            "(the installed cuda-bindings 13.0.3 selects nccl/*/lib/cu13/*)") != std::string::npos);
  FakeImage none = image("");  // nothing can select: cuda_major() raises, nothing loads
  auto none_found = Scan(none);
  REQUIRE(none_found["IC012"].size() == 1);
  CHECK(none_found["IC012"][0].severity == Severity::kInfo);
  CHECK(none_found["IC012"][0].message.find("no cuda-bindings is installed") != std::string::npos);
  FakeImage selected = image("12.9.0");
  auto selected_found = Scan(selected);
  REQUIRE(selected_found["IC012"].size() == 1);
  CHECK(selected_found["IC012"][0].severity != Severity::kInfo);
  CHECK(selected_found["IC012"][0].message.find("optional") == std::string::npos);
}

// A CuPy wheel `dist` `version` holding only `module`, which NEEDS `needed`.
FakeImage CupyModule(const std::string& dist, const std::string& version, const std::string& module,
                     const std::string& needed) {
  FakeImage f = WithLibs({});
  elf::fixture::ElfSpec ext;
  ext.needed = {needed};
  f.File(kSite + module, elf::fixture::BuildElf(ext));
  Dist(f, dist, version, {}, {module});
  return f;
}

TEST_CASE("IC012: CuPy's NCCL module without NCCL is info, its cuFFT module an error", "[checks]") {
  auto image = [](const std::string& module, const std::string& needed) {
    return CupyModule("cupy-cuda13x", "14.2.0", module, needed);
  };
  FakeImage optional =
      image("cupy_backends/cuda/libs/nccl.cpython-310-x86_64-linux-gnu.so", "libnccl.so.2");
  auto found = Scan(optional);
  REQUIRE(found["IC012"].size() == 1);
  CHECK(found["IC012"][0].severity == Severity::kInfo);
  CHECK(found["IC012"][0].message.find("(optional: cupy-cuda13x loads it when NCCL is used") !=
        std::string::npos);
  CHECK(found["IC012"][0].message.find("install the NCCL wheel of its CUDA major") !=
        std::string::npos);
  FakeImage needed = image("cupy/cuda/cufft.cpython-310-x86_64-linux-gnu.so", "libcufft.so.12");
  auto errors = Scan(needed);
  REQUIRE(errors["IC012"].size() == 1);
  CHECK(errors["IC012"][0].severity == Severity::kError);
}

TEST_CASE("IC012: CuPy 13's cuDNN module without cuDNN is info, its cuBLAS module an error",
          "[checks]") {
  auto image = [](const std::string& module, const std::string& needed) {
    return CupyModule("cupy-cuda11x", "13.6.0", module, needed);
  };
  FakeImage optional =
      image("cupy_backends/cuda/libs/cudnn.cpython-311-x86_64-linux-gnu.so", "libcudnn.so.8");
  auto found = Scan(optional);
  REQUIRE(found["IC012"].size() == 1);
  CHECK(found["IC012"][0].severity == Severity::kInfo);
  CHECK(found["IC012"][0].message.find("(optional: cupy-cuda11x loads it when cuDNN is used") !=
        std::string::npos);
  FakeImage needed =
      image("cupy_backends/cuda/libs/cublas.cpython-311-x86_64-linux-gnu.so", "libcublas.so.11");
  auto errors = Scan(needed);
  REQUIRE(errors["IC012"].size() == 1);
  CHECK(errors["IC012"][0].severity == Severity::kError);
  CHECK(errors["IC012"][0].message.find("optional") == std::string::npos);
}

namespace {

TEST_CASE("IC080: a release newer than the data knows names the row its checks fell back to",
          "[checks]") {
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  FakeImage known = Torch();
  CHECK(Paths(Scan(known), "IC080").empty());

  // One minor past the newest torch row, and a CUDA runtime one minor past the newest toolkit.
  Version newest = k.NewestKnown("torch")->version;
  Version torch = *Version::Parse(std::to_string(newest.major()) + "." +
                                  std::to_string(newest.at(1) + 1) + ".0");
  Version cuda = k.NewestKnown("cuda")->version;
  std::string cudart = std::to_string(cuda.major()) + "." + std::to_string(cuda.at(1) + 1) + ".0";
  FakeImage newer = Torch({.version = torch.str(), .cudart = cudart});
  auto found = Scan(newer);
  CHECK(Paths(found, "IC080") ==
        std::vector<std::string>{kSite + "nvidia/cuda_runtime/lib/libcudart.so.12",
                                 kSite + "torch/version.py"});
  for (const Finding& f : found["IC080"]) {
    CHECK(f.severity == Severity::kInfo);
    CHECK_THAT(f.message,
               Catch::Contains("imgcheck rules update") && Catch::Contains(k.version().str()));
  }
  CHECK_THAT(found["IC080"][0].message,
             Catch::Contains("the CUDA runtime " + cudart) &&
                 Catch::Contains("cuda_minor_compat row CUDA " + std::to_string(cuda.major())));
  CHECK_THAT(found["IC080"][1].message, Catch::Contains("torch " + torch.str()) &&
                                            Catch::Contains("own build file and pip pins") &&
                                            Catch::Contains(k.NewestKnown("torch")->version.str()));
}

}  // namespace

// ---- TensorFlow's dso_loader: the CUDA libraries it dlopens by name (dlopen.json)

namespace {

// TensorFlow 2.18's libtensorflow_framework.so.2 as tensorflow[and-cuda] lays it out: a RUNPATH
// into the nvidia wheels, build facts naming CUDA `cuda`; every wheel library but those matching
// the glob `missing`.
// `version` is the release its metadata says; the Python extension that NEEDS the framework
// (no RUNPATH into the wheels, as in 2.20) is there too.
FakeImage TfAndCuda(const std::string& cuda, const std::string& missing,
                    const std::string& version = "2.18.0") {
  FakeImage f = WithLibs({});
  f.File(kSite + "tensorflow/python/platform/build_info.py",
         "import collections\nbuild_info = collections.OrderedDict([('cuda_version', '" + cuda +
             "'), ('cudnn_version', '9'), ('is_cuda_build', True)])\n");
  const std::vector<std::pair<std::string, std::string>> wheels = {
      {"cuda_runtime", "libcudart.so.12"}, {"cublas", "libcublas.so.12"},
      {"cublas", "libcublasLt.so.12"},     {"cufft", "libcufft.so.11"},
      {"cusolver", "libcusolver.so.11"},   {"cusparse", "libcusparse.so.12"},
      {"cudnn", "libcudnn.so.9"}};
  elf::fixture::ElfSpec fw;
  fw.soname = "libtensorflow_framework.so.2";
  for (const auto& [dir, name] : wheels) {
    fw.runpath +=
        (fw.runpath.empty() ? "" : ":") + std::string("$ORIGIN/../nvidia/") + dir + "/lib";
    if (!util::GlobMatch(missing, name)) f.File(kSite + "nvidia/" + dir + "/lib/" + name, So(name));
  }
  f.File(kSite + "tensorflow/libtensorflow_framework.so.2", elf::fixture::BuildElf(fw));
  elf::fixture::ElfSpec pywrap;
  pywrap.needed = {"libtensorflow_framework.so.2"};
  pywrap.runpath = "$ORIGIN/..";
  f.File(kSite + "tensorflow/python/_pywrap_tensorflow_internal.so",
         elf::fixture::BuildElf(pywrap));
  Dist(f, "tensorflow", version, {},
       {"tensorflow/python/platform/build_info.py", "tensorflow/libtensorflow_framework.so.2",
        "tensorflow/python/_pywrap_tensorflow_internal.so"});
  return f;
}

// The IC012 findings whose message names `library`.
size_t Ic012Naming(FakeImage& f, const std::string& library) {
  auto found = Scan(f);
  return static_cast<size_t>(std::count_if(
      found["IC012"].begin(), found["IC012"].end(),
      [&](const Finding& x) { return x.message.find(library) != std::string::npos; }));
}

}  // namespace

TEST_CASE("IC012: TensorFlow's dso_loader opens cuFFT by name (CUDA 12 builds)", "[checks]") {
  FakeImage missing = TfAndCuda("12.5.1", "libcufft.so.11");
  CHECK(Ic012Naming(missing, "libcufft.so.11") == 1);
  FakeImage whole = TfAndCuda("12.5.1", "");
  CHECK(Ic012Naming(whole, "libcufft.so.11") == 0);
  CHECK(Ic012Naming(whole, "libcusolver.so.11") == 0);
  // A CUDA 11 build opens other names (libcufft.so.10): the CUDA 12 rows stay silent.
  FakeImage cuda11 = TfAndCuda("11.8", "libcufft.so.11");
  CHECK(Ic012Naming(cuda11, "libcufft.so.11") == 0);
}

TEST_CASE("IC012: TensorFlow 1.x's extension opens cuDNN and 2.x's framework does", "[checks]") {
  // 2.x's dso_loader is libtensorflow_framework.so.2's (dlopen searches its RUNPATH): the
  // extension's own RUNPATH, without the cudnn wheel, draws nothing. TF 2.20 drew an error here.
  FakeImage two = TfAndCuda("12.5.1", "");
  CHECK(Ic012Naming(two, "_pywrap_tensorflow_internal.so") == 0);
  // 1.x kept the dso_loader in the extension: libcudnn.so.9 from there cannot be resolved.
  FakeImage one = TfAndCuda("12.5.1", "", "1.15.5");
  CHECK(Ic012Naming(one, "_pywrap_tensorflow_internal.so") == 1);
}

TEST_CASE("IC012: a CPU install of TensorFlow is info and a GPU one missing libraries an error",
          "[checks]") {
  // pip install tensorflow without [and-cuda]: none of the GPU libraries its dso_loader opens;
  // TensorFlow logs "Cannot dlopen some GPU libraries" and runs on the CPU (tf221-nocuda).
  FakeImage cpu = TfAndCuda("12.5.1", "lib*");
  auto found = Scan(cpu);
  REQUIRE(found["IC012"].size() == 1);
  const Finding& info = found["IC012"][0];
  CHECK(info.severity == Severity::kInfo);
  CHECK_THAT(info.message, Catch::Contains("libcudart.so.12") && Catch::Contains("libcudnn.so.9") &&
                               Catch::Contains("a CPU install") &&
                               Catch::Contains("runs on the CPU"));
  // cuDNN and the runtime there: the image was meant for the GPU, which would be skipped as
  // silently; the five libraries it lacks are an error (the fixture's cuDNN lacks its
  // sub-libraries too: another finding).
  FakeImage gpu = TfAndCuda("12.5.1", "libcu[!d]*");
  found = Scan(gpu);
  auto framework = std::find_if(found["IC012"].begin(), found["IC012"].end(), [](const Finding& x) {
    return x.message.find("libtensorflow_framework.so.2") != std::string::npos;
  });
  REQUIRE(framework != found["IC012"].end());
  CHECK(framework->severity == Severity::kError);
  CHECK_THAT(framework->message, Catch::Contains("libcusolver.so.11") &&
                                     !Catch::Contains("libcudart.so.12") &&
                                     !Catch::Contains("a CPU install"));
}

TEST_CASE("IC012: onnxruntime-gpu with no CUDA library is a CPU install and with some an error",
          "[checks]") {
  // onnxruntime-gpu 1.31.1 (readelf of the wheel): its CUDA and TensorRT providers (no RUNPATH)
  // NEED CUDA 13's libraries and load when their execution provider is asked for; without them
  // the session runs on the CPU. The [cuda] extra puts cuRAND in nvidia/cu13/lib but installs
  // no cuBLAS.
  auto image = [](bool cuda_extra) {
    FakeImage f;
    const std::string capi = "onnxruntime/capi/";
    f.File(kSite + capi + "libonnxruntime_providers_cuda.so",
           So("libonnxruntime_providers_cuda.so",
              {"libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudart.so.13"}));
    f.File(kSite + capi + "libonnxruntime_providers_tensorrt.so",
           So("libonnxruntime_providers_tensorrt.so",
              {"libcublas.so.13", "libnvinfer.so.10", "libcudart.so.13", "libcudnn.so.9"}));
    if (cuda_extra) f.File(kSite + "nvidia/cu13/lib/libcurand.so.10", So("libcurand.so.10"));
    Dist(
        f, "onnxruntime-gpu", "1.31.1", {},
        {capi + "libonnxruntime_providers_cuda.so", capi + "libonnxruntime_providers_tensorrt.so"});
    return f;
  };
  auto saying = [](const std::vector<Finding>& list, const std::string& text) {
    std::vector<Finding> out;
    for (const Finding& x : list)
      if (x.message.find(text) != std::string::npos) out.push_back(x);
    return out;
  };
  auto serious = [](const std::vector<Finding>& list) {
    return std::count_if(list.begin(), list.end(),
                         [](const Finding& x) { return x.severity != Severity::kInfo; });
  };
  FakeImage cpu = image(false);
  auto found = Scan(cpu);
  CHECK(serious(found["IC012"]) == 0);
  // Grouped by the objects that miss them: the CUDA provider's own, and those both NEED.
  std::string said;
  for (const Finding& x : saying(found["IC012"], "a CPU install")) said += x.message + "\n";
  CHECK_THAT(said, Catch::Contains("libcublasLt.so.13") && Catch::Contains("libcudart.so.13") &&
                       Catch::Contains("Failed to create CUDAExecutionProvider"));
  FakeImage gpu = image(true);
  found = Scan(gpu);
  CHECK(saying(found["IC012"], "a CPU install").empty());
  std::vector<Finding> missing = saying(found["IC012"], "libcublasLt.so.13");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].severity == Severity::kError);
}

namespace {

// A pip distribution `name` 1.0 with `count` extension modules `<package>/_op<i>.so`, each NEEDING
// `needs` (and libc) and referencing `imports`, declaring `requires_dist`.
void Extension(FakeImage& f, const std::string& name, int count,
               const std::vector<std::string>& needs, const std::vector<std::string>& imports,
               const std::vector<std::string>& requires_dist = {}) {
  std::string dir = name;
  std::replace(dir.begin(), dir.end(), '-', '_');  // the import package of the distribution
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    elf::fixture::ElfSpec op;
    op.needed = needs;
    op.needed.push_back("libc.so.6");
    op.imported = imports;
    op.exported = {"PyInit__op" + std::to_string(i)};
    files.push_back(dir + "/_op" + std::to_string(i) + ".so");
    f.File(kSite + files.back(), elf::fixture::BuildElf(op));
  }
  Dist(f, name, "1.0", requires_dist, files);
}

}  // namespace

TEST_CASE("process: an extension that declares nothing is placed by what it NEEDS", "[checks]") {
  // PyG's torch-scatter leaves torch out of its Requires-Dist; its modules NEED libc10.so and
  // libtorch_cpu.so, which only torch's objects provide: they run in torch's process.
  const std::string op = kSite + "torch_scatter/_op0.so";
  FakeImage ok = TorchImport({});
  Extension(ok, "torch-scatter", 1, {"libc10.so", "libtorch_cpu.so"}, {kC10, kCpu});
  auto found = Scan(ok);
  CHECK(Naming(found, "IC012", op).empty());
  CHECK(Naming(found, "IC013", op).empty());
  // torch moved under it: the symbol it was built against is gone. One error, with the
  // evidence that placed it.
  FakeImage moved = TorchImport({});
  Extension(moved, "torch-scatter", 1, {"libc10.so", "libtorch_cpu.so"}, {kC10, kGone});
  std::vector<Finding> missing = Naming(Scan(moved), "IC013", op);
  REQUIRE(missing.size() == 1);
  INFO(missing[0].message);
  CHECK(missing[0].severity == Severity::kError);
  CHECK(missing[0].message.find("at::_ops::add::call()") != std::string::npos);
  CHECK(std::any_of(missing[0].evidence.begin(), missing[0].evidence.end(), [](const Evidence& e) {
    return e.label == "process" &&
           e.value ==
               "torch's process: _op0.so NEEDS libc10.so, which only torch's objects provide";
  }));
}

TEST_CASE("process: a library that another package's directory holds places nothing", "[checks]") {
  // appext's module NEEDS libprivate.so, which only otherpkg ships, in a directory its search
  // does not reach, and otherpkg is no framework: no evidence says which process loads it.
  auto image = [](const std::string& runpath) {
    FakeImage f = WithLibs({{"libc.so.6", So("libc.so.6")}});
    f.File(kSite + "otherpkg/lib/libprivate.so", So("libprivate.so"));
    Dist(f, "otherpkg", "1.0", {}, {"otherpkg/lib/libprivate.so"});
    elf::fixture::ElfSpec module;
    module.needed = {"libprivate.so", "libc.so.6"};
    module.runpath = runpath;
    module.exported = {"PyInit__ext"};
    f.File(kSite + "appext/_ext.so", elf::fixture::BuildElf(module));
    Dist(f, "appext", "2.0", {}, {"appext/_ext.so"});
    return f;
  };
  static const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  auto unplaced = [&](FakeImage& f) {
    catalog::Catalog cat = catalog::Build(f.image(), k.libraries());
    util::Expected<loader::Options> options = loader::ImageOptions(f.image(), cat, k.dlopen());
    REQUIRE(options);
    return loader::Session::Build(f.image(), cat, ConsumerRulesOf(k), std::move(*options))
        .unplaced();
  };
  FakeImage lost = image("");
  std::vector<loader::Unplaced> none_says = unplaced(lost);
  REQUIRE(none_says.size() == 1);
  CHECK(none_says[0].path == kSite + "appext/_ext.so");
  CHECK(none_says[0].package == "appext 2.0");
  CHECK(none_says[0].missing == "libprivate.so");
  // Its RUNPATH reaches the library: it loads on its own.
  FakeImage found = image("$ORIGIN/../otherpkg/lib");
  CHECK(unplaced(found).empty());
}

TEST_CASE("IC011: a package installed on purpose that nothing loads is info, never removed",
          "[checks]") {
  // apt-get install libcublas-12-1 beside a newer copy: apt marks it manual; no consumer loads
  // it. A stale copy a consumer loads stays a warning whatever the marks say.
  const std::string old = "/opt/old/lib/libcublas.so.12.1.3.1";
  auto image = [&](const std::string& states, bool loaded) {
    FakeImage f = WithLibs({{"libcublas.so.12.4.5.8", So("libcublas.so.12")}});
    f.File(old, So("libcublas.so.12"));
    f.File("/var/lib/dpkg/status",
           "Package: libcublas-12-1\nStatus: install ok installed\nArchitecture: amd64\n"
           "Version: 12.1.3.1-1\n");
    f.File("/var/lib/dpkg/info/libcublas-12-1.list", old + "\n");
    if (!states.empty()) f.File("/var/lib/apt/extended_states", states);
    if (loaded) {
      f.File("/opt/old/lib/libapp.so", So("libapp.so", {"libcublas.so.12"}));
      f.Link("/opt/old/lib/libcublas.so.12", "libcublas.so.12.1.3.1");
      SetEnv(f, "LD_LIBRARY_PATH", "/opt/old/lib:" + kLib);
    }
    return f;
  };
  FakeImage manual = image("Package: libfoo\nArchitecture: amd64\nAuto-Installed: 1\n", false);
  auto found = Scan(manual);
  REQUIRE(found["IC011"].size() == 1);
  const Finding& kept = found["IC011"][0];
  INFO(kept.message);
  CHECK(kept.severity == Severity::kInfo);
  CHECK(kept.message.find("installed on purpose (apt marks it manually installed "
                          "(/var/lib/apt/extended_states, layer 0)); no consumer loads it") !=
        std::string::npos);
  CHECK(kept.remediation.rfind("None needed: libcublas-12-1 was asked for", 0) == 0);
  CHECK(kept.remediation.find("apt-get remove") == std::string::npos);
  // apt installed it as a dependency: left behind, a warning with a removing fix.
  FakeImage automatic =
      image("Package: libcublas-12-1\nArchitecture: amd64\nAuto-Installed: 1\n", false);
  auto dep = Scan(automatic);
  REQUIRE(dep["IC011"].size() == 1);
  CHECK(dep["IC011"][0].severity == Severity::kWarning);
  CHECK(dep["IC011"][0].message.find("left behind") != std::string::npos);
  // Marked manual, but a consumer loads the older copy: still a warning.
  FakeImage reached = image("Package: libfoo\nArchitecture: amd64\nAuto-Installed: 1\n", true);
  auto loaded = Scan(reached);
  REQUIRE(loaded["IC011"].size() == 1);
  CHECK(loaded["IC011"][0].severity == Severity::kWarning);
  CHECK(loaded["IC011"][0].message.find("reachable: /opt/old/lib/libapp.so loads it") !=
        std::string::npos);
  // Without apt's marks, the RUN line that named it says so.
  FakeImage named = image("", false);
  named.image().layers[0].created_by =
      "/bin/sh -c apt-get update && apt-get install -y --no-install-recommends "
      "libcublas-12-1=12.1.3.1-1 && rm -rf /var/lib/apt/lists/*";
  auto run = Scan(named);
  REQUIRE(run["IC011"].size() == 1);
  CHECK(run["IC011"][0].severity == Severity::kInfo);
  CHECK(run["IC011"][0].message.find("(apt-get install libcublas-12-1 (named on the RUN line of "
                                     "layer 0))") != std::string::npos);
}

TEST_CASE("IC013: twenty op libraries of one package built for another torch: one error",
          "[checks]") {
  // torchvision built for torch 2.2.0 (its pin) on torch 2.3.0: every module misses the same
  // symbol. One error names the package, both releases, the count and the matching release
  // (frameworks.json companions: torchvision 0.18 for torch 2.3); each object stays evidence.
  FakeImage f = TorchImport({.vision_requires = "torch (==2.2.0)"});
  Extension(f, "torchvision", 20, {"libc10.so", "libtorch_cpu.so"}, {kC10, kGone},
            {"torch (==2.2.0)"});
  auto found = Scan(f);
  std::vector<Finding> errors;
  for (const Finding& e : found["IC013"])
    if (e.severity == Severity::kError) errors.push_back(e);
  REQUIRE(errors.size() == 1);
  const Finding& g = errors[0];
  INFO(g.message);
  CHECK(g.message ==
        "torchvision 0.18.0, built for torch==2.2.0, meets torch 2.3.0: 20 of its objects need "
        "symbols torch's objects do not define (at::_ops::add::call())");
  CHECK(g.remediation ==
        "The release that matches the installed torch: pip install 'torchvision==0.18.*' (the "
        "torchvision release built for torch 2.3).");
  CHECK(std::count_if(g.evidence.begin(), g.evidence.end(),
                      [](const Evidence& e) { return e.label == "object"; }) == 20);
  CHECK(g.paths.size() == 22);    // the dist-info, torch's, and every object
  CHECK(found["IC016"].empty());  // the same cause, said once
  // A package the data has no row for: the release it was built for.
  FakeImage other = TorchImport({});
  Extension(other, "myops", 3, {"libc10.so", "libtorch_cpu.so"}, {kC10, kGone},
            {"torch (==2.2.0)"});
  std::vector<Finding> mine;
  auto other_found = Scan(other);
  for (const Finding& e : other_found["IC013"])
    if (e.severity == Severity::kError) mine.push_back(e);
  REQUIRE(mine.size() == 1);
  INFO(mine[0].message);
  CHECK(mine[0].remediation.find("pip install 'torch==2.2.0' (the torch release myops 1.0 was "
                                 "built for)") != std::string::npos);
}

TEST_CASE("IC062: an LD_PRELOAD entry that resolves to nothing", "[checks]") {
  FakeImage f = WithLibs({{"libc.so.6", So("libc.so.6")}});
  SetEnv(f, "LD_PRELOAD", "libjemalloc.so.2");
  auto found = Scan(f);
  REQUIRE(found["IC062"].size() == 1);
  const Finding& w = found["IC062"][0];
  INFO(w.message);
  CHECK(w.severity == Severity::kWarning);
  CHECK(w.env == "LD_PRELOAD");
  CHECK(w.layer.index == -1);
  CHECK(w.message ==
        "LD_PRELOAD names libjemalloc.so.2, which is not in the image: every process prints "
        "\"ERROR: ld.so: object 'libjemalloc.so.2' from LD_PRELOAD cannot be preloaded (cannot "
        "open shared object file): ignored.\" and runs without it");
  // On the library path: preloaded, silent.
  f.File(kLib + "/libjemalloc.so.2", So("libjemalloc.so.2"));
  CHECK(Scan(f)["IC062"].empty());
  // /etc/ld.so.preload: the layer that wrote it; present entries silent.
  FakeImage g(2);
  g.File("/lib/x86_64-linux-gnu/libc.so.6", So("libc.so.6"));
  g.File("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4", So("libtcmalloc.so.4"));
  g.File("/etc/ld.so.preload", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4\n/usr/lib/libgone.so\n",
         1);
  auto preload = Scan(g);
  REQUIRE(preload["IC062"].size() == 1);
  CHECK(preload["IC062"][0].layer.index == 1);
  CHECK(preload["IC062"][0].paths == std::vector<std::string>{"/etc/ld.so.preload"});
  CHECK(preload["IC062"][0].message.rfind("/etc/ld.so.preload names /usr/lib/libgone.so,", 0) == 0);
}

TEST_CASE("IC012: a package's optional backend: what it loads itself is loaded, the system's once",
          "[checks]") {
  // torchaudio 2.6.0 as its wheel lays it out (readelf of the PyPI wheel): _init_sox loads
  // lib/libtorchaudio_sox.so by path, then imports _torchaudio_sox, which NEEDS it by name; torio
  // does the same for each FFmpeg major. libtorchaudio_sox.so NEEDS libsox.so, the FFmpeg ones
  // libavutil.so.N: the system's, absent here. Only SoX and FFmpeg are to be said, once each.
  FakeImage f = TorchImport({});
  std::vector<std::string> files;
  auto lib = [&](const std::string& rel, std::vector<std::string> needed,
                 const std::string& init = "") {
    elf::fixture::ElfSpec spec;
    spec.needed = std::move(needed);
    spec.needed.push_back("libc.so.6");
    spec.imported = {kC10};
    if (init.empty()) {
      spec.soname = std::string(util::BaseName(rel));
    } else {
      spec.exported = {"PyInit_" + init};
    }
    f.File(kSite + rel, elf::fixture::BuildElf(spec));
    files.push_back(rel);
  };
  lib("torchaudio/lib/libtorchaudio.so", {"libc10.so", "libtorch_cpu.so"});
  lib("torchaudio/lib/_torchaudio.so", {"libtorchaudio.so", "libc10.so"}, "_torchaudio");
  lib("torchaudio/lib/libtorchaudio_sox.so", {"libsox.so", "libc10.so"});
  lib("torchaudio/lib/_torchaudio_sox.so", {"libtorchaudio_sox.so", "libc10.so"},
      "_torchaudio_sox");
  for (const std::string n : {"4", "6"}) {
    std::string av = n == "4" ? "libavutil.so.56" : "libavutil.so.58";
    lib("torio/lib/libtorio_ffmpeg" + n + ".so", {av, "libc10.so"});
    lib("torio/lib/_torio_ffmpeg" + n + ".so", {"libtorio_ffmpeg" + n + ".so", av, "libc10.so"},
        "_torio_ffmpeg" + n);
  }
  Dist(f, "torchaudio", "2.3.0", {"torch (==2.3.0)"}, files);
  auto found = Scan(f);
  for (const auto& [rule, list] : found)
    for (const Finding& x : list) {
      INFO(rule + ": " + x.message);
      CHECK(x.severity == Severity::kInfo);
      CHECK(x.message.find("libtorchaudio_sox.so (DT_NEEDED") == std::string::npos);
      CHECK(x.message.find("libtorio_ffmpeg") == std::string::npos);
      CHECK(x.remediation.find("LD_LIBRARY_PATH") == std::string::npos);
      CHECK(x.remediation.find("patchelf") == std::string::npos);
    }
  REQUIRE(found["IC012"].size() == 2);
  const bool sox_first = found["IC012"][0].message.starts_with("libsox.so");
  const Finding& ffmpeg = found["IC012"][sox_first ? 1 : 0];
  const Finding& sox = found["IC012"][sox_first ? 0 : 1];
  INFO(ffmpeg.message + " | " + sox.message);
  CHECK(ffmpeg.message.rfind("libavutil.so.56 and libavutil.so.58 (DT_NEEDED of ", 0) == 0);
  CHECK(ffmpeg.remediation.find("apt-get install ffmpeg") != std::string::npos);
  CHECK(sox.message.rfind(
            "libsox.so (DT_NEEDED of " + kSite + "torchaudio/lib/libtorchaudio_sox.so", 0) == 0);
  CHECK(sox.remediation.find("apt-get install libsox-dev") != std::string::npos);
}

TEST_CASE("IC016: a pin alone is an error only for a package known to break on another release",
          "[checks]") {
  // A custom op pinned to torch 2.2.0 on torch 2.3.0 whose every symbol binds imports and runs
  // (scripts/loader-diff ext25-on-torch26-req): info. torchvision's pin stays an error (the
  // IC016 cases above): the data knows its operators fail on another torch.
  FakeImage f = TorchImport({});
  Extension(f, "myops", 1, {"libc10.so", "libtorch_cpu.so"}, {kC10, kCpu}, {"torch (==2.2.0)"});
  auto found = Scan(f);
  std::vector<Finding> pin = Naming(found, "IC016", kSite + "myops-1.0.dist-info");
  REQUIRE(pin.size() == 1);
  INFO(pin[0].message);
  CHECK(pin[0].severity == Severity::kInfo);
  CHECK(pin[0].message.find("its symbols bind") != std::string::npos);
  CHECK(Naming(found, "IC013", kSite + "myops/_op0.so").empty());
}

}  // namespace imgcheck::rules
