#include "scan/diff.h"

#include <map>
#include <utility>

#include "rules/version.h"
#include "util/path.h"

namespace imgcheck::scan {

namespace {

// Build facts a reviewer compares: the CUDA and cuDNN a framework was built with, its arches.
constexpr std::array<std::string_view, 5> kBuildKeys = {
    "cuda", "cuda_version", "cudnn", "cudnn_version", "cuda_compute_capabilities"};

// "2.3.0+cu121 (cuda 12.1, cudnn 8.9)": a framework's version and the build facts above.
std::string BuildText(const catalog::Component& c) {
  std::string facts;
  for (std::string_view key : kBuildKeys)
    if (auto it = c.build.find(key); it != c.build.end() && !it->second.empty())
      facts += (facts.empty() ? "" : ", ") + std::string(key) + " " + it->second;
  std::string version = c.version.empty() ? "?" : c.version;
  return facts.empty() ? version : version + " (" + facts + ")";
}

// Every value of each key, in catalog order, ", "-joined and each once.
using Listing = std::map<std::pair<std::string, std::string>, std::string>;
void Add(Listing& listing, std::pair<std::string, std::string> key, const std::string& value) {
  std::string& all = listing[std::move(key)];
  if (("," + all + ",").find("," + value + ",") != std::string::npos) return;
  all += (all.empty() ? "" : ",") + value;
}

Listing Frameworks(const catalog::Catalog& cat) {
  Listing out;
  for (const catalog::Component* c : cat.Find(catalog::ComponentKind::kFramework))
    if (!c->deleted) Add(out, {c->name, ""}, BuildText(*c));
  return out;
}

Listing Libraries(const catalog::Catalog& cat) {
  Listing out;
  for (const catalog::Component& c : cat.components)
    if (catalog::IsLibraryKind(c.kind) && !c.deleted)
      Add(out,
          {c.owner ? c.owner->name : "unowned in " + std::string(util::DirName(c.path)), c.name},
          c.version.empty() ? "?" : c.version);
  return out;
}

std::string Spaced(const std::string& listing) {
  std::string out;
  for (char c : listing) out += c == ',' ? std::string(", ") : std::string(1, c);
  return out;
}

report::Change ChangeOf(const std::string& before, const std::string& after) {
  if (before.empty()) return report::Change::kAdded;
  if (after.empty()) return report::Change::kRemoved;
  auto a = rules::Version::Parse(before);
  auto b = rules::Version::Parse(after);
  bool single = before.find(',') == std::string::npos && after.find(',') == std::string::npos;
  if (single && a && b && *a != *b)
    return *b > *a ? report::Change::kUpgraded : report::Change::kDowngraded;
  return report::Change::kChanged;
}

// Calls `changed(key, old, new)` for each key whose value differs (absent: ""); returns how
// many keys are in both, unchanged.
template <class F>
size_t Walk(const Listing& before, const Listing& after, F changed) {
  size_t same = 0;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> all;
  for (const auto& [key, value] : before) all[key].first = value;
  for (const auto& [key, value] : after) all[key].second = value;
  for (const auto& [key, values] : all) {
    if (values.first == values.second) {
      ++same;
      continue;
    }
    changed(key, values.first, values.second);
  }
  return same;
}

// (object, name) -> how the name it asks for resolves, over every consumer's link map (the
// first link map's where several agree, as they do but for RPATHs inherited from the root).
std::map<std::pair<std::string, std::string>, const loader::Resolution*> Resolutions(
    const Result& scanned) {
  std::map<std::pair<std::string, std::string>, const loader::Resolution*> out;
  for (const rules::Consumer& c : scanned.input.session.consumers())
    for (const loader::Resolution* r : c.graph.Resolutions())
      out.emplace(std::pair(r->consumer, r->name), r);
  return out;
}

std::string FileOf(const loader::Resolution& r) { return r.found() ? r.real_path : "not found"; }

// What the objects present in both images now resolve differently. An object only one image
// has came or went with a package, said above; its every load would be noise.
std::vector<report::LoadChange> Loads(const Result& old_scan, const Result& new_scan) {
  auto before = Resolutions(old_scan);
  auto after = Resolutions(new_scan);
  std::set<std::string> old_consumers, new_consumers;
  for (const auto& [key, r] : before) old_consumers.insert(key.first);
  for (const auto& [key, r] : after) new_consumers.insert(key.first);
  std::vector<report::LoadChange> out;
  for (const auto& [key, r] : after) {
    if (old_consumers.count(key.first) == 0) continue;
    auto it = before.find(key);
    std::string old_file = it == before.end() ? "" : FileOf(*it->second);
    if (old_file == FileOf(*r)) continue;
    out.push_back({key.first, key.second, old_file, FileOf(*r), report::ResolutionReason(*r)});
  }
  for (const auto& [key, r] : before)
    if (new_consumers.count(key.first) > 0 && after.count(key) == 0)
      out.push_back({key.first, key.second, FileOf(*r), "", "no longer asked for"});
  return out;
}

}  // namespace

report::Diff Compare(const Result& old_scan, const Result& new_scan) {
  report::Diff d;
  d.old_image = old_scan.report.image;
  d.report = new_scan.report;
  std::set<std::string> now;
  for (const rules::Finding& f : new_scan.report.findings) now.insert(f.fingerprint);
  for (const rules::Finding& f : old_scan.report.findings)
    if (now.count(f.fingerprint) == 0) d.fixed.push_back(f);
  Walk(Frameworks(old_scan.catalog), Frameworks(new_scan.catalog),
       [&](const auto& key, const std::string& a, const std::string& b) {
         d.frameworks.push_back({key.first, Spaced(a), Spaced(b), ChangeOf(a, b)});
       });
  d.libraries_unchanged =
      Walk(Libraries(old_scan.catalog), Libraries(new_scan.catalog),
           [&](const auto& key, const std::string& a, const std::string& b) {
             d.libraries.push_back({key.first, key.second, Spaced(a), Spaced(b), ChangeOf(a, b)});
           });
  d.loads = Loads(old_scan, new_scan);
  return d;
}

std::unique_ptr<DiffResult> RunDiff(const Request& old_request, Request new_request) {
  auto d = std::make_unique<DiffResult>();
  d->old_scan = Run(old_request);
  for (const rules::Finding& f : d->old_scan->report.findings)
    d->old_fingerprints.insert(f.fingerprint);
  new_request.baseline = &d->old_fingerprints;
  d->new_scan = Run(new_request);
  d->diff = Compare(*d->old_scan, *d->new_scan);
  return d;
}

}  // namespace imgcheck::scan
