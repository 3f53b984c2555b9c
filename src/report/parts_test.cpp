// The pieces every document of the report stage shares: the image header and the diagnostics,
// each rendered by one function, so the findings report, the catalog and the layers table agree.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "report/catalog_report.h"
#include "report/diagnostics.h"
#include "report/image_header.h"
#include "report/layers.h"
#include "report/report.h"

using namespace imgcheck;
using namespace imgcheck::report;

namespace {

const std::vector<util::Diagnostic> kDiagnostics = {
    {"/usr/lib/libbad.so", 0, "corrupt ELF: truncated"},
    {"/etc/ld.so.conf", -1, "includes stopped after 1000 lines"},
    {"", 2, "whiteout of a missing file"},
    {"", -1, "config history has 3 non-empty entries for 2 layers"},
};

constexpr const char* kDiagnosticsBlock =
    "\n4 diagnostics:\n"
    "  /usr/lib/libbad.so (layer 0): corrupt ELF: truncated\n"
    "  /etc/ld.so.conf: includes stopped after 1000 lines\n"
    "  layer 2: whiteout of a missing file\n"
    "  config history has 3 non-empty entries for 2 layers\n";

image::Image AnImage() {
  image::Image img;
  img.reference = "oci:/tmp/x:latest";
  img.transport = "oci";
  img.manifest_digest = "sha256:mmm";
  img.config_digest = "sha256:ccc";
  img.diagnostics = kDiagnostics;
  return img;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a diagnostic line names what it has: path, layer, both or neither", "[report]") {
  CHECK(DiagnosticLine(kDiagnostics[0]) == "/usr/lib/libbad.so (layer 0): corrupt ELF: truncated");
  CHECK(DiagnosticLine(kDiagnostics[1]) == "/etc/ld.so.conf: includes stopped after 1000 lines");
  CHECK(DiagnosticLine(kDiagnostics[2]) == "layer 2: whiteout of a missing file");
  CHECK(DiagnosticLine(kDiagnostics[3]) == "config history has 3 non-empty entries for 2 layers");
  CHECK(DiagnosticLine({"/x\x1b[2J", 1, "bad\x07"}) == "/x\\x1B[2J (layer 1): bad\\x07");
  CHECK(DiagnosticsText({}).empty());
  CHECK(DiagnosticsText({kDiagnostics[0]}) ==
        "\n1 diagnostic:\n  /usr/lib/libbad.so (layer 0): corrupt ELF: truncated\n");
  CHECK(DiagnosticsText(kDiagnostics) == kDiagnosticsBlock);
  CHECK(
      DiagnosticJson(kDiagnostics[3]).dump() ==
      R"({"path":"","layer":-1,"message":"config history has 3 non-empty entries for 2 layers"})");
}

TEST_CASE("the findings report, the catalog and the layers table show diagnostics alike",
          "[report]") {
  image::Image img = AnImage();
  Report report;
  report.image = ImageInfoOf(img, "linux/amd64");
  report.diagnostics = kDiagnostics;
  catalog::Catalog cat;
  cat.diagnostics = kDiagnostics;

  CHECK(Contains(Render(report, Format::kText), kDiagnosticsBlock));
  CHECK(Contains(RenderCatalogTable(cat, report.image), kDiagnosticsBlock));
  CHECK(Contains(RenderLayersText(img), kDiagnosticsBlock));

  std::string expected = nlohmann::json(DiagnosticJson(kDiagnostics[2])).dump();
  CHECK(nlohmann::json::parse(Render(report, Format::kJson))["diagnostics"][2].dump() == expected);
  CHECK(nlohmann::json::parse(RenderCatalogJson(cat, report.image))["diagnostics"][2].dump() ==
        expected);
  CHECK(nlohmann::json::parse(RenderLayersJson(img))["diagnostics"][2].dump() == expected);
}

TEST_CASE("the catalog and the layers table open with the same image header", "[report]") {
  image::Image img = AnImage();
  ImageInfo info = ImageInfoOf(img, "linux/amd64");
  CHECK(info.platform == "linux/amd64");
  CHECK(ImageText(info) ==
        "image:    oci:/tmp/x:latest\nmanifest: sha256:mmm\nconfig:   sha256:ccc\n");
  CHECK(RenderCatalogTable(catalog::Catalog(), info).starts_with(ImageText(info)));
  CHECK(RenderLayersText(img).starts_with(ImageText(info)));
  // A directory image has no manifest: the line is left out, not left empty.
  info.manifest_digest.clear();
  CHECK(ImageText(info) == "image:    oci:/tmp/x:latest\nconfig:   sha256:ccc\n");
}
