// Catalog::Build over merged trees written directly (the image stage is tested on its own):
// tiny shared objects with the right SONAMEs stand in for NVIDIA's libraries.
#include "catalog/catalog.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "catalog/test_rules.h"
#include "elf_builder.h"
#include "fake_image.h"
#include "support.h"

namespace imgcheck::catalog {
namespace {

/// The bytes of a tiny shared object with `soname`, compiled once per soname.
std::string SharedObjectBytes(const std::string& soname) {
  static testing::TempDir dir;
  static std::map<std::string, std::string> cache;
  auto it = cache.find(soname);
  if (it != cache.end()) return it->second;
  std::filesystem::path out = dir / (soname.empty() ? "nosoname.so" : soname);
  testing::SharedObject so;
  so.soname = soname;
  testing::Compile(so, out);
  return cache[soname] = testing::ReadFile(out);
}

using testing::FakeImage;

/// `f`'s file `path`: a tiny shared object with `soname`.
void Library(FakeImage& f, const std::string& path, const std::string& soname, int layer = 0,
             std::vector<int> history = {}) {
  f.File(path, SharedObjectBytes(soname), layer, std::move(history));
}

const Component& One(const Catalog& cat, ComponentKind kind, std::string_view path) {
  for (const Component& c : cat.components) {
    if (c.kind == kind && c.path == path) return c;
  }
  FAIL("no " << KindName(kind) << " component at " << path);
  throw std::logic_error("unreachable");
}

const Component& Named(const Catalog& cat, ComponentKind kind, std::string_view name) {
  std::vector<const Component*> found = cat.Find(kind, name);
  REQUIRE(found.size() == 1);
  return *found.front();
}

/// The evidence of `source`, or null.
const VersionEvidence* Evidence(const Component& c, VersionSource source) {
  for (const VersionEvidence& e : c.versions) {
    if (e.source == source) return &e;
  }
  return nullptr;
}

constexpr const char* kLib = "/usr/lib/x86_64-linux-gnu";
constexpr const char* kCuda = "/usr/local/cuda-12.1";

}  // namespace

TEST_CASE("cuDNN 8 from dpkg, cudart from the toolkit, driver files", "[catalog]") {
  std::string lib = kLib, cuda = kCuda;
  std::string targets = cuda + "/targets/x86_64-linux";
  FakeImage f(3);
  f.File(
      "/var/lib/dpkg/status",
      "Package: libc6\nStatus: install ok installed\nVersion: 2.35-0ubuntu3\n\n"
      "Package: libcudnn8\nStatus: hold ok installed\nArchitecture: amd64\n"
      "Version: 8.9.2.26-1+cuda12.1\n\n"
      "Package: cuda-cudart-12-1\nStatus: install ok installed\nVersion: 12.1.105-1\n\n"
      "Package: cuda-compat-12-1\nStatus: install ok installed\nVersion: 530.30.02-1\n\n"
      "Package: libcudnn8-dev\nStatus: deinstall ok config-files\nVersion: 8.9.2.26-1+cuda12.1\n");
  f.File("/var/lib/dpkg/info/libcudnn8:amd64.list", "/.\n/usr\n" + lib + "/libcudnn.so.8.9.2\n" +
                                                        lib + "/libcudnn.so.8\n" + lib +
                                                        "/libcudnn_ops_infer.so.8.9.2\n");
  f.File("/var/lib/dpkg/info/cuda-cudart-12-1.list", targets + "/lib/libcudart.so.12.1.105\n");
  f.File("/var/lib/dpkg/info/cuda-compat-12-1.list", cuda + "/compat/libcuda.so.530.30.02\n");
  Library(f, lib + "/libcudnn.so.8.9.2", "libcudnn.so.8");
  f.Link(lib + "/libcudnn.so.8", "libcudnn.so.8.9.2");
  f.Link(lib + "/libcudnn.so", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8");
  Library(f, lib + "/libcudnn_ops_infer.so.8.9.2", "libcudnn_ops_infer.so.8", 1, {0});
  f.Deleted(lib + "/libcudnn_adv_infer.so.8.9.2", 2, {0});
  f.File("/usr/include/x86_64-linux-gnu/cudnn_version_v8.h",
         "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 2\n");
  f.File(cuda + "/version.json",
         R"({"cuda":{"name":"CUDA SDK","version":"12.1.1"},"cuda_cudart":{"version":"12.1.105"}})");
  Library(f, targets + "/lib/libcudart.so.12.1.105", "libcudart.so.12");
  f.Link("/usr/local/cuda", "cuda-12.1");
  Library(f, targets + "/lib/stubs/libcuda.so", "libcuda.so.1");
  Library(f, cuda + "/compat/libcuda.so.530.30.02", "libcuda.so.1");
  Library(f, lib + "/libcuda.so.535.104.05", "libcuda.so.1", 2);
  f.File("/etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n");
  f.File("/usr/share/doc/readme.txt", "not a library");
  f.image().config.env = {"PATH=/usr/bin", "CUDA_VERSION=12.1.1", "NV_CUDNN_VERSION=8.9.2.26",
                          "LD_LIBRARY_PATH=/usr/local/nvidia/lib::/usr/local/nvidia/lib64"};
  f.image().config.labels = {{"com.nvidia.cudnn.version", "8.9.2.26"}};
  Catalog cat = Build(f.image(), BuiltInRules());

  SECTION("the cuDNN shim: dpkg version, every source, alias links, owner") {
    const Component& c = One(cat, ComponentKind::kCudaLibrary, lib + "/libcudnn.so.8.9.2");
    CHECK(c.name == "libcudnn");
    CHECK(c.family == "cudnn");
    CHECK(c.version == "8.9.2.26");
    CHECK(c.layer == 0);
    REQUIRE(Evidence(c, VersionSource::kDpkg) != nullptr);
    CHECK(Evidence(c, VersionSource::kDpkg)->path == "/var/lib/dpkg/info/libcudnn8:amd64.list");
    CHECK(Evidence(c, VersionSource::kDpkg)->detail == "8.9.2.26-1+cuda12.1");
    CHECK(Evidence(c, VersionSource::kFilename)->value == "8.9.2");
    CHECK(Evidence(c, VersionSource::kSoname)->value == "8");
    REQUIRE(Evidence(c, VersionSource::kHeader) != nullptr);
    CHECK(Evidence(c, VersionSource::kHeader)->value == "8.9.2");
    CHECK(Evidence(c, VersionSource::kHeader)->path ==
          "/usr/include/x86_64-linux-gnu/cudnn_version_v8.h");
    REQUIRE(c.owner);
    CHECK(c.owner->name == "libcudnn8");
    CHECK(c.owner->manager == PackageManager::kDpkg);
    CHECK(c.aliases == std::vector<std::string>{lib + "/libcudnn.so", lib + "/libcudnn.so.8"});
    REQUIRE(c.elf);
    CHECK(c.elf->soname == "libcudnn.so.8");
    CHECK(cat.Elf(c.path) != nullptr);
    CHECK(cat.Elf(lib + "/libcudnn.so.8") == nullptr);  // no link following
  }
  SECTION("a sub-library rewritten by a later layer, and one deleted") {
    const Component& ops =
        One(cat, ComponentKind::kCudaLibrary, lib + "/libcudnn_ops_infer.so.8.9.2");
    CHECK(ops.name == "libcudnn_ops_infer");
    CHECK(ops.layer == 1);
    CHECK(ops.overwritten_layers == std::vector<int>{0});
    CHECK(ops.version == "8.9.2.26");
    const Component& adv =
        One(cat, ComponentKind::kCudaLibrary, lib + "/libcudnn_adv_infer.so.8.9.2");
    CHECK(adv.deleted);
    CHECK(adv.layer == 2);
    CHECK(adv.version == "8.9.2");
    CHECK(Evidence(adv, VersionSource::kFilename)->layer == 0);
    for (const Component* c : cat.Family("cudnn")) CHECK_FALSE(c->deleted);
    CHECK(cat.Family("cudnn").size() == 2);
  }
  SECTION("dpkg packages: CUDA ones only, held state, removed ones skipped") {
    const Component& p = Named(cat, ComponentKind::kOsPackage, "libcudnn8");
    CHECK(p.version == "8.9.2.26");
    CHECK(p.held);
    CHECK(p.family == "cudnn");
    CHECK(Named(cat, ComponentKind::kOsPackage, "cuda-cudart-12-1").version == "12.1.105");
    CHECK(cat.Find(ComponentKind::kOsPackage, "libc6").empty());
    CHECK(cat.Find(ComponentKind::kOsPackage, "libcudnn8-dev").empty());
  }
  SECTION("cudart: dpkg, version.json, file name and soname") {
    const Component& c =
        One(cat, ComponentKind::kCudaLibrary, targets + "/lib/libcudart.so.12.1.105");
    CHECK(c.version == "12.1.105");
    CHECK(Evidence(c, VersionSource::kDpkg)->value == "12.1.105");
    REQUIRE(Evidence(c, VersionSource::kVersionJson) != nullptr);
    CHECK(Evidence(c, VersionSource::kVersionJson)->path == cuda + "/version.json");
    CHECK(Evidence(c, VersionSource::kSoname)->value == "12");
    CHECK(Evidence(c, VersionSource::kHeader) == nullptr);  // the cuDNN header is not cudart's
    const Component& toolkit = Named(cat, ComponentKind::kCudaToolkit, "cuda");
    CHECK(toolkit.version == "12.1.1");
    CHECK(toolkit.build.at("cuda_cudart") == "12.1.105");
  }
  SECTION("driver library, stub and forward-compatibility library") {
    const Component& stub = One(cat, ComponentKind::kDriverStub, targets + "/lib/stubs/libcuda.so");
    CHECK(stub.name == "libcuda");
    CHECK(stub.family == "driver");
    const Component& compat =
        One(cat, ComponentKind::kCompatLibrary, cuda + "/compat/libcuda.so.530.30.02");
    CHECK(compat.version == "530.30.02");
    REQUIRE(compat.owner);
    CHECK(compat.owner->name == "cuda-compat-12-1");
    CHECK(Evidence(compat, VersionSource::kDpkg) != nullptr);
    const Component& driver =
        One(cat, ComponentKind::kDriverLibrary, lib + "/libcuda.so.535.104.05");
    CHECK(driver.version == "535.104.05");
    CHECK_FALSE(driver.owner);  // unmanaged
    CHECK(driver.layer == 2);
  }
  SECTION("image configuration") {
    CHECK(cat.config.Env("CUDA_VERSION") == "12.1.1");
    CHECK_FALSE(cat.config.Env("NOPE"));
    CHECK(cat.config.LdLibraryPath() ==
          std::vector<std::string>{"/usr/local/nvidia/lib", "", "/usr/local/nvidia/lib64"});
    CHECK(cat.config.labels.at("com.nvidia.cudnn.version") == "8.9.2.26");
    CHECK(cat.config.os_release.at("VERSION_ID") == "22.04");
    CHECK(cat.config.os_release_path == "/etc/os-release");
    CHECK(cat.Layer(2)->created_by == "RUN step 2");
    CHECK(cat.Layer(3) == nullptr);
    CHECK(cat.diagnostics.empty());
  }
}

TEST_CASE("distroless: dpkg records in status.d, files in their md5sums", "[catalog]") {
  std::string lib = kLib;
  FakeImage f(2);
  // As distroless writes them: no Status field, paths relative to the root.
  f.File("/var/lib/dpkg/status.d/libcudnn9-cuda-12",
         "Package: libcudnn9-cuda-12\nVersion: 9.1.0.70-1\nArchitecture: amd64\n");
  f.File("/var/lib/dpkg/status.d/libcudnn9-cuda-12.md5sums",
         "0123456789abcdef0123456789abcdef  usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0\n");
  f.File("/var/lib/dpkg/status.d/libc6", "Package: libc6\nVersion: 2.36-9\n", 1);
  Library(f, lib + "/libcudnn.so.9.1.0", "libcudnn.so.9");
  Library(f, lib + "/libcudnn_ops.so.9.1.0", "libcudnn_ops.so.9");  // in no md5sums
  Catalog cat = Build(f.image(), BuiltInRules());

  const Component& p = Named(cat, ComponentKind::kOsPackage, "libcudnn9-cuda-12");
  CHECK(p.version == "9.1.0.70");
  CHECK(p.path == "/var/lib/dpkg/status.d/libcudnn9-cuda-12");
  CHECK(cat.Find(ComponentKind::kOsPackage, "libc6").empty());  // not a CUDA package
  const Component& shim = One(cat, ComponentKind::kCudaLibrary, lib + "/libcudnn.so.9.1.0");
  REQUIRE(shim.owner);
  CHECK(shim.owner->name == "libcudnn9-cuda-12");
  CHECK(shim.owner->metadata == "/var/lib/dpkg/status.d/libcudnn9-cuda-12.md5sums");
  REQUIRE(Evidence(shim, VersionSource::kDpkg) != nullptr);
  CHECK(Evidence(shim, VersionSource::kDpkg)->value == "9.1.0.70");
  CHECK_FALSE(One(cat, ComponentKind::kCudaLibrary, lib + "/libcudnn_ops.so.9.1.0").owner);
}

TEST_CASE("pip wheels, frameworks and conda", "[catalog]") {
  const std::string site = "/usr/local/lib/python3.10/dist-packages";
  const std::string cudnn_info = site + "/nvidia_cudnn_cu12-9.1.0.70.dist-info";
  const std::string torch_info = site + "/torch-2.3.0.dist-info";
  FakeImage f(2);
  f.File(cudnn_info + "/METADATA",
         "Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n");
  f.File(cudnn_info + "/RECORD",
         "nvidia/cudnn/lib/libcudnn.so.9,sha256=x,1\n"
         "nvidia/cudnn/lib/libcudnn_graph.so.9,sha256=x,1\n"
         "nvidia/cudnn/lib/libcudnn_adv.so.9,sha256=x,1\n"
         "nvidia/cudnn/include/cudnn_version.h,sha256=x,1\n"
         "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD,,\n");
  Library(f, site + "/nvidia/cudnn/lib/libcudnn.so.9", "libcudnn.so.9");
  Library(f, site + "/nvidia/cudnn/lib/libcudnn_graph.so.9", "libcudnn_graph.so.9");
  f.File(site + "/nvidia/cudnn/include/cudnn_version.h",
         "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n");
  f.File(torch_info + "/METADATA",
         "Name: torch\nVersion: 2.3.0\nRequires-Dist: nvidia-cudnn-cu12 ==8.9.2.26; "
         "platform_system == \"Linux\" and platform_machine == \"x86_64\"\n",
         1);
  f.File(torch_info + "/RECORD", "torch/version.py,,\ntorch/lib/libcudnn.so.8,,\n", 1);
  f.File(site + "/torch/version.py",
         "__version__ = '2.3.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\n"
         "hip: Optional[str] = None\n",
         1);
  Library(f, site + "/torch/lib/libcudnn.so.8", "libcudnn.so.8", 1);
  f.File(site + "/tensorflow/python/platform/build_info.py",
         "import collections\nbuild_info = collections.OrderedDict([('cuda_compute_capabilities', "
         "['sm_35', 'compute_80']), ('cuda_version', '11.2'), ('cudnn_version', '8'), "
         "('is_cuda_build', True)])\n");
  f.File("/opt/tf1/lib/python3.6/site-packages/tensorflow/python/platform/build_info.py",
         "is_cuda_build = True\ncuda_version_number = '9.0'\ncudnn_version_number = '7'\n");
  f.File(site + "/onnxruntime/capi/build_and_package_info.py",
         "package_name = 'onnxruntime-gpu'\n__version__ = '1.17.1'\ncuda_version = '12.2'\n");
  f.File(site + "/cupy/.data/_wheel.json",
         R"({"packaging":"pip","cuda":"12.x","cudnn":{"version":"8.8.1","filename":"c.tar"}})");
  f.File(site + "/cupy_cuda12x-12.0.0-py3.10.egg-info/PKG-INFO",
         "Metadata-Version: 1.2\nName: cupy-cuda12x\nVersion: 12.0.0\n");
  f.File(site + "/jax/version.py",
         "_version: str = \"0.4.30\"\n__version__ = _version_from_git()\n");
  f.File(site + "/jax_cuda12_plugin/version.py", "_version = '0.4.30'\n");
  f.File(
      "/opt/conda/conda-meta/cudnn-8.9.2.26-cuda12_0.json",
      R"({"name":"cudnn","version":"8.9.2.26","build":"cuda12_0","files":["lib/libcudnn.so.8"]})");
  f.File("/opt/conda/conda-meta/python-3.11.0-h1.json",
         R"({"name":"python","version":"3.11.0","files":["bin/python3.11"]})");
  f.File("/opt/conda/conda-meta/broken.json", "{\"name\":");
  Library(f, "/opt/conda/lib/libcudnn.so.8", "libcudnn.so.8");
  Catalog cat = Build(f.image(), BuiltInRules());

  SECTION("NVIDIA wheels name files by major only: the RECORD owner gives the version") {
    const Component& c =
        One(cat, ComponentKind::kCudaLibrary, site + "/nvidia/cudnn/lib/libcudnn.so.9");
    CHECK(c.version == "9.1.0.70");
    const VersionEvidence* pip = Evidence(c, VersionSource::kPipRecord);
    REQUIRE(pip != nullptr);
    CHECK(pip->path == cudnn_info + "/RECORD");
    CHECK(c.versions.front().source == VersionSource::kPipRecord);  // most trusted first
    CHECK(Evidence(c, VersionSource::kHeader)->value == "9.1.0");
    CHECK(One(cat, ComponentKind::kCudaLibrary, site + "/nvidia/cudnn/lib/libcudnn_graph.so.9")
              .version == "9.1.0.70");
    const Component& dist = Named(cat, ComponentKind::kPythonDist, "nvidia-cudnn-cu12");
    CHECK(dist.version == "9.1.0.70");
    CHECK(dist.path == cudnn_info);
    CHECK(dist.missing_files ==
          std::vector<std::string>{site + "/nvidia/cudnn/lib/libcudnn_adv.so.9"});
  }
  SECTION("a library bundled in a framework wheel keeps its own version") {
    const Component& c = One(cat, ComponentKind::kCudaLibrary, site + "/torch/lib/libcudnn.so.8");
    CHECK(c.version == "8");
    REQUIRE(c.owner);
    CHECK(c.owner->name == "torch");
    CHECK(Evidence(c, VersionSource::kPipRecord) == nullptr);
    CHECK(Evidence(c, VersionSource::kHeader) == nullptr);  // the 9.x header is elsewhere
    CHECK(c.layer == 1);
  }
  SECTION("torch: dist pins and version.py") {
    const Component& dist = Named(cat, ComponentKind::kPythonDist, "torch");
    REQUIRE(dist.requires_dist.size() == 1);
    CHECK(dist.requires_dist[0].name == "nvidia-cudnn-cu12");
    CHECK(dist.requires_dist[0].Pinned() == "8.9.2.26");
    const Component& fw = Named(cat, ComponentKind::kFramework, "torch");
    CHECK(fw.version == "2.3.0+cu121");
    CHECK(fw.build.at("cuda") == "12.1");
    CHECK(fw.layer == 1);
    REQUIRE(fw.owner);
    CHECK(fw.owner->name == "torch");
  }
  SECTION("TensorFlow 2 and 1 build_info") {
    const Component& tf2 =
        One(cat, ComponentKind::kFramework, site + "/tensorflow/python/platform/build_info.py");
    CHECK(tf2.name == "tensorflow");
    CHECK(tf2.build.at("cuda_version") == "11.2");
    CHECK(tf2.build.at("cudnn_version") == "8");
    CHECK(tf2.build.at("cuda_compute_capabilities") == "sm_35,compute_80");
    const Component& tf1 =
        One(cat, ComponentKind::kFramework,
            "/opt/tf1/lib/python3.6/site-packages/tensorflow/python/platform/build_info.py");
    CHECK(tf1.build.at("cuda_version") == "9.0");
    CHECK(tf1.build.at("cudnn_version") == "7");
  }
  SECTION("onnxruntime, cupy, jax") {
    const Component& ort = Named(cat, ComponentKind::kFramework, "onnxruntime-gpu");
    CHECK(ort.version == "1.17.1");
    CHECK(ort.build.at("cuda_version") == "12.2");
    const Component& cupy = Named(cat, ComponentKind::kFramework, "cupy");
    CHECK(cupy.build.at("cuda") == "12.x");
    CHECK(cupy.build.at("cudnn.version") == "8.8.1");
    const Component& egg = Named(cat, ComponentKind::kPythonDist, "cupy-cuda12x");
    CHECK(egg.version == "12.0.0");
    CHECK(egg.path == site + "/cupy_cuda12x-12.0.0-py3.10.egg-info");
    CHECK(Named(cat, ComponentKind::kFramework, "jax").version == "0.4.30");
    CHECK(Named(cat, ComponentKind::kFramework, "jax-cuda12-plugin").version == "0.4.30");
  }
  SECTION("conda: owner version, CUDA packages only, broken json is a diagnostic") {
    const Component& c = One(cat, ComponentKind::kCudaLibrary, "/opt/conda/lib/libcudnn.so.8");
    CHECK(c.version == "8.9.2.26");
    CHECK(Evidence(c, VersionSource::kConda)->path ==
          "/opt/conda/conda-meta/cudnn-8.9.2.26-cuda12_0.json");
    CHECK(Named(cat, ComponentKind::kCondaPackage, "cudnn").version == "8.9.2.26");
    CHECK(cat.Find(ComponentKind::kCondaPackage, "python").empty());
    REQUIRE(cat.diagnostics.size() == 1);
    CHECK(cat.diagnostics[0].path == "/opt/conda/conda-meta/broken.json");
  }
}

TEST_CASE("a DT_NEEDED whose name was not captured is a diagnostic, never a library named ''",
          "[catalog]") {
  FakeImage f(2);
  elf::fixture::ElfSpec spec;
  spec.soname = "libtensorflow_framework.so.2";
  spec.needed = {"libcudart.so.12", "libgone.so.1"};
  std::string bytes = elf::fixture::BuildElf(spec);
  const size_t gone = bytes.find(std::string("\0libgone.so.1\0", 14)) + 1;
  const size_t dynstr = bytes.find(std::string("\0libcudart.so.12\0", 17));
  REQUIRE(gone > dynstr);
  // A reading that kept everything but that name's bytes.
  util::SparseFile kept(bytes.size());
  kept.Add(0, std::string_view(bytes).substr(0, gone));
  kept.Add(gone + 12, std::string_view(bytes).substr(gone + 12));
  const std::string path =
      "/usr/local/lib/python3.11/dist-packages/tensorflow/"
      "libtensorflow_framework.so.2";
  testing::AddFile(f.image().tree, path, "", 1).content =
      std::make_shared<util::SparseFile>(std::move(kept));
  Catalog cat = Build(f.image(), BuiltInRules());
  REQUIRE(cat.diagnostics.size() == 1);
  CHECK(cat.diagnostics[0].path == path);
  CHECK(cat.diagnostics[0].layer == 1);
  char offset[32];
  std::snprintf(offset, sizeof offset, "0x%zx", gone - dynstr);
  CHECK(cat.diagnostics[0].message ==
        "dynamic section not read whole: DT_NEEDED at .dynstr offset " + std::string(offset) +
            " not captured");
  const elf::ElfInfo* info = cat.Elf(path);
  REQUIRE(info);
  CHECK(info->needed == std::vector<std::string>{"libcudart.so.12"});
  CHECK(info->soname == "libtensorflow_framework.so.2");
}

TEST_CASE("a corrupt ELF is a diagnostic and the scan goes on", "[catalog]") {
  FakeImage f(2);
  std::string bytes = SharedObjectBytes("libcublas.so.12");
  // e_shoff / e_phoff far past the end of the file.
  for (size_t i = 0x20; i < 0x30; ++i) bytes[i] = '\xff';
  f.File("/usr/lib/libcublas.so.12.1.3.1", bytes, 1);
  Library(f, "/usr/lib/libcublasLt.so.12", "libcublasLt.so.12");
  Catalog cat = Build(f.image(), BuiltInRules());
  REQUIRE(cat.diagnostics.size() == 1);
  CHECK(cat.diagnostics[0].path == "/usr/lib/libcublas.so.12.1.3.1");
  CHECK(cat.diagnostics[0].layer == 1);
  const Component& bad = One(cat, ComponentKind::kCudaLibrary, "/usr/lib/libcublas.so.12.1.3.1");
  CHECK(bad.version == "12.1.3.1");
  CHECK_FALSE(bad.elf);
  CHECK(One(cat, ComponentKind::kCudaLibrary, "/usr/lib/libcublasLt.so.12").elf);
}

TEST_CASE("threads that parse the ELF files make the catalog one thread makes", "[catalog]") {
  FakeImage f(2);
  for (int i = 0; i < 40; ++i) {
    std::string name = "libcublas" + std::to_string(i) + ".so.12";
    std::string bytes = SharedObjectBytes(name);
    if (i % 7 == 3)
      for (size_t b = 0x20; b < 0x30; ++b) bytes[b] = '\xff';  // corrupt: a diagnostic
    f.File("/usr/lib/" + name, bytes, i % 2);
  }
  Library(f, "/usr/lib/libcublasLt.so.12", "libcublasLt.so.12");
  Catalog one = Build(f.image(), BuiltInRules(), {}, 1);
  REQUIRE(one.diagnostics.size() == 6);
  REQUIRE(one.elves().size() == 35);
  for (int jobs : {2, 8}) {
    Catalog many = Build(f.image(), BuiltInRules(), {}, jobs);
    REQUIRE(many.diagnostics.size() == one.diagnostics.size());
    for (size_t i = 0; i < one.diagnostics.size(); ++i) {
      CHECK(many.diagnostics[i].path == one.diagnostics[i].path);
      CHECK(many.diagnostics[i].layer == one.diagnostics[i].layer);
      CHECK(many.diagnostics[i].message == one.diagnostics[i].message);
    }
    REQUIRE(many.elves().size() == one.elves().size());
    for (const auto& [path, elf] : one.elves()) {
      REQUIRE(many.elves().count(path) == 1);
      CHECK(many.elves().at(path).soname == elf.soname);
      CHECK(many.elves().at(path).exported.size() == elf.exported.size());
    }
    CHECK(many.components.size() == one.components.size());
  }
  // The first file in the tree's order over the ELF table bound is the one named.
  util::Limits tight;
  tight.elf_table_bytes = 16;
  for (int jobs : {1, 8})
    CHECK_THROWS_WITH(Build(f.image(), BuiltInRules(), tight, jobs),
                      Catch::Contains("the dynamic tables of /usr/lib/libcublas0.so.12"));
}

TEST_CASE("capture policy: ELF capturer for libraries, prefixes for metadata", "[catalog]") {
  image::CapturePolicy policy = CapturePolicy(BuiltInRules());
  CHECK(policy("/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2", 1 << 20, 0644) != nullptr);
  CHECK(policy("/usr/local/bin/python3", 1 << 20, 0644) != nullptr);
  CHECK(policy("/var/lib/dpkg/status", 1000, 0644) != nullptr);
  CHECK(policy("/x/site-packages/torch-2.1.0.dist-info/RECORD", 1000, 0644) != nullptr);
  CHECK(policy("/x/site-packages/torch/version.py", 100, 0644) != nullptr);
  CHECK(policy("/etc/ld.so.conf.d/nvidia.conf", 100, 0644) != nullptr);
  CHECK(policy("/usr/share/doc/readme.txt", 100, 0644) == nullptr);
  CHECK(policy("/x/site-packages/torch/functional.py", 100, 0644) == nullptr);
  // Executables anywhere: an application's own binary may link CUDA libraries.
  CHECK(policy("/app/server", 1 << 20, 0755) != nullptr);
  CHECK(policy("/app/model.bin", 1 << 20, 0644) == nullptr);
  CHECK(policy("/app/tiny", 10, 0755) == nullptr);  // smaller than an ELF header
  // A prefix capture keeps at most its limit of a huge metadata file.
  std::unique_ptr<image::Capturer> cap = policy("/var/lib/dpkg/status", uint64_t{1} << 40, 0644);
  std::string chunk(1 << 20, 'x');
  int fed = 0;
  while (cap->Feed(chunk) && fed < 200) ++fed;
  CHECK(fed < 200);
  CHECK(cap->Finish(uint64_t{1} << 40).captured_bytes() <= 64u << 20);
}

// The policy reads the rule data: what it keeps, and so the layer cache's identity, follow it.
TEST_CASE("capture policy: rule data names headers and framework files", "[catalog]") {
  LibraryRules rules = BuiltInRules();
  image::CapturePolicy builtin = CapturePolicy(rules);
  CHECK(builtin("/usr/include/cudnn_version_v9.h", 100, 0644) != nullptr);
  CHECK(builtin("/usr/local/cuda/include/cuda_runtime_api.h", 100, 0644) != nullptr);
  CHECK(builtin("/usr/include/stdio.h", 100, 0644) == nullptr);
  CHECK(builtin("/x/site-packages/mxnet/libinfo.py", 100, 0644) == nullptr);
  rules.framework_files.push_back({"mxnet/libinfo.py", "mxnet", false, "test"});
  image::CapturePolicy more = CapturePolicy(rules);
  CHECK(more("/x/site-packages/mxnet/libinfo.py", 100, 0644) != nullptr);
  CHECK(CapturePolicyId(rules) != CapturePolicyId(BuiltInRules()));
  CHECK(CapturePolicyId(BuiltInRules()) == CapturePolicyId(LibraryRules(BuiltInRules())));
}

}  // namespace imgcheck::catalog

namespace imgcheck::catalog {
namespace {

/// What the ELF capturer keeps of a host file, streamed in chunks as a layer would be.
std::shared_ptr<util::SparseFile> CaptureHostFile(const std::filesystem::path& path) {
  std::unique_ptr<image::Capturer> cap = elf::MakeCapturer();
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize got = in.gcount();
    if (got <= 0 || !cap->Feed(std::string_view(buf.data(), static_cast<size_t>(got)))) break;
  }
  return std::make_shared<util::SparseFile>(cap->Finish(std::filesystem::file_size(path)));
}

}  // namespace

TEST_CASE("real NVIDIA cuDNN 9 and cudart wheels from this machine's toolkit", "[catalog][real]") {
  const std::filesystem::path host_lib = "/usr/local/cuda/lib";
  const std::filesystem::path dist_root = "/usr/local/cuda-13.0/dist-info";
  const std::string cudnn_dist = "nvidia_cudnn_cu13-9.19.0.56.dist-info";
  const std::string cudart_dist = "nvidia_cuda_runtime-13.0.96.dist-info";
  if (!std::filesystem::exists(host_lib / "libcudnn.so.9") ||
      !std::filesystem::exists(dist_root / cudnn_dist / "RECORD") ||
      !std::filesystem::exists(dist_root / cudart_dist / "RECORD")) {
    return testing::Skip("no CUDA toolkit with cuDNN 9.19 wheels at /usr/local/cuda");
  }
  const std::string site = "/usr/local/lib/python3.12/dist-packages";
  FakeImage f(1);
  for (const std::string& dist : {cudnn_dist, cudart_dist}) {
    for (const char* meta : {"METADATA", "RECORD"}) {
      f.File(site + "/" + dist + "/" + meta, testing::ReadFile(dist_root / dist / meta));
    }
    // Every RECORD entry exists in the image; shared objects come from the host toolkit, the
    // small ones captured as a layer stream would capture them (no 1 GB copies).
    std::istringstream record(testing::ReadFile(dist_root / dist / "RECORD"));
    for (std::string line; std::getline(record, line);) {
      std::string rel = line.substr(0, line.find(','));
      std::string path = site + "/" + rel;
      if (f.image().tree.Find(path) != nullptr) continue;
      std::filesystem::path host = host_lib / std::filesystem::path(rel).filename();
      image::Node n;
      n.layer = 0;
      std::filesystem::path header =
          "/usr/local/cuda/include" / std::filesystem::path(rel).filename();
      if (rel.ends_with("cudnn_version.h") && std::filesystem::exists(header)) {
        std::string text = testing::ReadFile(header);
        n.size = text.size();
        n.content = std::make_shared<util::SparseFile>(util::SparseFile::Whole(std::move(text)));
      } else if (rel.find(".so.") != std::string::npos && std::filesystem::exists(host)) {
        n.size = std::filesystem::file_size(host);
        if (n.size <= (8u << 20)) n.content = CaptureHostFile(host);
      }
      f.image().tree.mutable_nodes()[path] = std::move(n);
    }
  }
  Catalog cat = Build(f.image(), BuiltInRules());
  CHECK(cat.diagnostics.empty());

  std::vector<const Component*> cudnn = cat.Family("cudnn");
  CHECK(cudnn.size() == 8);  // the shim and its seven cuDNN 9 sub-libraries
  for (const Component* c : cudnn) {
    INFO(c->path);
    CHECK(c->version == "9.19.0.56");
    CHECK(Evidence(*c, VersionSource::kPipRecord) != nullptr);
    CHECK(Evidence(*c, VersionSource::kFilename)->value == "9");
    REQUIRE(c->owner);
    CHECK(c->owner->name == "nvidia-cudnn-cu13");
  }
  const Component& shim =
      One(cat, ComponentKind::kCudaLibrary, site + "/nvidia/cudnn/lib/libcudnn.so.9");
  REQUIRE(shim.elf);
  CHECK(shim.elf->soname == "libcudnn.so.9");
  CHECK(Evidence(shim, VersionSource::kSoname)->value == "9");
  if (std::filesystem::exists("/usr/local/cuda/include/cudnn_version.h")) {
    REQUIRE(Evidence(shim, VersionSource::kHeader) != nullptr);
    CHECK(Evidence(shim, VersionSource::kHeader)->value == "9.19.0");
  }
  const Component& cudart =
      One(cat, ComponentKind::kCudaLibrary, site + "/nvidia/cu13/lib/libcudart.so.13");
  CHECK(cudart.version == "13.0.96");
  CHECK(cudart.owner->name == "nvidia-cuda-runtime");
  REQUIRE(cudart.elf);
  CHECK(cudart.elf->soname == "libcudart.so.13");
  CHECK(Named(cat, ComponentKind::kPythonDist, "nvidia-cudnn-cu13").missing_files.empty());
}

TEST_CASE("package metadata past Limits::metadata_bytes stops the catalog", "[catalog]") {
  FakeImage f;
  f.File("/var/lib/dpkg/status", "Package: libfoo\nStatus: install ok installed\nVersion: 1\n");
  std::string list;
  for (int i = 0; i < 10000; ++i) list += "/x/" + std::to_string(i) + "\n";  // ~70 kB
  f.File("/var/lib/dpkg/info/libfoo.list", list);
  util::Limits limits;
  CHECK_NOTHROW(Build(f.image(), BuiltInRules(), limits));
  // 10,000 lines of 256 bytes each once parsed: past 2 MiB, though the file is far smaller.
  limits.metadata_bytes = 2u << 20;
  CHECK_THROWS_WITH(Build(f.image(), BuiltInRules(), limits),
                    "the records of /var/lib/dpkg/info/libfoo.list (10001 lines) exceeds "
                    "imgcheck's limit of 2 MiB (raise it with --max-metadata-mb)");
  // A file larger than the limit, by its size in the image.
  limits.metadata_bytes = 64u << 10;
  CHECK_THROWS_WITH(Build(f.image(), BuiltInRules(), limits),
                    "/var/lib/dpkg/info/libfoo.list (" + std::to_string(list.size()) +
                        " bytes) exceeds imgcheck's limit of 65536 bytes (raise it with "
                        "--max-metadata-mb)");
}

}  // namespace imgcheck::catalog
