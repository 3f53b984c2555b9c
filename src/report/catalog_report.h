// The `catalog` subcommand's output: the catalog as a table (people), JSON (tools) and a
// CycloneDX 1.5 SBOM. Formats only read the model.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "report/report.h"

namespace imgcheck::report {

enum class CatalogFormat : uint8_t { kTable, kJson, kCycloneDx };

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
/// CycloneDX 1.5 JSON: present components with type, name, version, purl where one is obvious
/// (pkg:pypi, pkg:deb, pkg:conda) and imgcheck:* properties for path, layer and version source;
/// the metadata names the tool and (property imgcheck:rules-version) the rule data's version.
std::string RenderCatalogCycloneDx(const catalog::Catalog& cat, const ImageInfo& image,
                                   std::string_view tool_version,
                                   std::string_view rules_version = {});

std::string RenderCatalog(const catalog::Catalog& cat, const ImageInfo& image, CatalogFormat format,
                          std::string_view tool_version, std::string_view rules_version = {});

}  // namespace imgcheck::report
