// `imgcheck probe` on images that are fine but awkward to stage (hard links, files several layers
// wrote) and on names that are not UTF-8.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "fake_stack.h"
#include "image_writer.h"
#include "support.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using probe::testing::Build;
using probe::testing::BuiltStack;
using probe::testing::FakeStack;

std::string Name(const std::string& path) { return fs::path(path).filename().string(); }

bool IsCudnn(const std::string& path) { return Name(path).rfind("libcudnn", 0) == 0; }

std::string Layout(const TempDir& dir, const ImageRecipe& r) {
  WriteOciLayout(dir / "layout", r);
  return "oci:" + (dir / "layout").string() + ":latest";
}

// `ENV imgcheck probe REF --format json --test-libcuda DRIVER`, stdout only (stderr has the
// "runs image code" notice).
CommandResult ProbeJson(const std::string& env, const std::string& ref, const fs::path& driver) {
  return Run("(" + env + " " +
             ImgcheckCommand("probe " + Quote(ref) + " --format json " + "--test-libcuda " +
                             Quote(driver)) +
             " 2>/dev/null)");
}

// A stack under /opt/cuda/lib (the image's LD_LIBRARY_PATH) in one layer.
ImageRecipe StackImage(const BuiltStack& built) {
  LayerRecipe layer;
  layer.entries = {Dir("opt"), Dir("opt/cuda"), Dir("opt/cuda/lib")};
  for (const auto& [role, path] : built.libraries)
    layer.entries.push_back(FileFrom("opt/cuda/lib/" + Name(path), path));
  layer.created_by = "COPY cuda /opt/cuda";
  ImageRecipe r;
  r.env = {"LD_LIBRARY_PATH=/opt/cuda/lib"};
  r.layers.push_back(layer);
  return r;
}

TEST_CASE("probe: a libcudnn.so.9 that is a hard link is staged with its target's bytes") {
  TempDir dir;
  BuiltStack built = Build(FakeStack{}, dir / "stack");
  ImageRecipe r = StackImage(built);
  // As a Debian package leaves it: the versioned file, and the soname as a second name of it.
  for (auto& e : r.layers[0].entries)
    if (Name(e.path) == "libcudnn.so.9") e.path = "opt/cuda/lib/libcudnn.so.9.19.0";
  r.layers[0].entries.push_back(
      Hardlink("opt/cuda/lib/libcudnn.so.9", "opt/cuda/lib/libcudnn.so.9.19.0"));
  auto p = ProbeJson("", Layout(dir, r), built.libcuda);
  INFO(p.output);
  REQUIRE(p.status == 0);
  auto j = nlohmann::json::parse(p.output);
  CHECK(j["status"] == "ran");
  CHECK(j["findings"].empty());
  std::set<std::string> paths;
  for (const auto& l : j["libraries"]) paths.insert(l["path"].get<std::string>());
  CHECK(paths.count("/opt/cuda/lib/libcudnn.so.9"));
  CHECK(j["probe"]["cudnn"]["version"] == 91900);
  CHECK(j["probe"]["cudnn"]["create"]["status"] == 0);
}

TEST_CASE("probe: a cuDNN an upper layer wrote over another is staged from the upper layer") {
  // A merged-/usr base (/lib is a link to usr/lib) with cudart and cuDNN 9.18, and a layer that
  // upgrades cuDNN to 9.19 as a package does, through /lib: its tar names lib/..., the files land
  // in /usr/lib/... over the base's. Both layers hold libraries the probe loads.
  TempDir dir;
  FakeStack old_stack;
  old_stack.cudnn_version = 91800;
  BuiltStack old_built = Build(old_stack, dir / "old");
  BuiltStack new_built = Build(FakeStack{}, dir / "new");
  const std::string kLib = "usr/lib/x86_64-linux-gnu/";
  LayerRecipe base;
  base.entries = {Dir("usr"), Dir("usr/lib"), Dir(kLib), Symlink("lib", "usr/lib")};
  for (const auto& [role, path] : old_built.libraries)
    base.entries.push_back(FileFrom(kLib + Name(path), path));
  base.created_by = "FROM base";
  LayerRecipe upgrade;
  for (const auto& [role, path] : new_built.libraries)
    if (IsCudnn(path))
      upgrade.entries.push_back(FileFrom("lib/x86_64-linux-gnu/" + Name(path), path));
  upgrade.created_by = "RUN dpkg -i libcudnn9_9.19.deb";
  ImageRecipe r;
  r.env = {"LD_LIBRARY_PATH=/" + kLib};
  r.layers = {base, upgrade};
  auto p = ProbeJson("", Layout(dir, r), new_built.libcuda);
  INFO(p.output);
  REQUIRE(p.status == 0);
  auto j = nlohmann::json::parse(p.output);
  CHECK(j["status"] == "ran");
  CHECK(j["findings"].empty());  // no version disagreement, no skewed sub-library
  CHECK(j["probe"]["cudnn"]["version"] == 91900);
  int upper = 0;
  for (const auto& l : j["libraries"])
    if (IsCudnn(l["path"].get<std::string>())) upper += l["layer"] == 1;
  CHECK(upper == 5);  // the shim and its four sub-libraries
  for (const auto& c : j["probe"]["cudnn"]["sublibraries"]) CHECK(c["status"] == 0);
}

TEST_CASE("probe: a staging directory whose name is not UTF-8 gives valid JSON, no finding") {
  TempDir dir;
  BuiltStack built = Build(FakeStack{}, dir / "stack");
  std::string ref = Layout(dir, StackImage(built));
  fs::path tmp = dir / "tmp\xE9";
  fs::create_directories(tmp);
  auto p = ProbeJson("TMPDIR=" + Quote(tmp), ref, built.libcuda);
  INFO(p.output);
  REQUIRE(p.status == 0);
  auto j = nlohmann::json::parse(p.output);  // throws on invalid UTF-8
  CHECK(j["status"] == "ran");
  // The probe loaded every library from the staging directory: nothing "from outside" (IC077).
  CHECK(j["findings"].empty());
  std::string escaped = (dir / "tmp").string() + "\\xE9/imgcheck-probe-";
  for (const auto& l : j["probe"]["libraries"]) {
    CHECK(l["loaded"] == true);
    CHECK_THAT(l["path"].get<std::string>(), Catch::StartsWith(escaped));
  }
  CHECK(fs::is_empty(tmp));
}

}  // namespace
}  // namespace imgcheck::probe
