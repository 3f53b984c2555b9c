// Kubernetes admission (admission.k8s.io/v1 AdmissionReview) for Pods and the pod templates of
// workload kinds: which images an object runs, and the AdmissionReview answer.
// https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "rules/config.h"
#include "serve/fleet/fleet.h"
#include "util/error.h"

namespace imgcheck::serve::front {

/// One container's image in the object.
struct ImageUse {
  std::string image;  ///< as written in the spec
  std::string where;  ///< "spec.template.spec.initContainers[0] (setup)"
  /// Where the image is in request.object, as a JSON Pointer (RFC 6901):
  /// "/spec/template/spec/initContainers/0/image"; empty when not from an object.
  std::string pointer{};
  /// UPDATE: request.oldObject has this very image at `pointer`, so it was admitted before and
  /// may be running (a change of it would restart a pod's container).
  bool unchanged = false;
};

struct AdmissionRequest {
  std::string uid;  ///< echoed in the response, as the API server requires
  std::string kind;
  std::string name, namespace_name, operation;
  std::vector<ImageUse> images;
  /// The platform the pod's nodes pull: nodeSelector kubernetes.io/os and kubernetes.io/arch
  /// when set, else `default_platform`.
  std::string platform;
};

/// Parses an AdmissionReview body. Errors come in two kinds: `uid` is set in `uid_out` when the
/// review was readable enough to be answered (unknown kind, malformed object); the error
/// message says what was wrong.
util::Expected<AdmissionRequest> ParseAdmissionReview(std::string_view body,
                                                      const std::string& default_platform,
                                                      std::string& uid_out);

/// The kinds whose pod spec is read, and where: "Pod" -> spec, "CronJob" -> spec.jobTemplate...
const std::vector<std::pair<std::string_view, std::vector<std::string_view>>>& PodSpecPaths();

struct AdmissionAnswer {
  bool allowed = true;
  std::string message;  ///< why, when denied (status.message)
  int code = 200;       ///< status.code when denied (403)
  std::vector<std::string> warnings;
  /// A JSONPatch (RFC 6902) document for the object (mutating admission); empty: none.
  std::string patch;
};

/// What to answer when imgcheck cannot judge: no verdict within the budget (--on-unknown), or
/// a request or image it cannot check (--on-error).
enum class Fallback { kAllow, kDeny };

struct DecideOptions {
  rules::FailOn fail_on{rules::Severity::kError};  ///< findings at or above it deny
  Fallback on_unknown = Fallback::kAllow;
  Fallback on_error = Fallback::kAllow;
};

/// One image of the request and what became of it.
struct ImageResult {
  ImageUse use;
  std::string digest;      ///< empty when it could not be resolved
  fleet::Outcome outcome;  ///< kFailed with `error` set when resolution failed too
};

/// Denies when an image's verdict fails the gate (or by a fallback), listing each failing
/// finding (rule, file, fix); warning findings and allowed fallbacks become warnings.
AdmissionAnswer Decide(const std::vector<ImageResult>& images, const DecideOptions& options);
/// The answer to a request that cannot be judged at all (`why`), per --on-error.
AdmissionAnswer Unjudgeable(const std::string& why, Fallback on_error);

/// The AdmissionReview response for `uid`, with the answer's patch (base64, patchType JSONPatch)
/// when it has one.
std::string AdmissionResponse(const std::string& uid, const AdmissionAnswer& answer);

}  // namespace imgcheck::serve::front
