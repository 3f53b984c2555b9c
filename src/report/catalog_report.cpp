#include "report/catalog_report.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/escape.h"

namespace imgcheck::report {
namespace {

using catalog::Component;
using catalog::ComponentKind;
using nlohmann::ordered_json;

ordered_json LayerJson(const catalog::Catalog& cat, int index) {
  ordered_json j;
  j["index"] = index;
  const image::Layer* layer = cat.Layer(index);
  j["digest"] = layer != nullptr ? layer->digest : "";
  j["created_by"] = layer != nullptr ? layer->created_by : "";
  return j;
}

/// The source of the evidence that gave the component its version.
std::string_view ChosenSource(const Component& c) {
  for (const catalog::VersionEvidence& e : c.versions) {
    if (e.value == c.version) return catalog::SourceName(e.source);
  }
  return "";
}

const catalog::VersionEvidence* ChosenEvidence(const Component& c) {
  for (const catalog::VersionEvidence& e : c.versions) {
    if (e.value == c.version) return &e;
  }
  return nullptr;
}

ordered_json ComponentJson(const catalog::Catalog& cat, const Component& c) {
  ordered_json j;
  j["kind"] = catalog::KindName(c.kind);
  j["name"] = c.name;
  if (!c.family.empty()) j["family"] = c.family;
  j["version"] = c.version;
  j["version_source"] = ChosenSource(c);
  ordered_json sources = ordered_json::array();
  for (const catalog::VersionEvidence& e : c.versions) {
    ordered_json s;
    s["value"] = e.value;
    s["source"] = catalog::SourceName(e.source);
    s["path"] = e.path;
    s["layer"] = e.layer;
    if (!e.detail.empty()) s["detail"] = e.detail;
    sources.push_back(std::move(s));
  }
  j["version_sources"] = std::move(sources);
  j["path"] = c.path;
  j["layer"] = LayerJson(cat, c.layer);
  if (!c.overwritten_layers.empty()) j["overwritten_layers"] = c.overwritten_layers;
  j["deleted"] = c.deleted;
  if (!c.aliases.empty()) j["aliases"] = c.aliases;
  bool library = catalog::IsLibraryKind(c.kind);
  if (c.owner) {
    ordered_json o;
    o["manager"] = catalog::ManagerName(c.owner->manager);
    o["name"] = c.owner->name;
    o["version"] = c.owner->version;
    o["metadata"] = c.owner->metadata;
    o["layer"] = c.owner->layer;
    j["owner"] = std::move(o);
  } else if (library) {
    j["owner"] = nullptr;
  }
  if (library) j["managed"] = c.owner.has_value();
  if (c.elf) {
    ordered_json e;
    e["soname"] = c.elf->soname;
    e["needed"] = c.elf->needed;
    e["machine"] = c.elf->machine;
    e["class"] = c.elf->is64 ? 64 : 32;
    if (!c.elf->sass_sm.empty()) e["sass_sm"] = c.elf->sass_sm;
    if (!c.elf->ptx_sm.empty()) e["ptx_sm"] = c.elf->ptx_sm;
    j["elf"] = std::move(e);
  }
  if (!c.requires_dist.empty()) {
    ordered_json reqs = ordered_json::array();
    for (const catalog::Requirement& r : c.requires_dist) {
      ordered_json q;
      q["name"] = r.name;
      q["specifier"] = r.specifier;
      if (!r.marker.empty()) q["marker"] = r.marker;
      if (std::string pin = r.Pinned(); !pin.empty()) q["pinned"] = pin;
      reqs.push_back(std::move(q));
    }
    j["requires_dist"] = std::move(reqs);
  }
  if (!c.missing_files.empty()) j["missing_files"] = c.missing_files;
  if (c.kind == ComponentKind::kOsPackage) {
    j["status"] = c.status;
    j["held"] = c.held;
  }
  if (!c.build.empty()) {
    ordered_json b = ordered_json::object();
    for (const auto& [k, v] : c.build) b[k] = v;
    j["build"] = std::move(b);
  }
  return j;
}

ordered_json ConfigJson(const catalog::Catalog& cat) {
  const catalog::ImageConfig& config = cat.config;
  ordered_json j;
  ordered_json env = ordered_json::array();
  for (const auto& [k, v] : config.env) env.push_back(k + "=" + v);
  j["env"] = std::move(env);
  j["labels"] = config.labels;
  ordered_json conf = ordered_json::array();
  for (const catalog::LdSoConfDir& d : config.ld_so_conf.dirs) {
    conf.push_back({{"dir", d.dir}, {"file", d.file}, {"line", d.line}, {"layer", d.layer}});
  }
  j["ld_so_conf"] = std::move(conf);
  if (config.ld_so_cache) {
    ordered_json cache;
    cache["path"] = config.ld_so_cache_path;
    cache["layer"] = config.ld_so_cache_layer;
    static constexpr const char* kFormats[] = {"old", "new", "combined"};
    cache["format"] = kFormats[static_cast<int>(config.ld_so_cache->format)];
    ordered_json entries = ordered_json::array();
    for (const catalog::LdCacheRecord& r : config.ld_so_cache->entries) {
      ordered_json e{{"name", r.name}, {"path", r.path}, {"flags", r.flags}};
      if (!r.hwcaps_subdir.empty()) e["hwcaps"] = r.hwcaps_subdir;
      entries.push_back(std::move(e));
    }
    cache["entries"] = std::move(entries);
    j["ld_so_cache"] = std::move(cache);
  } else {
    j["ld_so_cache"] = nullptr;
  }
  j["os_release"] = config.os_release;
  return j;
}

ordered_json ImageJson(const ImageInfo& image) {
  return {{"reference", image.reference},
          {"transport", image.transport},
          {"manifest_digest", image.manifest_digest},
          {"config_digest", image.config_digest},
          {"platform", image.platform}};
}

std::string Column(std::string_view s, size_t width) {
  std::string out(s);
  if (out.size() < width) out.append(width - out.size(), ' ');
  return out;
}

/// Percent-encoding of a purl segment (purl spec: '+' and others must be encoded).
std::string PurlEncode(std::string_view s) {
  std::ostringstream out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~') {
      out << c;
    } else {
      out << '%' << std::uppercase << std::hex << std::setw(2) << std::setfill('0')
          << static_cast<int>(c) << std::dec;
    }
  }
  return out.str();
}

std::string Purl(const catalog::Catalog& cat, const Component& c) {
  switch (c.kind) {
    case ComponentKind::kPythonDist:
      return "pkg:pypi/" + PurlEncode(c.name) + "@" + PurlEncode(c.version);
    case ComponentKind::kCondaPackage:
      return "pkg:conda/" + PurlEncode(c.name) + "@" + PurlEncode(c.version);
    case ComponentKind::kOsPackage: {
      auto id = cat.config.os_release.find("ID");
      std::string distro = id != cat.config.os_release.end() ? id->second : "debian";
      // The package's own version string (with revision) is what a deb purl names.
      std::string version = c.versions.empty() ? c.version : c.versions.front().detail;
      if (version.empty()) version = c.version;
      return "pkg:deb/" + PurlEncode(distro) + "/" + PurlEncode(c.name) + "@" + PurlEncode(version);
    }
    default:
      return "";
  }
}

std::string_view CycloneDxType(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kFramework:
    case ComponentKind::kCudaToolkit:
      return "framework";
    case ComponentKind::kHeader:
      return "file";
    default:
      return "library";
  }
}

}  // namespace

const std::vector<CatalogFormatInfo>& CatalogFormats() {
  static const std::vector<CatalogFormatInfo> kFormats = {
      {"table", CatalogFormat::kTable, "aligned columns for people"},
      {"json", CatalogFormat::kJson, "every component with its version sources and layer"},
      {"cyclonedx", CatalogFormat::kCycloneDx, "CycloneDX 1.5 JSON SBOM"},
  };
  return kFormats;
}

std::optional<CatalogFormat> ParseCatalogFormat(std::string_view name) {
  for (const CatalogFormatInfo& f : CatalogFormats()) {
    if (f.name == name) return f.format;
  }
  return std::nullopt;
}

std::string RenderCatalogTable(const catalog::Catalog& cat, const ImageInfo& image) {
  std::vector<std::vector<std::string>> rows = {
      {"KIND", "NAME", "VERSION", "SOURCE", "LAYER", "PATH"}};
  for (const Component& c : cat.components) {
    std::string path = Visible(c.path);
    if (c.deleted) path += " (deleted)";
    if (c.kind != ComponentKind::kPythonDist && c.kind != ComponentKind::kFramework &&
        c.kind != ComponentKind::kOsPackage && c.kind != ComponentKind::kCondaPackage &&
        c.kind != ComponentKind::kHeader && c.kind != ComponentKind::kCudaToolkit && !c.owner) {
      path += " (unmanaged)";
    }
    rows.push_back({std::string(catalog::KindName(c.kind)), Visible(c.name),
                    c.version.empty() ? "?" : Visible(c.version), std::string(ChosenSource(c)),
                    std::to_string(c.layer), path});
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream out;
  out << "image " << Visible(image.reference) << "\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i + 1 < row.size(); ++i) out << Column(row[i], width[i] + 2);
    out << row.back() << "\n";
  }
  const catalog::ImageConfig& config = cat.config;
  if (auto ld = config.Env("LD_LIBRARY_PATH")) out << "\nLD_LIBRARY_PATH=" << Visible(*ld) << "\n";
  if (!config.ld_so_conf.dirs.empty()) {
    out << "ld.so.conf:";
    for (const catalog::LdSoConfDir& d : config.ld_so_conf.dirs) out << " " << Visible(d.dir);
    out << "\n";
  }
  if (config.ld_so_cache) {
    out << "ld.so.cache: " << config.ld_so_cache->entries.size() << " entries (layer "
        << config.ld_so_cache_layer << ")\n";
  }
  if (auto name = config.os_release.find("PRETTY_NAME"); name != config.os_release.end()) {
    out << "os: " << Visible(name->second) << "\n";
  }
  for (const util::Diagnostic& d : cat.diagnostics) {
    out << "warning: " << Visible(d.path) << " (layer " << d.layer << "): " << Visible(d.message)
        << "\n";
  }
  return VisibleLines(out.str());
}

std::string RenderCatalogJson(const catalog::Catalog& cat, const ImageInfo& image) {
  ordered_json j;
  j["image"] = ImageJson(image);
  ordered_json layers = ordered_json::array();
  for (const image::Layer& l : cat.layers) layers.push_back(LayerJson(cat, l.index));
  j["layers"] = std::move(layers);
  ordered_json components = ordered_json::array();
  for (const Component& c : cat.components) components.push_back(ComponentJson(cat, c));
  j["components"] = std::move(components);
  j["config"] = ConfigJson(cat);
  ordered_json diags = ordered_json::array();
  for (const util::Diagnostic& d : cat.diagnostics) {
    diags.push_back({{"path", d.path}, {"layer", d.layer}, {"message", d.message}});
  }
  j["diagnostics"] = std::move(diags);
  return DumpJson(j, 2) + "\n";
}

std::string RenderCatalogCycloneDx(const catalog::Catalog& cat, const ImageInfo& image,
                                   std::string_view tool_version) {
  ordered_json bom;
  bom["bomFormat"] = "CycloneDX";
  bom["specVersion"] = "1.5";
  bom["version"] = 1;
  ordered_json metadata;
  metadata["tools"] = {
      {"components", {{{"type", "application"}, {"name", "imgcheck"}, {"version", tool_version}}}}};
  ordered_json subject{{"type", "container"}, {"name", image.reference}};
  if (!image.manifest_digest.empty()) subject["version"] = image.manifest_digest;
  metadata["component"] = std::move(subject);
  bom["metadata"] = std::move(metadata);
  ordered_json components = ordered_json::array();
  size_t n = 0;
  for (const Component& c : cat.components) {
    ++n;
    if (c.deleted) continue;  // not in the image
    ordered_json j;
    j["bom-ref"] = "component-" + std::to_string(n);
    j["type"] = CycloneDxType(c.kind);
    j["name"] = c.name;
    if (!c.version.empty()) j["version"] = c.version;
    if (std::string purl = Purl(cat, c); !purl.empty()) j["purl"] = purl;
    ordered_json props = ordered_json::array();
    auto prop = [&](std::string_view name, const std::string& value) {
      if (!value.empty()) props.push_back({{"name", name}, {"value", value}});
    };
    prop("imgcheck:kind", std::string(catalog::KindName(c.kind)));
    prop("imgcheck:path", c.path);
    prop("imgcheck:layer", std::to_string(c.layer));
    if (const image::Layer* layer = cat.Layer(c.layer)) {
      prop("imgcheck:layer_digest", layer->digest);
      prop("imgcheck:created_by", layer->created_by);
    }
    if (const catalog::VersionEvidence* e = ChosenEvidence(c)) {
      prop("imgcheck:version_source", std::string(catalog::SourceName(e->source)));
      prop("imgcheck:version_source_path", e->path);
    }
    if (c.owner) prop("imgcheck:owner", c.owner->name + "@" + c.owner->version);
    j["properties"] = std::move(props);
    components.push_back(std::move(j));
  }
  bom["components"] = std::move(components);
  return DumpJson(bom, 2) + "\n";
}

std::string RenderCatalog(const catalog::Catalog& cat, const ImageInfo& image, CatalogFormat format,
                          std::string_view tool_version) {
  switch (format) {
    case CatalogFormat::kTable:
      return RenderCatalogTable(cat, image);
    case CatalogFormat::kJson:
      return RenderCatalogJson(cat, image);
    case CatalogFormat::kCycloneDx:
      return RenderCatalogCycloneDx(cat, image, tool_version);
  }
  return {};
}

}  // namespace imgcheck::report
