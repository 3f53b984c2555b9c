#include "report/catalog_report.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "catalog/metadata.h"
#include "report/diagnostics.h"
#include "report/escape.h"
#include "report/image_header.h"
#include "util/clock.h"
#include "util/path.h"

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
  if (library && c.owner && catalog::IsVendoredName(util::BaseName(c.path)))
    j["vendored_by"] = c.owner->name;
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

// The purl of a component (https://github.com/package-url/purl-spec), "" when none says what it
// is. Qualifiers in key order; `arch` is the image platform's (dpkg's for native packages).
std::string Purl(const catalog::Catalog& cat, const Component& c, const ImageInfo& image) {
  switch (c.kind) {
    case ComponentKind::kPythonDist:
      return "pkg:pypi/" + PurlEncode(c.name) + "@" + PurlEncode(c.version);
    case ComponentKind::kCondaPackage:
      return "pkg:conda/" + PurlEncode(c.name) + "@" + PurlEncode(c.version);
    case ComponentKind::kOsPackage: {
      auto field = [&](const char* key) {
        auto it = cat.config.os_release.find(key);
        return it != cat.config.os_release.end() ? it->second : std::string();
      };
      std::string id = field("ID").empty() ? "debian" : field("ID");
      std::string distro = field("VERSION_ID").empty() ? id : id + "-" + field("VERSION_ID");
      // The package's own version string (with revision) is what a deb purl names.
      std::string version = c.versions.empty() ? c.version : c.versions.front().detail;
      if (version.empty()) version = c.version;
      std::string arch = image.platform.substr(image.platform.find('/') + 1);
      arch = arch.substr(0, arch.find('/'));
      if (arch == "x86_64") arch = "amd64";
      return "pkg:deb/" + PurlEncode(id) + "/" + PurlEncode(c.name) + "@" + PurlEncode(version) +
             (arch.empty() ? "" : "?arch=" + PurlEncode(arch) + "&") + (arch.empty() ? "?" : "") +
             "distro=" + PurlEncode(distro);
    }
    case ComponentKind::kCudaLibrary:
      // A library no package owns (a tarball or runfile install) is NVIDIA's, by its name.
      if (c.owner || c.version.empty()) return "";
      return "pkg:generic/nvidia/" + PurlEncode(c.name) + "@" + PurlEncode(c.version);
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

/// One component of an SBOM with its reference ("component-3"; a package outside the CUDA
/// stack "package-7"), unique in the document.
struct SbomItem {
  const Component* component;
  std::string ref;
};

/// The package manager whose database names a package component; nullopt for the rest.
std::optional<catalog::PackageManager> ManagerOf(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kPythonDist:
      return catalog::PackageManager::kPip;
    case ComponentKind::kOsPackage:
      return catalog::PackageManager::kDpkg;
    case ComponentKind::kCondaPackage:
      return catalog::PackageManager::kConda;
    default:
      return std::nullopt;
  }
}

/// A package as its component is keyed: pip's by the normalised distribution name, as the
/// catalog names python-dist components; an owner's name as the database wrote it.
using PackageKey = std::pair<catalog::PackageManager, std::string>;
PackageKey KeyOf(const catalog::PackageRef& owner) {
  return {owner.manager, owner.manager == catalog::PackageManager::kPip
                             ? catalog::NormalizeDistName(owner.name)
                             : owner.name};
}

/// The present components, then every other package of the image with sbom.all_packages, else
/// only those that installed a present component (the CUDA stack's own packages).
std::vector<SbomItem> SbomItems(const catalog::Catalog& cat, const SbomInput& sbom) {
  std::vector<SbomItem> items;
  std::set<PackageKey> owners;
  for (size_t i = 0; i < cat.components.size(); ++i) {
    const Component& c = cat.components[i];
    if (c.deleted) continue;  // not in the image
    items.push_back({&c, "component-" + std::to_string(i + 1)});
    if (c.owner) owners.insert(KeyOf(*c.owner));
  }
  for (size_t i = 0; i < cat.packages.size(); ++i) {
    const Component& p = cat.packages[i];
    std::optional<catalog::PackageManager> m = ManagerOf(p.kind);
    if (sbom.all_packages || (m && owners.count({*m, p.name})))
      items.push_back({&p, "package-" + std::to_string(i + 1)});
  }
  return items;
}

/// Where each item sits in the SBOM. A file a package installed (its component's owner) is
/// nested in that package's component (CycloneDX) or CONTAINed by it (SPDX); a framework whose
/// distribution is listed is that one component, its build facts folded into it.
struct SbomTree {
  std::map<PackageKey, std::string> package_ref;  ///< each package item's reference
  std::map<std::string, std::string> parent;      ///< item ref -> its package's ref
  std::map<std::string, std::vector<const Component*>> frameworks;  ///< package ref -> folded
  std::set<std::string> folded;  ///< refs of the frameworks folded away
};

SbomTree TreeOf(const std::vector<SbomItem>& items) {
  SbomTree tree;
  for (const SbomItem& item : items)
    if (std::optional<catalog::PackageManager> m = ManagerOf(item.component->kind))
      tree.package_ref.emplace(PackageKey{*m, item.component->name}, item.ref);
  for (const SbomItem& item : items) {
    const Component& c = *item.component;
    if (!c.owner || ManagerOf(c.kind)) continue;
    auto it = tree.package_ref.find(KeyOf(*c.owner));
    if (it == tree.package_ref.end()) continue;  // its package is not listed: stays on its own
    if (c.kind == ComponentKind::kFramework) {
      tree.frameworks[it->second].push_back(&c);
      tree.folded.insert(item.ref);
    } else {
      tree.parent.emplace(item.ref, it->second);
    }
  }
  return tree;
}

/// The framework's facts as name/value pairs: its name, version and where its build facts
/// file is, then each build fact ("build:cuda_version").
std::vector<std::pair<std::string, std::string>> FrameworkFacts(const Component& fw) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"framework", fw.name}, {"framework_version", fw.version}, {"framework_path", fw.path}};
  for (const auto& [k, v] : fw.build) out.emplace_back("build:" + k, v);
  return out;
}

/// The dependency graph of `items` by reference: each load's consumer and library mapped to
/// the library component at that path, else to the package component that owns the file. A
/// load inside one component (a package's own libraries) is no edge.
std::map<std::string, std::set<std::string>> DependencyRefs(const catalog::Catalog& cat,
                                                            const std::vector<SbomItem>& items,
                                                            const SbomTree& tree,
                                                            const SbomInput& sbom) {
  std::map<std::string, std::string, std::less<>> by_path;
  for (const SbomItem& item : items) {
    const Component& c = *item.component;
    if (!ManagerOf(c.kind) && catalog::IsLibraryKind(c.kind)) by_path.emplace(c.path, item.ref);
  }
  auto ref_of = [&](const std::string& path) -> std::string {
    if (auto it = by_path.find(path); it != by_path.end()) return it->second;
    if (const catalog::PackageRef* owner = cat.Owner(path))
      if (auto it = tree.package_ref.find(KeyOf(*owner)); it != tree.package_ref.end())
        return it->second;
    return "";
  };
  std::map<std::string, std::set<std::string>> graph;
  for (const auto& [consumer, library] : sbom.loads) {
    std::string from = ref_of(consumer), to = ref_of(library);
    if (!from.empty() && !to.empty() && from != to) graph[from].insert(to);
  }
  return graph;
}

}  // namespace

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
    if (c.owner && c.kind != ComponentKind::kPythonDist && c.kind != ComponentKind::kFramework &&
        catalog::IsVendoredName(util::BaseName(c.path)))
      path += " (vendored by " + Visible(c.owner->name + " " + c.owner->version) + ")";
    rows.push_back({std::string(catalog::KindName(c.kind)), Visible(c.name),
                    c.version.empty() ? "?" : Visible(c.version), std::string(ChosenSource(c)),
                    std::to_string(c.layer), path});
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream out;
  out << ImageText(image);
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
  out << DiagnosticsText(cat.diagnostics);
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
  for (const util::Diagnostic& d : cat.diagnostics) diags.push_back(DiagnosticJson(d));
  j["diagnostics"] = std::move(diags);
  return DumpJson(j, 2) + "\n";
}

std::string RenderCatalogCycloneDx(const catalog::Catalog& cat, const ImageInfo& image,
                                   std::string_view tool_version, std::string_view rules_version,
                                   std::string_view spec, const SbomInput& sbom) {
  ordered_json bom;
  bom["bomFormat"] = "CycloneDX";
  bom["specVersion"] = spec;
  bom["version"] = 1;
  ordered_json metadata;
  metadata["tools"] = {
      {"components", {{{"type", "application"}, {"name", "imgcheck"}, {"version", tool_version}}}}};
  // The rule data that classified the components (libraries.json families, framework files).
  if (!rules_version.empty())
    metadata["properties"] = {{{"name", "imgcheck:rules-version"}, {"value", rules_version}}};
  ordered_json subject{{"bom-ref", "image"}, {"type", "container"}, {"name", image.reference}};
  if (!image.manifest_digest.empty()) subject["version"] = image.manifest_digest;
  metadata["component"] = std::move(subject);
  bom["metadata"] = std::move(metadata);
  std::vector<SbomItem> items = SbomItems(cat, sbom);
  SbomTree tree = TreeOf(items);
  std::map<std::string, ordered_json> by_ref;
  for (const SbomItem& item : items) {
    const Component& c = *item.component;
    if (tree.folded.count(item.ref)) continue;
    ordered_json j;
    j["bom-ref"] = item.ref;
    j["type"] = CycloneDxType(c.kind);
    j["name"] = c.name;
    if (!c.version.empty()) j["version"] = c.version;
    if (!c.sha256.empty()) j["hashes"] = {{{"alg", "SHA-256"}, {"content", c.sha256}}};
    if (std::string purl = Purl(cat, c, image); !purl.empty()) j["purl"] = purl;
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
    for (const Component* fw : tree.frameworks[item.ref])
      for (const auto& [name, value] : FrameworkFacts(*fw)) prop("imgcheck:" + name, value);
    j["properties"] = std::move(props);
    // Where the file is in the image (CycloneDX 1.5+ evidence.occurrences).
    if (!ManagerOf(c.kind) && !c.path.empty())
      j["evidence"] = {{"occurrences", {{{"location", c.path}}}}};
    by_ref.emplace(item.ref, std::move(j));
  }
  // A package's files nested in its component, in catalog order; the rest at the top.
  for (const SbomItem& item : items)
    if (auto p = tree.parent.find(item.ref); p != tree.parent.end()) {
      ordered_json& package = by_ref.at(p->second);
      if (!package.contains("components")) package["components"] = ordered_json::array();
      package["components"].push_back(std::move(by_ref.at(item.ref)));
    }
  ordered_json components = ordered_json::array();
  for (const SbomItem& item : items)
    if (!tree.folded.count(item.ref) && !tree.parent.count(item.ref))
      components.push_back(std::move(by_ref.at(item.ref)));
  bom["components"] = std::move(components);
  // Who loads whom, as the loader resolved it (CycloneDX: a component's dependsOn).
  ordered_json dependencies = ordered_json::array();
  for (const auto& [from, to] : DependencyRefs(cat, items, tree, sbom))
    dependencies.push_back({{"ref", from}, {"dependsOn", ordered_json(to)}});
  if (!dependencies.empty()) bom["dependencies"] = std::move(dependencies);
  // By default the catalog lists the CUDA stack (libraries, driver files, frameworks and the
  // packages that own them), not every package of the image: said, so that no scanner takes it
  // as whole. With every package (--sbom-scope all) the list is the image's.
  std::string aggregate = sbom.all_packages ? "complete" : "incomplete";
  bom["compositions"] = {{{"aggregate", aggregate}, {"assemblies", {"image"}}}};
  return DumpJson(bom, 2) + "\n";
}

std::string RenderCatalogSpdx(const catalog::Catalog& cat, const ImageInfo& image,
                              std::string_view tool_version, std::string timestamp,
                              const SbomInput& sbom) {
  if (timestamp.empty()) timestamp = util::UtcNow("%Y-%m-%dT%H:%M:%SZ");
  ordered_json doc;
  doc["spdxVersion"] = "SPDX-2.3";
  doc["dataLicense"] = "CC0-1.0";
  doc["SPDXID"] = "SPDXRef-DOCUMENT";
  doc["name"] = image.reference;
  // Unique per image and run, as the spec asks; not a URL anyone serves.
  doc["documentNamespace"] =
      "https://imgcheck.invalid/spdx/" +
      PurlEncode(image.manifest_digest.empty() ? image.reference : image.manifest_digest) + "/" +
      PurlEncode(timestamp);
  doc["creationInfo"] = {
      {"created", timestamp},
      {"creators", {"Tool: imgcheck-" + std::string(tool_version)}},
      {"comment", sbom.all_packages ? "Every dpkg, pip and conda package of the image, and "
                                      "the CUDA libraries, driver files and frameworks."
                                    : "The CUDA stack of the image only (libraries, driver "
                                      "files, frameworks and the packages that own them)."}};
  ordered_json packages = ordered_json::array();
  ordered_json subject{{"SPDXID", "SPDXRef-Image"},
                       {"name", image.reference},
                       {"downloadLocation", "NOASSERTION"},
                       {"filesAnalyzed", false},
                       {"primaryPackagePurpose", "CONTAINER"}};
  if (!image.manifest_digest.empty()) subject["versionInfo"] = image.manifest_digest;
  packages.push_back(std::move(subject));
  ordered_json relationships = ordered_json::array();
  relationships.push_back({{"spdxElementId", "SPDXRef-DOCUMENT"},
                           {"relationshipType", "DESCRIBES"},
                           {"relatedSpdxElement", "SPDXRef-Image"}});
  // SPDX identifiers from the CycloneDX references: "component-3" -> "SPDXRef-component-3".
  auto id_of = [](const std::string& ref) { return "SPDXRef-" + ref; };
  std::vector<SbomItem> items = SbomItems(cat, sbom);
  SbomTree tree = TreeOf(items);
  for (const SbomItem& item : items) {
    const Component& c = *item.component;
    if (tree.folded.count(item.ref)) continue;
    std::string id = id_of(item.ref);
    ordered_json p{{"SPDXID", id},
                   {"name", c.name},
                   {"downloadLocation", "NOASSERTION"},
                   {"filesAnalyzed", false}};
    if (!c.version.empty()) p["versionInfo"] = c.version;
    if (!c.sha256.empty())
      p["checksums"] = {{{"algorithm", "SHA256"}, {"checksumValue", c.sha256}}};
    if (std::string purl = Purl(cat, c, image); !purl.empty())
      p["externalRefs"] = {{{"referenceCategory", "PACKAGE-MANAGER"},
                            {"referenceType", "purl"},
                            {"referenceLocator", purl}}};
    std::string comment = std::string(catalog::KindName(c.kind)) + " at " + c.path + " (layer " +
                          std::to_string(c.layer) + ")";
    for (const Component* fw : tree.frameworks[item.ref])  // SPDX 2.3 packages have no properties
      for (const auto& [name, value] : FrameworkFacts(*fw))
        if (!value.empty()) comment += "; " + name + "=" + value;
    p["comment"] = std::move(comment);
    packages.push_back(std::move(p));
    // The package that installed the file contains it; the image contains the rest.
    auto parent = tree.parent.find(item.ref);
    relationships.push_back(
        {{"spdxElementId", parent != tree.parent.end() ? id_of(parent->second) : "SPDXRef-Image"},
         {"relationshipType", "CONTAINS"},
         {"relatedSpdxElement", id}});
  }
  for (const auto& [from, to] : DependencyRefs(cat, items, tree, sbom))
    for (const std::string& library : to)
      relationships.push_back({{"spdxElementId", id_of(from)},
                               {"relationshipType", "DEPENDS_ON"},
                               {"relatedSpdxElement", id_of(library)}});
  doc["packages"] = std::move(packages);
  doc["relationships"] = std::move(relationships);
  return DumpJson(doc, 2) + "\n";
}

bool IsSbom(CatalogFormat format) {
  return format == CatalogFormat::kCycloneDx || format == CatalogFormat::kCycloneDx15 ||
         format == CatalogFormat::kSpdx;
}

std::string RenderCatalog(const catalog::Catalog& cat, const ImageInfo& image, CatalogFormat format,
                          std::string_view tool_version, std::string_view rules_version,
                          const SbomInput& sbom) {
  switch (format) {
    case CatalogFormat::kTable:
      return RenderCatalogTable(cat, image);
    case CatalogFormat::kJson:
      return RenderCatalogJson(cat, image);
    case CatalogFormat::kCycloneDx:
      return RenderCatalogCycloneDx(cat, image, tool_version, rules_version, "1.6", sbom);
    case CatalogFormat::kCycloneDx15:
      return RenderCatalogCycloneDx(cat, image, tool_version, rules_version, "1.5", sbom);
    case CatalogFormat::kSpdx:
      return RenderCatalogSpdx(cat, image, tool_version, "", sbom);
  }
  return {};
}

}  // namespace imgcheck::report
