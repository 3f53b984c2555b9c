// `imgcheck scan IMAGE` (also plain `imgcheck IMAGE`): image -> catalog -> loader -> rules ->
// report, and the CI exit code: 0 nothing at or above --fail-on, 1 findings, 2 scan failed.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "attest/attest.h"
#include "cli/commands.h"
#include "cli/rule_args.h"
#include "image/transports.h"
#include "probe/session.h"
#include "report/report.h"
#include "rules/config.h"
#include "scan/baseline.h"
#include "scan/scan.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/profile.h"

namespace imgcheck::cli {

namespace {

struct ScanArgs {
  ImageArgs image;
  std::string format = "text";
  std::vector<std::string> outputs;  ///< FILE (in --format) or FORMAT=FILE, each once
  std::string dockerfile;            ///< --dockerfile: map findings to its lines
  std::string sarif_category;        ///< --sarif-category ("": the reference less tag/digest)
  std::string baseline;              ///< --baseline: an earlier JSON report
  scan::PolicyArgs rules;
  bool fail_on_empty = false;  ///< --fail-on-empty: exit 1 when there is no CUDA stack
  bool probe = false;          ///< --probe: also run the GPU probe (src/probe)
  bool verbose = false;        ///< --verbose: the text report's evidence and quiet findings
  ProbeRunArgs probe_run;
  bool attest = false;  ///< --attest: sign the verdict and attach it to the image (src/attest)
  std::string key;      ///< --key: the private key that signs it
  std::string attest_format = "att";  ///< --attest-format: attest::kLayouts
};

struct Output {
  report::Format format;
  std::string file;  ///< "" for stdout
};

// --format and --output: FILE takes --format; FORMAT=FILE names its own (syft's spelling).
std::vector<Output> Outputs(const ScanArgs& args) {
  report::Format format = FormatOf(report::kFormats, args.format);
  std::vector<Output> out;
  for (const auto& o : args.outputs) {
    size_t eq = o.find('=');
    std::optional<report::Format> named;
    if (eq != std::string::npos) named = util::ParseFormat(report::kFormats, o.substr(0, eq));
    // FORMAT=FILE with a word that is no format is a typo, never a file named "xml=foo.xml"
    // (a path to such a file still works: ./xml=foo.xml).
    bool word = eq != std::string::npos && eq > 0 &&
                o.find_first_not_of(
                    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == eq;
    if (word && !named)
      throw util::Fatal("--output: unknown format '" + o.substr(0, eq) + "' in " + o +
                        " (FORMAT=FILE takes " + util::FormatNames(report::kFormats) + ")");
    if (named && eq + 1 == o.size()) throw util::Fatal("--output: " + o + " names no file");
    out.push_back(named ? Output{*named, o.substr(eq + 1)} : Output{format, o});
  }
  if (out.empty()) out.push_back({format, ""});
  return out;
}

// --attest: the signed verdict added to the image's attestations (--attest-format's layout).
void Attest(const ScanArgs& args, const report::Report& rep, const scan::Policy& policy,
            const attest::Signer& signer) {
  attest::Attested a = attest::AttestScan(args.image.reference, rep, policy, signer,
                                          ToLoadOptions(args.image).registry,
                                          *util::ParseFormat(attest::kLayouts, args.attest_format));
  std::cerr << "imgcheck: attested " << a.repository << "@" << a.digest
            << (a.index.empty() ? "" : " (" + rep.image.platform + " of index " + a.index + ")")
            << " as " << a.where << "\n";
}

// One scan of `args.image` (its --platform) under `policy`: the reports, then the attestation.
int ScanOne(const ScanArgs& args, const std::vector<Output>& outputs, const scan::Policy& policy,
            const std::optional<attest::Signer>& signer) {
  scan::Request request = ScanRequest(args.image, policy.knowledge, scan::Depth::kFindings);
  request.policy = &policy;
  // Read before the scan, so that a bad baseline fails at once.
  std::optional<scan::Baseline> baseline;
  if (!args.baseline.empty())
    request.baseline = &baseline.emplace(scan::LoadBaseline(args.baseline)).fingerprints;
  request.dockerfile = args.dockerfile;
  // The GPU probe's findings join the scan's; without a GPU only a note.
  std::optional<probe::ScanStep> probe;
  if (args.probe) {
    std::cerr << kProbeNotice;
    request.probe = &probe.emplace(ToRunOptions(args.probe_run));
  }
  report::Report& rep = KeepToExit(scan::Run(request)).report;
  rep.timestamp = util::UtcNow("%Y-%m-%dT%H:%M:%S");
  rep.notes.insert(rep.notes.end(), policy.config.expired.begin(), policy.config.expired.end());
  rep.sarif_category = args.sarif_category.empty() ? image::WithoutTagOrDigest(args.image.reference)
                                                   : args.sarif_category;

  for (const Output& o : outputs) {
    report::RenderOptions ro;
    ro.verbose = args.verbose;
    ro.color = o.file.empty() && o.format == report::Format::kText && isatty(STDOUT_FILENO) &&
               std::getenv("NO_COLOR") == nullptr;
    util::ProfileSpan span(util::Stage::kReport);
    std::string text = report::Render(rep, o.format, ro);
    if (o.file.empty()) {
      std::cout << text << std::flush;
    } else {
      std::ofstream out(o.file, std::ios::binary | std::ios::trunc);
      out << text;
      if (!out.flush()) throw util::Fatal("--output: cannot write " + o.file);
    }
  }
  if (signer) Attest(args, rep, policy, *signer);
  for (const auto& f : rep.findings)
    if (report::Fails(rep, f)) return 1;
  return args.fail_on_empty && !rep.cuda_stack ? 1 : 0;
}

int Scan(const ScanArgs& args) {
  std::vector<Output> outputs = Outputs(args);
  if (args.attest && args.key.empty()) throw util::Fatal("--attest needs --key FILE");
  bool all = args.image.platform == "all";
  if (all && !args.attest)
    throw util::Fatal(
        "--platform all scans and attests each platform of an index: it needs "
        "--attest (scan one platform at a time otherwise)");
  if (all && (outputs.size() > 1 || !outputs.front().file.empty()))
    throw util::Fatal("--platform all writes one report per platform to stdout, not --output");
  // The key is read before the scan, so a bad one fails at once.
  std::optional<attest::Signer> signer;
  if (args.attest) signer = attest::LoadSigner(args.key);
  // The policy and the scan's model live to the process's end (KeepToExit).
  scan::Policy& policy = KeepToExit(std::make_unique<scan::Policy>(scan::LoadPolicy(args.rules)));
  if (!all) return ScanOne(args, outputs, policy, signer);
  // Each platform its own scan and statement, about its own manifest; the worst exit wins.
  int status = 0;
  for (const attest::PlatformImage& p :
       attest::ImagesOf(args.image.reference, ToLoadOptions(args.image).registry)) {
    ScanArgs one = args;
    one.image.platform = p.platform.empty() ? ImageArgs{}.platform : p.platform;
    std::cerr << "imgcheck: scanning " << args.image.reference << " "
              << (p.platform.empty() ? "(not an index)" : p.platform) << "\n";
    status = std::max(status, ScanOne(one, outputs, policy, signer));
  }
  return status;
}

}  // namespace

Runner DefineScan(CLI::App& sub) {
  auto args = std::make_shared<ScanArgs>();
  AddImageArgs(sub, args->image);
  AddFormatOption(sub, args->format, report::kFormats);
  sub.add_option("-o,--output", args->outputs,
                 "write the report to FILE instead of stdout; FORMAT=FILE (repeatable) writes "
                 "one report per format from one scan");
  sub.add_option("--dockerfile", args->dockerfile,
                 "the Dockerfile the image was built from: findings name its lines");
  sub.add_option("--sarif-category", args->sarif_category,
                 "SARIF automationDetails category, the same for every build of one image "
                 "(default: the image reference without tag or digest)");
  sub.add_option("--baseline", args->baseline,
                 "an earlier scan's JSON report (e.g. of main): the findings it has are marked "
                 "as in the baseline and do not fail the exit code");
  AddRuleArgs(sub, args->rules);
  sub.add_flag("-v,--verbose", args->verbose,
               "text report: the evidence of each finding (search lists, version sources, "
               "layer digests) and quiet findings");
  sub.add_flag("--fail-on-empty", args->fail_on_empty,
               "exit 1 when the image holds no CUDA stack (no CUDA library, toolkit or framework)");
  sub.add_flag("--probe", args->probe,
               "also run the image's cuDNN stack on this host's GPU (runs image code; see probe)");
  AddProbeRunArgs(sub, args->probe_run, "--probe-timeout");
  sub.add_flag("--attest", args->attest,
               "sign the verdict (in-toto statement, DSSE) and attach it to the registry image "
               "where cosign and Kyverno look (tag sha256-HEX.att; see --attest-format); "
               "needs --key");
  sub.add_option("--key", args->key,
                 "the private key (PKCS#8 PEM, from `imgcheck key generate`) that signs --attest");
  sub.get_option("--platform")
      ->description(
          "os/arch[/variant] to pick from an index; all (with --attest): scan and attest each "
          "platform");
  AddTableOption(sub, "--attest-format", args->attest_format, attest::kLayouts,
                 util::FormatHelp(attest::kLayouts, "where --attest puts it"));
  return [args]() -> int { return Scan(*args); };
}

}  // namespace imgcheck::cli
