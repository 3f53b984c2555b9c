// `imgcheck probe` on images that are fine but awkward to stage (hard links, files several layers
// wrote), on names that are not UTF-8, and interrupted: nothing of the probe may outlive imgcheck.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

void Interrupted(const std::string& subcommand, int sig) {
  TempDir dir;
  FakeStack s;
  s.hang = true;  // cudnnCreate forks a helper, and both block
  BuiltStack built = Build(s, dir / "stack");
  std::string ref = Layout(dir, StackImage(built));
  fs::path tmp = dir / "tmp", err = dir / "stderr";
  fs::create_directories(tmp);
  std::vector<std::string> args = {(BinaryDir() / "imgcheck").string(),
                                   subcommand,
                                   ref,
                                   "--no-cache",
                                   "--test-libcuda",
                                   built.libcuda.string()};
  if (subcommand == "probe") {
    args.insert(args.end(), {"--timeout", "600"});
  } else {
    args.insert(args.end(), {"--probe", "--probe-timeout", "600"});
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string tmpdir = "TMPDIR=" + tmp.string();
  std::vector<char*> envp = {tmpdir.data()};
  for (char** e = environ; *e; ++e)
    if (std::string_view(*e).rfind("TMPDIR=", 0) != 0) envp.push_back(*e);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) == 0);
  posix_spawn_file_actions_destroy(&fa);

  // imgcheck-probe leads its own group; the probe is blocked once it has forked its helper.
  pid_t group = 0;
  bool blocked = Eventually([&] {
    for (const auto& p : Processes())
      if (p.ppid == pid && p.pgid == p.pid && LiveInGroup(p.pid) >= 2) group = p.pid;
    return group != 0;
  });
  if (!blocked) kill(pid, SIGKILL);
  REQUIRE(blocked);
  CHECK_FALSE(fs::is_empty(tmp));  // the staging directory is there while the probe runs
  REQUIRE(kill(pid, sig) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + sig);
  std::string text = ReadFile(err);
  INFO(text);
  std::string line =
      "imgcheck: interrupted by " + std::string(sig == SIGINT ? "SIGINT" : "SIGTERM");
  CHECK_THAT(text, Catch::Contains(line));
  CHECK(text.substr(text.find(line)).find('\n') == text.size() - text.find(line) - 1);
  CHECK(fs::is_empty(tmp));
  // SIGKILL is delivered asynchronously: wait for both to be gone, then check.
  Eventually([&] { return LiveInGroup(group) == 0; });
  CHECK(LiveInGroup(group) == 0);
}

TEST_CASE("probe: SIGTERM removes the staging directory and kills the probe's process group") {
  Interrupted("probe", SIGTERM);
}

TEST_CASE("scan --probe: SIGINT removes the staging directory and kills the probe's group") {
  Interrupted("scan", SIGINT);
}

}  // namespace
}  // namespace imgcheck::probe
