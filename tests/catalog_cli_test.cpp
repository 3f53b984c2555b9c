// `imgcheck catalog` through the built binary: JSON and CycloneDX of an image written from a
// recipe, and an unknown format refused.
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
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

// Issue #35: each CUDA library's file floated free of the package that installed it, and a
// framework was listed twice (its distribution and a purl-less "framework"). The BOM is read back
// as a scanner would: the package (its purl) of each file, per package manager.
TEST_CASE("imgcheck catalog SBOM: each file in its package, each framework once", "[catalog]") {
  TempDir dir;
  auto so = [&](const std::string& soname) {
    SharedObject obj;
    obj.soname = soname;
    Compile(obj, dir / "so" / soname);
    return dir / "so" / soname;
  };
  const std::string deb_lib = "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.7";
  const std::string site = "usr/local/lib/python3.10/dist-packages/";
  const std::string wheel_lib = "/" + site + "nvidia/cublas/lib/libcublas.so.12";
  const std::string conda_lib = "/opt/conda/lib/libcudart.so.12";
  const std::string unowned_lib = "/usr/local/cuda/lib64/libcufft.so.11.0.2";
  LayerRecipe layer;
  layer.created_by = "RUN apt-get install libcudnn8 && pip install torch && conda install";
  layer.entries = {
      File("etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
      FileFrom(deb_lib.substr(1), so("libcudnn.so.8")),
      File("var/lib/dpkg/status",
           "Package: libcudnn8\nStatus: install ok installed\nVersion: 8.9.7.29-1+cuda12.2\n"),
      File("var/lib/dpkg/info/libcudnn8:amd64.list", deb_lib + "\n"),
      FileFrom(wheel_lib.substr(1), so("libcublas.so.12")),
      File(site + "nvidia_cublas_cu12-12.4.5.8.dist-info/METADATA",
           "Metadata-Version: 2.1\nName: nvidia-cublas-cu12\nVersion: 12.4.5.8\n"),
      File(site + "nvidia_cublas_cu12-12.4.5.8.dist-info/RECORD",
           "nvidia/cublas/lib/libcublas.so.12,,\n"),
      File(site + "torch-2.3.0.dist-info/METADATA", "Name: torch\nVersion: 2.3.0\n"),
      File(site + "torch-2.3.0.dist-info/RECORD", "torch/version.py,,\n"),
      File(site + "torch/version.py", "__version__ = '2.3.0+cu121'\ncuda = '12.1'\n"),
      FileFrom(conda_lib.substr(1), so("libcudart.so.12")),
      File("opt/conda/conda-meta/cuda-cudart-12.1.55-0.json",
           R"({"name":"cuda-cudart","version":"12.1.55","build":"0",)"
           R"("files":["lib/libcudart.so.12"]})"),
      FileFrom(unowned_lib.substr(1), so("libcufft.so.11")),
  };
  ImageRecipe r;
  r.layers = {layer};
  WriteOciLayout(dir / "layout", r);
  const std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  auto bom = [&](const std::string& format) {
    CommandResult out = Run((BinaryDir() / "imgcheck").string() +
                            " catalog -q --no-cache --format " + format + " " + ref);
    INFO(out.output);
    REQUIRE(out.status == 0);
    return nlohmann::json::parse(out.output);
  };
  const std::map<std::string, std::string> package_of = {
      {deb_lib, "pkg:deb/ubuntu/libcudnn8@8.9.7.29-1%2Bcuda12.2?arch=amd64&distro=ubuntu-22.04"},
      {wheel_lib, "pkg:pypi/nvidia-cublas-cu12@12.4.5.8"},
      {conda_lib, "pkg:conda/cuda-cudart@12.1.55"},
      {unowned_lib, ""},
  };
  auto property = [](const nlohmann::json& c, const std::string& name) -> std::string {
    for (const auto& p : c.value("properties", nlohmann::json::array()))
      if (p["name"] == name) return p["value"];
    return "";
  };

  for (const char* format : {"cyclonedx", "cyclonedx-1.5"}) {
    INFO(format);
    nlohmann::json b = bom(format);
    // Every component with the purl of the one it is nested in ("" at the top).
    std::map<std::string, std::string> found;  // path -> its package's purl
    std::vector<nlohmann::json> torch;
    std::function<void(const nlohmann::json&, const std::string&)> walk =
        [&](const nlohmann::json& list, const std::string& parent) {
          for (const auto& c : list) {
            std::string path = property(c, "imgcheck:path");
            if (package_of.count(path)) {
              found[path] = parent;
              CHECK(c["evidence"]["occurrences"][0]["location"] == path);
            }
            if (c["name"] == "torch") torch.push_back(c);
            walk(c.value("components", nlohmann::json::array()), c.value("purl", ""));
          }
        };
    walk(b["components"], "");
    for (const auto& [path, purl] : package_of) {
      INFO(path);
      REQUIRE(found.count(path));
      CHECK(found[path] == purl);
    }
    REQUIRE(torch.size() == 1);  // the distribution, with the framework's build facts
    CHECK(torch[0]["purl"] == "pkg:pypi/torch@2.3.0");
    CHECK(torch[0]["type"] == "library");
    CHECK(property(torch[0], "imgcheck:framework") == "torch");
    CHECK(property(torch[0], "imgcheck:build:cuda") == "12.1");
    CHECK(property(torch[0], "imgcheck:framework_version") == "2.3.0+cu121");
  }

  // SPDX: the package CONTAINS its file; the image CONTAINS the unowned one.
  nlohmann::json spdx = bom("spdx-json");
  std::map<std::string, std::string> purl_of, path_of;  // SPDXID -> purl, path
  size_t torch = 0;
  for (const auto& p : spdx["packages"]) {
    for (const auto& e : p.value("externalRefs", nlohmann::json::array()))
      purl_of[p["SPDXID"]] = e["referenceLocator"];
    std::string comment = p.value("comment", "");
    if (comment.find(" at ") != std::string::npos)
      path_of[p["SPDXID"]] = comment.substr(comment.find(" at ") + 4,
                                            comment.find(" (layer") - comment.find(" at ") - 4);
    if (p["name"] == "torch") {
      ++torch;
      CHECK_THAT(comment, Catch::Contains("build:cuda=12.1"));
    }
  }
  CHECK(torch == 1);
  std::map<std::string, std::string> container;  // path -> purl of what CONTAINS it
  for (const auto& rel : spdx["relationships"])
    if (rel["relationshipType"] == "CONTAINS" && path_of.count(rel["relatedSpdxElement"]))
      container[path_of[rel["relatedSpdxElement"]]] =
          rel["spdxElementId"] == "SPDXRef-Image" ? "" : purl_of[rel["spdxElementId"]];
  for (const auto& [path, purl] : package_of) {
    INFO(path);
    REQUIRE(container.count(path));
    CHECK(container[path] == purl);
  }
}

}  // namespace
}  // namespace imgcheck::testing
