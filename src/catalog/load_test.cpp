// End to end: images written by the fixture writer, read by image::Load with the catalog's
// capture policy, then catalogued (`imgcheck catalog` itself: tests/catalog_cli_test.cpp).
#include <catch2/catch.hpp>

#include "catalog/catalog.h"
#include "catalog/test_rules.h"
#include "image_writer.h"
#include "support.h"

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
  auto so = [&](const std::string& soname) {
    SharedObject obj;
    obj.soname = soname;
    std::filesystem::path out = dir / "so" / soname;
    Compile(obj, out);
    return out;
  };
  const std::string lib = "usr/lib/x86_64-linux-gnu/";
  ImageRecipe r;
  r.env = {"PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "NV_CUDNN_VERSION=8.9.2.26"};
  r.labels = {{"com.nvidia.cudnn.version", "8.9.2.26"}};
  LayerRecipe base;
  base.created_by = "RUN apt-get install -y libcudnn8=8.9.2.26-1+cuda12.1";
  base.entries = {
      Dir("usr"),
      Dir("usr/lib"),
      Dir("usr/lib/x86_64-linux-gnu"),
      FileFrom(lib + "libcudnn.so.8.9.2", so("libcudnn.so.8")),
      Symlink(lib + "libcudnn.so.8", "libcudnn.so.8.9.2"),
      FileFrom(lib + "libcudnn_adv_infer.so.8.9.2", so("libcudnn_adv_infer.so.8")),
      File("var/lib/dpkg/status",
           "Package: libcudnn8\nStatus: hold ok installed\nVersion: 8.9.2.26-1+cuda12.1\n"),
      File("var/lib/dpkg/info/libcudnn8:amd64.list",
           "/" + lib + "libcudnn.so.8.9.2\n/" + lib + "libcudnn_adv_infer.so.8.9.2\n"),
      File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
      File("etc/ld.so.conf.d/nvidia.conf", "/usr/local/nvidia/lib64\n"),
      File("etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
      File("usr/share/doc/big.txt", std::string(200000, 'x')),
  };
  LayerRecipe top;
  top.created_by = "RUN rm libcudnn_adv_infer && install driver";
  top.compression = Compression::kZstd;
  top.entries = {Whiteout(lib + "libcudnn_adv_infer.so.8.9.2"),
                 FileFrom(lib + "libcuda.so.535.104.05", so("libcuda.so.1")),
                 FileFrom("usr/local/cuda-12.1/compat/libcuda.so.530.30.02", so("libcuda.so.1"))};
  r.layers = {base, top};
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
  CHECK(cat.Layer(cudnn->layer)->created_by == base.created_by);
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

}  // namespace imgcheck::catalog
