#include "scan/scan.h"

#include <set>
#include <utility>

#include "catalog/library_rules.h"
#include "loader/loader.h"
#include "report/image_header.h"
#include "rules/config.h"
#include "rules/target.h"
#include "scan/baseline.h"
#include "scan/build_info.h"
#include "scan/dockerfile.h"
#include "scan/fingerprint.h"
#include "util/error.h"
#include "util/profile.h"

namespace imgcheck::scan {

namespace {

// One note for the extension modules no evidence placed in a process and that cannot load
// alone: how many, of which packages, and the first library one misses; "" when none.
std::string UnplacedNote(const std::vector<loader::Unplaced>& unplaced) {
  if (unplaced.empty()) return "";
  std::set<std::string> packages;
  for (const loader::Unplaced& u : unplaced) packages.insert(u.package);
  std::string list;
  for (const std::string& p : packages) list += (list.empty() ? "" : ", ") + p;
  const size_t n = unplaced.size();
  return "not placed: " + std::to_string(n) + " Python extension module" + (n > 1 ? "s" : "") +
         " of " + list + " cannot load on " + (n > 1 ? "their" : "its") + " own (" +
         unplaced[0].path + " NEEDS " + unplaced[0].missing +
         ") and nothing in the image says which process loads " + (n > 1 ? "them" : "it") +
         ": not checked";
}

// The loader's options for the image and every consumer's link map into `r.input`. An image
// whose machine the loader does not model gets a note saying so (the loader's rules stay
// silent), or a util::Fatal when the request needs the link maps.
void LoadLinkMaps(const Request& request, Result& r) {
  const rules::Knowledge& knowledge = *r.input.knowledge;
  util::Expected<loader::Options> options =
      loader::ImageOptions(r.image, r.catalog, knowledge.dlopen());
  if (!options) {
    if (request.loader_required) throw util::Fatal(options.error().message);
    r.input.target.notes.push_back(options.error().message);
    return;
  }
  options->limits = r.load.limits;
  if (request.ld_library_path) options->ld_library_path = *request.ld_library_path;
  if (request.roots.empty()) {
    r.input.session = loader::Session::Build(r.image, r.catalog, rules::ConsumerRulesOf(knowledge),
                                             std::move(*options));
    if (std::string note = UnplacedNote(r.input.session.unplaced()); !note.empty())
      r.input.target.notes.push_back(std::move(note));
    return;
  }
  // why --consumer: exactly the objects named, each by its real path.
  std::vector<std::string> roots;
  for (const std::string& root : request.roots) {
    auto resolved = r.image.tree.Resolve(root);
    if (!resolved || r.catalog.Elf(resolved->path) == nullptr)
      throw util::Fatal("--consumer: " + root + " is not an ELF file in the image");
    roots.push_back(resolved->path);
  }
  r.input.session = loader::Session::ForRoots(r.image, r.catalog, roots, std::move(*options));
}

// The checks, the probe's findings, one sort, then the config; the rest of the report.
void Judge(const Request& request, const ProbeStep::Outcome* probe, Result& r) {
  const Policy& policy = *request.policy;
  report::Report& rep = r.report;
  rep.image = report::ImageInfoOf(r.image, r.load.platform);
  rep.findings = rules::RunChecks(r.input);
  if (probe)
    rep.findings.insert(rep.findings.end(), probe->findings.begin(), probe->findings.end());
  rules::SortFindings(rep.findings);  // once, the probe's with the checks', in the report's order
  AssignFingerprints(rep.findings, r.catalog);  // suppressed ones too: in the same order
  rep.suppressed = rules::ApplyConfig(policy.config, rep.findings);
  if (request.baseline) {
    MarkBaseline(*request.baseline, rep.findings);
    rep.baseline = true;
  }
  rep.fail_on = policy.fail_on;
  rep.notes = r.input.target.notes;
  rep.cuda_stack = r.catalog.HasCudaStack();
  rep.diagnostics = Diagnostics(r);
  rep.knowledge = &policy.knowledge;
  rep.tool_version = BuildVersion();
  rep.rules_version = policy.knowledge.version().str();
  rep.not_run = rules::RulesNotRun(
      r.input.target, policy.knowledge, rules::ImplementedRules(),
      probe ? probe->note : "checked only by the GPU probe (imgcheck scan --probe)");
  if (!request.dockerfile.empty()) MapToDockerfile(request.dockerfile, r.image, rep);
  if (probe && !probe->note.empty()) rep.notes.push_back(probe->note);
}

}  // namespace

std::unique_ptr<Result> Run(const Request& request) {
  if (request.depth == Depth::kFindings && request.policy == nullptr)
    throw util::Fatal("internal error: a scan for findings without a policy");
  const rules::Knowledge& knowledge =
      request.policy ? request.policy->knowledge : *request.knowledge;
  auto r = std::make_unique<Result>();
  r->reference = request.reference;
  r->load = request.load;
  // Every caller captures what the catalog needs, so cached layers serve them all alike (an
  // SBOM's reading, which also hashes libraries, has a cache key of its own).
  r->load.capture = catalog::CapturePolicy(knowledge.libraries(), request.sbom_hashes);
  r->load.capture_id = catalog::CapturePolicyId(knowledge.libraries(), request.sbom_hashes);
  r->load.digests = catalog::DigestRule(knowledge.libraries());
  r->image = image::Load(request.reference, r->load);
  if (request.depth == Depth::kImage) return r;
  {
    util::ProfileSpan span(util::Stage::kCatalog);
    r->catalog = catalog::Build(r->image, knowledge.libraries(), r->load.limits, r->load.jobs);
  }
  r->input.image = &r->image;
  r->input.catalog = &r->catalog;
  r->input.knowledge = &knowledge;
  if (request.policy) r->input.target = request.policy->target;
  if (request.depth == Depth::kCatalog) return r;

  {
    util::ProfileSpan span(util::Stage::kLoader);
    LoadLinkMaps(request, *r);
  }
  std::optional<ProbeStep::Outcome> probe;
  if (request.probe) probe = request.probe->Run(*r);
  if (request.depth == Depth::kFindings) {
    util::ProfileSpan span(util::Stage::kRules);
    Judge(request, probe ? &*probe : nullptr, *r);
  }
  return r;
}

std::vector<util::Diagnostic> Diagnostics(const Result& scanned) {
  std::vector<util::Diagnostic> all = scanned.image.diagnostics;
  all.insert(all.end(), scanned.catalog.diagnostics.begin(), scanned.catalog.diagnostics.end());
  return all;
}

std::vector<WhyEntry> Why(const Result& scanned, std::string_view target) {
  std::vector<loader::Root> roots;
  roots.reserve(scanned.input.session.consumers().size());
  for (const rules::Consumer& c : scanned.input.session.consumers())
    // Where it runs and the evidence for it belong to what `why` explains.
    roots.push_back({c.path, c.process.empty() ? c.role : c.role + "; " + c.process, &c.graph});
  return loader::FindWhy(scanned.image.tree, roots, target);
}

std::vector<std::pair<std::string, std::string>> Loads(const Result& scanned) {
  std::vector<std::pair<std::string, std::string>> loads;
  std::set<std::pair<std::string, std::string>> seen;
  for (const rules::Consumer& c : scanned.input.session.consumers())
    for (const loader::Resolution* r : c.graph.Resolutions())
      if (r->found() && seen.emplace(r->consumer, r->real_path).second)
        loads.emplace_back(r->consumer, r->real_path);
  return loads;
}

image::LoadOptions PinnedLoad(const Result& scanned) {
  image::LoadOptions o = scanned.load;
  o.manifest_digest = scanned.image.manifest_digest;
  return o;
}

}  // namespace imgcheck::scan
