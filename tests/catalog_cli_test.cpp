// `imgcheck catalog` through the built binary: JSON and CycloneDX of an image written from a
// recipe, and an unknown format refused.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "image_writer.h"
#include "support.h"
#include "util/sha256.h"

namespace imgcheck::testing {
namespace {

TEST_CASE("imgcheck catalog prints an image's components as JSON and CycloneDX", "[catalog]") {
  TempDir dir;
  const std::string lib = kCudnnDriverLibDir;
  ImageRecipe r = CudnnDriverRecipe(dir.path());  // what src/catalog/load_test.cpp catalogues
  WrittenImage written = WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";

  std::filesystem::path bin = BinaryDir() / "imgcheck";
  CommandResult json = Run(bin.string() + " catalog -q --format json " + ref);
  INFO(json.output);
  REQUIRE(json.status == 0);
  nlohmann::json j = nlohmann::json::parse(json.output);
  bool found = false;
  for (const auto& c : j["components"]) {
    if (c["path"] != "/" + lib + "libcudnn.so.8.9.2") continue;
    found = true;
    CHECK(c["name"] == "libcudnn");
    CHECK(c["version"] == "8.9.2.26");
    CHECK(c["version_source"] == "dpkg");
    CHECK(c["layer"]["digest"] == written.layers[0].digest);
  }
  CHECK(found);
  std::filesystem::path out = dir / "bom.json";
  CommandResult bom =
      Run(bin.string() + " catalog -q --format cyclonedx --output " + out.string() + " " + ref);
  REQUIRE(bom.status == 0);
  nlohmann::json b = nlohmann::json::parse(ReadFile(out));
  CHECK(b["specVersion"] == "1.6");  // cyclonedx-1.5 on request
  CHECK(b["components"].size() >= 3);
  CommandResult bad = Run(bin.string() + " catalog -q --format yaml " + ref);
  CHECK(bad.status == 2);
}

// Issue #22: the SBOM had no hash, no dependency graph and only the CUDA stack. An SBOM's
// reading hashes the libraries as they stream and loads them; --sbom-scope all lists every
// package of the image and says the list is complete.
TEST_CASE("imgcheck catalog SBOM: hashes, who loads whom, and --sbom-scope all", "[catalog]") {
  TempDir dir;
  const std::string lib = "usr/local/cuda/lib64/";
  SharedObject lt;
  lt.soname = "libcublasLt.so.12";
  Compile(lt, dir / "so/libcublasLt.so.12");
  SharedObject cublas;
  cublas.soname = "libcublas.so.12";
  cublas.needed = {"-Wl,--no-as-needed", (dir / "so/libcublasLt.so.12").string()};
  Compile(cublas, dir / "so/libcublas.so.12");
  LayerRecipe layer;
  layer.created_by = "COPY cuda /usr/local/cuda";
  layer.entries = {
      FileFrom(lib + "libcublasLt.so.12.4.5.8", dir / "so/libcublasLt.so.12"),
      Symlink(lib + "libcublasLt.so.12", "libcublasLt.so.12.4.5.8"),
      FileFrom(lib + "libcublas.so.12.4.5.8", dir / "so/libcublas.so.12"),
      Symlink(lib + "libcublas.so.12", "libcublas.so.12.4.5.8"),
      File("etc/ld.so.conf", "/usr/local/cuda/lib64\n"),
      File("etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
      File("var/lib/dpkg/status", "Package: bash\nStatus: install ok installed\nVersion: 5.1-6\n"),
  };
  ImageRecipe r;
  r.env = {"LD_LIBRARY_PATH=/usr/local/cuda/lib64"};
  r.layers = {layer};
  WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  std::filesystem::path bin = BinaryDir() / "imgcheck";

  auto bom = [&](const std::string& args) {
    CommandResult out = Run(bin.string() + " catalog -q --no-cache " + args + " " + ref);
    INFO(out.output);
    REQUIRE(out.status == 0);
    return nlohmann::json::parse(out.output);
  };
  nlohmann::json cuda = bom("--format cyclonedx");
  std::map<std::string, std::string> ref_of;
  for (const auto& c : cuda["components"]) {
    ref_of[c["name"]] = c["bom-ref"];
    if (c["name"] == "libcublas") {
      REQUIRE(c.contains("hashes"));
      CHECK(c["hashes"][0]["content"] ==
            util::Sha256Digest(ReadFile(dir / "so/libcublas.so.12")).substr(7));
    }
    CHECK(c["name"] != "bash");
  }
  bool depends = false;
  for (const auto& d : cuda["dependencies"])
    depends |= d["ref"] == ref_of["libcublas"] &&
               d["dependsOn"] == nlohmann::json::array({ref_of["libcublasLt"]});
  CHECK(depends);
  CHECK(cuda["compositions"][0]["aggregate"] == "incomplete");

  nlohmann::json all = bom("--format cyclonedx --sbom-scope all");
  bool bash = false;
  for (const auto& c : all["components"])
    bash |= c["name"] == "bash" &&
            c["purl"] == "pkg:deb/ubuntu/bash@5.1-6?arch=amd64&distro=ubuntu-22.04";
  CHECK(bash);
  CHECK(all["compositions"][0]["aggregate"] == "complete");
  nlohmann::json spdx = bom("--format spdx-json --sbom-scope all");
  size_t depends_on = 0;
  for (const auto& rel : spdx["relationships"])
    depends_on += rel["relationshipType"] == "DEPENDS_ON";
  CHECK(depends_on == 1);
  // The table is not an SBOM: nothing hashed, nothing loaded, the same catalog as before.
  nlohmann::json plain = bom("--format json");
  for (const auto& c : plain["components"]) CHECK(c["name"] != "bash");
}

}  // namespace
}  // namespace imgcheck::testing
