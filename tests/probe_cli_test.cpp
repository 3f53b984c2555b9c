// `imgcheck probe` end to end: an image built from the fake CUDA stack, the static scan's plan,
// staging, imgcheck-probe with a fake driver, the report and the exit status.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "fake_stack.h"
#include "image_writer.h"
#include "support.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using probe::testing::Build;
using probe::testing::FakeStack;

struct Image {
  TempDir dir;
  std::string reference;
  fs::path libcuda;
};

// The stack's libraries under /opt/cuda/lib, found through the image's LD_LIBRARY_PATH.
void Write(const FakeStack& stack, Image& img) {
  auto built = Build(stack, img.dir / "stack");
  img.libcuda = built.libcuda;
  LayerRecipe layer;
  layer.entries = {Dir("opt"), Dir("opt/cuda"), Dir("opt/cuda/lib")};
  for (const auto& [role, path] : built.libraries)
    layer.entries.push_back(FileFrom("opt/cuda/lib/" + fs::path(path).filename().string(), path));
  layer.created_by = "COPY cuda /opt/cuda";
  ImageRecipe r;
  r.env = {"LD_LIBRARY_PATH=/opt/cuda/lib"};
  r.layers.push_back(layer);
  WriteOciLayout(img.dir / "layout", r);
  img.reference = "oci:" + (img.dir / "layout").string() + ":latest";
}

// `imgcheck SUBCOMMAND IMAGE EXTRA`, stdout only: stderr has the "runs image code" notice.
CommandResult Imgcheck(const std::string& subcommand, const Image& img, const std::string& extra) {
  return Run("('" + (BinaryDir() / "imgcheck").string() + "' " + subcommand + " '" + img.reference +
             "' " + extra + " 2>/dev/null)");
}

CommandResult Probe(const Image& img, const std::string& extra) {
  return Imgcheck("probe", img, extra);
}

TEST_CASE("imgcheck probe: a timeout that is not 1 to 86400 seconds is refused, exit 2") {
  for (std::string bad : {"0", "-1", "86401", "2147483648", "99999999999999999999", "5s"}) {
    auto r =
        Run("'" + (BinaryDir() / "imgcheck").string() + "' probe oci:/nowhere --timeout " + bad);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Contains("--timeout"));
    CHECK_THAT(r.output, Catch::Contains(bad));
  }
}

TEST_CASE("imgcheck probe: a consistent image runs clean, exit 0") {
  Image img;
  Write(FakeStack{}, img);
  auto r = Probe(img, "--format json --test-libcuda '" + img.libcuda.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.output);
  CHECK(j["status"] == "ran");
  CHECK(j["runs_image_code"] == true);
  REQUIRE(j["findings"].is_array());
  CHECK(j["findings"].empty());
  std::set<std::string> sonames;
  for (const auto& l : j["libraries"]) sonames.insert(l["soname"].get<std::string>());
  CHECK(sonames.count("libcudnn.so.9"));
  CHECK(sonames.count("libcudart.so.12"));
  CHECK(sonames.count("libcudnn_ops.so.9"));
  CHECK(j["probe"]["convolution"]["passed"] == true);
}

TEST_CASE("imgcheck probe: a skewed sub-library in the image is IC072, exit 1") {
  Image img;
  FakeStack s;
  s.sublibrary_versions["cnn"] = 91800;
  Write(s, img);
  auto r = Probe(img, "--test-libcuda '" + img.libcuda.string() + "'");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output,
             Catch::Contains("IC072") && Catch::Contains("/opt/cuda/lib/libcudnn_cnn.so.9"));
  CHECK_THAT(r.output, Catch::Contains("untrusted code"));
}

TEST_CASE("imgcheck probe: no driver is 'no GPU: probe skipped', exit 3") {
  Image img;
  Write(FakeStack{}, img);
  auto r = Probe(img, "--test-libcuda '" + (img.dir / "none/libcuda.so.1").string() + "'");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK_THAT(r.output, Catch::Contains("no GPU: probe skipped"));
}

TEST_CASE("imgcheck probe: libraries whose layer alone would not place them are still extracted") {
  // cudart in layer 0, which also makes /opt/cuda/lib2 a link; layer 1 makes it a directory
  // again; cuDNN in layer 2, under lib2. Reading only the layers that wrote the libraries (0 and
  // 2) leaves lib2 a link, so the probe must read every layer to find cuDNN.
  Image img;
  auto built = Build(FakeStack{}, img.dir / "stack");
  img.libcuda = built.libcuda;
  LayerRecipe base, fix, cudnn;
  base.entries = {Dir("opt"), Dir("opt/cuda"), Dir("opt/cuda/lib"),
                  Symlink("opt/cuda/lib2", "lib")};
  fix.entries = {Dir("opt/cuda/lib2")};
  cudnn.entries = {};
  for (const auto& [role, path] : built.libraries) {
    std::string name = fs::path(path).filename().string();
    if (name.rfind("libcudart", 0) == 0)
      base.entries.push_back(FileFrom("opt/cuda/lib/" + name, path));
    else
      cudnn.entries.push_back(FileFrom("opt/cuda/lib2/" + name, path));
  }
  ImageRecipe r;
  r.env = {"LD_LIBRARY_PATH=/opt/cuda/lib:/opt/cuda/lib2"};
  r.layers = {base, fix, cudnn};
  WriteOciLayout(img.dir / "layout", r);
  img.reference = "oci:" + (img.dir / "layout").string() + ":latest";
  auto p = Probe(img, "--format json --test-libcuda '" + img.libcuda.string() + "'");
  INFO(p.output);
  REQUIRE(p.status == 0);
  auto j = nlohmann::json::parse(p.output);
  CHECK(j["status"] == "ran");
  std::set<std::string> paths;
  for (const auto& l : j["libraries"]) paths.insert(l["path"].get<std::string>());
  CHECK(paths.count("/opt/cuda/lib2/libcudnn.so.9"));
  CHECK(paths.count("/opt/cuda/lib/libcudart.so.12"));
}

TEST_CASE("imgcheck scan --probe: the probe's findings join the scan's, and decide the exit") {
  Image img;
  FakeStack s;
  s.sublibrary_versions["cnn"] = 91800;
  Write(s, img);
  std::string driver = "--test-libcuda '" + img.libcuda.string() + "'";
  // The fake stack links no libcublas and is vendored (IC012, IC051): ignored, so that the scan
  // alone passes and only the probe, which sees the skew, fails it.
  auto without = Imgcheck("scan", img, "--format json --ignore IC012,IC051");
  INFO(without.output);
  REQUIRE(without.status == 0);
  auto with = Imgcheck("scan", img, "--format json --ignore IC012,IC051 --probe " + driver);
  INFO(with.output);
  REQUIRE(with.status == 1);
  auto rules = [](const std::string& report) {
    std::set<std::string> out;
    nlohmann::json j = nlohmann::json::parse(report);
    for (const auto& f : j["findings"]) out.insert(f["rule"].get<std::string>());
    return out;
  };
  CHECK(rules(with.output).count("IC072"));
  CHECK_FALSE(rules(without.output).count("IC072"));
  auto notice = Run("('" + (BinaryDir() / "imgcheck").string() + "' scan '" + img.reference +
                    "' --probe " + driver + " 2>&1 >/dev/null)");  // stderr only
  CHECK_THAT(notice.output, Catch::Contains("untrusted code"));
}

TEST_CASE(
    "imgcheck scan --probe: the probe's findings are sorted with the scan's in JSON and SARIF") {
  Image img;
  FakeStack s;
  s.sublibrary_versions["cnn"] = 91800;
  Write(s, img);
  // IC051 (info, the vendored stack) from the checks, IC072 (error) from the probe: the error
  // comes first in every format, as reports promise.
  std::string common = "--ignore IC012 --probe --test-libcuda '" + img.libcuda.string() + "'";
  auto json = Imgcheck("scan", img, "--format json " + common);
  INFO(json.output);
  REQUIRE(json.status == 1);
  std::vector<std::string> order;
  nlohmann::json report = nlohmann::json::parse(json.output);
  for (const auto& f : report["findings"])
    order.push_back(f["severity"].get<std::string>() + " " + f["rule"].get<std::string>());
  REQUIRE(order.size() >= 2);
  CHECK(order.front() == "error IC072");
  CHECK(order.back() == "info IC051");
  auto sarif = Imgcheck("scan", img, "--format sarif " + common);
  INFO(sarif.output);
  std::vector<std::string> levels;
  nlohmann::json log = nlohmann::json::parse(sarif.output);
  for (const auto& r : log["runs"][0]["results"])
    if (!r.contains("suppressions"))  // the ignored ones follow, as SARIF keeps them
      levels.push_back(r["ruleId"].get<std::string>() + " " + r["level"].get<std::string>());
  REQUIRE(levels.size() == order.size());
  CHECK(levels.front() == "IC072 error");
  CHECK(levels.back() == "IC051 note");
}

TEST_CASE("imgcheck scan --probe without a GPU: a note, and the static result stands") {
  Image img;
  Write(FakeStack{}, img);
  auto r = Imgcheck("scan", img,
                    "--format json --ignore IC012,IC051 --probe --test-libcuda '" +
                        (img.dir / "none/libcuda.so.1").string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.output);
  REQUIRE(j["findings"].is_array());
  CHECK(j["findings"].empty());
  std::string notes = j["notes"].dump();
  CHECK_THAT(notes, Catch::Contains("--probe: no GPU: probe skipped"));
}

// Issue #35: IMGCHECK_PROBE was both the helper's path and, once scan's flags read variables,
// --probe's; a path there made every scan fail ("Could not convert"). The helper's variable is
// IMGCHECK_PROBE_HELPER now, and a path in the old name still means the helper.
TEST_CASE("IMGCHECK_PROBE_HELPER names the helper, IMGCHECK_PROBE=/path is its old name") {
  Image img;
  Write(FakeStack{}, img);
  const fs::path marker = img.dir / "helper-ran";
  const fs::path helper = img.dir / "helper.sh";
  WriteFile(helper, "#!/bin/sh\necho ran >> '" + marker.string() + "'\nexec '" +
                        (BinaryDir() / "imgcheck-probe").string() + "' \"$@\"\n");
  fs::permissions(helper, fs::perms::owner_all);
  const std::string driver = " --test-libcuda '" + img.libcuda.string() + "'";
  const std::string bin = "'" + (BinaryDir() / "imgcheck").string() + "' ";
  auto ran = [&] {
    bool r = fs::exists(marker);
    fs::remove(marker);
    return r;
  };

  auto probe = Run("IMGCHECK_PROBE_HELPER='" + helper.string() + "' " + bin + "probe '" +
                   img.reference + "'" + driver + " 2>&1");
  INFO(probe.output);
  CHECK(probe.status == 0);
  CHECK(ran());

  // The old name with a path: a plain scan (no probe, no "Could not convert"), as before.
  const std::string scan = bin + "scan '" + img.reference + "' --format json --ignore IC012,IC051";
  auto old_name = Run("IMGCHECK_PROBE='" + helper.string() + "' " + scan + " 2>&1");
  INFO(old_name.output);
  CHECK(old_name.status == 0);
  CHECK_THAT(old_name.output, !Catch::Contains("Could not convert"));
  CHECK_FALSE(ran());
  // ... and the helper, when --probe is given.
  auto old_helper =
      Run("IMGCHECK_PROBE='" + helper.string() + "' " + scan + " --probe" + driver + " 2>&1");
  INFO(old_helper.output);
  CHECK(old_helper.status == 0);
  CHECK(ran());

  // --probe's own variable still turns the probe on; the new name wins over the old one.
  auto flag = Run("IMGCHECK_PROBE=true IMGCHECK_PROBE_HELPER='" + helper.string() + "' " + scan +
                  driver + " 2>&1");
  INFO(flag.output);
  CHECK(flag.status == 0);
  CHECK(ran());
  auto missing = Run("IMGCHECK_PROBE_HELPER=" + (img.dir / "none").string() + " IMGCHECK_PROBE='" +
                     helper.string() + "' " + scan + " --probe" + driver + " 2>&1");
  INFO(missing.output);
  CHECK_FALSE(ran());
  CHECK_THAT(missing.output, Catch::Contains((img.dir / "none").string()));
}

}  // namespace
}  // namespace imgcheck::probe
