#include "probe/session.h"

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "catalog/metadata.h"
#include "probe/interrupt.h"
#include "probe/observation.h"
#include "probe/stage.h"
#include "report/escape.h"
#include "util/error.h"
#include "util/names.h"

namespace imgcheck::probe {

namespace fs = std::filesystem;

Session RunSession(const scan::Result& scanned, const RunOptions& run) {
  const rules::ScanInput& scan = scanned.input;
  // From here a SIGINT or SIGTERM removes the staging directory and kills imgcheck-probe's
  // group before imgcheck exits.
  InterruptCleanup interrupts;
  Session s;
  s.image = scanned.reference;
  // The host first: without a driver or a GPU there is no point reading the image again.
  Observation host = RunProbe({}, run);
  if (host.outcome == Observation::Outcome::kNoGpu) {
    s.no_gpu = true;
    s.skip_reason = host.reason;
    s.observation = std::move(host);
    return s;
  }
  s.plan = PlanFromScan(scan);
  if (s.plan.libraries.empty()) {
    s.nothing_to_load = true;
    s.skip_reason = "the loader resolves no cuDNN, cudart or cuBLAS library in the image";
    return s;
  }
  PrivateDir dir;
  std::set<std::string> paths;
  for (const auto& lib : s.plan.libraries) paths.insert(lib.image_path);
  // Copies land apart from the staged names, which the image chooses.
  fs::path copies = dir.path() / "extract", staged = dir.path() / "lib";
  std::error_code ec;
  if (!fs::create_directory(copies, ec) || !fs::create_directory(staged, ec))
    throw util::Fatal("cannot create a directory in " + dir.path().string());
  auto extracted =
      ExtractFiles(scanned.reference, scan::PinnedLoad(scanned), scan.image->tree, paths, copies);
  s.staged = Materialise(s.plan.libraries, staged, extracted);
  std::vector<std::pair<std::string, std::string>> libs;
  for (const auto& st : s.staged) libs.emplace_back(st.planned.role, st.local_path);
  s.observation = RunProbe(libs, run);
  if (s.observation.outcome == Observation::Outcome::kNoGpu) {
    s.no_gpu = true;
    s.skip_reason = s.observation.reason;
  }
  if (s.observation.cudnn_version)
    if (auto v = scan.knowledge->DecodeCudnn(static_cast<long>(*s.observation.cudnn_version)))
      s.cudnn_version = v->str();
  s.findings =
      Compare(s.staged, dir.path().string(), s.observation, *scan.knowledge, scan.image->layers);
  return s;
}

scan::ProbeStep::Outcome ScanStep::Run(const scan::Result& scanned) {
  session_ = RunSession(scanned, run_);
  Outcome out;
  if (session_.no_gpu) out.note = "--probe: no GPU: probe skipped (" + session_.skip_reason + ")";
  if (session_.nothing_to_load) out.note = "--probe: " + session_.skip_reason;
  out.findings = session_.findings;
  return out;
}

int ExitCode(const Session& s, std::optional<rules::Severity> fail_on) {
  if (s.no_gpu) return kExitNoGpu;
  if (fail_on)
    for (const auto& f : s.findings)
      if (f.severity >= *fail_on) return 1;
  return 0;
}

namespace {

using nlohmann::json;
using Outcome = Observation::Outcome;

constexpr auto kStatuses =
    std::to_array<util::EnumName<Outcome>>({{Outcome::kRan, "ran"},
                                            {Outcome::kNoGpu, "no_gpu"},
                                            {Outcome::kCrashed, "crashed"},
                                            {Outcome::kTimedOut, "timed_out"},
                                            {Outcome::kBadOutput, "bad_output"}});
static_assert(util::NamesEvery(kStatuses));

std::string Status(const Session& s) {
  if (s.no_gpu) return "no_gpu";
  if (s.nothing_to_load) return "nothing_to_load";
  return std::string(util::Name(kStatuses, s.observation.outcome, "bad_output"));
}

json FindingJson(const rules::Finding& f) {
  json evidence = json::array();
  for (const auto& e : f.evidence) evidence.push_back({{"label", e.label}, {"value", e.value}});
  return {
      {"rule", f.rule},
      {"name", f.name},
      {"severity", std::string(rules::SeverityName(f.severity))},
      {"message", f.message},
      {"paths", f.paths},
      {"layer",
       {{"index", f.layer.index}, {"digest", f.layer.digest}, {"created_by", f.layer.created_by}}},
      {"remediation", f.remediation},
      {"evidence", evidence}};
}

std::string FormatJson(const Session& s) {
  json j;
  j["image"] = s.image;
  j["status"] = Status(s);
  j["runs_image_code"] = true;
  if (!s.skip_reason.empty()) j["reason"] = s.skip_reason;
  if (s.observation.outcome != Outcome::kRan && !s.observation.reason.empty())
    j["reason"] = s.observation.reason;
  json libs = json::array();
  for (const auto& l : s.plan.libraries)
    libs.push_back({{"role", l.role},
                    {"soname", l.soname},
                    {"path", l.image_path},
                    {"layer", l.layer},
                    {"predicted_version", l.version}});
  j["libraries"] = libs;
  json probe = ParseProbeDocument(s.observation.json);
  j["probe"] = probe.is_discarded() ? json(nullptr) : probe;
  if (!s.cudnn_version.empty()) j["cudnn_version"] = s.cudnn_version;
  json findings = json::array();
  for (const auto& f : s.findings) findings.push_back(FindingJson(f));
  j["findings"] = findings;
  return report::DumpJson(j, 2) + "\n";  // names from the image need not be UTF-8
}

std::string Fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string FormatText(const Session& s) {
  const Observation& o = s.observation;
  std::string out = "imgcheck probe: " + s.image + "\n";
  if (s.no_gpu) return out + "no GPU: probe skipped (" + s.skip_reason + ")\n";
  out += "note: this ran the image's own libraries (untrusted code) on this host\n";
  if (o.driver_version) {
    out += "host: driver for CUDA " + catalog::CudaVersionString(*o.driver_version);
    if (!o.gpu.empty()) out += ", " + o.gpu;
    if (!o.sm.empty()) out += " (sm_" + o.sm;
    if (o.memory_bytes) out += Fmt(", %.1f GiB", static_cast<double>(*o.memory_bytes) / (1 << 30));
    if (!o.sm.empty()) out += ")";
    out += "\n";
  }
  if (s.nothing_to_load) return out + "nothing to probe: " + s.skip_reason + "\n";
  out += "libraries, in load order:\n";
  for (const auto& l : s.plan.libraries) {
    std::string state = "not loaded";
    for (const auto& st : s.staged)
      if (st.planned.image_path == l.image_path)
        for (const auto& load : o.libraries)
          if (load.path == st.local_path) state = load.loaded ? "loaded" : "FAILED: " + load.error;
    out += "  " + l.soname + " -> " + l.image_path + " (layer " + std::to_string(l.layer) +
           (l.version.empty() ? "" : ", " + l.version) + "): " + state + "\n";
  }
  if (o.outcome != Outcome::kRan) {
    out += "probe: " + o.reason + "\n";
  } else {
    if (o.runtime_version)
      out += "CUDA runtime: " + catalog::CudaVersionString(*o.runtime_version) + ", first call " +
             o.first_call_name + "\n";
    if (o.cudnn_version) {
      out += "cuDNN: " +
             (s.cudnn_version.empty() ? std::to_string(*o.cudnn_version) : s.cudnn_version);
      if (o.cudnn_cudart_version)
        out += ", built for CUDA " + catalog::CudaVersionString(*o.cudnn_cudart_version);
      out += "\n  sub-libraries:";
      for (const auto& c : o.sublibraries)
        out += " " + c.sublibrary + " " +
               (c.status == 0 ? "ok"
                : c.status    ? c.status_name
                              : c.error);
      out += "\n  cudnnCreate: " +
             (o.create_status_name.empty() ? o.create_error : o.create_status_name) + "\n";
    }
    const auto& c = o.convolution;
    if (c.ran) {
      out += std::string("convolution: ") + (c.passed ? "passed" : "WRONG") +
             Fmt(", max |error| %g", c.max_abs_error) + Fmt(" (tolerance %g)", c.tolerance) +
             Fmt(", first run %.3f ms", c.first_ms) + Fmt(", mean %.3f ms", c.mean_ms) + "\n";
    } else {
      out += "convolution: not run (" + c.failed_at +
             (c.status_name.empty() ? "" : ": " + c.status_name) + ")\n";
    }
  }
  int errors = 0, warnings = 0;
  for (const auto& f : s.findings) {
    out += std::string(rules::SeverityName(f.severity)) + " " + f.rule + " " + f.name + ": " +
           f.message + "\n";
    for (const auto& p : f.paths)
      out += "    " + p +
             (f.layer.index >= 0 ? " (layer " + std::to_string(f.layer.index) + ")" : "") + "\n";
    if (!f.remediation.empty()) out += "    fix: " + f.remediation + "\n";
    errors += f.severity == rules::Severity::kError;
    warnings += f.severity == rules::Severity::kWarning;
  }
  out += std::to_string(s.findings.size()) + " probe finding(s): " + std::to_string(errors) +
         " error(s), " + std::to_string(warnings) + " warning(s)\n";
  return out;
}

}  // namespace

std::string Format(const Session& s, ReportFormat format) {
  return format == ReportFormat::kJson ? FormatJson(s) : FormatText(s);
}

}  // namespace imgcheck::probe
