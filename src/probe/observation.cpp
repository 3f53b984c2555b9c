#include "probe/observation.h"

#include "probe/probe.h"
#include "report/escape.h"

namespace imgcheck::probe {
namespace {

using nlohmann::json;

// Typed reads that tolerate a missing or mistyped field: the probe may have stopped anywhere, and
// its output is parsed, never trusted.
std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <class T>
std::optional<T> Num(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<T>();
}

double Real(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

bool Flag(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const json& Obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

const json& Arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

// The bytes a string of code points U+0000-U+00FF stands for; any other string as it is (the
// probe writes no such string, so it was not one of its byte escapes).
std::string Bytes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      out += static_cast<char>(((c & 0x03) << 6) | (static_cast<unsigned char>(s[++i]) & 0x3F));
    } else {
      return s;
    }
  }
  return out;
}

}  // namespace

json ParseProbeDocument(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) report::TransformStrings(j, Bytes);
  return j;
}

Observation ParseObservation(std::string_view text) {
  Observation o;
  o.json = std::string(text);
  json j = ParseProbeDocument(text);
  if (!j.is_object() || Str(j, "probe") != "imgcheck-probe") {
    o.reason = "imgcheck-probe printed no result";
    return o;
  }
  std::string status = Str(j, "status");
  if (status == "ran") {
    o.outcome = Observation::Outcome::kRan;
  } else if (status == "no_gpu") {
    o.outcome = Observation::Outcome::kNoGpu;
    o.reason = Str(j, "reason");
  } else {
    o.reason = "imgcheck-probe reported an unknown status '" + status + "'";
  }

  const json& host = Obj(j, "host");
  o.driver_version = Num<int>(host, "driver_version");
  o.gpu = Str(host, "gpu");
  o.sm = Str(host, "sm");
  o.memory_bytes = Num<int64_t>(host, "memory_bytes");

  for (const json& l : Arr(j, "libraries")) {
    if (!l.is_object()) continue;
    o.libraries.push_back({Str(l, "role"), Str(l, "path"), Str(l, "error"), Flag(l, "loaded")});
  }

  const json& rt = Obj(j, "cudart");
  o.runtime_version = Num<int>(rt, "runtime_version");
  o.runtime_driver_version = Num<int>(rt, "driver_version");
  o.first_call = Num<int>(rt, "first_call");
  o.first_call_name = Str(rt, "first_call_name");
  o.cudart_error = Str(rt, "error");

  const json& dnn = Obj(j, "cudnn");
  o.cudnn_version = Num<int64_t>(dnn, "version");
  o.cudnn_cudart_version = Num<int64_t>(dnn, "cudart_version");
  o.cudnn_error = Str(dnn, "error");
  for (const json& c : Arr(dnn, "sublibraries")) {
    if (!c.is_object()) continue;
    o.sublibraries.push_back({Str(c, "sublibrary"), Str(c, "symbol"), Str(c, "status_name"),
                              Str(c, "error"), Num<int>(c, "status")});
  }
  const json& create = Obj(dnn, "create");
  o.create_status = Num<int>(create, "status");
  o.create_status_name = Str(create, "status_name");
  o.create_error = Str(create, "error");

  const json& conv = Obj(j, "convolution");
  auto& c = o.convolution;
  c.ran = Flag(conv, "ran");
  c.passed = Flag(conv, "passed");
  c.failed_at = Str(conv, "failed_at");
  c.status = Num<int>(conv, "status");
  c.status_name =
      Str(conv, "status_name").empty() ? Str(conv, "cuda_error_name") : Str(conv, "status_name");
  c.error = Str(conv, "error");
  c.shape = Str(conv, "shape");
  c.tolerance = Real(conv, "tolerance");
  c.max_abs_error = Real(conv, "max_abs_error");
  c.expected = Real(conv, "expected");
  c.got = Real(conv, "got");
  c.first_ms = Real(conv, "first_ms");
  c.mean_ms = Real(conv, "mean_ms");

  for (const json& p : Arr(j, "loaded_objects"))
    if (p.is_string()) o.loaded_objects.push_back(p.get<std::string>());
  return o;
}

}  // namespace imgcheck::probe
