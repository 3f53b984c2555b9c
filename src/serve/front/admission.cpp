#include "serve/front/admission.h"

#include <nlohmann/json.hpp>

#include "image/registry_auth.h"
#include "serve/front/json_body.h"
#include "serve/verdict.h"

namespace imgcheck::serve::front {

namespace {

constexpr size_t kMaxWarnings = 32;       // the API server passes them to kubectl as headers
constexpr size_t kMaxWarningChars = 400;  // ... and truncates long ones anyway
// A denial lists this many problems and counts the rest: the message is shown by kubectl and
// logged, and one review naming a broken image in 80,000 containers must not make it megabytes.
constexpr size_t kMaxListedDenials = 20;

const nlohmann::json* At(const nlohmann::json& j, const std::vector<std::string_view>& path) {
  const nlohmann::json* p = &j;
  for (auto key : path) {
    if (!p->is_object()) return nullptr;
    auto it = p->find(std::string(key));
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p;
}

}  // namespace

const std::vector<std::pair<std::string_view, std::vector<std::string_view>>>& PodSpecPaths() {
  static const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kPaths = {
      {"Pod", {"spec"}},
      {"Deployment", {"spec", "template", "spec"}},
      {"StatefulSet", {"spec", "template", "spec"}},
      {"DaemonSet", {"spec", "template", "spec"}},
      {"ReplicaSet", {"spec", "template", "spec"}},
      {"Job", {"spec", "template", "spec"}},
      {"CronJob", {"spec", "jobTemplate", "spec", "template", "spec"}},
  };
  return kPaths;
}

util::Expected<AdmissionRequest> ParseAdmissionReview(std::string_view body,
                                                      const std::string& default_platform,
                                                      std::string& uid_out) {
  uid_out.clear();
  auto parsed = ParseJsonBody(body);
  if (!parsed) return parsed.error();
  const nlohmann::json& j = *parsed;
  // A field of the wrong type ({"kind":5}) is as wrong as a missing one, and never throws.
  if (StringAt(j, "kind") != "AdmissionReview")
    return util::MakeError("the body is not an AdmissionReview");
  if (StringAt(j, "apiVersion") != "admission.k8s.io/v1")
    return util::MakeError("AdmissionReview apiVersion '" + StringAt(j, "apiVersion") +
                           "' is not admission.k8s.io/v1");
  const nlohmann::json* req = At(j, {"request"});
  const nlohmann::json* uid = req ? At(*req, {"uid"}) : nullptr;
  if (!uid || !uid->is_string() || uid->get<std::string>().empty())
    return util::MakeError("AdmissionReview without request.uid");
  AdmissionRequest r;
  r.uid = uid_out = uid->get<std::string>();
  auto str = [&](const std::vector<std::string_view>& path) {
    const nlohmann::json* v = At(*req, path);
    return v && v->is_string() ? v->get<std::string>() : std::string();
  };
  r.kind = str({"kind", "kind"});
  r.name = str({"name"});
  r.namespace_name = str({"namespace"});
  r.operation = str({"operation"});
  // Nothing runs on DELETE or CONNECT: there is no new pod spec to judge.
  if (r.operation == "DELETE" || r.operation == "CONNECT") return r;
  const std::vector<std::string_view>* spec_path = nullptr;
  for (const auto& [kind, path] : PodSpecPaths())
    if (kind == r.kind) spec_path = &path;
  if (!spec_path) return util::MakeError("kind '" + r.kind + "' is not one imgcheck checks");
  const nlohmann::json* object = At(*req, {"object"});
  if (!object || !object->is_object()) return util::MakeError("request.object is missing");
  const nlohmann::json* spec = At(*object, *spec_path);
  std::string spec_name;
  std::vector<std::string> spec_tokens;
  for (auto p : *spec_path) {
    spec_name += (spec_name.empty() ? "" : ".") + std::string(p);
    spec_tokens.emplace_back(p);
  }
  if (!spec || !spec->is_object()) return util::MakeError(r.kind + " without " + spec_name);

  std::string os = "linux", arch = "amd64";
  if (auto slash = default_platform.find('/'); slash != std::string::npos) {
    os = default_platform.substr(0, slash);
    arch = default_platform.substr(slash + 1);
  }
  if (const nlohmann::json* sel = At(*spec, {"nodeSelector"}); sel && sel->is_object()) {
    if (std::string v = StringAt(*sel, "kubernetes.io/os"); !v.empty()) os = v;
    if (std::string v = StringAt(*sel, "kubernetes.io/arch"); !v.empty()) arch = v;
  }
  r.platform = os + "/" + arch;

  const nlohmann::json* old_object = r.operation == "UPDATE" ? At(*req, {"oldObject"}) : nullptr;
  if (old_object && !old_object->is_object()) old_object = nullptr;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const nlohmann::json* cs = At(*spec, {list});
    if (!cs) continue;
    if (!cs->is_array()) return util::MakeError(spec_name + "." + list + " is not a list");
    for (size_t i = 0; i < cs->size(); ++i) {
      const nlohmann::json& c = (*cs)[i];
      std::string where = spec_name + "." + list + "[" + std::to_string(i) + "]";
      if (!c.is_object()) return util::MakeError(where + " is not an object");
      if (std::string name = StringAt(c, "name"); !name.empty()) where += " (" + name + ")";
      auto image = c.find("image");
      if (image == c.end() || !image->is_string() || image->get<std::string>().empty())
        return util::MakeError(where + " has no image");
      std::vector<std::string> tokens = spec_tokens;
      tokens.insert(tokens.end(), {list, std::to_string(i), "image"});
      ImageUse use{image->get<std::string>(), where, JsonPointer(tokens)};
      if (old_object) {
        nlohmann::json::json_pointer at(use.pointer);
        use.unchanged = old_object->contains(at) && old_object->at(at) == *image;
      }
      r.images.push_back(std::move(use));
    }
  }
  return r;
}

AdmissionAnswer Decide(const std::vector<ImageResult>& images, const DecideOptions& options) {
  AdmissionAnswer a;
  std::vector<std::string> denials;
  for (const ImageResult& r : images) {
    std::string who = r.use.image + (r.digest.empty() ? "" : " (" + r.digest + ")");
    const fleet::Outcome& o = r.outcome;
    if (o.state == fleet::Outcome::State::kReady) {
      for (const VerdictFinding& f : o.verdict->findings) {
        if (rules::Fails(options.fail_on, f.severity))
          denials.push_back(r.use.where + " " + who + ": " + FindingLine(f));
        else if (f.severity != rules::Severity::kInfo && a.warnings.size() < kMaxWarnings)
          a.warnings.push_back("imgcheck: " + r.use.image + ": " + FindingLine(f));
      }
      continue;
    }
    bool pending = o.state == fleet::Outcome::State::kPending;
    Fallback policy = pending ? options.on_unknown : options.on_error;
    std::string why = pending ? "not scanned yet (the scan goes on in the background)"
                              : "cannot be checked: " + o.error;
    std::string flag = pending ? "--on-unknown" : "--on-error";
    if (policy == Fallback::kDeny)
      denials.push_back(r.use.where + " " + who + ": " + why + " (" + flag + "=deny)");
    else if (a.warnings.size() < kMaxWarnings)
      a.warnings.push_back("imgcheck: " + who + " " + why + "; allowed by " + flag + "=allow");
  }
  if (!denials.empty()) {
    a.allowed = false;
    a.code = 403;
    a.message = "imgcheck: denied: " + std::to_string(denials.size()) +
                (denials.size() == 1 ? " problem" : " problems");
    for (size_t i = 0; i < denials.size() && i < kMaxListedDenials; ++i)
      a.message += "\n- " + denials[i];
    if (denials.size() > kMaxListedDenials)
      a.message += "\n- and " + std::to_string(denials.size() - kMaxListedDenials) + " more";
  }
  return a;
}

AdmissionAnswer Unjudgeable(const std::string& why, Fallback on_error) {
  AdmissionAnswer a;
  if (on_error == Fallback::kDeny) {
    a.allowed = false;
    a.code = 400;
    a.message = "imgcheck: " + why + " (--on-error=deny)";
  } else {
    a.warnings.push_back("imgcheck: " + why + "; allowed by --on-error=allow");
  }
  return a;
}

std::string AdmissionResponse(const std::string& uid, const AdmissionAnswer& answer) {
  nlohmann::json response = {{"uid", uid}, {"allowed", answer.allowed}};
  if (!answer.allowed)
    response["status"] = {
        {"code", answer.code}, {"reason", "Forbidden"}, {"message", answer.message}};
  if (!answer.warnings.empty()) {
    nlohmann::json w = nlohmann::json::array();
    for (size_t i = 0; i < answer.warnings.size() && i < kMaxWarnings; ++i)
      w.push_back(answer.warnings[i].substr(0, kMaxWarningChars));
    response["warnings"] = std::move(w);
  }
  if (!answer.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = image::Base64Encode(answer.patch);
  }
  nlohmann::json j = {{"apiVersion", "admission.k8s.io/v1"},
                      {"kind", "AdmissionReview"},
                      {"response", std::move(response)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace imgcheck::serve::front
