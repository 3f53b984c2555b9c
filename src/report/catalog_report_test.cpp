#include "report/catalog_report.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace imgcheck::report {
namespace {

catalog::Catalog SmallCatalog() {
  catalog::Catalog cat;
  image::Layer l0;
  l0.index = 0;
  l0.digest = "sha256:aaa";
  l0.created_by = "RUN apt-get install libcudnn8";
  cat.layers = {l0};
  cat.config.os_release = {
      {"ID", "ubuntu"}, {"VERSION_ID", "22.04"}, {"PRETTY_NAME", "Ubuntu 22.04"}};
  cat.config.env = {{"LD_LIBRARY_PATH", "/usr/local/nvidia/lib"}};

  catalog::Component lib;
  lib.kind = catalog::ComponentKind::kCudaLibrary;
  lib.name = "libcudnn";
  lib.family = "cudnn";
  lib.version = "8.9.2.26";
  lib.path = "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2";
  lib.layer = 0;
  lib.versions = {{"8.9.2.26", catalog::VersionSource::kDpkg,
                   "/var/lib/dpkg/info/libcudnn8:amd64.list", 0, "8.9.2.26-1+cuda12.1"},
                  {"8.9.2", catalog::VersionSource::kFilename, lib.path, 0, ""}};
  lib.owner =
      catalog::PackageRef{catalog::PackageManager::kDpkg, "libcudnn8", "8.9.2.26-1+cuda12.1",
                          "/var/lib/dpkg/info/libcudnn8:amd64.list", 0};
  cat.components.push_back(lib);

  catalog::Component gone = lib;
  gone.name = "libcudnn_adv_infer";
  gone.path = "/usr/lib/x86_64-linux-gnu/libcudnn_adv_infer.so.8.9.2";
  gone.deleted = true;
  gone.owner.reset();
  cat.components.push_back(gone);

  catalog::Component dist;
  dist.kind = catalog::ComponentKind::kPythonDist;
  dist.name = "torch";
  dist.version = "2.3.0+cu121";
  dist.versions = {{"2.3.0+cu121", catalog::VersionSource::kPipMetadata,
                    "/site/torch-2.3.0.dist-info/METADATA", 0, ""}};
  dist.path = "/site/torch-2.3.0.dist-info";
  dist.layer = 0;
  catalog::Requirement cudnn;
  cudnn.name = "nvidia-cudnn-cu12";
  cudnn.specifier = "==8.9.2.26";
  cudnn.marker = "platform_system == \"Linux\"";
  cudnn.raw = "raw";
  dist.requires_dist = {cudnn};
  cat.components.push_back(dist);

  catalog::Component deb;
  deb.kind = catalog::ComponentKind::kOsPackage;
  deb.name = "libcudnn8";
  deb.version = "8.9.2.26";
  deb.versions = {{"8.9.2.26", catalog::VersionSource::kDpkg, "/var/lib/dpkg/status", 0,
                   "8.9.2.26-1+cuda12.1"}};
  deb.path = "/var/lib/dpkg/status";
  deb.layer = 0;
  deb.held = true;
  cat.components.push_back(deb);
  cat.diagnostics.push_back({"/usr/lib/libbad.so", 0, "corrupt ELF: truncated"});
  return cat;
}

ImageInfo Info() {
  ImageInfo i;
  i.reference = "oci:/tmp/x:latest";
  i.manifest_digest = "sha256:mmm";
  i.platform = "linux/amd64";
  return i;
}

}  // namespace

TEST_CASE("catalog formats come from one table", "[report][catalog]") {
  CHECK(util::ParseFormat(kCatalogFormats, "cyclonedx") == CatalogFormat::kCycloneDx);
  CHECK(util::ParseFormat(kCatalogFormats, "table") == CatalogFormat::kTable);
  CHECK_FALSE(util::ParseFormat(kCatalogFormats, "sarif"));
  CHECK(util::ParseFormat(kCatalogFormats, "cyclonedx-1.5") == CatalogFormat::kCycloneDx15);
  CHECK(kCatalogFormats.size() == 5);  // table, json, cyclonedx, cyclonedx-1.5, spdx-json
}

TEST_CASE("catalog JSON: name, version, sources, path, layer provenance", "[report][catalog]") {
  nlohmann::json j = nlohmann::json::parse(RenderCatalogJson(SmallCatalog(), Info()));
  CHECK(j["image"]["reference"] == "oci:/tmp/x:latest");
  const auto& c = j["components"][0];
  CHECK(c["name"] == "libcudnn");
  CHECK(c["kind"] == "cuda-library");
  CHECK(c["version"] == "8.9.2.26");
  CHECK(c["version_source"] == "dpkg");
  CHECK(c["version_sources"][1]["source"] == "filename");
  CHECK(c["version_sources"][0]["detail"] == "8.9.2.26-1+cuda12.1");
  CHECK(c["path"] == "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2");
  CHECK(c["layer"]["index"] == 0);
  CHECK(c["layer"]["digest"] == "sha256:aaa");
  CHECK(c["layer"]["created_by"] == "RUN apt-get install libcudnn8");
  CHECK(c["owner"]["name"] == "libcudnn8");
  CHECK(c["managed"] == true);
  CHECK(j["components"][1]["deleted"] == true);
  CHECK(j["components"][1]["managed"] == false);
  CHECK(j["components"][2]["requires_dist"][0]["pinned"] == "8.9.2.26");
  CHECK(j["components"][3]["held"] == true);
  CHECK(j["config"]["env"][0] == "LD_LIBRARY_PATH=/usr/local/nvidia/lib");
  CHECK(j["config"]["ld_so_cache"].is_null());
  CHECK(j["diagnostics"][0]["path"] == "/usr/lib/libbad.so");
}

TEST_CASE("catalog CycloneDX 1.6: present components, purls, properties", "[report][catalog]") {
  nlohmann::json bom =
      nlohmann::json::parse(RenderCatalogCycloneDx(SmallCatalog(), Info(), "0.1.0", "2026+ab"));
  CHECK(bom["bomFormat"] == "CycloneDX");
  CHECK(bom["metadata"]["properties"][0]["name"] == "imgcheck:rules-version");
  CHECK(bom["metadata"]["properties"][0]["value"] == "2026+ab");
  CHECK(bom["specVersion"] == "1.6");
  CHECK(bom["compositions"][0]["aggregate"] == "incomplete");
  CHECK(bom["compositions"][0]["assemblies"][0] == bom["metadata"]["component"]["bom-ref"]);
  CHECK(nlohmann::json::parse(RenderCatalog(SmallCatalog(), Info(), CatalogFormat::kCycloneDx15,
                                            "0.1.0"))["specVersion"] == "1.5");
  CHECK(bom["metadata"]["component"]["type"] == "container");
  // The deleted library is not in the image; the live one is in the package that installed it.
  REQUIRE(bom["components"].size() == 2);
  const auto& deb = bom["components"][1];
  REQUIRE(deb["components"].size() == 1);
  const auto& lib = deb["components"][0];
  CHECK(lib["type"] == "library");
  CHECK(lib["evidence"]["occurrences"][0]["location"] ==
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2");
  CHECK(lib["name"] == "libcudnn");
  CHECK_FALSE(lib.contains("purl"));
  bool has_path = false;
  for (const auto& p : lib["properties"]) {
    if (p["name"] == "imgcheck:path")
      has_path = p["value"] == "/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2";
  }
  CHECK(has_path);
  CHECK(bom["components"][0]["purl"] == "pkg:pypi/torch@2.3.0%2Bcu121");
  // A CUDA library no package owns is NVIDIA's, by name and version.
  catalog::Catalog unowned = SmallCatalog();
  unowned.components[0].owner.reset();
  auto generic = nlohmann::json::parse(RenderCatalogCycloneDx(unowned, Info(), "0.1.0"));
  CHECK(generic["components"][0]["purl"].get<std::string>().rfind("pkg:generic/nvidia/libcudnn@",
                                                                  0) == 0);
  // The full Debian version, the platform's arch and os-release's ID-VERSION_ID.
  CHECK(deb["purl"] ==
        "pkg:deb/ubuntu/libcudnn8@8.9.2.26-1%2Bcuda12.1?arch=amd64&distro=ubuntu-22.04");
}

TEST_CASE("catalog SPDX 2.3: the image contains each present component", "[report][catalog]") {
  auto doc = nlohmann::json::parse(
      RenderCatalogSpdx(SmallCatalog(), Info(), "0.1.0", "2026-11-25T14:00:00Z"));
  CHECK(doc["spdxVersion"] == "SPDX-2.3");
  CHECK(doc["dataLicense"] == "CC0-1.0");
  CHECK(doc["creationInfo"]["created"] == "2026-11-25T14:00:00Z");
  REQUIRE(doc["packages"].size() == 4);  // the image and the three present components
  CHECK(doc["packages"][0]["primaryPackagePurpose"] == "CONTAINER");
  CHECK(doc["packages"][3]["externalRefs"][0]["referenceLocator"] ==
        "pkg:deb/ubuntu/libcudnn8@8.9.2.26-1%2Bcuda12.1?arch=amd64&distro=ubuntu-22.04");
  CHECK(doc["relationships"][0]["relationshipType"] == "DESCRIBES");
  REQUIRE(doc["relationships"].size() == 4);
  // The library is the deb's, which the image contains.
  CHECK(doc["relationships"][1] ==
        nlohmann::json{{"spdxElementId", doc["packages"][3]["SPDXID"]},
                       {"relationshipType", "CONTAINS"},
                       {"relatedSpdxElement", doc["packages"][1]["SPDXID"]}});
  CHECK(doc["relationships"][3]["spdxElementId"] == "SPDXRef-Image");
  CHECK(util::ParseFormat(kCatalogFormats, "spdx-json") == CatalogFormat::kSpdx);
}

TEST_CASE("catalog table: one row per component, provenance marks", "[report][catalog]") {
  std::string table = RenderCatalogTable(SmallCatalog(), Info());
  CHECK(table.find("KIND") != std::string::npos);
  CHECK(table.find("libcudnn_adv_infer.so.8.9.2 (deleted)") != std::string::npos);
  CHECK(table.find("8.9.2.26") != std::string::npos);
  CHECK(table.find("\n1 diagnostic:\n  /usr/lib/libbad.so (layer 0): corrupt ELF: truncated\n") !=
        std::string::npos);
  CHECK(table.find("os: Ubuntu 22.04") != std::string::npos);
}

TEST_CASE("catalog: a library vendored by auditwheel names the package that vendored it",
          "[report][catalog]") {
  catalog::Catalog cat = SmallCatalog();
  catalog::Component lib = cat.components[0];
  lib.path = "/site/ctranslate2.libs/libcudnn-74a4c495.so.9.1.0";
  lib.version = "9.1.0";
  lib.owner = catalog::PackageRef{catalog::PackageManager::kPip, "ctranslate2", "4.5.0",
                                  "/site/ctranslate2-4.5.0.dist-info/RECORD", 0};
  cat.components.push_back(lib);
  std::string table = RenderCatalogTable(cat, Info());
  CHECK(table.find("libcudnn-74a4c495.so.9.1.0 (vendored by ctranslate2 4.5.0)") !=
        std::string::npos);
  CHECK(table.find("libcudnn.so.8.9.2 (vendored") == std::string::npos);
  auto j = nlohmann::json::parse(RenderCatalogJson(cat, Info()));
  CHECK(j["components"].back()["vendored_by"] == "ctranslate2");
  CHECK_FALSE(j["components"][0].contains("vendored_by"));
}

// Issue #22: no component had a hash, the SBOM had no dependency graph, and nothing listed the
// image's other packages for Grype or Trivy.
TEST_CASE("catalog SBOM: hashes, the loader's graph, and every package with --sbom-scope all",
          "[report][catalog]") {
  catalog::Catalog cat = SmallCatalog();
  const std::string sha(64, 'a');
  cat.components[0].owner.reset();  // a tarball cuDNN: pkg:generic/nvidia, hashed
  cat.components[0].sha256 = sha;
  // torch's extension loads the cuDNN: the extension is no component, its pip owner is.
  const std::string ext = "/site/torch/lib/libtorch_cuda.so";
  cat.mutable_owners().emplace(
      ext, catalog::PackageRef{catalog::PackageManager::kPip, "torch", "2.3.0+cu121",
                               "/site/torch-2.3.0.dist-info/RECORD", 0});
  catalog::Component bash;
  bash.kind = catalog::ComponentKind::kOsPackage;
  bash.name = "bash";
  bash.version = "5.1";
  bash.versions = {
      {"5.1", catalog::VersionSource::kDpkg, "/var/lib/dpkg/status", 0, "5.1-6ubuntu1"}};
  bash.path = "/var/lib/dpkg/status";
  bash.layer = 0;
  cat.packages.push_back(bash);
  SbomInput sbom;
  sbom.loads = {{ext, cat.components[0].path},
                {cat.components[0].path, cat.components[0].path},  // itself: no edge
                {"/usr/bin/unknown", cat.components[0].path}};     // nobody's: no edge

  auto bom = nlohmann::json::parse(RenderCatalogCycloneDx(cat, Info(), "0.1.0", "", "1.6", sbom));
  const auto& lib = bom["components"][0];
  CHECK(lib["purl"].get<std::string>().rfind("pkg:generic/nvidia/libcudnn@8.9.2.26", 0) == 0);
  REQUIRE(lib["hashes"].size() == 1);
  CHECK(lib["hashes"][0]["alg"] == "SHA-256");
  CHECK(lib["hashes"][0]["content"] == sha);
  CHECK_FALSE(bom["components"][1].contains("hashes"));  // torch's dist: no file to hash
  REQUIRE(bom["dependencies"].size() == 1);
  CHECK(bom["dependencies"][0]["ref"] == bom["components"][1]["bom-ref"]);  // torch
  CHECK(bom["dependencies"][0]["dependsOn"] == nlohmann::json::array({lib["bom-ref"]}));
  CHECK(bom["components"].size() == 3);  // the CUDA stack: not bash
  CHECK(bom["compositions"][0]["aggregate"] == "incomplete");

  auto spdx =
      nlohmann::json::parse(RenderCatalogSpdx(cat, Info(), "0.1.0", "2026-11-25T14:00:00Z", sbom));
  CHECK(spdx["packages"][1]["checksums"][0]["algorithm"] == "SHA256");
  CHECK(spdx["packages"][1]["checksums"][0]["checksumValue"] == sha);
  bool depends = false;
  for (const auto& r : spdx["relationships"])
    if (r["relationshipType"] == "DEPENDS_ON")
      depends = r["spdxElementId"] == spdx["packages"][2]["SPDXID"] &&
                r["relatedSpdxElement"] == spdx["packages"][1]["SPDXID"];
  CHECK(depends);

  sbom.all_packages = true;
  auto all = nlohmann::json::parse(RenderCatalogCycloneDx(cat, Info(), "0.1.0", "", "1.6", sbom));
  REQUIRE(all["components"].size() == 4);
  CHECK(all["components"][3]["purl"] ==
        "pkg:deb/ubuntu/bash@5.1-6ubuntu1?arch=amd64&distro=ubuntu-22.04");
  CHECK(all["compositions"][0]["aggregate"] == "complete");
  auto spdx_all =
      nlohmann::json::parse(RenderCatalogSpdx(cat, Info(), "0.1.0", "2026-11-25T14:00:00Z", sbom));
  CHECK(spdx_all["packages"].size() == 5);  // the image and the four
}

}  // namespace imgcheck::report
