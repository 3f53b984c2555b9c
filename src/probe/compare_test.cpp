// Findings from probe observations: each probe rule fires on its failure and stays silent on its
// nearest innocent neighbour. Observations come from imgcheck-probe run on fake stacks.
#include "probe/compare.h"

#include <catch2/catch.hpp>

#include "fake_stack.h"
#include "support.h"

namespace imgcheck::probe {
namespace {

using testing::Build;
using testing::FakeStack;
namespace fs = std::filesystem;

const rules::Knowledge& K() {
  static const rules::Knowledge k =
      rules::Knowledge::Load({(imgcheck::testing::SourceDir() / "rules").string()});
  return k;
}

struct Result {
  Observation observation;
  std::vector<rules::Finding> findings;
  std::vector<std::string> Rules() const {
    std::vector<std::string> out;
    for (const auto& f : findings) out.push_back(f.rule);
    return out;
  }
  const rules::Finding* Find(const std::string& rule) const {
    for (const auto& f : findings)
      if (f.rule == rule) return &f;
    return nullptr;
  }
};

// Each staged library pretends to come from /usr/lib/x86_64-linux-gnu in layer 1; `versions`
// are the scan's predictions by role.
Result ProbeAndCompare(
    const FakeStack& stack, std::map<std::string, std::string> versions = {},
    const std::function<void(testing::BuiltStack&, const fs::path&)>& edit = {}) {
  imgcheck::testing::TempDir dir;
  auto built = Build(stack, dir.path());
  if (edit) edit(built, dir.path());
  std::vector<StagedLibrary> staged;
  for (const auto& [role, path] : built.libraries) {
    PlannedLibrary p;
    p.role = role;
    p.soname = fs::path(path).filename().string();
    p.image_path = "/usr/lib/x86_64-linux-gnu/" + p.soname;
    p.layer = 1;
    p.version = versions[role];
    staged.push_back({p, path});
  }
  RunOptions o;
  o.executable = imgcheck::testing::BinaryDir() / "imgcheck-probe";
  o.libcuda = built.libcuda.string();
  o.wall_seconds = 20;
  Result r;
  r.observation = RunProbe(built.libraries, o);
  std::vector<image::Layer> layers(2);
  layers[1].index = 1;
  layers[1].digest = "sha256:feed";
  layers[1].created_by = "COPY libs /usr/lib/";
  r.findings = Compare(staged, built.lib_dir.string(), r.observation, K(), layers);
  return r;
}

TEST_CASE("probe rules are in the catalogue with their documentation") {
  for (const char* id :
       {"IC070", "IC071", "IC072", "IC073", "IC074", "IC075", "IC076", "IC077", "IC078"}) {
    const rules::RuleInfo* r = K().Rule(id);
    REQUIRE(r != nullptr);
    CHECK_FALSE(r->summary.empty());
    CHECK_FALSE(r->remediation.empty());
    CHECK_FALSE(r->source.empty());
  }
}

TEST_CASE("a consistent stack whose versions match the scan: no finding") {
  Result r = ProbeAndCompare(FakeStack{}, {{"cudnn", "9.19.0.56"}, {"cudart", "12.8.90"}});
  INFO(r.observation.json);
  CHECK(r.findings.empty());
}

TEST_CASE("IC071: the host driver is too old for the image's runtime") {
  FakeStack s;
  s.driver_version = 11080;
  Result r = ProbeAndCompare(s);
  const auto* f = r.Find("IC071");
  REQUIRE(f);
  CHECK(f->severity == rules::Severity::kError);
  CHECK_THAT(f->message, Catch::Contains("12.8") && Catch::Contains("11.8"));
  CHECK(f->paths == std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libcudart.so.12"});
  CHECK(f->layer.digest == "sha256:feed");
  CHECK(f->layer.created_by == "COPY libs /usr/lib/");
  CHECK(r.Find("IC073"));        // cudnnCreate fails too, with its own status
  CHECK_FALSE(r.Find("IC075"));  // the convolution not running is already explained
  // Neighbour: a driver exactly as new as the runtime.
  FakeStack same;
  same.driver_version = 12080;
  CHECK_FALSE(ProbeAndCompare(same).Find("IC071"));
}

TEST_CASE("IC072: a skewed or missing cuDNN sub-library") {
  FakeStack skew;
  skew.sublibrary_versions["ops"] = 91800;
  Result r = ProbeAndCompare(skew);
  REQUIRE(r.Rules() == std::vector<std::string>{"IC072"});
  CHECK_THAT(r.findings[0].message, Catch::Contains("CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"));
  CHECK(r.findings[0].paths[0] == "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9");

  FakeStack missing;
  missing.missing = {"adv"};
  Result m = ProbeAndCompare(missing);
  REQUIRE(m.Rules() == std::vector<std::string>{"IC072"});
  CHECK_THAT(m.findings[0].message, Catch::Contains("SUBLIBRARY_LOADING_FAILED") &&
                                        Catch::Contains("resolved no libcudnn_adv"));
  CHECK(m.findings[0].paths[0] == "/usr/lib/x86_64-linux-gnu/libcudnn.so.9");
}

TEST_CASE("IC074: a wrong convolution, IC075: a failing one") {
  FakeStack wrong;
  wrong.wrong_result = true;
  Result w = ProbeAndCompare(wrong);
  REQUIRE(w.Rules() == std::vector<std::string>{"IC074"});
  CHECK_THAT(w.findings[0].message, Catch::Contains("tolerance 0.001"));

  FakeStack failing;
  failing.conv_status = 3007;
  Result f = ProbeAndCompare(failing);
  REQUIRE(f.Rules() == std::vector<std::string>{"IC075"});
  CHECK_THAT(f.findings[0].message, Catch::Contains("CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH"));
}

TEST_CASE("IC076: a version the scan predicted differs from the loaded library's") {
  Result r = ProbeAndCompare(FakeStack{}, {{"cudnn", "9.1.0"}, {"cudart", "12.4"}});
  REQUIRE(r.Rules() == std::vector<std::string>{"IC076", "IC076"});
  CHECK_THAT(r.findings[0].message + r.findings[1].message,
             Catch::Contains("cuDNN 9.1.0") && Catch::Contains("reports 9.19.0") &&
                 Catch::Contains("CUDA runtime 12.4") && Catch::Contains("reports 12.8"));
  // A prediction as precise as a soname major agrees with any minor.
  CHECK(ProbeAndCompare(FakeStack{}, {{"cudnn", "9"}, {"cudart", "12"}}).findings.empty());
}

TEST_CASE("IC077: a CUDA library mapped from outside the staged directory") {
  Result r = ProbeAndCompare(FakeStack{}, {}, [](testing::BuiltStack& b, const fs::path& dir) {
    // The cnn sub-library comes from "the host", not from the image's staged files.
    fs::create_directories(dir / "host");
    fs::rename(b.lib_dir / "libcudnn_cnn.so.9", dir / "host/libcudnn_cnn.so.9");
    for (auto& [role, path] : b.libraries)
      if (role == "cudnn_cnn") path = (dir / "host/libcudnn_cnn.so.9").string();
  });
  REQUIRE(r.Rules() == std::vector<std::string>{"IC077"});
  CHECK_THAT(r.findings[0].message, Catch::Contains("/host/libcudnn_cnn.so.9"));
}

TEST_CASE("IC070: a library that does not load, IC078: a crash or a hang") {
  Result r = ProbeAndCompare(FakeStack{}, {}, [](testing::BuiltStack& b, const fs::path&) {
    imgcheck::testing::WriteFile(b.lib_dir / "libcublasLt.so.12", "not an ELF file");
    b.libraries.insert(b.libraries.begin(),
                       {"cublasLt", (b.lib_dir / "libcublasLt.so.12").string()});
  });
  REQUIRE(r.Rules() == std::vector<std::string>{"IC070"});
  CHECK(r.findings[0].paths[0] == "/usr/lib/x86_64-linux-gnu/libcublasLt.so.12");

  FakeStack crash;
  crash.crash = true;
  Result c = ProbeAndCompare(crash);
  REQUIRE(c.Rules() == std::vector<std::string>{"IC078"});
  CHECK_THAT(c.findings[0].message, Catch::Contains("cudnnCreate"));
}

TEST_CASE("no GPU: nothing to report, whatever the stack") {
  FakeStack s;
  s.no_device = true;
  s.wrong_result = true;
  CHECK(ProbeAndCompare(s).findings.empty());
}

}  // namespace
}  // namespace imgcheck::probe
