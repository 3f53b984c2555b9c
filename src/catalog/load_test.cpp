// End to end: images written by the fixture writer, read by image::Load with the catalog's
// capture policy, then catalogued (`imgcheck catalog` itself: tests/catalog_cli_test.cpp).
#include <algorithm>
#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "catalog/test_rules.h"
#include "image_writer.h"
#include "support.h"
#include "util/sha256.h"

namespace imgcheck::catalog {
namespace {

const Component* At(const Catalog& cat, std::string_view path) {
  for (const Component& c : cat.components) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("an OCI image loaded with the capture policy is catalogued per layer",
          "[catalog][load]") {
  using namespace imgcheck::testing;
  TempDir dir;
  const std::string lib = kCudnnDriverLibDir;
  ImageRecipe r = CudnnDriverRecipe(dir.path());
  WrittenImage written = WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";

  image::LoadOptions options;
  options.capture = CapturePolicy(BuiltInRules());
  image::Image img = image::Load(ref, options);
  // Unread files are not kept.
  REQUIRE(img.tree.Find("/usr/share/doc/big.txt") != nullptr);
  CHECK(img.tree.Find("/usr/share/doc/big.txt")->content == nullptr);
  Catalog cat = Build(img, BuiltInRules());
  CHECK(cat.diagnostics.empty());

  const Component* cudnn = At(cat, "/" + lib + "libcudnn.so.8.9.2");
  REQUIRE(cudnn != nullptr);
  CHECK(cudnn->name == "libcudnn");
  CHECK(cudnn->version == "8.9.2.26");
  CHECK(cudnn->layer == 0);
  REQUIRE(cat.Layer(cudnn->layer) != nullptr);
  CHECK(cat.Layer(cudnn->layer)->digest == written.layers[0].digest);
  CHECK(cat.Layer(cudnn->layer)->created_by == r.layers[0].created_by);
  REQUIRE(cudnn->elf);
  CHECK(cudnn->elf->soname == "libcudnn.so.8");
  CHECK(cudnn->aliases == std::vector<std::string>{"/" + lib + "libcudnn.so.8"});

  const Component* adv = At(cat, "/" + lib + "libcudnn_adv_infer.so.8.9.2");
  REQUIRE(adv != nullptr);
  CHECK(adv->deleted);
  CHECK(adv->layer == 1);

  const Component* driver = At(cat, "/" + lib + "libcuda.so.535.104.05");
  REQUIRE(driver != nullptr);
  CHECK(driver->kind == ComponentKind::kDriverLibrary);
  CHECK_FALSE(driver->owner);
  const Component* compat = At(cat, "/usr/local/cuda-12.1/compat/libcuda.so.530.30.02");
  REQUIRE(compat != nullptr);
  CHECK(compat->kind == ComponentKind::kCompatLibrary);
  CHECK(compat->version == "530.30.02");

  CHECK(cat.config.Env("NV_CUDNN_VERSION") == "8.9.2.26");
  CHECK(cat.config.labels.at("com.nvidia.cudnn.version") == "8.9.2.26");
  REQUIRE(cat.config.ld_so_conf.dirs.size() == 1);
  CHECK(cat.config.ld_so_conf.dirs[0].dir == "/usr/local/nvidia/lib64");
  CHECK(cat.config.os_release.at("ID") == "ubuntu");
}

TEST_CASE("digests: a library a later layer writes over a dpkg one, and nothing else",
          "[catalog][load][digest]") {
  using namespace imgcheck::testing;
  TempDir dir;
  const std::string lib = "usr/lib/x86_64-linux-gnu/";
  const std::string graph(5000, 'g'), adv(5000, 'a'), cublas(5000, 'b');
  ImageRecipe r;
  LayerRecipe base;
  base.created_by = "RUN apt-get install -y libcudnn9-cuda-12";
  // usrmerge: the md5sums names adv under /lib, which is a link to usr/lib.
  base.entries = {
      Dir("usr"),
      Dir("usr/lib"),
      Symlink("lib", "usr/lib"),
      File(lib + "libcudnn_graph.so.9.1.0", graph),
      File(lib + "libcudnn_adv.so.9.1.0", adv),
      File(lib + "libcublas.so.12.1.3.1", cublas),
      File("var/lib/dpkg/status",
           "Package: libcudnn9-cuda-12\nStatus: install ok installed\nVersion: 9.1.0.70-1\n"),
      File("var/lib/dpkg/info/libcudnn9-cuda-12.md5sums",
           util::Md5Hex(graph) + "  " + lib + "libcudnn_graph.so.9.1.0\n" + util::Md5Hex(adv) +
               "  lib/x86_64-linux-gnu/libcudnn_adv.so.9.1.0\n"),
  };
  LayerRecipe top;
  top.created_by = "COPY cudnn/ /usr/lib/x86_64-linux-gnu/";
  top.entries = {File(lib + "libcudnn_graph.so.9.1.0", graph + "x"),
                 File(lib + "libcudnn_adv.so.9.1.0", adv + "x"),
                 File(lib + "libcudnn_ops.so.9.1.0", std::string(5000, 'o'))};
  r.layers = {base, top};
  WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  for (int jobs : {1, 2}) {
    INFO("jobs " << jobs);
    image::LoadOptions options;
    options.capture = CapturePolicy(BuiltInRules());
    options.digests = DigestRule(BuiltInRules());
    options.jobs = jobs;
    image::Image img = image::Load(ref, options);
    auto md5 = [&](const std::string& path) {
      const image::Node* n = img.tree.Find("/" + lib + path);
      REQUIRE(n);
      REQUIRE(n->content);
      return n->content->md5();
    };
    // Written over what the md5sums below state: digested.
    CHECK(md5("libcudnn_graph.so.9.1.0") == util::Md5Hex(graph + "x"));
    CHECK(md5("libcudnn_adv.so.9.1.0") == util::Md5Hex(adv + "x"));
    // A library no md5sums below states, and one its own package's layer installed: not.
    CHECK(md5("libcudnn_ops.so.9.1.0").empty());
    CHECK(md5("libcublas.so.12.1.3.1").empty());
    Catalog cat = Build(img, BuiltInRules());
    std::vector<std::string> replaced;
    for (const ReplacedFile& f : cat.replaced) replaced.push_back(f.path);
    std::sort(replaced.begin(), replaced.end());
    CHECK(replaced == std::vector<std::string>{"/" + lib + "libcudnn_adv.so.9.1.0",
                                               "/" + lib + "libcudnn_graph.so.9.1.0"});
  }
}

// Issue #22: no component had a hash. Issue #26: hashing every library on every scan costs a
// pass over its bytes, so only an SBOM's reading takes the SHA-256, and only of the libraries
// outside Python environments (a generic purl's files; pip's are named by their wheel).
TEST_CASE("sbom hashes: the SHA-256 of libraries while the layer streams, only when asked",
          "[catalog][load][digest]") {
  using namespace imgcheck::testing;
  TempDir dir;
  const std::string lib = "usr/local/cuda/lib64/";
  const std::string site = "usr/lib/python3/dist-packages/nvidia/cublas/lib/";
  const std::string cudnn(70000, 'c'), cublas(5000, 'b');
  ImageRecipe r;
  LayerRecipe layer;
  layer.created_by = "COPY cuda /usr/local/cuda";
  layer.entries = {File(lib + "libcudnn.so.9.1.0", cudnn), File(site + "libcublas.so.12", cublas),
                   File("var/lib/dpkg/status",
                        "Package: bash\nStatus: install ok installed\nVersion: 5.1-6ubuntu1\n\n"
                        "Package: libcudnn9-cuda-12\nStatus: install ok installed\n"
                        "Version: 9.1.0.70-1\n")};
  r.layers = {layer};
  WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  for (bool sbom : {false, true}) {
    INFO("sbom_hashes " << sbom);
    image::LoadOptions options;
    options.capture = CapturePolicy(BuiltInRules(), sbom);
    Catalog cat = Build(image::Load(ref, options), BuiltInRules());
    const Component* c = At(cat, "/" + lib + "libcudnn.so.9.1.0");
    REQUIRE(c != nullptr);
    CHECK(c->sha256 == (sbom ? util::Sha256Digest(cudnn).substr(7) : ""));
    const Component* pip = At(cat, "/" + site + "libcublas.so.12");
    REQUIRE(pip != nullptr);
    CHECK(pip->sha256.empty());
    // The packages that are not CUDA's wait for an SBOM of the whole image, outside the
    // components the checks read.
    REQUIRE(cat.packages.size() == 1);
    CHECK(cat.packages[0].name == "bash");
    CHECK(cat.packages[0].version == "5.1");
    CHECK(cat.Find(ComponentKind::kOsPackage, "bash").empty());
    CHECK(cat.Find(ComponentKind::kOsPackage, "libcudnn9-cuda-12").size() == 1);
  }
  CHECK(CapturePolicyId(BuiltInRules(), true) != CapturePolicyId(BuiltInRules()));
}

}  // namespace imgcheck::catalog
