// Black-box tests of `imgcheck scan` and `imgcheck rules`: images generated from recipes (tiny
// shared objects with real SONAMEs, pip dist-info, framework build files), scanned by the
// built binary. Each rule has a scenario that fires it and its nearest innocent neighbour.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "elf_builder.h"
#include "fake_image.h"
#include "image_writer.h"
#include "support.h"
#include "util/sha256.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

const std::string kSite = "usr/local/lib/python3.10/dist-packages/";

const fs::path& Cache() {
  static TempDir dir;
  return dir.path();
}

// A shared object with `soname` that links the fixtures named in `needed` (by soname), compiled
// once per distinct spec.
fs::path So(const std::string& soname, const std::vector<std::string>& needed = {},
            const std::string& runpath = "", const std::string& source = "",
            const std::string& version_script = "") {
  static std::map<std::string, fs::path> done;
  std::string key = soname + "|" + runpath + "|" + source + "|" + version_script;
  for (const auto& n : needed) key += "|" + n;
  if (auto it = done.find(key); it != done.end()) return it->second;
  SharedObject so;
  so.soname = soname;
  so.runpath = runpath;
  so.version_script = version_script;
  if (!source.empty()) so.source = source;
  // The fixtures call nothing in what they need: keep the DT_NEEDED entries anyway (the
  // flag goes first on the link line; Compile quotes it like a path, cc still reads it).
  if (!needed.empty()) so.needed.push_back("-Wl,--no-as-needed");
  for (const auto& n : needed) so.needed.push_back(So(n).string());
  fs::path out = Cache() / std::to_string(done.size()) / soname;
  Compile(so, out);
  return done[key] = out;
}

// `dir/file` from `so`, plus the soname link `dir/soname -> file` when they differ.
void AddLib(std::vector<Entry>& e, const std::string& dir, const std::string& file,
            const fs::path& so, const std::string& soname) {
  e.push_back(FileFrom(dir + "/" + file, so));
  if (file != soname) e.push_back(Symlink(dir + "/" + soname, file));
}

// A pip distribution owning `files` (paths relative to site-packages).
void AddDist(std::vector<Entry>& e, const std::string& name, const std::string& version,
             const std::vector<std::string>& requires_dist, const std::vector<std::string>& files) {
  for (const auto& [path, text] : DistInfo(name, version, requires_dist, files))
    e.push_back(File(kSite + path, text));
}

struct TorchStack {
  std::string torch = "2.3.0", cuda = "12.1";
  std::string cudnn_pkg = "nvidia-cudnn-cu12", cudnn = "8.9.2.26";
  std::string cudart = "12.1.105";
  bool pin = true;
};

const std::vector<std::string> kCudnn8Subs = {"libcudnn_ops_infer", "libcudnn_ops_train",
                                              "libcudnn_cnn_infer", "libcudnn_cnn_train",
                                              "libcudnn_adv_infer", "libcudnn_adv_train"};
const std::vector<std::string> kCudnn9Subs = {"libcudnn_graph",
                                              "libcudnn_engines_precompiled",
                                              "libcudnn_engines_runtime_compiled",
                                              "libcudnn_heuristic",
                                              "libcudnn_ops",
                                              "libcudnn_cnn",
                                              "libcudnn_adv"};

// PyTorch as its wheels lay it out: torch/lib/libtorch_cuda.so with a RUNPATH into the nvidia-*
// wheels, which pin cuDNN and the CUDA runtime.
LayerRecipe TorchLayer(const TorchStack& s) {
  std::vector<Entry> e;
  int major = std::stoi(s.cudnn.substr(0, s.cudnn.find('.')));
  std::string shim = "libcudnn.so." + std::to_string(major);
  e.push_back(File(kSite + "torch/version.py", "__version__ = '" + s.torch + "+cu" +
                                                   s.cuda.substr(0, 2) + s.cuda.substr(3) +
                                                   "'\ndebug = False\ncuda = '" + s.cuda +
                                                   "'\ngit_version = '0000'\nhip = None\n"));
  e.push_back(FileFrom(kSite + "torch/lib/libtorch_cuda.so",
                       So("libtorch_cuda.so", {shim, "libcudart.so.12"},
                          "$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/cuda_runtime/lib")));
  std::vector<std::string> requires_dist;
  if (s.pin)
    requires_dist = {s.cudnn_pkg + "==" + s.cudnn, "nvidia-cuda-runtime-cu12==" + s.cudart};
  AddDist(e, "torch", s.torch, requires_dist, {"torch/version.py", "torch/lib/libtorch_cuda.so"});
  std::vector<std::string> cudnn_files = {"nvidia/cudnn/lib/" + shim};
  e.push_back(FileFrom(kSite + "nvidia/cudnn/lib/" + shim, So(shim, {}, "$ORIGIN")));
  for (const auto& sub : major == 8 ? kCudnn8Subs : kCudnn9Subs) {
    std::string name = sub + ".so." + std::to_string(major);
    e.push_back(FileFrom(kSite + "nvidia/cudnn/lib/" + name, So(name)));
    cudnn_files.push_back("nvidia/cudnn/lib/" + name);
  }
  AddDist(e, s.cudnn_pkg, s.cudnn, {}, cudnn_files);
  e.push_back(FileFrom(kSite + "nvidia/cuda_runtime/lib/libcudart.so.12", So("libcudart.so.12")));
  AddDist(e, "nvidia-cuda-runtime-cu12", s.cudart, {}, {"nvidia/cuda_runtime/lib/libcudart.so.12"});
  return {e, Compression::kGzip, "RUN pip install torch==" + s.torch};
}

LayerRecipe Layer(std::vector<Entry> e, std::string created_by) {
  return {std::move(e), Compression::kGzip, std::move(created_by)};
}

struct Result {
  int status = -1;
  nlohmann::json json;
  std::string output;

  std::vector<nlohmann::json> Of(const std::string& rule) const {
    std::vector<nlohmann::json> out;
    if (json.is_object())
      for (const auto& f : json["findings"])
        if (f["rule"] == rule) out.push_back(f);
    return out;
  }
  size_t Count(const std::string& rule) const { return Of(rule).size(); }
  size_t Serious() const {
    size_t n = 0;
    if (json.is_object())
      for (const auto& f : json["findings"]) n += f["severity"] != "info";
    return n;
  }
};

std::string Imgcheck() { return (BinaryDir() / "imgcheck").string(); }

// The scan of `recipe` as it went, whatever its exit status.
Result RunScan(const ImageRecipe& recipe, const std::string& args = "") {
  TempDir dir;
  WriteOciLayout(dir / "layout", recipe);
  fs::path out = dir / "report.json";
  CommandResult r = Run("cd '" + dir.path().string() + "' && '" + Imgcheck() +
                        "' scan oci:" + (dir / "layout").string() +
                        ":latest --format json --output '" + out.string() + "' " + args);
  Result res;
  res.status = r.status;
  res.output = r.output;
  if (fs::exists(out)) res.json = nlohmann::json::parse(ReadFile(out), nullptr, false);
  return res;
}

// A scan that must have run to the end: exit 0 or 1 and a well-formed report, so that a crash or
// a refused image can never pass for "IC0xx does not appear".
Result Scan(const ImageRecipe& recipe, const std::string& args = "") {
  Result res = RunScan(recipe, args);
  INFO(res.output);
  REQUIRE((res.status == 0 || res.status == 1));
  REQUIRE(res.json.is_object());
  REQUIRE(res.json.contains("findings"));
  REQUIRE(res.json["findings"].is_array());
  for (const auto& f : res.json["findings"]) {
    REQUIRE(f.is_object());
    REQUIRE(f.contains("rule"));
    REQUIRE(f["rule"].is_string());
    INFO(f.dump(2));
    CHECK(!f["evidence"].empty());  // whatever the rule, a finding shows what it is based on
  }
  return res;
}

std::string Messages(const Result& r) {
  std::string all;
  if (r.json.is_object())
    for (const auto& f : r.json["findings"])
      all += f["rule"].get<std::string>() + ": " + f["message"].get<std::string>() + "\n";
  return all + r.output;
}

ImageRecipe Base(std::vector<std::string> env = {}) {
  ImageRecipe r;
  r.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  r.env.insert(r.env.end(), env.begin(), env.end());
  return r;
}

// TensorFlow 1.2 (tested with cuDNN 5.1) whose extension needs libcudnn.so.5; the system has
// cuDNN 5.1.10 and, with `stale`, a cuDNN 5.0.5 that LD_LIBRARY_PATH puts first.
ImageRecipe Seed(bool stale, bool build_info = true) {
  ImageRecipe r =
      Base(stale ? std::vector<std::string>{"LD_LIBRARY_PATH=/usr/local/cudnn-5.0/lib64"}
                 : std::vector<std::string>{});
  std::vector<Entry> sys;
  AddLib(sys, "usr/lib64", "libcudnn.so.5.1.10", So("libcudnn.so.5"), "libcudnn.so.5");
  r.layers.push_back(Layer(sys, "COPY cudnn-5.1 /usr/lib64"));
  if (stale) {
    std::vector<Entry> old;
    AddLib(old, "usr/local/cudnn-5.0/lib64", "libcudnn.so.5.0.5", So("libcudnn.so.5"),
           "libcudnn.so.5");
    r.layers.push_back(Layer(old, "COPY cudnn-5.0 /usr/local/cudnn-5.0"));
  }
  std::vector<Entry> tf;
  if (build_info)
    tf.push_back(File(
        kSite + "tensorflow/python/platform/build_info.py",
        "# Generated by the TensorFlow build\nis_cuda_build = True\ncuda_version_number = '8.0'\n"
        "cudnn_version_number = '5'\n"));
  tf.push_back(FileFrom(kSite + "tensorflow/python/_pywrap_tensorflow_internal.so",
                        So("_pywrap_tensorflow_internal.so", {"libcudnn.so.5"})));
  AddDist(tf, "tensorflow-gpu", "1.2.0", {},
          {"tensorflow/python/platform/build_info.py",
           "tensorflow/python/_pywrap_tensorflow_internal.so"});
  r.layers.push_back(Layer(tf, "RUN pip install tensorflow-gpu==1.2.0"));
  return r;
}

}  // namespace

TEST_CASE("seed: TensorFlow 1.2 built with cuDNN 5.1 loads cuDNN 5.0.5 first (IC001)", "[scan]") {
  Result bad = Scan(Seed(true));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC001") == 1);
  CHECK(bad.status == 1);
  auto f = bad.Of("IC001")[0];
  std::string m = f["message"];
  CHECK(m.find("cuDNN 5.1") != std::string::npos);
  CHECK(m.find("cuDNN 5.0.5") != std::string::npos);
  CHECK(m.find("Loaded runtime CuDNN library: 5005 (compatibility version 5000) but source was "
               "compiled with "
               "5100 (compatibility version 5100)") != std::string::npos);
  CHECK(f["severity"] == "error");
  CHECK(f["paths"][0] == "/usr/local/cudnn-5.0/lib64/libcudnn.so.5.0.5");
  CHECK(f["layer"]["created_by"] == "COPY cudnn-5.0 /usr/local/cudnn-5.0");

  Result good = Scan(Seed(false));
  INFO(Messages(good));
  CHECK(good.Count("IC001") == 0);
}

TEST_CASE("TensorFlow 1.2 without build_info.py: facts from its tested configuration (IC001)",
          "[scan]") {
  Result bad = Scan(Seed(true, false));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC001") == 1);
  std::string m = bad.Of("IC001")[0]["message"];
  CHECK(m.find("compiled with cuDNN 5.1 (from the tested configuration of tensorflow-gpu 1.2.0)") !=
        std::string::npos);
  CHECK(m.find("cuDNN 5.0.5") != std::string::npos);
  Result good = Scan(Seed(false, false));
  INFO(Messages(good));
  CHECK(good.Count("IC001") == 0);
  CHECK(good.Serious() == 0);
}

TEST_CASE(
    "a consistent PyTorch stack is clean, a shadowing cuDNN is not (IC001, IC010, IC050, IC051)",
    "[scan]") {
  ImageRecipe clean = Base();
  clean.layers.push_back(TorchLayer({}));
  Result ok = Scan(clean);
  INFO(Messages(ok));
  CHECK(ok.status == 0);
  CHECK(ok.Serious() == 0);
  CHECK(ok.Count("IC051") == 0);

  ImageRecipe shadow = Base({"LD_LIBRARY_PATH=/usr/local/cudnn/lib64"});
  shadow.layers.push_back(TorchLayer({}));
  std::vector<Entry> old;
  AddLib(old, "usr/local/cudnn/lib64", "libcudnn.so.8.5.0", So("libcudnn.so.8"), "libcudnn.so.8");
  shadow.layers.push_back(Layer(old, "COPY cudnn /usr/local/cudnn"));
  Result bad = Scan(shadow);
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC001") == 1);
  CHECK(bad.Of("IC001")[0]["message"].get<std::string>().find(
            "cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found "
            "runtime version (8, 5, 0)") != std::string::npos);
  CHECK(bad.Count("IC010") == 1);
  CHECK(bad.Count("IC050") == 1);
  CHECK(bad.Count("IC051") == 1);
  CHECK(bad.status == 1);

  // A newer minor in LD_LIBRARY_PATH is accepted by PyTorch (cuDNN >= 7): no IC001, still
  // shadowing.
  ImageRecipe newer = Base({"LD_LIBRARY_PATH=/usr/local/cudnn/lib64"});
  newer.layers.push_back(TorchLayer({}));
  std::vector<Entry> nine;
  AddLib(nine, "usr/local/cudnn/lib64", "libcudnn.so.8.9.7", So("libcudnn.so.8"), "libcudnn.so.8");
  newer.layers.push_back(Layer(nine, "COPY cudnn /usr/local/cudnn"));
  Result accepted = Scan(newer);
  INFO(Messages(accepted));
  CHECK(accepted.Count("IC001") == 0);
  CHECK(accepted.Count("IC010") == 1);
}

TEST_CASE("CUDA runtime older than the framework's build (IC002)", "[scan]") {
  TorchStack s;
  s.cuda = "12.4";
  ImageRecipe r = Base();
  r.layers.push_back(TorchLayer(s));
  Result bad = Scan(r);
  INFO(Messages(bad));
  CHECK(bad.Count("IC002") == 1);
  ImageRecipe ok = Base();
  ok.layers.push_back(TorchLayer({}));
  CHECK(Scan(ok).Count("IC002") == 0);
}

TEST_CASE("cuDNN built for another CUDA major (IC003)", "[scan]") {
  TorchStack s;
  s.cudnn_pkg = "nvidia-cudnn-cu11";
  ImageRecipe r = Base();
  r.layers.push_back(TorchLayer(s));
  Result bad = Scan(r);
  INFO(Messages(bad));
  CHECK(bad.Count("IC003") == 1);
  ImageRecipe ok = Base();
  ok.layers.push_back(TorchLayer({}));
  CHECK(Scan(ok).Count("IC003") == 0);
}

TEST_CASE("cuDNN 9 sub-libraries from another install (IC004)", "[scan]") {
  TorchStack s;
  s.torch = "2.4.0";
  s.cudnn = "9.1.0.70";
  auto image = [&](bool skew) {
    ImageRecipe r = Base(skew ? std::vector<std::string>{"LD_LIBRARY_PATH=/opt/cudnn9/lib"}
                              : std::vector<std::string>{});
    r.layers.push_back(TorchLayer(s));
    std::vector<Entry> other;
    for (const auto& sub : kCudnn9Subs)
      AddLib(other, "opt/cudnn9/lib", sub + ".so.9.5.1", So(sub + ".so.9"), sub + ".so.9");
    r.layers.push_back(Layer(other, "COPY cudnn9 /opt/cudnn9"));
    return r;
  };
  Result bad = Scan(image(true));
  INFO(Messages(bad));
  CHECK(bad.Count("IC004") == kCudnn9Subs.size());
  Result ok = Scan(image(false));
  INFO(Messages(ok));
  CHECK(ok.Count("IC004") == 0);
}

TEST_CASE("an older copy of a CUDA library (IC011)", "[scan]") {
  auto image = [](const std::string& old_version) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    AddLib(e, "usr/lib64", "libcublas.so.12.4.5.8", So("libcublas.so.12"), "libcublas.so.12");
    AddLib(e, "opt/old/lib", "libcublas.so." + old_version, So("libcublas.so.12"),
           "libcublas.so.12");
    r.layers.push_back(Layer(e, "COPY cublas"));
    return r;
  };
  Result bad = Scan(image("12.1.3.1"));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC011") == 1);
  CHECK(bad.Of("IC011")[0]["paths"][0] == "/opt/old/lib/libcublas.so.12.1.3.1");
  CHECK(Scan(image("12.4.5.8")).Count("IC011") == 0);
}

// cuBLAS in /usr/lib64, which needs cuBLASLt (there with `with_lt`).
std::vector<Entry> Cublas(bool with_lt) {
  std::vector<Entry> e;
  AddLib(e, "usr/lib64", "libcublas.so.12.4.5.8", So("libcublas.so.12", {"libcublasLt.so.12"}),
         "libcublas.so.12");
  if (with_lt)
    AddLib(e, "usr/lib64", "libcublasLt.so.12.4.5.8", So("libcublasLt.so.12"), "libcublasLt.so.12");
  return e;
}

TEST_CASE("a CUDA library that cannot be resolved (IC012)", "[scan]") {
  auto image = [](bool with_lt) {
    ImageRecipe r = Base();
    r.layers.push_back(Layer(Cublas(with_lt), "COPY cublas"));
    return r;
  };
  Result bad = Scan(image(false));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC012") == 1);
  auto f = bad.Of("IC012")[0];
  CHECK(f["message"].get<std::string>().find("libcublasLt.so.12") != std::string::npos);
  // Nothing in the image loads cuBLAS: a warning that says so, not an error.
  CHECK(f["severity"] == "warning");
  CHECK(f["message"].get<std::string>().find("no program, extension or framework") !=
        std::string::npos);
  CHECK(Scan(image(true)).Count("IC012") == 0);
}

// A program in /app that links `needed` (fixture sonames), with `rpath` as its DT_RPATH.
fs::path Program(const std::string& name, const std::vector<std::string>& needed,
                 const std::string& rpath = "") {
  SharedObject app;
  app.executable = true;
  app.source = "int main(void) { return 0; }\n";
  app.rpath = rpath;
  app.needed = {"-Wl,--no-as-needed"};
  for (const auto& n : needed) app.needed.push_back(So(n).string());
  std::string key = rpath;
  for (const auto& n : needed) key += "|" + n;
  fs::path out = Cache() / ("program-" + std::to_string(std::hash<std::string>{}(key))) / name;
  Compile(app, out);
  return out;
}

TEST_CASE("a CUDA library's missing dependency is an error once a program loads it (IC012)",
          "[scan]") {
  auto image = [](bool later_delete) {
    ImageRecipe r = Base();
    std::vector<Entry> e = Cublas(later_delete);
    e.push_back(Dir("app"));
    e.push_back(FileFrom("app/server", Program("server", {"libcublas.so.12"}), 0755));
    r.layers.push_back(Layer(e, "COPY app"));
    if (later_delete)
      r.layers.push_back(Layer(
          {Whiteout("usr/lib64/libcublasLt.so.12"), Whiteout("usr/lib64/libcublasLt.so.12.4.5.8")},
          "RUN rm /usr/lib64/libcublasLt*"));
    return r;
  };
  Result bad = Scan(image(false));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC012") == 1);
  CHECK(bad.Of("IC012")[0]["severity"] == "error");
  CHECK(bad.Of("IC012")[0]["layer"]["created_by"] == "COPY app");
  CHECK(bad.status == 1);
  // Deleted by a later layer: that layer is blamed, first in the message.
  Result deleted = Scan(image(true));
  INFO(Messages(deleted));
  REQUIRE(deleted.Count("IC012") == 1);
  auto f = deleted.Of("IC012")[0];
  CHECK(f["layer"]["created_by"] == "RUN rm /usr/lib64/libcublasLt*");
  CHECK(f["message"].get<std::string>().rfind("deleted by layer 1 (RUN rm /usr/lib64/libcublasLt*)",
                                              0) == 0);
}

TEST_CASE("an extension module of any package that links CUDA is a consumer (IC012)", "[scan]") {
  // flash-attn's extension needs cuDNN 9 through its RUNPATH into the nvidia-cudnn wheel.
  auto image = [](bool with_cudnn) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    std::string ext = "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so";
    e.push_back(
        FileFrom(kSite + ext, So(ext, {"libcudnn.so.9"}, "$ORIGIN/nvidia/cudnn/lib"), 0755));
    AddDist(e, "flash-attn", "2.5.8", {}, {ext});
    if (with_cudnn) {
      std::vector<std::string> files = {"nvidia/cudnn/lib/libcudnn.so.9"};
      for (const auto& sub : kCudnn9Subs) files.push_back("nvidia/cudnn/lib/" + sub + ".so.9");
      for (const auto& file : files) {
        std::string name = fs::path(file).filename();
        // Each finds the libraries it dlopens in its own directory (the wheel's files all have
        // RUNPATH $ORIGIN: the shim opens the sub-libraries, libcudnn_graph the engines).
        e.push_back(FileFrom(kSite + file, So(name, {}, "$ORIGIN")));
      }
      AddDist(e, "nvidia-cudnn-cu12", "9.1.0.70", {}, files);
    }
    r.layers.push_back(Layer(e, "RUN pip install flash-attn==2.5.8"));
    return r;
  };
  Result bad = Scan(image(false));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC012") == 1);
  auto f = bad.Of("IC012")[0];
  CHECK(f["severity"] == "error");
  std::string m = f["message"];
  CHECK(m.find("libcudnn.so.9") != std::string::npos);
  CHECK(m.find("flash-attn 2.5.8") != std::string::npos);
  CHECK(m.find("tried") == std::string::npos);  // the directories tried are evidence
  CHECK(f["evidence"].dump().find("tried") != std::string::npos);
  Result ok = Scan(image(true));
  INFO(Messages(ok));
  CHECK(ok.Count("IC012") == 0);

  // An application library nobody packaged, found by what it links, not by its name.
  ImageRecipe app = Base();
  app.layers.push_back(
      Layer({FileFrom("opt/app/lib/libmyconv.so", So("libmyconv.so", {"libcudnn.so.9"}))},
            "COPY libmyconv.so /opt/app/lib/"));
  Result mine = Scan(app);
  INFO(Messages(mine));
  REQUIRE(mine.Count("IC012") == 1);
  CHECK(mine.Of("IC012")[0]["message"].get<std::string>().find("unowned in /opt/app/lib") !=
        std::string::npos);
}

TEST_CASE("what a package preloads is already loaded for its extensions (IC012)", "[scan]") {
  // CuPy's cufft extension NEEDS libcufft.so.12 with no RUNPATH; CuPy loads it first from the
  // cu13 wheel directory (dlopen.json preload).
  auto image = [](const std::string& cupy, bool with_cufft, bool with_jitlink) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    std::string ext = "cupy/cuda/cufft.cpython-310-x86_64-linux-gnu.so";
    e.push_back(
        FileFrom(kSite + ext, So("cufft.cpython-310-x86_64-linux-gnu.so", {"libcufft.so.12"})));
    AddDist(e, cupy, "14.0.0", {}, {ext});
    std::vector<std::string> files;
    if (with_cufft) {
      e.push_back(FileFrom(kSite + "nvidia/cu13/lib/libcufft.so.12",
                           So("libcufft.so.12", {"libnvJitLink.so.13"}, "$ORIGIN")));
      files.push_back("nvidia/cu13/lib/libcufft.so.12");
    }
    if (with_jitlink) {
      e.push_back(FileFrom(kSite + "nvidia/cu13/lib/libnvJitLink.so.13", So("libnvJitLink.so.13")));
      files.push_back("nvidia/cu13/lib/libnvJitLink.so.13");
    }
    AddDist(e, "nvidia-cufft", "12.0.0.61", {}, files);
    r.layers.push_back(Layer(e, "RUN pip install " + cupy));
    return r;
  };
  Result ok = Scan(image("cupy-cuda13x", true, true));
  INFO(Messages(ok));
  CHECK(ok.Count("IC012") == 0);
  CHECK(ok.Serious() == 0);
  // The same extension in a package that preloads nothing does not find it.
  Result other = Scan(image("notcupy", true, true));
  INFO(Messages(other));
  REQUIRE(other.Count("IC012") == 1);
  CHECK(other.Of("IC012")[0]["message"].get<std::string>().find("libcufft.so.12") !=
        std::string::npos);
  // Nothing to preload: the extension's own DT_NEEDED fails.
  Result none = Scan(image("cupy-cuda13x", false, false));
  INFO(Messages(none));
  REQUIRE(none.Count("IC012") == 1);
  CHECK(none.Of("IC012")[0]["severity"] == "error");
  // A preload that itself fails: the preloaded cuFFT lacks its nvJitLink.
  Result broken = Scan(image("cupy-cuda13x", true, false));
  INFO(Messages(broken));
  bool jitlink = false;
  for (const auto& f : broken.Of("IC012"))
    jitlink = jitlink ||
              (f["message"].get<std::string>().find("libnvJitLink.so.13") != std::string::npos &&
               f["severity"] == "error");
  CHECK(jitlink);
}

TEST_CASE("onnxruntime-gpu 1.19 without its build file, an optional provider is info (IC012)",
          "[scan]") {
  // Its CUDA provider NEEDS cuDNN 9 (an image with cuDNN 8.9 only); its TensorRT provider NEEDS
  // TensorRT, which it loads only when that execution provider is requested.
  ImageRecipe r = Base();
  std::vector<Entry> e;
  const std::string capi = "onnxruntime/capi/";
  e.push_back(FileFrom(kSite + capi + "libonnxruntime_providers_cuda.so",
                       So("libonnxruntime_providers_cuda.so", {"libcudnn.so.9"})));
  e.push_back(FileFrom(kSite + capi + "libonnxruntime_providers_tensorrt.so",
                       So("libonnxruntime_providers_tensorrt.so", {"libnvinfer.so.10"})));
  AddDist(
      e, "onnxruntime-gpu", "1.19.0", {},
      {capi + "libonnxruntime_providers_cuda.so", capi + "libonnxruntime_providers_tensorrt.so"});
  AddLib(e, "usr/lib64", "libcudnn.so.8.9.7", So("libcudnn.so.8"), "libcudnn.so.8");
  r.layers.push_back(Layer(e, "RUN pip install onnxruntime-gpu==1.19.0"));
  Result res = Scan(r);
  INFO(Messages(res));
  size_t providers = 0;  // (the cuDNN 8 shim's sub-libraries are not in this image either)
  for (const auto& f : res.Of("IC012")) {
    std::string m = f["message"];
    if (m.find("libonnxruntime_providers_") == std::string::npos) continue;
    ++providers;
    CHECK(m.find("onnxruntime-gpu 1.19.0") != std::string::npos);
    bool trt = m.find("libnvinfer.so.10") != std::string::npos;
    CHECK(f["severity"] == (trt ? "info" : "error"));
    if (trt) CHECK(m.find("TensorrtExecutionProvider") != std::string::npos);
  }
  CHECK(providers == 2);
  CHECK(res.status == 1);
}

TEST_CASE("a test binary that cannot run as shipped is reported once, as info (IC012)", "[scan]") {
  // torch 2.1.2's torch/bin/nvfuser_tests: its RPATH misses torch/lib/libtorch.so.
  auto image = [](const std::string& rpath) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    e.push_back(FileFrom(kSite + "torch/lib/libtorch.so", So("libtorch.so")));
    e.push_back(FileFrom(kSite + "torch/bin/nvfuser_tests",
                         Program("nvfuser_tests", {"libtorch.so", "libcudnn.so.8"}, rpath), 0755));
    AddDist(e, "torch", "2.1.2", {}, {"torch/lib/libtorch.so", "torch/bin/nvfuser_tests"});
    r.layers.push_back(Layer(e, "RUN pip install torch==2.1.2"));
    return r;
  };
  Result shipped = Scan(image("$ORIGIN/../../lib"));
  INFO(Messages(shipped));
  REQUIRE(shipped.Count("IC012") == 1);
  auto f = shipped.Of("IC012")[0];
  CHECK(f["severity"] == "info");
  CHECK(f["message"].get<std::string>().find("not runnable as shipped") != std::string::npos);
  CHECK(f["message"].get<std::string>().find("libtorch.so") != std::string::npos);
  CHECK(shipped.status == 0);
  // The same binary that finds libtorch.so is a gate: its missing cuDNN is an error.
  Result runnable = Scan(image("$ORIGIN/../lib"));
  INFO(Messages(runnable));
  REQUIRE(runnable.Count("IC012") == 1);
  CHECK(runnable.Of("IC012")[0]["severity"] == "error");
  CHECK(runnable.Of("IC012")[0]["message"].get<std::string>().find("libcudnn.so.8") !=
        std::string::npos);
}

TEST_CASE("an application's own executable, wherever it lies, is a consumer (IC012)", "[scan]") {
  SharedObject app;
  app.executable = true;
  app.source = "int main(void) { return 0; }\n";
  app.needed = {"-Wl,--no-as-needed", So("libcublas.so.12").string()};
  fs::path server = Cache() / "app" / "server";
  Compile(app, server);
  ImageRecipe r = Base();
  r.layers.push_back(
      Layer({Dir("app"), FileFrom("app/server", server, 0755)}, "COPY server /app/"));
  Result bad = Scan(r);
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC012") == 1);
  std::string message = bad.Of("IC012")[0]["message"].get<std::string>();
  CHECK(message.find("libcublas.so.12") != std::string::npos);
  CHECK(message.find("/app/server") != std::string::npos);
}

TEST_CASE("a symbol version the resolved library lacks (IC013)", "[scan]") {
  const std::string fn = "int cudaFancy(void) { return 1; }\n";
  fs::path good =
      So("libcudart.so.12", {}, "", fn, "libcudart.so.12 { global: cudaFancy; local: *; };");
  fs::path old =
      So("libcudart.so.12", {}, "", fn, "libcudart.so.11.0 { global: cudaFancy; local: *; };");
  // The consumer is linked against the good one, so it needs version libcudart.so.12.
  SharedObject consumer;
  consumer.soname = "libcublas.so.12";
  consumer.source = "extern int cudaFancy(void);\nint cublasCall(void) { return cudaFancy(); }\n";
  consumer.needed = {good.string()};
  fs::path consumer_so = Cache() / "ic013" / "libcublas.so.12";
  Compile(consumer, consumer_so);
  auto image = [&](const fs::path& cudart) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    AddLib(e, "usr/lib64", "libcublas.so.12.4.5.8", consumer_so, "libcublas.so.12");
    AddLib(e, "usr/lib64", "libcudart.so.12.4.127", cudart, "libcudart.so.12");
    r.layers.push_back(Layer(e, "COPY libs"));
    return r;
  };
  Result bad = Scan(image(old));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC013") == 1);
  CHECK(bad.Of("IC013")[0]["message"].get<std::string>().find("cudaFancy@libcudart.so.12") !=
        std::string::npos);
  CHECK(Scan(image(good)).Count("IC013") == 0);
}

TEST_CASE("a package's library replaced by a later layer (IC015, IC004)", "[scan]") {
  // nvidia-cudnn-cu12's RECORD states each file's size; a later layer copies another release's
  // libcudnn_graph.so.9 (and an app library) over the wheel's.
  const std::string lib = "nvidia/cudnn/lib/";
  auto image = [&](bool replace) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    std::string record;
    for (const std::string name : {"libcudnn_graph.so.9", "libhelper.so"}) {
      fs::path so = So(name);
      e.push_back(FileFrom(kSite + lib + name, so));
      record += lib + name + ",sha256=x," + std::to_string(fs::file_size(so)) + "\n";
    }
    std::string info = "nvidia_cudnn_cu12-9.19.0.56.dist-info/";
    e.push_back(File(kSite + info + "METADATA",
                     "Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.19.0.56\n"));
    e.push_back(File(kSite + info + "RECORD", record + info + "RECORD,,\n"));
    r.layers.push_back(Layer(e, "RUN pip install nvidia-cudnn-cu12==9.19.0.56"));
    const std::string other =
        "static const char pad[8192] = {1};\nconst char* p(void) { return pad; }\n";
    std::vector<Entry> copy;
    for (const std::string name : {"libcudnn_graph.so.9", "libhelper.so"})
      copy.push_back(FileFrom(kSite + lib + name, replace ? So(name, {}, "", other) : So(name)));
    r.layers.push_back(Layer(copy, "COPY cudnn-9.10/ " + kSite + lib));
    return r;
  };
  Result bad = Scan(image(true));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC015") == 2);
  for (const auto& f : bad.Of("IC015")) {
    std::string m = f["message"];
    bool cuda = m.find("libcudnn_graph.so.9") != std::string::npos;
    CHECK(f["severity"] == (cuda ? "error" : "warning"));
    CHECK(m.find("nvidia-cudnn-cu12 9.19.0.56") != std::string::npos);
    CHECK(f["layer"]["created_by"].get<std::string>().rfind("COPY cudnn-9.10/", 0) == 0);
  }
  REQUIRE(bad.Count("IC004") == 1);
  CHECK(bad.Of("IC004")[0]["paths"][0] == "/" + kSite + lib + "libcudnn_graph.so.9");
  Result same = Scan(image(false));  // the same bytes copied again
  INFO(Messages(same));
  CHECK(same.Count("IC015") == 0);
  CHECK(same.Count("IC004") == 0);
}

TEST_CASE("a dpkg package's library replaced by a later layer (IC015 from md5sums, IC004)",
          "[scan]") {
  // libcudnn9-cuda-12 installs libcudnn_graph.so.9.1.0 and states its MD5 in md5sums; a later
  // layer copies another build over it. The MD5 is taken while the layer streams (the library
  // is 4 MiB: no capture keeps it whole).
  const std::string dir = "usr/lib/x86_64-linux-gnu/";
  const std::string pad =
      "static const char pad[4 << 20] = {1};\nconst char* p(void) { return pad; }\n";
  fs::path deb = So("libcudnn_graph.so.9", {}, "", pad);
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto image = [&](const fs::path& later) {
    ImageRecipe r = Base();
    r.layers.push_back(Layer(
        {File("var/lib/dpkg/status",
              "Package: libcudnn9-cuda-12\nStatus: install ok installed\nVersion: 9.1.0.70-1\n"),
         File("var/lib/dpkg/info/libcudnn9-cuda-12.list", "/" + dir + "libcudnn_graph.so.9.1.0\n"),
         File("var/lib/dpkg/info/libcudnn9-cuda-12.md5sums",
              imgcheck::util::Md5Hex(bytes(deb)) + "  " + dir + "libcudnn_graph.so.9.1.0\n"),
         FileFrom(dir + "libcudnn_graph.so.9.1.0", deb)},
        "RUN apt-get install libcudnn9-cuda-12=9.1.0.70-1"));
    r.layers.push_back(
        Layer({FileFrom(dir + "libcudnn_graph.so.9.1.0", later)}, "COPY cudnn-9.0/ /" + dir));
    return r;
  };
  Result bad = Scan(image(So("libcudnn_graph.so.9", {}, "", pad + "int other = 1;\n")));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC015") == 1);
  auto f = bad.Of("IC015")[0];  // a copy: Of returns a new list
  CHECK(f["severity"] == "error");
  CHECK(f["message"].get<std::string>().find("dpkg libcudnn9-cuda-12 9.1.0.70-1") !=
        std::string::npos);
  CHECK(f["layer"]["created_by"].get<std::string>().rfind("COPY cudnn-9.0/", 0) == 0);
  CHECK(bad.Count("IC004") == 1);
  Result same = Scan(image(deb));  // the same bytes copied again
  INFO(Messages(same));
  CHECK(same.Count("IC015") == 0);
  CHECK(same.Count("IC004") == 0);
}

TEST_CASE("a dangling soname link (IC014)", "[scan]") {
  auto image = [](bool remove) {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    AddLib(e, "usr/lib64", "libcufft.so.11.2.1.3", So("libcufft.so.11"), "libcufft.so.11");
    r.layers.push_back(Layer(e, "COPY cufft"));
    if (remove)
      r.layers.push_back(
          Layer({Whiteout("usr/lib64/libcufft.so.11.2.1.3")}, "RUN rm libcufft.so.11.2.1.3"));
    return r;
  };
  Result bad = Scan(image(true));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC014") == 1);
  CHECK(bad.Of("IC014")[0]["paths"][0] == "/usr/lib64/libcufft.so.11");
  CHECK(bad.Of("IC014")[0]["layer"]["created_by"] == "RUN rm libcufft.so.11.2.1.3");
  CHECK(Scan(image(false)).Count("IC014") == 0);
}

// Issue #22: with --dockerfile, an IC020 that LD_LIBRARY_PATH causes pointed at the COPY that
// wrote the stub, and one stub copied under two names gave two results. One result, on the ENV
// line, with the COPY as its related location.
TEST_CASE("sarif: a stub on the path is one result on its ENV line, the COPY related", "[scan]") {
  TempDir dir;
  ImageRecipe r = Base({"LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs"});
  r.layers.push_back(
      Layer({File("etc/os-release", "ID=ubuntu\n")}, "/bin/sh -c #(nop) ADD file:0123 in / "));
  r.layers.push_back(
      Layer({FileFrom("usr/local/cuda/lib64/stubs/libcuda.so", So("libcuda.so.1")),
             FileFrom("usr/local/cuda/lib64/stubs/libcuda.so.1", So("libcuda.so.1"))},
            "COPY stubs /usr/local/cuda/lib64/stubs # buildkit"));
  r.layers.push_back(EmptyLayer("ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs"));
  WriteFile(dir / "Dockerfile",
            "FROM ubuntu:22.04\n"
            "COPY stubs /usr/local/cuda/lib64/stubs\n"
            "ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs\n");
  fs::path sarif = dir / "r.sarif";
  Result res = Scan(r, "--dockerfile '" + (dir / "Dockerfile").string() + "' --output sarif='" +
                           sarif.string() + "'");
  INFO(Messages(res));
  REQUIRE(res.Count("IC020") == 1);
  CHECK(res.Of("IC020")[0]["dockerfile"]["line"] == 3);
  CHECK(res.Of("IC020")[0]["written_by"]["line"] == 2);
  auto j = nlohmann::json::parse(ReadFile(sarif));
  std::vector<nlohmann::json> ic020;
  for (const auto& result : j["runs"][0]["results"])
    if (result["ruleId"] == "IC020") ic020.push_back(result);
  REQUIRE(ic020.size() == 1);
  CHECK(ic020[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3);
  REQUIRE(ic020[0]["relatedLocations"].size() == 1);
  const auto& related = ic020[0]["relatedLocations"][0];
  CHECK(related["physicalLocation"]["region"]["startLine"] == 2);
  CHECK(related["physicalLocation"]["region"]["snippet"]["text"] ==
        "COPY stubs /usr/local/cuda/lib64/stubs");
  auto valid = Run("python3 '" + (SourceDir() / "testdata/sarif/validate.py").string() + "' '" +
                   sarif.string() + "'");
  INFO(valid.output);
  CHECK(valid.status == 0);
}

TEST_CASE("driver stub, baked-in driver, forward-compat libraries (IC020, IC021, IC022)",
          "[scan]") {
  auto cudart = [](std::vector<Entry>& e) {
    AddLib(e, "usr/local/cuda-12.4/lib64", "libcudart.so.12.4.127", So("libcudart.so.12"),
           "libcudart.so.12");
  };
  auto stub = [&](bool on_path) {
    ImageRecipe r =
        Base(on_path ? std::vector<std::string>{"LD_LIBRARY_PATH=/usr/local/cuda-12.4/lib64/stubs"}
                     : std::vector<std::string>{});
    std::vector<Entry> e;
    cudart(e);
    e.push_back(FileFrom("usr/local/cuda-12.4/lib64/stubs/libcuda.so", So("libcuda.so.1")));
    e.push_back(Symlink("usr/local/cuda-12.4/lib64/stubs/libcuda.so.1", "libcuda.so"));
    r.layers.push_back(Layer(e, "COPY cuda"));
    return r;
  };
  Result bad = Scan(stub(true));
  INFO(Messages(bad));
  CHECK(bad.Count("IC020") == 1);
  CHECK(bad.Count("IC021") == 0);
  Result ok = Scan(stub(false));
  INFO(Messages(ok));
  CHECK(ok.Count("IC020") == 0);

  ImageRecipe driver = Base();
  std::vector<Entry> d;
  AddLib(d, "usr/lib64", "libcuda.so.535.104.05", So("libcuda.so.1"), "libcuda.so.1");
  AddLib(d, "usr/lib64", "libnvidia-ml.so.535.104.05", So("libnvidia-ml.so.1"),
         "libnvidia-ml.so.1");
  driver.layers.push_back(Layer(d, "RUN apt-get install libnvidia-compute-535"));
  Result baked = Scan(driver);
  INFO(Messages(baked));
  CHECK(baked.Count("IC021") >= 1);
  CHECK(ok.Count("IC021") == 0);

  auto compat = [&](bool on_path) {
    ImageRecipe r =
        Base(on_path ? std::vector<std::string>{"LD_LIBRARY_PATH=/usr/local/cuda-12.4/compat"}
                     : std::vector<std::string>{});
    std::vector<Entry> e;
    cudart(e);
    AddLib(e, "usr/local/cuda-12.4/compat", "libcuda.so.550.54.15", So("libcuda.so.1"),
           "libcuda.so.1");
    r.layers.push_back(Layer(e, "RUN apt-get install cuda-compat-12-4"));
    return r;
  };
  // A stub registered with ldconfig reaches every CUDA program started later, with no consumer
  // in the image; the same directory without the stub's soname on the search path does not.
  auto registered = [](const std::string& dir) {
    ImageRecipe r = Base();
    std::vector<Entry> e = {
        File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
        File("etc/ld.so.conf.d/cuda.conf", dir + "\n"),
        FileFrom("usr/local/cuda-12.4/lib64/stubs/libcuda.so", So("libcuda.so.1"))};
    r.layers.push_back(Layer(e, "COPY cuda"));
    return r;
  };
  Result conf = Scan(registered("/usr/local/cuda-12.4/lib64/stubs"));
  INFO(Messages(conf));
  REQUIRE(conf.Count("IC020") == 1);
  CHECK(conf.Of("IC020")[0]["message"].get<std::string>().find("/etc/ld.so.conf.d/cuda.conf") !=
        std::string::npos);
  Result conf_ok = Scan(registered("/usr/local/cuda-12.4/lib64"));
  INFO(Messages(conf_ok));
  CHECK(conf_ok.Count("IC020") == 0);
  ImageRecipe link_only = Base({"LD_LIBRARY_PATH=/usr/local/cuda-12.4/lib64/stubs"});
  link_only.layers.push_back(Layer(
      {FileFrom("usr/local/cuda-12.4/lib64/stubs/libcuda.so", So("libcuda.so.1"))}, "COPY cuda"));
  Result no_soname = Scan(link_only);  // dlopen("libcuda.so.1") does not find "libcuda.so"
  INFO(Messages(no_soname));
  CHECK(no_soname.Count("IC020") == 0);

  Result fc = Scan(compat(true));
  INFO(Messages(fc));
  CHECK(fc.Count("IC022") == 1);
  CHECK(fc.Count("IC021") == 0);
  Result fc_off = Scan(compat(false));
  INFO(Messages(fc_off));
  CHECK(fc_off.Count("IC022") == 0);
}

TEST_CASE("target driver and NVIDIA_REQUIRE_CUDA (IC030, IC031)", "[scan]") {
  ImageRecipe r = Base();
  r.layers.push_back(TorchLayer({}));
  Result old = Scan(r, "--driver 470.57.02");
  INFO(Messages(old));
  REQUIRE(old.Count("IC030") == 1);
  CHECK(old.Of("IC030")[0]["message"].get<std::string>().find("525.60.13") != std::string::npos);
  CHECK(Scan(r, "--driver 535.104.05").Count("IC030") == 0);
  Result none = Scan(r);
  CHECK(none.Count("IC030") == 0);
  bool noted = false;
  for (const auto& n : none.json["notes"])
    noted = noted || n.get<std::string>().rfind("IC030", 0) == 0;
  CHECK(noted);

  ImageRecipe under = Base({"NVIDIA_REQUIRE_CUDA=cuda>=11.8 brand=tesla,driver>=470,driver<471"});
  under.layers.push_back(TorchLayer({}));
  Result u = Scan(under);
  INFO(Messages(u));
  CHECK(u.Count("IC031") == 1);
  ImageRecipe right = Base({"NVIDIA_REQUIRE_CUDA=cuda>=12.1 brand=tesla,driver>=470,driver<471"});
  right.layers.push_back(TorchLayer({}));
  CHECK(Scan(right).Count("IC031") == 0);
}

// The loader simulates the machine of the image's own libc: an aarch64 image is searched as one
// (whatever its configuration says), and a machine it does not model (ppc64le) is a note, not a
// "missing library" finding for every library of the image.
TEST_CASE("platform: the image's libc decides the machine (IC012)", "[scan]") {
  using namespace imgcheck::elf::fixture;
  auto image = [](uint16_t machine, const std::string& triplet, bool with_lt) {
    auto elf = [machine](const std::string& soname, std::vector<std::string> needed) {
      ElfSpec spec;
      spec.machine = machine;
      spec.soname = soname;
      spec.needed = std::move(needed);
      return BuildElf(spec);
    };
    ImageRecipe r = Base();  // its configuration says amd64
    std::string lib = "usr/lib/" + triplet + "/";
    std::vector<Entry> e = {
        File(lib + "libc.so.6", elf("libc.so.6", {})),
        File(lib + "libcublas.so.12", elf("libcublas.so.12", {"libcublasLt.so.12", "libc.so.6"}))};
    if (with_lt) e.push_back(File(lib + "libcublasLt.so.12", elf("libcublasLt.so.12", {})));
    r.layers.push_back(Layer(e, "COPY libs"));
    return r;
  };
  Result arm = Scan(image(183, "aarch64-linux-gnu", true));
  INFO(Messages(arm));
  CHECK(arm.status == 0);
  CHECK(arm.Count("IC012") == 0);
  Result arm_missing = Scan(image(183, "aarch64-linux-gnu", false));
  INFO(Messages(arm_missing));
  REQUIRE(arm_missing.Count("IC012") == 1);
  CHECK(Messages(arm_missing).find("libcublasLt.so.12") != std::string::npos);

  Result ppc = Scan(image(21, "powerpc64le-linux-gnu", true));
  INFO(Messages(ppc));
  CHECK(ppc.status == 0);
  CHECK(ppc.Count("IC012") == 0);
  REQUIRE(ppc.json.is_object());
  CHECK(ppc.json["notes"].dump().find("ELF machine 21 (64-bit), which the loader does not model") !=
        std::string::npos);
}

TEST_CASE("target GPU: device code and cuDNN's GPU floor (IC040, IC041)", "[scan]") {
  using namespace imgcheck::elf::fixture;
  ElfSpec spec;
  spec.soname = "libcufft.so.11";
  spec.fatbin = BuildFatbin({{false, 80}, {false, 90}});
  ImageRecipe r = Base();
  r.layers.push_back(Layer({File("usr/lib64/libcufft.so.11.2.1.3", BuildElf(spec)),
                            Symlink("usr/lib64/libcufft.so.11", "libcufft.so.11.2.1.3")},
                           "COPY cufft"));
  Result bad = Scan(r, "--gpu sm_75");
  INFO(Messages(bad));
  CHECK(bad.Count("IC040") == 1);
  CHECK(Scan(r, "--gpu sm_86").Count("IC040") == 0);  // sm_80 SASS runs on 8.6
  CHECK(Scan(r, "--gpu H100").Count("IC040") == 0);
  CHECK(Scan(r).Count("IC040") == 0);

  // The cu13 wheel's libcufft.so.12 lists only sm_75 SASS: NVIDIA's release is judged by the
  // SM range CUDA 13 supports (sm_75 and newer), not by its fatbin listing.
  ElfSpec wheel;
  wheel.soname = "libcufft.so.12";
  wheel.fatbin = BuildFatbin({{false, 75}});
  ImageRecipe cu13 = Base();
  std::vector<Entry> e = {File(kSite + "nvidia/cu13/lib/libcufft.so.12", BuildElf(wheel))};
  AddDist(e, "nvidia-cufft", "12.0.0.61", {}, {"nvidia/cu13/lib/libcufft.so.12"});
  cu13.layers.push_back(Layer(e, "RUN pip install nvidia-cufft"));
  Result hopper = Scan(cu13, "--gpu H100");
  INFO(Messages(hopper));
  CHECK(hopper.Count("IC040") == 0);
  Result volta_cufft = Scan(cu13, "--gpu 'Tesla V100'");
  INFO(Messages(volta_cufft));
  REQUIRE(volta_cufft.Count("IC040") == 1);
  CHECK(volta_cufft.Of("IC040")[0]["message"].get<std::string>().find("CUDA 13") !=
        std::string::npos);
  // The same fatbin in an application's library is judged by its device code.
  ImageRecipe app = Base();
  app.layers.push_back(Layer({File("opt/app/lib/libcufft.so.12", BuildElf(wheel))}, "COPY app"));
  CHECK(Scan(app, "--gpu H100").Count("IC040") == 1);

  TorchStack s;
  s.torch = "2.8.0";
  s.cuda = "12.8";
  s.cudnn = "9.11.0.98";
  s.cudart = "12.8.90";
  ImageRecipe t = Base();
  t.layers.push_back(TorchLayer(s));
  Result volta = Scan(t, "--gpu 'Tesla V100'");
  INFO(Messages(volta));
  REQUIRE(volta.Count("IC041") == 1);
  CHECK(volta.Of("IC041")[0]["message"].get<std::string>().find(
            "not compatible with devices with SM < 7.5") != std::string::npos);
  CHECK(Scan(t, "--gpu A100").Count("IC041") == 0);
}

TEST_CASE("LD_LIBRARY_PATH with empty, relative or missing entries (IC060)", "[scan]") {
  ImageRecipe bad = Base({"LD_LIBRARY_PATH=:/opt/gone/lib:lib"});
  bad.layers.push_back(Layer({Dir("usr/lib64")}, "RUN mkdir"));
  Result b = Scan(bad);
  INFO(Messages(b));
  REQUIRE(b.Count("IC060") == 1);
  std::string m = b.Of("IC060")[0]["message"];
  CHECK(m.find("empty") != std::string::npos);
  CHECK(m.find("/opt/gone/lib") != std::string::npos);
  CHECK(m.find("relative") != std::string::npos);
  // The nvidia/cuda images' driver-volume entries are mounted at run time.
  ImageRecipe ok =
      Base({"LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64:/usr/lib64"});
  ok.layers.push_back(Layer({Dir("usr/lib64")}, "RUN mkdir"));
  CHECK(Scan(ok).Count("IC060") == 0);
}

TEST_CASE("ld.so.cache out of date with the library directories (IC061)", "[scan]") {
  if (!HaveProgram("ldconfig") || geteuid() != 0)
    return Skip("ldconfig -r needs root (it chroots)");
  // A root with cuFFT in /opt/cuda/lib named by ld.so.conf, its cache written by ldconfig.
  TempDir root;
  fs::create_directories(root / "etc");
  fs::create_directories(root / "opt/cuda/lib");
  WriteFile(root / "etc/ld.so.conf", "/opt/cuda/lib\n");
  fs::copy_file(So("libcufft.so.11"), root / "opt/cuda/lib/libcufft.so.11.2.1.3");
  fs::create_symlink("libcufft.so.11.2.1.3", root / "opt/cuda/lib/libcufft.so.11");
  auto r = Run("ldconfig -X -r '" + root.path().string() + "' 2>&1");
  REQUIRE(r.status == 0);
  std::string cache = ReadFile(root / "etc/ld.so.cache");
  auto image = [&](bool add_later) {
    ImageRecipe img = Base();
    std::vector<Entry> e = {File("etc/ld.so.conf", "/opt/cuda/lib\n"),
                            File("etc/ld.so.cache", cache)};
    AddLib(e, "opt/cuda/lib", "libcufft.so.11.2.1.3", So("libcufft.so.11"), "libcufft.so.11");
    img.layers.push_back(Layer(e, "RUN ldconfig"));
    if (add_later) {
      std::vector<Entry> more;
      AddLib(more, "opt/cuda/lib", "libcurand.so.10.3.5.147", So("libcurand.so.10"),
             "libcurand.so.10");
      img.layers.push_back(Layer(more, "COPY curand /opt/cuda/lib"));
    }
    return img;
  };
  Result bad = Scan(image(true));
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC061") == 1);
  CHECK(bad.Of("IC061")[0]["message"].get<std::string>().find("libcurand.so.10") !=
        std::string::npos);
  CHECK(Scan(image(false)).Count("IC061") == 0);
}

TEST_CASE("exit codes, --fail-on, --ignore and the config file", "[scan]") {
  Result seed = Scan(Seed(true));
  CHECK(seed.status == 1);
  CHECK(Scan(Seed(true), "--fail-on none").status == 0);
  Result ignored = Scan(Seed(true), "--ignore IC001,IC050,IC051,IC011");
  INFO(Messages(ignored));
  CHECK(ignored.Count("IC001") == 0);
  CHECK(ignored.status == 0);
  CHECK(ignored.json["suppressed"].size() >= 1);

  ImageRecipe ld = Base({"LD_LIBRARY_PATH=:/usr/lib64"});
  ld.layers.push_back(Layer({Dir("usr/lib64")}, "RUN mkdir"));
  CHECK(Scan(ld).status == 0);  // a warning passes the default gate
  CHECK(Scan(ld, "--fail-on warning").status == 1);

  TempDir dir;
  WriteFile(dir / "policy.yaml", "ignore:\n  - rule: IC060\n    reason: entrypoint sets the cwd\n");
  Result cfg = Scan(ld, "--fail-on warning --config '" + (dir / "policy.yaml").string() + "'");
  CHECK(cfg.status == 0);
  CHECK(cfg.Count("IC060") == 0);

  WriteFile(dir / "bad.yaml", "ignore:\n  - rule: IC060\n");
  Result bad_cfg = RunScan(ld, "--config '" + (dir / "bad.yaml").string() + "'");
  CHECK(bad_cfg.status == 2);
  CHECK(bad_cfg.output.find("bad.yaml:2: the ignore of IC060 needs a \"reason\"") !=
        std::string::npos);

  auto typo = Run("'" + Imgcheck() + "' scan oci:/nonexistent --ignore IC0060 2>&1");
  CHECK(typo.status == 2);
  CHECK(typo.output.find("did you mean IC060") != std::string::npos);
  auto missing = Run("'" + Imgcheck() + "' scan oci:/nonexistent/layout 2>&1");
  CHECK(missing.status == 2);
}

TEST_CASE("an image without a CUDA stack says so, --fail-on-empty fails it", "[scan]") {
  ImageRecipe plain = Base();
  plain.layers.push_back(Layer({File("etc/os-release", "ID=debian\n")}, "ADD rootfs.tar /"));
  Result empty = Scan(plain);
  CHECK(empty.status == 0);
  CHECK(empty.json["findings"].empty());
  CHECK(empty.json["cuda_stack"] == false);
  CHECK(Scan(plain, "--fail-on-empty").status == 1);
  TempDir dir;
  WriteOciLayout(dir / "layout", plain);
  auto text = Run("'" + Imgcheck() + "' scan --quiet --no-cache oci:" + (dir / "layout").string());
  CHECK(text.status == 0);
  CHECK(text.output.find("no CUDA stack found") != std::string::npos);

  Result stack = Scan(Seed(false), "--fail-on none --fail-on-empty");
  CHECK(stack.json["cuda_stack"] == true);
  CHECK(stack.status == 0);
}

TEST_CASE("profile: --profile prints each stage's time on stderr, and the report stays as it was",
          "[scan]") {
  TempDir dir;
  WriteOciLayout(dir / "layout", Seed(true));
  std::string scan =
      "'" + Imgcheck() + "' scan --quiet --no-cache --format json oci:" + (dir / "layout").string();
  // The reports go to files: what Run() captures is stderr alone.
  auto plain = Run(scan + " --output '" + (dir / "plain.json").string() + "'");
  auto profiled = Run(scan + " --profile --output '" + (dir / "profiled.json").string() + "'");
  CHECK(profiled.status == plain.status);
  CHECK(ReadFile(dir / "profiled.json") == ReadFile(dir / "plain.json"));
  CHECK(plain.output.empty());
  INFO(profiled.output);
  for (std::string stage : {"read layers", "inflate+blob", "hash wait", "capture", "merge",
                            "catalog", "loader", "rules", "binding", "report", "wall"})
    CHECK(profiled.output.find("  " + stage + " ") != std::string::npos);
}

// The text report of a few scenario images besides the demo, so that what people read cannot
// drift unnoticed: testdata/golden/scan-NAME.txt. The image's digest depends on the compiler that
// built the fixtures, so the summary line's is masked. IMGCHECK_UPDATE_GOLDEN=1 rewrites them
// after a deliberate change.
TEST_CASE("text report goldens of scenario images", "[scan][golden]") {
  // onnxruntime-gpu's CUDA provider with a RUNPATH into a CUDA 12.2 that is not there; the
  // nvidia-* wheels it needs are installed, off its search path (issue #22's real image).
  auto ort = [] {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    const std::string capi = "onnxruntime/capi/";
    e.push_back(FileFrom(kSite + capi + "libonnxruntime_providers_cuda.so",
                         So("libonnxruntime_providers_cuda.so",
                            {"libcudnn.so.9", "libcudart.so.12"}, "/usr/local/cuda-12.2/lib")));
    AddDist(e, "onnxruntime-gpu", "1.19.0", {}, {capi + "libonnxruntime_providers_cuda.so"});
    e.push_back(FileFrom(kSite + "nvidia/cudnn/lib/libcudnn.so.9", So("libcudnn.so.9")));
    AddDist(e, "nvidia-cudnn-cu12", "9.5.1.17", {}, {"nvidia/cudnn/lib/libcudnn.so.9"});
    e.push_back(FileFrom(kSite + "nvidia/cuda_runtime/lib/libcudart.so.12", So("libcudart.so.12")));
    AddDist(e, "nvidia-cuda-runtime-cu12", "12.6.77", {},
            {"nvidia/cuda_runtime/lib/libcudart.so.12"});
    r.layers.push_back(Layer(e, "RUN pip install onnxruntime-gpu==1.19.0"));
    return r;
  };
  auto stub = [] {
    ImageRecipe r = Base({"LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs"});
    std::vector<Entry> e;
    AddLib(e, "usr/local/cuda/lib64", "libcudart.so.12.4.127", So("libcudart.so.12"),
           "libcudart.so.12");
    e.push_back(FileFrom("usr/local/cuda/lib64/stubs/libcuda.so", So("libcuda.so.1")));
    e.push_back(FileFrom("usr/local/cuda/lib64/stubs/libcuda.so.1", So("libcuda.so.1")));
    r.layers.push_back(Layer(e, "COPY cuda /usr/local/cuda"));
    return r;
  };
  auto clean = [] {
    ImageRecipe r = Base();
    std::vector<Entry> e;
    AddLib(e, "usr/lib64", "libcudart.so.12.4.127", So("libcudart.so.12"), "libcudart.so.12");
    e.push_back(FileFrom("app/server", Program("server", {"libcudart.so.12"}), 0755));
    r.layers.push_back(Layer(e, "COPY . /"));
    return r;
  };
  const std::vector<std::pair<std::string, ImageRecipe>> scenarios = {
      {"stale-cudnn", Seed(true)}, {"ort-off-path", ort()}, {"stub", stub()}, {"clean", clean()}};
  for (const auto& [name, recipe] : scenarios) {
    INFO(name);
    TempDir dir;
    WriteOciLayout(dir / "image", recipe);
    CommandResult r = Run("cd '" + dir.path().string() + "' && NO_COLOR=1 '" + Imgcheck() +
                          "' scan --quiet --no-cache oci:image:latest");
    INFO(r.output);
    CHECK(r.status == (name == "clean" ? 0 : 1));
    std::string text = r.output;
    size_t digest = text.find(" sha256:");
    REQUIRE(digest != std::string::npos);
    REQUIRE(digest < text.find('\n'));
    text.replace(digest + 8, 12, "<digest>");
    const fs::path golden = SourceDir() / ("testdata/golden/scan-" + name + ".txt");
    if (std::getenv("IMGCHECK_UPDATE_GOLDEN")) WriteFile(golden, text);
    CHECK(ReadFile(golden) == text);
  }
}

TEST_CASE("a legacy docker save archive is named by its config digest", "[scan]") {
  TempDir dir;
  WrittenImage w =
      WriteDockerArchive(dir / "d.tar", Seed(true), "example/x:1", DockerArchiveForm::kLegacy);
  fs::path out = dir / "r.json";
  Run("'" + Imgcheck() + "' scan --quiet --no-cache --format json --output '" + out.string() +
      "' docker-archive:" + (dir / "d.tar").string());
  auto j = nlohmann::json::parse(ReadFile(out));
  CHECK(j["image"]["manifest_digest"] == w.config_digest);
  CHECK(j["image"]["config_digest"] == w.config_digest);
}

TEST_CASE("every format renders a scan, --output writes it", "[scan]") {
  TempDir dir;
  WriteOciLayout(dir / "layout", Seed(true));
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  auto sarif = Run("'" + Imgcheck() + "' scan " + ref + " --format sarif --output '" +
                   (dir / "r.sarif").string() + "'");
  CHECK(sarif.status == 1);
  auto j = nlohmann::json::parse(ReadFile(dir / "r.sarif"));
  CHECK(j["version"] == "2.1.0");
  CHECK(j["runs"][0]["results"].size() >= 1);
  auto junit = Run("'" + Imgcheck() + "' " + ref + " --format junit");
  CHECK(junit.output.find(
            "<testcase classname=\"imgcheck.IC001\" name=\"IC001 cudnn-version-mismatch\" "
            "time=\"0\">") != std::string::npos);
  auto text = Run("NO_COLOR=1 '" + Imgcheck() + "' " + ref);
  CHECK(text.output.find("1 error, ") != std::string::npos);
  CHECK(text.output.find("\nerror   IC001 cudnn-version-mismatch\n") != std::string::npos);
  CHECK(text.output.find("\033[") == std::string::npos);  // not a terminal: no colour
  auto unknown = Run("'" + Imgcheck() + "' " + ref + " --format yaml 2>&1");
  CHECK(unknown.status == 2);
}

TEST_CASE(
    "SARIF's category is the image's repository: app:1 and app:2 share it, and reports name "
    "the version",
    "[scan]") {
  TempDir dir;
  WriteOciLayout(dir / "layout", Seed(true), "1");
  WriteOciLayout(dir / "layout", Seed(false), "2");
  auto id = [&](const std::string& tag, const std::string& args) {
    fs::path out = dir / ("r" + tag + ".sarif");
    auto r = Run("'" + Imgcheck() + "' scan -q --no-cache oci:" + (dir / "layout").string() + ":" +
                 tag + " --format sarif --output '" + out.string() + "'" + args);
    CHECK(r.status <= 1);
    return nlohmann::json::parse(ReadFile(out))["runs"][0]["automationDetails"]["id"];
  };
  CHECK(id("1", "") == "imgcheck/oci:" + (dir / "layout").string() + "/");
  CHECK(id("2", "") == id("1", ""));
  CHECK(id("2", " --sarif-category app") == "imgcheck/app/");

  // The reports name the version `imgcheck version` prints.
  auto version = nlohmann::json::parse(Run("'" + Imgcheck() + "' version --format json").output);
  auto sarif = nlohmann::json::parse(ReadFile(dir / "r1.sarif"));
  CHECK(sarif["runs"][0]["tool"]["driver"]["version"] == version["version"]);
  fs::path json = dir / "r.json";
  Run("'" + Imgcheck() + "' scan -q --no-cache oci:" + (dir / "layout").string() +
      ":1 --format json --output '" + json.string() + "'");
  CHECK(nlohmann::json::parse(ReadFile(json))["tool"]["version"] == version["version"]);
}

TEST_CASE("an LD_PRELOAD entry the image lacks is one warning on its ENV line (IC062)", "[scan]") {
  TempDir dir;
  auto image = [](bool present) {
    ImageRecipe r = Base({"LD_PRELOAD=libjemalloc.so.2"});
    std::vector<Entry> e = {Dir("usr/lib64")};
    if (present) AddLib(e, "usr/lib64", "libjemalloc.so.2", So("libjemalloc.so.2"), "libjemalloc.so.2");
    r.layers.push_back(Layer(e, "RUN apt-get install -y libjemalloc2"));
    r.layers.push_back(EmptyLayer("ENV LD_PRELOAD=libjemalloc.so.2"));
    return r;
  };
  WriteFile(dir / "Dockerfile",
            "FROM debian:12\n"
            "RUN apt-get install -y libjemalloc2\n"
            "ENV LD_PRELOAD=libjemalloc.so.2\n");
  Result bad = Scan(image(false), "--dockerfile '" + (dir / "Dockerfile").string() + "'");
  INFO(Messages(bad));
  REQUIRE(bad.Count("IC062") == 1);
  const auto f = bad.Of("IC062")[0];
  CHECK(f["severity"] == "warning");
  CHECK(f["dockerfile"]["line"] == 3);
  CHECK(f["message"].get<std::string>().find(
            "from LD_PRELOAD cannot be preloaded (cannot open shared object file): ignored.") !=
        std::string::npos);
  CHECK(bad.status == 0);  // a warning: --fail-on error passes it
  CHECK(Scan(image(true)).Count("IC062") == 0);
}

TEST_CASE("rules list and rules explain come from the rule table", "[rules]") {
  auto list = Run("'" + Imgcheck() + "' rules list");
  CHECK(list.status == 0);
  for (const char* id : {"IC001", "IC004", "IC014", "IC015", "IC022", "IC031", "IC041", "IC061"})
    CHECK(list.output.find(id) != std::string::npos);
  auto replaced = Run("'" + Imgcheck() + "' rules explain IC015");
  CHECK(replaced.status == 0);
  CHECK(replaced.output.find("package-file-replaced") != std::string::npos);
  CHECK(replaced.output.find("RECORD") != std::string::npos);
  CHECK(replaced.output.find("md5sums") != std::string::npos);
  auto explain = Run("'" + Imgcheck() + "' rules explain IC001");
  CHECK(explain.status == 0);
  CHECK(explain.output.find("cudnn-version-mismatch") != std::string::npos);
  CHECK(explain.output.find("compatibility version 5000") != std::string::npos);
  CHECK(explain.output.find("Fix:") != std::string::npos);
  auto typo = Run("'" + Imgcheck() + "' rules explain IC01 2>&1");
  CHECK(typo.status == 2);
  CHECK(typo.output.find("did you mean IC001") != std::string::npos);

  TempDir dir;
  WriteFile(dir / "cuda.json", "{\n  \"cuda_driver\": {\"rows\": [\n    {\"cuda\": 12}\n  ]}\n}\n");
  auto bad = Run("'" + Imgcheck() + "' rules --rules '" + dir.path().string() + "' list 2>&1");
  CHECK(bad.status == 2);
  CHECK(bad.output.find((dir / "cuda.json").string() + ":3: ") != std::string::npos);
}

TEST_CASE("a clean image of the machine's real CUDA files stays clean", "[scan][real]") {
  // NVIDIA's wheels as pip lays them out (nvidia/cu13/lib + dist-info with the real RECORD
  // sizes), from the toolkit this machine has; the small runtime wheels only.
  const fs::path cuda = "/usr/local/cuda";
  if (!fs::exists(cuda / "dist-info") || !fs::exists(cuda / "lib")) {
    WARN("SKIPPED: needs the CUDA toolkit at /usr/local/cuda with its wheels' dist-info");
    return;
  }
  ImageRecipe r = Base();
  std::vector<Entry> e;
  size_t libraries = 0;
  for (const auto& info : fs::directory_iterator(cuda / "dist-info")) {
    std::string name = info.path().filename();
    if (name.rfind("nvidia_cuda_runtime-", 0) != 0 && name.rfind("nvidia_nvtx-", 0) != 0 &&
        name.rfind("nvidia_cuda_cupti-", 0) != 0)
      continue;
    // Keep the RECORD rows of files the machine has (nvidia/<dir>/X is /usr/local/cuda/X).
    std::string record;
    std::istringstream rows(ReadFile(info.path() / "RECORD"));
    for (std::string row; std::getline(rows, row);) {
      std::string path = row.substr(0, row.find(','));
      size_t dir_end = path.find('/', 7);
      if (path.rfind("nvidia/", 0) != 0 || dir_end == std::string::npos) continue;
      fs::path host = cuda / path.substr(dir_end + 1);
      if (!fs::is_regular_file(host) || fs::is_symlink(host)) continue;
      e.push_back(FileFrom(kSite + path, host));
      record += row + "\n";
      libraries += path.find(".so") != std::string::npos;
    }
    e.push_back(FileFrom(kSite + name + "/METADATA", info.path() / "METADATA"));
    e.push_back(File(kSite + name + "/RECORD", record + name + "/RECORD,,\n"));
  }
  REQUIRE(libraries > 0);
  r.layers.push_back(Layer(e, "RUN pip install nvidia-cuda-runtime nvidia-nvtx nvidia-cuda-cupti"));
  Result clean = Scan(r);
  INFO(Messages(clean));
  CHECK(clean.status == 0);
  CHECK(clean.Serious() == 0);
}

// --- Baselines, diff and Markdown (issue 45) -------------------------------------------------

namespace {

// Seed(true) after a cuDNN bump: the stale /usr/local/cudnn-5.0 now holds cuDNN 5.1.10 (IC001
// fixed), but its copy brought a development link to a file it lacks (IC014 introduced).
ImageRecipe CudnnBumped() {
  ImageRecipe r = Seed(true);
  std::vector<Entry> bumped;
  AddLib(bumped, "usr/local/cudnn-5.0/lib64", "libcudnn.so.5.1.10", So("libcudnn.so.5"),
         "libcudnn.so.5");
  bumped.push_back(Symlink("usr/local/cudnn-5.0/lib64/libcudnn.so", "libcudnn.so.5.1.3"));
  r.layers[1] = Layer(bumped, "COPY cudnn-5.1 /usr/local/cudnn-5.0");
  return r;
}

// `recipe` on a base layer of its own (a distribution release file): a base bump changes it.
ImageRecipe OnBase(ImageRecipe recipe, const std::string& release) {
  recipe.layers.insert(recipe.layers.begin(), Layer({File("etc/debian_version", release + "\n")},
                                                    "FROM debian:" + release));
  return recipe;
}

struct Pair {
  TempDir dir;
  WrittenImage old_image, new_image;
  Pair(const ImageRecipe& before, const ImageRecipe& after) {
    old_image = WriteOciLayout(dir / "old", before);
    new_image = WriteOciLayout(dir / "new", after);
  }
  std::string Old() const { return "oci:" + (dir / "old").string() + ":latest"; }
  std::string New() const { return "oci:" + (dir / "new").string() + ":latest"; }
};

CommandResult Imgcheck(const Pair& p, const std::string& args) {
  return Run("cd '" + p.dir.path().string() + "' && '" + Imgcheck() + "' " + args + " 2>&1");
}

// The diff's JSON (and its exit status), which must have run to the end.
std::pair<int, nlohmann::json> DiffJson(const Pair& p, const std::string& args = "") {
  CommandResult r = Imgcheck(
      p, "diff -q " + p.Old() + " " + p.New() + " --no-cache --format json -o diff.json " + args);
  INFO(r.output);
  REQUIRE((r.status == 0 || r.status == 1));
  return {r.status, nlohmann::json::parse(ReadFile(p.dir / "diff.json"))};
}

std::vector<std::string> Rules(const nlohmann::json& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.push_back(f["rule"]);
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Markdown as GitHub renders it (cmark-gfm: tables, raw HTML kept), as HTML.
std::string MarkdownToHtml(const fs::path& markdown) {
  REQUIRE(HaveProgram("cmark-gfm"));  // scripts/deps.sh installs it
  CommandResult html = Run("cmark-gfm --unsafe -e table -e autolink " + Quote(markdown));
  REQUIRE(html.status == 0);
  return html.output;
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Findings of a JSON list whose evidence holds a loader resolution: the loader findings.
size_t LoaderFindings(const nlohmann::json& findings) {
  size_t n = 0;
  for (const auto& f : findings) {
    bool loader = false;
    for (const auto& e : f["evidence"]) loader |= e.contains("resolution");
    n += loader;
  }
  return n;
}

}  // namespace

TEST_CASE("diff: a cuDNN bump that fixes IC001 and introduces IC014, and --fail-on sees only new",
          "[diff]") {
  Pair p(Seed(true), CudnnBumped());
  auto [status, j] = DiffJson(p);
  INFO(j.dump(2));
  CHECK(j["schema"] == "imgcheck-diff/1");
  auto added = Rules(j["findings"]["new"]), fixed = Rules(j["findings"]["fixed"]);
  CHECK(Has(fixed, "IC001"));
  CHECK(Has(added, "IC014"));
  CHECK_FALSE(Has(added, "IC001"));
  CHECK(status == 1);  // IC014 is a new error
  for (const auto& f : j["findings"]["unchanged"]) CHECK(f["baseline"] == true);
  // The library by package: the stale copy 5.0.5 became 5.1.10.
  bool upgraded = false;
  for (const auto& l : j["libraries"])
    upgraded |= l["library"] == "libcudnn" &&
                l["package"] == "unowned in /usr/local/cudnn-5.0/lib64" &&
                l["change"] == "upgraded" && l["old"] == "5.0.5" && l["new"] == "5.1.10";
  CHECK(upgraded);
  // TensorFlow's libcudnn.so.5 still comes first from the bumped directory: another file now.
  bool reloaded = false;
  for (const auto& l : j["loads"])
    reloaded |= l["name"] == "libcudnn.so.5" &&
                l["old"] == "/usr/local/cudnn-5.0/lib64/libcudnn.so.5.0.5" &&
                l["new"] == "/usr/local/cudnn-5.0/lib64/libcudnn.so.5.1.10" &&
                l["why"].get<std::string>().find("ld-library-path") != std::string::npos;
  CHECK(reloaded);
  // --fail-on none: the new error does not fail either; the text says what changed.
  CHECK(DiffJson(p, "--fail-on none").first == 0);
  CommandResult text = Imgcheck(p, "diff -q --no-cache " + p.Old() + " " + p.New());
  CHECK(text.status == 1);
  CHECK(text.output.find(
            "upgraded libcudnn (unowned in /usr/local/cudnn-5.0/lib64): 5.0.5 -> 5.1.10") !=
        std::string::npos);
  CHECK(text.output.find("fixed findings:\n  error IC001") != std::string::npos);
}

TEST_CASE("diff: a torch bump: the framework's build, the cuDNN wheel by package, the loads",
          "[diff]") {
  TorchStack before;  // torch 2.3.0 for CUDA 12.1 with cuDNN 8.9.2.26
  TorchStack after;
  after.torch = "2.4.0";
  after.cuda = "12.4";
  after.cudnn = "9.1.0.70";
  ImageRecipe a = Base(), b = Base();
  a.layers.push_back(TorchLayer(before));
  b.layers.push_back(TorchLayer(after));
  Pair p(a, b);
  auto [status, j] = DiffJson(p);
  INFO(j.dump(2));
  REQUIRE(j["frameworks"].size() == 1);
  CHECK(j["frameworks"][0]["name"] == "torch");
  CHECK(j["frameworks"][0]["change"] == "upgraded");
  CHECK(j["frameworks"][0]["old"].get<std::string>().find("cuda 12.1") != std::string::npos);
  CHECK(j["frameworks"][0]["new"].get<std::string>().find("cuda 12.4") != std::string::npos);
  std::map<std::string, nlohmann::json> cudnn;  // library -> its change in the cuDNN wheel
  for (const auto& l : j["libraries"])
    if (l["package"] == "nvidia-cudnn-cu12") cudnn[l["library"]] = l;
  REQUIRE(cudnn.count("libcudnn") == 1);
  CHECK(cudnn["libcudnn"]["change"] == "upgraded");
  CHECK(cudnn["libcudnn"]["old"].get<std::string>().rfind("8", 0) == 0);
  CHECK(cudnn["libcudnn"]["new"].get<std::string>().rfind("9", 0) == 0);
  CHECK(cudnn["libcudnn_ops_infer"]["change"] == "removed");
  CHECK(cudnn["libcudnn_graph"]["change"] == "added");
  // libtorch_cuda.so now asks for libcudnn.so.9, and no longer for libcudnn.so.8.
  std::map<std::string, nlohmann::json> loads;
  for (const auto& l : j["loads"])
    if (l["consumer"].get<std::string>().ends_with("torch/lib/libtorch_cuda.so"))
      loads[l["name"]] = l;
  REQUIRE(loads.count("libcudnn.so.9") == 1);
  CHECK(loads["libcudnn.so.9"]["old"] == "");
  CHECK(loads["libcudnn.so.9"]["new"] == "/" + kSite + "nvidia/cudnn/lib/libcudnn.so.9");
  CHECK(loads["libcudnn.so.9"]["why"].get<std::string>().rfind("runpath", 0) == 0);
  REQUIRE(loads.count("libcudnn.so.8") == 1);
  CHECK(loads["libcudnn.so.8"]["new"] == "");
  CHECK(loads["libcudnn.so.8"]["why"] == "no longer asked for");
  CHECK(loads.count("libcudart.so.12") == 0);  // the same file in both
}

TEST_CASE("diff: a base bump changes nothing in the stack, and inherited errors do not fail",
          "[diff]") {
  Pair p(OnBase(Seed(true), "12.1"), OnBase(Seed(true), "12.2"));
  auto [status, j] = DiffJson(p);
  INFO(j.dump(2));
  CHECK(j["frameworks"].empty());
  CHECK(j["libraries"].empty());
  CHECK(j["libraries_unchanged"].get<size_t>() >= 2);
  CHECK(j["loads"].empty());
  CHECK(j["findings"]["new"].empty());
  CHECK(j["findings"]["fixed"].empty());
  CHECK(Has(Rules(j["findings"]["unchanged"]), "IC001"));
  CHECK(status == 0);  // IC001 is an error, but the old image had it
  // The same image scanned alone fails: the diff's pass is the baseline's doing.
  CHECK(Imgcheck(p, "scan -q --no-cache " + p.New()).status == 1);
}

TEST_CASE("diff: two images that share a base read the shared layers once", "[diff]") {
  Pair p(Seed(true), CudnnBumped());
  // The layers both images have, and the new layout's copy of them corrupted (same size): a
  // reading of them from the new layout fails its digest check.
  REQUIRE(p.old_image.layers[0].digest == p.new_image.layers[0].digest);
  REQUIRE(p.old_image.layers[2].digest == p.new_image.layers[2].digest);
  for (int i : {0, 2}) {
    fs::path blob = BlobPath(p.dir / "new", p.new_image.layers[static_cast<size_t>(i)].digest);
    std::string bytes = ReadFile(blob);
    for (size_t k = bytes.size() / 2; k < bytes.size() / 2 + 16 && k < bytes.size(); ++k)
      bytes[k] = static_cast<char>(~bytes[k]);
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    WriteFile(blob, bytes);
  }
  std::string images = " " + p.Old() + " " + p.New();
  CommandResult cached = Imgcheck(p, "diff -q --cache-dir cache" + images);
  INFO(cached.output);
  CHECK(cached.status == 1);  // ran to the end: the shared layers came from the first scan
  CommandResult uncached = Imgcheck(p, "diff -q --no-cache" + images);
  INFO(uncached.output);
  CHECK(uncached.status == 2);  // read twice: the new layout's corrupt copy is met
}

TEST_CASE("scan --baseline: a rebuild that moves files between layers matches, and new ones fail",
          "[baseline]") {
  // The rebuild: the stale cuDNN in another directory, written by another layer, and the
  // layers in another order; the same problem (IC001) with the same cause.
  ImageRecipe moved = Base({"LD_LIBRARY_PATH=/opt/cudnn5/lib64"});
  ImageRecipe seed = Seed(true);
  std::vector<Entry> old;
  AddLib(old, "opt/cudnn5/lib64", "libcudnn.so.5.0.5", So("libcudnn.so.5"), "libcudnn.so.5");
  moved.layers = {seed.layers[2], Layer(old, "COPY cudnn-5.0 /opt/cudnn5"), seed.layers[0]};
  Pair p(seed, moved);
  CommandResult before = Imgcheck(p, "scan -q --no-cache " + p.Old() + " -f json -o main.json");
  REQUIRE(before.status == 1);
  auto main = nlohmann::json::parse(ReadFile(p.dir / "main.json"));
  Result after = Scan(moved, "--baseline '" + (p.dir / "main.json").string() + "'");
  INFO(Messages(after));
  REQUIRE(after.Count("IC001") == 1);
  CHECK(after.Of("IC001")[0]["paths"][0] == "/opt/cudnn5/lib64/libcudnn.so.5.0.5");
  CHECK(after.Of("IC001")[0]["baseline"] == true);
  CHECK(after.Of("IC001")[0]["fingerprint"] == Result{0, main, ""}.Of("IC001")[0]["fingerprint"]);
  for (const auto& f : after.json["findings"]) CHECK(f["baseline"] == true);
  CHECK(after.status == 0);
  // SARIF: unchanged, and without a baseline no baselineState at all.
  CommandResult sarif =
      Imgcheck(p, "scan -q --no-cache " + p.New() + " --baseline main.json -f sarif -o new.sarif");
  CHECK(sarif.status == 0);
  auto s = nlohmann::json::parse(ReadFile(p.dir / "new.sarif"));
  for (const auto& res : s["runs"][0]["results"]) {
    CHECK(res["baselineState"] == "unchanged");
    CHECK(res["partialFingerprints"].contains("imgcheck/v2"));
  }
  // Must fire: a finding the baseline lacks is new and fails.
  Result worse = Scan(CudnnBumped(), "--baseline '" + (p.dir / "main.json").string() + "'");
  INFO(Messages(worse));
  REQUIRE(worse.Count("IC014") == 1);
  CHECK(worse.Of("IC014")[0]["baseline"] == false);
  CHECK(worse.status == 1);
}

TEST_CASE("scan --baseline: a file that is no report is refused in one line (exit 2)",
          "[baseline]") {
  TempDir dir;
  WriteOciLayout(dir / "layout", Seed(false));
  std::string image = " oci:" + (dir / "layout").string() + ":latest";
  WriteFile(dir / "not.json", "{\"findings\": [");
  WriteFile(dir / "old.json", R"({"schema":"imgcheck-report/1","findings":[{"rule":"IC001"}]})");
  for (std::string bad : {"not.json", "old.json", "missing.json"}) {
    CommandResult r = Run("cd '" + dir.path().string() + "' && '" + Imgcheck() +
                          "' scan -q --no-cache --baseline " + bad + image);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.rfind("imgcheck: --baseline: ", 0) == 0);
    CHECK(Occurrences(r.output, "\n") == 1);
  }
}

TEST_CASE(
    "markdown: GFM that cmark-gfm renders with a table, details and a Mermaid block per "
    "loader finding",
    "[markdown]") {
  TempDir dir;
  WriteOciLayout(dir / "layout", Seed(true));
  std::string image = " oci:" + (dir / "layout").string() + ":latest";
  CommandResult r = Run("cd '" + dir.path().string() + "' && '" + Imgcheck() +
                        "' scan -q --no-cache" + image + " -o markdown=scan.md -o json=scan.json");
  INFO(r.output);
  REQUIRE(r.status == 1);
  auto json = nlohmann::json::parse(ReadFile(dir / "scan.json"));
  std::string html = MarkdownToHtml(dir / "scan.md");
  INFO(html);
  CHECK(Occurrences(html, "<table>") == 1);
  CHECK(Occurrences(html, "<details>") == json["findings"].size());
  size_t loader = LoaderFindings(json["findings"]);
  CHECK(loader >= 1);  // IC001's resolution of libcudnn.so.5
  CHECK(Occurrences(html, "<pre><code class=\"language-mermaid\">") == loader);
  CHECK(html.find("<h3>Errors (") != std::string::npos);
  CHECK(html.find("flowchart LR") != std::string::npos);
  // The diff's Markdown: its tables and sections, a block per loader finding again.
  Pair p(Seed(true), CudnnBumped());
  CommandResult d =
      Imgcheck(p, "diff -q --no-cache " + p.Old() + " " + p.New() + " -f markdown -o diff.md");
  REQUIRE(d.status == 1);
  auto [status, j] = DiffJson(p);
  std::string diff_html = MarkdownToHtml(p.dir / "diff.md");
  INFO(diff_html);
  CHECK(diff_html.find("<h3>New findings (") != std::string::npos);
  CHECK(diff_html.find("<h3>Fixed findings (") != std::string::npos);
  CHECK(diff_html.find("<th>package</th>") != std::string::npos);
  size_t all = j["findings"]["new"].size() + j["findings"]["fixed"].size() +
               j["findings"]["unchanged"].size();
  CHECK(Occurrences(diff_html, "<details>") == all);
  CHECK(Occurrences(diff_html, "<pre><code class=\"language-mermaid\">") ==
        LoaderFindings(j["findings"]["new"]) + LoaderFindings(j["findings"]["fixed"]) +
            LoaderFindings(j["findings"]["unchanged"]));
}
