// The one front door of the pipeline: image -> catalog -> link maps -> findings -> report, for
// every caller (scan, why, catalog, probe, serve). Callers say how far to go and what to add;
// the stages below are reached only through here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "image/image.h"
#include "loader/why.h"
#include "report/report.h"
#include "rules/finding.h"
#include "rules/knowledge.h"
#include "rules/scan.h"
#include "scan/policy.h"

namespace imgcheck::scan {

/// How far a scan goes.
enum class Depth : uint8_t {
  kImage,     ///< the image alone, read with the catalog's capture policy (`layers`)
  kCatalog,   ///< the image and its catalog (`catalog`)
  kLinkMaps,  ///< and every consumer's link map (`why`, `probe`)
  kFindings,  ///< and the checks, the config and the report (`scan`, `serve`)
};

struct Result;

/// The GPU probe as a step of the scan (probe/ implements it; scan only calls it): run after
/// the link maps, on the image already read. Its findings join the checks' before the config
/// applies and everything is sorted.
class ProbeStep {
 public:
  virtual ~ProbeStep() = default;
  struct Outcome {
    std::vector<rules::Finding> findings;
    /// Why the probe did not run ("--probe: no GPU: ..."), "" when it did: a note of the report
    /// and the reason its rules did not run.
    std::string note;
  };
  virtual Outcome Run(const Result& scanned) = 0;
};

struct Request {
  std::string reference;    ///< as the user wrote it ("oci:dir:tag", "nvcr.io/x:1")
  image::LoadOptions load;  ///< how to read it; the capture policy is the catalog's (Run sets it)
  /// The rule data (libraries, dlopen and preload tables). With depth kFindings, `policy` must
  /// be given and this is its knowledge.
  const rules::Knowledge* knowledge = nullptr;
  const Policy* policy = nullptr;  ///< config, gate and target; needed for kFindings
  Depth depth = Depth::kFindings;
  /// Replaces the image's LD_LIBRARY_PATH for every link map (why --ld-library-path).
  std::optional<std::string> ld_library_path;
  /// Load only these objects (paths in the image) instead of the consumers (why --consumer);
  /// util::Fatal when one is not an ELF file of the image.
  std::vector<std::string> roots;
  /// An image whose machine the loader does not model is a util::Fatal (why), not a note.
  bool loader_required = false;
  /// The Dockerfile the image was built from: findings are mapped to its lines.
  std::string dockerfile;
  ProbeStep* probe = nullptr;  ///< run the GPU probe after the link maps (scan --probe, probe)
  /// Take the SHA-256 of the libraries outside Python environments while the layers stream
  /// (Component::sha256): for an SBOM only, as it costs a pass over those bytes.
  bool sbom_hashes = false;
  /// The fingerprints of a baseline (scan/baseline.h; a diff's old image): findings among them
  /// are marked `baseline`, which the exit code leaves out. Null: no baseline.
  const std::set<std::string>* baseline = nullptr;
};

/// Everything one scan learned. Not copyable: the input and the report point into it.
struct Result {
  Result() = default;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  std::string reference;    ///< as requested
  image::LoadOptions load;  ///< as used (with the catalog's capture policy)
  image::Image image;       ///< with its manifest digest
  catalog::Catalog catalog;
  /// What the checks read: image, catalog, knowledge, target, loader options and the link map
  /// of every consumer (empty below kLinkMaps, or when the loader does not model the image).
  rules::ScanInput input;
  report::Report report;  ///< kFindings only
};

/// Runs `request` as far as its depth. Throws util::Fatal (one line) when the image cannot be
/// read or verified, or a request field names what the image does not have.
std::unique_ptr<Result> Run(const Request& request);

/// The image's diagnostics, then the catalog's: what every report lists.
std::vector<util::Diagnostic> Diagnostics(const Result& scanned);

using WhyEntry = loader::WhyEntry;

/// How every consumer's link map of `scanned` resolves `target` (a soname or a path in the
/// image): `why`.
std::vector<WhyEntry> Why(const Result& scanned, std::string_view target);

/// Every library the loader resolved for every consumer of `scanned` (depth kLinkMaps or more),
/// as (the object that loads it, the library) real paths, in load order, each pair once: the
/// SBOM's dependency graph.
std::vector<std::pair<std::string, std::string>> Loads(const Result& scanned);

/// Options that read the same image again, pinned to the manifest digest scanned (the probe
/// extracting libraries): a reading that reaches another manifest is a util::Fatal.
image::LoadOptions PinnedLoad(const Result& scanned);

}  // namespace imgcheck::scan
