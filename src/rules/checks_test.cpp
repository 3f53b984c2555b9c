// The checks on hand-made images: merged trees written in memory, libraries written field by
// field (no compiler, no layer on disk), then the scan's own pipeline. For each rule, a case that
// fires it and its nearest neighbour that must not. tests/scan_cli_test.cpp runs the same rules
// through the binary on images built from recipes.
#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "elf_builder.h"
#include "fake_image.h"
#include "rules/scan.h"

namespace imgcheck::rules {
namespace {

using testing::FakeImage;

const std::string kLib = "/opt/cuda/lib";

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
  util::Expected<loader::Options> options = LoaderOptions(f.image(), cat, k.dlopen());
  REQUIRE(options);
  in.options = std::move(*options);
  in.consumers = LoadConsumers(f.image(), cat, k, in.options);
  std::map<std::string, std::vector<Finding>> out;
  for (Finding& finding : RunChecks(in)) out[finding.rule].push_back(std::move(finding));
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

TEST_CASE("IC060: LD_LIBRARY_PATH with empty, relative or missing elements", "[checks]") {
  FakeImage f = WithLibs({});
  SetEnv(f, "LD_LIBRARY_PATH", kLib + "::lib:/nowhere");
  auto found = Scan(f);
  REQUIRE(found["IC060"].size() == 1);
  const std::string& m = found["IC060"][0].message;
  CHECK(m.find("element 2 is empty") != std::string::npos);
  CHECK(m.find("\"lib\" is relative") != std::string::npos);
  CHECK(m.find("\"/nowhere\" does not exist") != std::string::npos);
  SetEnv(f, "LD_LIBRARY_PATH", kLib);
  CHECK(Paths(Scan(f), "IC060").empty());
}

}  // namespace imgcheck::rules
