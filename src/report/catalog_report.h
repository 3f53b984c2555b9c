// The `catalog` subcommand's output: the catalog as a table (people), JSON (tools) and a
// CycloneDX 1.6 (or 1.5) SBOM. Formats only read the model.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "report/report.h"

namespace imgcheck::report {

enum class CatalogFormat : uint8_t { kTable, kJson, kCycloneDx, kCycloneDx15, kSpdx };

/// The one table of catalog output formats (--format, its help, check and completion).
inline constexpr std::array<util::FormatInfo<CatalogFormat>, 5> kCatalogFormats = {{
    {CatalogFormat::kTable, "table", "aligned columns for people"},
    {CatalogFormat::kJson, "json", "every component with its version sources and layer"},
    {CatalogFormat::kCycloneDx, "cyclonedx", "CycloneDX 1.6 JSON SBOM"},
    {CatalogFormat::kCycloneDx15, "cyclonedx-1.5", "CycloneDX 1.5 JSON SBOM"},
    {CatalogFormat::kSpdx, "spdx-json", "SPDX 2.3 JSON SBOM"},
}};

/// Columns KIND, NAME, VERSION, SOURCE, LAYER, PATH; then loader configuration and diagnostics.
std::string RenderCatalogTable(const catalog::Catalog& cat, const ImageInfo& image);
/// Every component with at least name, version, version_source(s), path and
/// layer {index, digest, created_by}; the image configuration; diagnostics.
std::string RenderCatalogJson(const catalog::Catalog& cat, const ImageInfo& image);
/// What an SBOM says beyond the catalog's CUDA components.
struct SbomInput {
  /// --sbom-scope all: every dpkg, pip and conda package of the image (Catalog::packages join
  /// the components) and the document says the list is complete; else the CUDA stack only,
  /// said to be incomplete.
  bool all_packages = false;
  /// The loader's resolutions, (consumer, library it loads) as real paths in the image: the
  /// dependency graph, each end mapped to its library component or the package that owns it.
  std::vector<std::pair<std::string, std::string>> loads;
};

/// CycloneDX JSON (`spec` "1.6", or "1.5" on request): present components with type, name,
/// version, a purl per the purl spec (pkg:pypi, pkg:conda, pkg:deb with the full version, arch
/// and distro; pkg:generic/nvidia for a CUDA library no package owns), imgcheck:* properties for
/// path, layer and version source, a SHA-256 hash where the reading took one, each file's path as
/// evidence.occurrences; a file a listed package installed is nested in that package's component,
/// and a framework whose distribution is listed is that component (its build facts as
/// imgcheck:build:* properties), never a second one; `dependencies`
/// from `sbom.loads`, and a composition that says the list is the CUDA stack only (aggregate
/// "incomplete") or, with sbom.all_packages, every package ("complete"); the metadata names the
/// tool and (property imgcheck:rules-version) the rule data's version.
std::string RenderCatalogCycloneDx(const catalog::Catalog& cat, const ImageInfo& image,
                                   std::string_view tool_version,
                                   std::string_view rules_version = {},
                                   std::string_view spec = "1.6", const SbomInput& sbom = {});

/// SPDX 2.3 JSON: the image as the described package, which CONTAINS each present component
/// (name, versionInfo, the purl as a PACKAGE-MANAGER external reference, a SHA256 checksum where
/// the reading took one) but the files a listed package installed, which that package CONTAINS;
/// a framework folded into its distribution as in CycloneDX (its build facts in the comment);
/// DEPENDS_ON relationships from `sbom.loads`; `created` is `timestamp`
/// ("YYYY-MM-DDTHH:MM:SSZ"; empty: now).
std::string RenderCatalogSpdx(const catalog::Catalog& cat, const ImageInfo& image,
                              std::string_view tool_version, std::string timestamp = "",
                              const SbomInput& sbom = {});

/// True for the SBOM formats (CycloneDX, SPDX): their reading hashes libraries and loads them.
bool IsSbom(CatalogFormat format);

std::string RenderCatalog(const catalog::Catalog& cat, const ImageInfo& image, CatalogFormat format,
                          std::string_view tool_version, std::string_view rules_version = {},
                          const SbomInput& sbom = {});

}  // namespace imgcheck::report
