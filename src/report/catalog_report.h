// The `catalog` subcommand's output: the catalog as a table (people), JSON (tools) and a
// CycloneDX 1.6 (or 1.5) SBOM. Formats only read the model.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "report/report.h"

namespace imgcheck::report {

enum class CatalogFormat : uint8_t { kTable, kJson, kCycloneDx, kCycloneDx15, kSpdx };

struct CatalogFormatInfo {
  std::string_view name;
  CatalogFormat format;
  std::string_view summary;
};
/// The one table of catalog output formats (for --format, its help and "did you mean").
const std::vector<CatalogFormatInfo>& CatalogFormats();
/// By name; nullopt when unknown.
std::optional<CatalogFormat> ParseCatalogFormat(std::string_view name);

/// Columns KIND, NAME, VERSION, SOURCE, LAYER, PATH; then loader configuration and diagnostics.
std::string RenderCatalogTable(const catalog::Catalog& cat, const ImageInfo& image);
/// Every component with at least name, version, version_source(s), path and
/// layer {index, digest, created_by}; the image configuration; diagnostics.
std::string RenderCatalogJson(const catalog::Catalog& cat, const ImageInfo& image);
/// CycloneDX JSON (`spec` "1.6", or "1.5" on request): present components with type, name,
/// version, a purl per the purl spec (pkg:pypi, pkg:conda, pkg:deb with the full version, arch
/// and distro; pkg:generic/nvidia for a CUDA library no package owns), imgcheck:* properties for
/// path, layer and version source, and a composition that says the list is the CUDA stack only
/// (aggregate "incomplete"); the metadata names the tool and (property imgcheck:rules-version)
/// the rule data's version.
std::string RenderCatalogCycloneDx(const catalog::Catalog& cat, const ImageInfo& image,
                                   std::string_view tool_version,
                                   std::string_view rules_version = {},
                                   std::string_view spec = "1.6");

/// SPDX 2.3 JSON: the image as the described package, which CONTAINS each present component
/// (name, versionInfo, the purl as a PACKAGE-MANAGER external reference); `created` is
/// `timestamp` ("YYYY-MM-DDTHH:MM:SSZ"; empty: now).
std::string RenderCatalogSpdx(const catalog::Catalog& cat, const ImageInfo& image,
                              std::string_view tool_version, std::string timestamp = "");

std::string RenderCatalog(const catalog::Catalog& cat, const ImageInfo& image, CatalogFormat format,
                          std::string_view tool_version, std::string_view rules_version = {});

}  // namespace imgcheck::report
