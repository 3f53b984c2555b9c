// What the checks share (private to the rules stage): lookups over the catalog and the link
// maps, and how a finding is made from the rule table.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/library_rules.h"
#include "rules/scan.h"

namespace imgcheck::rules {

using catalog::PackageLabel;

/// A resolution seen in some consumer's link map, with the object that asked.
struct SeenResolution {
  const Consumer* consumer = nullptr;
  int object = -1;  ///< index in consumer->graph.objects of the requester
  loader::Resolution resolution;
};

class Context {
 public:
  explicit Context(const ScanInput& input);

  const ScanInput& input;
  const catalog::Catalog& catalog;
  const Knowledge& knowledge;
  const image::Tree& tree;
  std::vector<Finding> findings;
  /// Distributions IC013 reported as one root cause against their framework: IC016 does not
  /// report the same cause again.
  std::set<std::string, std::less<>> mismatched;

  /// The present library-like component (CUDA library, driver, stub, compat) at `real_path`.
  const catalog::Component* LibraryAt(std::string_view real_path) const;
  /// The libraries.json family of a soname or file name ("libcudnn_ops.so.9" -> "cudnn").
  std::string FamilyOf(std::string_view name) const;
  /// A component's version when it has at least `precision` components.
  std::optional<Version> VersionOf(const catalog::Component* c, size_t precision = 2) const;
  /// The framework release (its build file, else its pip distribution).
  std::optional<Version> FrameworkVersion(const catalog::Component& fw) const;
  /// Consumers rooted under a framework's package directory (runnable ones, as every lookup
  /// over consumers here: one that cannot run as shipped is reported once, never a gate).
  std::vector<const Consumer*> ConsumersOf(const catalog::Component& fw) const;
  /// The Python distribution component named `name` (PEP 503), null when none.
  const catalog::Component* Dist(std::string_view name) const;
  /// Every resolution in every consumer's link map, plus the cuDNN shims' sub-library dlopens
  /// (resolved here when rules/dlopen.json does not list them), deduplicated by
  /// (requesting object, name).
  const std::vector<SeenResolution>& Resolutions() const { return resolutions_; }
  /// True when `c` is a copy a pip distribution vendors for its own use (triton's
  /// backends/nvidia/lib/cupti/libcupti.so.2024.1.0, an auditwheel `<dist>.libs/` copy, a
  /// `<pkg>/lib/` copy of a package that does not version the family) and no consumer outside
  /// that distribution loads it: it is its package's, not a copy of the one others load.
  bool VendoredOnly(const catalog::Component& c) const;
  /// Loaded objects whose real path is `real_path` (all consumers), as (consumer, index).
  std::vector<std::pair<const Consumer*, int>> Loaded(std::string_view real_path) const;

  /// A library in some link map: the object, how it was resolved, and its catalog component.
  struct LoadedLibrary {
    const Consumer* consumer = nullptr;
    int index = -1;
    const loader::Resolution* how = nullptr;        ///< the request that loaded it; null for roots
    const catalog::Component* component = nullptr;  ///< null when the catalog does not know it
  };
  /// Objects of `consumers`' link maps whose soname (or requested name) starts with `prefix`
  /// ("libcudnn.so."), one per real path, in consumer order.
  std::vector<LoadedLibrary> LoadedWithPrefix(const std::vector<const Consumer*>& consumers,
                                              std::string_view prefix) const;
  /// Every consumer that can run as shipped (Consumer::not_runnable empty).
  const std::vector<const Consumer*>& AllConsumers() const { return consumers_; }

  /// Make's `layer` when the finding's layer is the one that wrote its first path.
  static constexpr int kLayerOfFirstPath = -2;
  /// A finding of `rule` with the table's name, severity and remediation, and the layer that
  /// wrote `paths[0]` (or `layer` when given; -1: none).
  Finding Make(std::string_view rule, std::string message, std::vector<std::string> paths,
               int layer = kLayerOfFirstPath) const;
  LayerRef Layer(int index) const;
  /// Every path a resolution tried, with its outcome ("/a/libx.so.1 (missing), ..."); "" when
  /// it tried none.
  static std::string Searched(const loader::Resolution& r);
  /// Evidence of a library component: where it is, each statement of its version and the
  /// package that owns it (or none), each label prefixed with `what` ("older copy ").
  static void AddComponentEvidence(Finding& f, const catalog::Component& c,
                                   const std::string& what = "");

 private:
  std::map<std::string, const catalog::Component*, std::less<>> by_path_;
  std::vector<const Consumer*> consumers_;
  std::vector<SeenResolution> resolutions_;
};

/// A package built for one framework release that meets another: what it was built for and
/// how to make the two match.
struct ReleaseMismatch {
  std::string built_for;  ///< "torch==2.5.0" from its Requires-Dist pin; "" when unknown
  std::string fix;        ///< "pip install 'torchvision==0.21.*' (...)", or the framework's pin
};
/// For distribution `dist` whose objects load into framework `fw`'s process: its exact pin of
/// `fw` (Requires-Dist, no marker, no extra) and the fix: the release of `dist` built for the
/// installed `fw` (frameworks.json companions), else the `fw` release `dist` pins, else a
/// rebuild.
ReleaseMismatch MatchRelease(const Context& ctx, const catalog::Component& dist,
                             const catalog::Component& fw);

/// True for the cuDNN shim's soname ("libcudnn.so.9"), with its major in `major`.
bool IsCudnnShim(std::string_view soname, int* major);

/// A version and where it was learned.
struct Known {
  Version version;
  std::string how;  ///< for the evidence
};
/// The name a framework goes by in frameworks.json's cudnn_acceptance ("torch", "tensorflow",
/// "jax"); "" for others.
std::string AcceptanceKey(const catalog::Component& fw);
/// The cuDNN a framework was compiled with: build file, then pip pin, then release table.
std::optional<Known> CompiledCudnn(const Context& ctx, const catalog::Component& fw);
/// The CUDA a framework was compiled with (JAX: the minimum its plugin accepts).
std::optional<Known> CompiledCuda(const Context& ctx, const catalog::Component& fw);
/// What CUDA the image's contents need: every present libcudart with a known minor, every
/// framework's compiled CUDA, every toolkit; each with the path that says so.
std::vector<std::pair<Known, std::string>> CudaNeeds(const Context& ctx);

/// One check: its rule ID and the function that adds its findings.
struct Check {
  std::string_view rule;
  std::function<void(Context&)> run;
};
/// The checks of each file; RunChecks runs them all in ID order.
std::vector<Check> CudnnChecks();
std::vector<Check> LoaderChecks();
std::vector<Check> DriverChecks();
std::vector<Check> DataChecks();
/// IC013's symbol binding (checks_symbols.cpp): each consumer's link map bound as glibc does.
void CheckUnboundSymbols(Context& ctx);

}  // namespace imgcheck::rules
