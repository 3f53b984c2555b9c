// `imgcheck catalog` through the built binary: JSON and CycloneDX of an image written from a
// recipe, and an unknown format refused.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "image_writer.h"
#include "support.h"

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

}  // namespace
}  // namespace imgcheck::testing
