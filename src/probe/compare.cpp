#include "probe/compare.h"

#include <algorithm>

#include "catalog/metadata.h"
#include "probe/abi.h"
#include "util/path.h"

namespace imgcheck::probe {
namespace {

using rules::Finding;
using rules::Version;

class Findings {
 public:
  Findings(const rules::Knowledge& k, const std::vector<image::Layer>& layers)
      : k_(k), layers_(layers) {}

  // A finding of `rule` with the catalogue's name, severity and remediation.
  void Add(std::string_view rule, std::string message, const PlannedLibrary* lib) {
    Finding f = rules::MakeFinding(k_, rule, std::move(message));
    if (lib) {
      f.paths.push_back(lib->image_path);
      f.layer.index = lib->layer;
      for (const auto& l : layers_)
        if (l.index == lib->layer) {
          f.layer.digest = l.digest;
          f.layer.created_by = l.created_by;
        }
      f.evidence.push_back({"loaded as", lib->soname});
    }
    out_.push_back(std::move(f));
  }
  void Evidence(std::string label, std::string value) {
    out_.back().evidence.push_back({std::move(label), std::move(value)});
  }
  std::vector<Finding> Take() {
    std::stable_sort(out_.begin(), out_.end(), [](const Finding& a, const Finding& b) {
      return a.severity != b.severity ? a.severity > b.severity : a.rule < b.rule;
    });
    return std::move(out_);
  }

 private:
  const rules::Knowledge& k_;
  const std::vector<image::Layer>& layers_;
  std::vector<Finding> out_;
};

const StagedLibrary* ByRole(const std::vector<StagedLibrary>& staged, std::string_view role) {
  for (const auto& s : staged)
    if (s.planned.role == role) return &s;
  return nullptr;
}

const PlannedLibrary* PlannedByRole(const std::vector<StagedLibrary>& staged,
                                    std::string_view role) {
  const StagedLibrary* s = ByRole(staged, role);
  return s ? &s->planned : nullptr;
}

// The static prediction agrees when the observed version matches it to the predicted precision
// (a prediction "9" from a soname says nothing about the minor).
bool Agrees(const Version& predicted, const Version& observed) {
  return predicted.Prefix(observed.size()) == observed.Prefix(predicted.size());
}

void CompareVersions(const std::vector<StagedLibrary>& staged, const Observation& o,
                     const rules::Knowledge& k, Findings& f) {
  if (const PlannedLibrary* dnn = PlannedByRole(staged, "cudnn"); dnn && o.cudnn_version) {
    auto predicted = Version::Parse(dnn->version);
    auto observed = k.DecodeCudnn(static_cast<long>(*o.cudnn_version));
    if (predicted && observed && !Agrees(predicted->Prefix(3), *observed)) {
      f.Add("IC076",
            "the scan predicted cuDNN " + predicted->str() + " for " + dnn->image_path +
                ", but the loaded library reports " + observed->str() + " (cudnnGetVersion " +
                std::to_string(*o.cudnn_version) + ")",
            dnn);
    }
  }
  if (const PlannedLibrary* rt = PlannedByRole(staged, "cudart"); rt && o.runtime_version) {
    auto predicted = Version::Parse(rt->version);
    catalog::CudaVersion runtime = catalog::DecodeCudaVersion(*o.runtime_version);
    Version observed({static_cast<int>(runtime.major), static_cast<int>(runtime.minor)});
    if (predicted && !Agrees(predicted->Prefix(2), observed)) {
      f.Add("IC076",
            "the scan predicted CUDA runtime " + predicted->str() + " for " + rt->image_path +
                ", but the loaded library reports " + observed.str() + " (cudaRuntimeGetVersion " +
                std::to_string(*o.runtime_version) + ")",
            rt);
    }
  }
}

// Every CUDA library the probe process mapped must be one of the files we materialised: a copy
// from elsewhere (the host's /usr/lib, a default directory) means the image's loader path does
// not lead where the scan said.
void CompareResolutions(const std::vector<StagedLibrary>& staged, std::string_view dir,
                        const Observation& o, Findings& f) {
  std::string prefix = std::string(dir) + "/";
  for (const auto& path : o.loaded_objects) {
    if (path.starts_with(prefix)) continue;
    std::string role = RoleOf(util::BaseName(util::NormalizePath(path)));
    const StagedLibrary* s = ByRole(staged, role);
    bool cuda_family = role.starts_with("cudnn") || role.starts_with("cublas") || role == "cudart";
    if (!s && !cuda_family) continue;
    std::string message = "the probe process loaded " + path + " from outside the image";
    if (s)
      message += ", where the scan resolved " + s->planned.soname + " to " + s->planned.image_path;
    f.Add("IC077", message, s ? &s->planned : nullptr);
  }
}

}  // namespace

std::vector<Finding> Compare(const std::vector<StagedLibrary>& staged, std::string_view dir,
                             const Observation& o, const rules::Knowledge& k,
                             const std::vector<image::Layer>& layers) {
  Findings f(k, layers);
  using Outcome = Observation::Outcome;
  if (o.outcome == Outcome::kNoGpu) return {};
  if (o.outcome != Outcome::kRan) {
    f.Add("IC078", o.reason.empty() ? "imgcheck-probe failed" : o.reason, nullptr);
    if (!o.last_stage.empty()) f.Evidence("last stage", o.last_stage);
    return f.Take();
  }

  for (const auto& load : o.libraries) {
    if (load.loaded) continue;
    const StagedLibrary* s = nullptr;
    for (const auto& c : staged)
      if (c.local_path == load.path) s = &c;
    f.Add("IC070",
          (s ? s->planned.image_path : load.path) + " does not load on this host: " + load.error,
          s ? &s->planned : nullptr);
  }

  const PlannedLibrary* cudart = PlannedByRole(staged, "cudart");
  if (o.first_call && *o.first_call != 0) {
    std::string driver =
        o.driver_version ? catalog::CudaVersionString(*o.driver_version) : "unknown";
    std::string runtime =
        o.runtime_version ? catalog::CudaVersionString(*o.runtime_version) : "unknown";
    if (*o.first_call == abi::kCudaRtInsufficientDriver) {
      f.Add("IC071",
            "the image's CUDA runtime " + runtime +
                " needs a newer driver than this host's (CUDA " + driver +
                "): its first call failed with cudaErrorInsufficientDriver",
            cudart);
    } else {
      f.Add("IC075",
            "the image's CUDA runtime " + runtime +
                " failed its first call on this host: " + o.first_call_name,
            cudart);
    }
  }

  const PlannedLibrary* cudnn = PlannedByRole(staged, "cudnn");
  for (const auto& c : o.sublibraries) {
    if (c.status == 0) continue;
    const PlannedLibrary* sub = PlannedByRole(staged, "cudnn_" + c.sublibrary);
    std::string what = c.status ? c.status_name : c.error;
    f.Add("IC072",
          "cuDNN sub-library " + c.sublibrary + " failed " + c.symbol + ": " + what +
              (sub ? "" : " (the scan resolved no libcudnn_" + c.sublibrary + " to load)"),
          sub ? sub : cudnn);
  }

  if (o.create_status && *o.create_status != 0) {
    f.Add("IC073", "cudnnCreate failed on this host: " + o.create_status_name, cudnn);
  } else if (!o.create_error.empty()) {
    f.Add("IC073", "cudnnCreate could not be called: " + o.create_error, cudnn);
  }

  const auto& conv = o.convolution;
  if (conv.ran && !conv.passed) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "max |error| %g > tolerance %g (element expected %g, got %g)",
                  conv.max_abs_error, conv.tolerance, conv.expected, conv.got);
    f.Add("IC074",
          "the cuDNN convolution on the GPU differs from the CPU reference: " + std::string(buf),
          cudnn);
    f.Evidence("convolution", conv.shape);
  } else if (!conv.ran && o.create_status == 0 && o.first_call == 0) {
    // Only when nothing above already explains it (no handle, an unusable runtime).
    std::string why = conv.status_name.empty() ? conv.error : conv.status_name;
    f.Add("IC075", "the cuDNN convolution failed at " + conv.failed_at + ": " + why, cudnn);
    f.Evidence("convolution", conv.shape);
  }

  CompareVersions(staged, o, k, f);
  CompareResolutions(staged, dir, o, f);
  return f.Take();
}

}  // namespace imgcheck::probe
