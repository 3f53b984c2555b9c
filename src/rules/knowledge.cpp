#include "rules/knowledge.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <functional>
#include <future>
#include <set>

#include "util/names.h"
#include "util/sha256.h"
#include "util/text.h"

namespace imgcheck::rules {

namespace {

Version VersionField(const Row& row, std::string_view key, bool required = true) {
  std::string text = row.String(key, required);
  if (text.empty()) return Version();
  auto v = Version::Parse(text);
  if (!v) row.Fail(key, "\"" + text + "\" is not a version");
  return *v;
}

// A table version such as "5.1" or "2.7" matches every release it is a prefix of.
bool PrefixMatches(const Version& table, const Version& actual) {
  return actual.Prefix(table.size()) == table && actual.size() >= table.size();
}

// A dlopen row's "names": each a string (one dlopen of that name) or a list of strings (one
// dlopen trying them in order).
std::vector<loader::DlopenCall> DlopenCalls(const Row& row) {
  constexpr std::string_view kShape =
      "field \"names\" must list names or lists of names (the names one dlopen tries)";
  if (!row.Has("names") || !(*row.value)["names"].is_array()) row.Fail("names", kShape);
  std::vector<loader::DlopenCall> calls;
  for (const nlohmann::json& e : (*row.value)["names"]) {
    if (e.is_string()) {
      calls.emplace_back(e.get<std::string>());
      continue;
    }
    if (!e.is_array() || e.empty()) row.Fail("names", kShape);
    std::vector<std::string> tries;
    for (const nlohmann::json& n : e) {
      if (!n.is_string()) row.Fail("names", kShape);
      tries.push_back(n.get<std::string>());
    }
    calls.emplace_back(std::move(tries));
  }
  return calls;
}

void LoadRules(const std::vector<DataFile>& files, std::vector<RuleInfo>& out) {
  std::set<std::string> seen;
  for (const Row& row : TableRows(files, "rules")) {
    RuleInfo r;
    r.id = row.String("id");
    if (r.id.size() != 5 || !r.id.starts_with("IC") ||
        !std::all_of(r.id.begin() + 2, r.id.end(), [](char c) { return c >= '0' && c <= '9'; }))
      row.Fail("id", "rule id \"" + r.id + "\" must be IC followed by three digits");
    if (!seen.insert(r.id).second) continue;  // a later file overrode this rule
    r.name = row.String("name");
    auto severity = ParseSeverity(row.String("severity"));
    if (!severity) row.Fail("severity", "severity must be error, warning or info");
    r.severity = *severity;
    r.summary = row.String("summary");
    r.breaks = row.String("breaks");
    r.remediation = row.String("remediation");
    r.errors = row.Strings("errors");
    r.needs_target = row.String("needs_target", false);
    if (!r.needs_target.empty() && r.needs_target != "driver" && r.needs_target != "gpu")
      row.Fail("needs_target", "needs_target must be \"driver\" or \"gpu\"");
    r.source = row.String("source");
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
}

bool IsDate(std::string_view s) {
  return s.size() == 10 && s[4] == '-' && s[7] == '-' &&
         std::all_of(s.begin(), s.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); });
}

// Little-endian whatever the host, so that the data version is the same on every machine.
void AppendRaw(std::string& out, uint64_t v) {
  char b[8];
  for (size_t i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out.append(b, 8);
}

// `j`'s value in a canonical encoding, for the data's digest: each value is its type and its
// content (lengths first, so no two values encode alike), objects by sorted key. What the JSON
// text spells differently (whitespace, key order, escapes) encodes the same, as a canonical dump
// would, for a fraction of a dump's cost (every scan digests the rule data).
void AppendCanonical(const nlohmann::json& j, std::string& out) {
  using Type = nlohmann::json::value_t;
  switch (j.type()) {
    case Type::null:
    case Type::discarded:
      out += 'n';
      break;
    case Type::boolean:
      out += j.get<bool>() ? 't' : 'f';
      break;
    case Type::number_integer:
      out += 'i';
      AppendRaw(out, static_cast<uint64_t>(j.get<int64_t>()));
      break;
    case Type::number_unsigned:
      out += 'u';
      AppendRaw(out, j.get<uint64_t>());
      break;
    case Type::number_float:
      out += 'd';
      AppendRaw(out, std::bit_cast<uint64_t>(j.get<double>()));
      break;
    case Type::string: {
      const std::string& s = j.get_ref<const std::string&>();
      out += 's';
      AppendRaw(out, static_cast<uint64_t>(s.size()));
      out += s;
      break;
    }
    case Type::binary:
      out += 'b';
      AppendRaw(out, static_cast<uint64_t>(j.get_binary().size()));
      out.append(j.get_binary().begin(), j.get_binary().end());
      break;
    case Type::array:
      out += '[';
      AppendRaw(out, static_cast<uint64_t>(j.size()));
      for (const nlohmann::json& e : j) AppendCanonical(e, out);
      break;
    case Type::object:  // nlohmann::json keeps keys sorted (std::map)
      out += '{';
      AppendRaw(out, static_cast<uint64_t>(j.size()));
      for (const auto& [key, value] : j.get_ref<const nlohmann::json::object_t&>()) {
        AppendRaw(out, static_cast<uint64_t>(key.size()));
        out += key;
        AppendCanonical(value, out);
      }
      break;
  }
}

// The digest of every file's canonical encoding: the data's identity.
std::string DataDigest(const std::vector<DataFile>& files) {
  std::string content;
  size_t text_bytes = 0;
  for (const DataFile& f : files) text_bytes += f.name.size() + f.text.size();
  content.reserve(text_bytes);  // the encoding is about as long as the text
  for (const DataFile& f : files) {
    AppendRaw(content, static_cast<uint64_t>(f.name.size()));
    content += f.name;
    AppendCanonical(f.json, content);
  }
  util::Sha256 h;
  h.Update(content);
  return h.HexDigest();
}

// version.json's date and schema (the last file of that name).
DataVersion ReadVersion(const std::vector<DataFile>& files) {
  DataVersion v;
  for (const DataFile& f : files) {
    if (f.name != "version.json") continue;
    const nlohmann::json& j = f.json;
    if (!j.is_object() || !j.contains("date") || !j["date"].is_string() ||
        !IsDate(j["date"].get<std::string>()))
      throw util::Fatal(f.Where("/date", "version.json needs \"date\": \"YYYY-MM-DD\""));
    if (!j.contains("schema") || !j["schema"].is_number_integer())
      throw util::Fatal(f.Where("/schema", "version.json needs an integer \"schema\""));
    v.date = j["date"].get<std::string>();
    v.schema = j["schema"].get<int>();
  }
  return v;
}

constexpr auto kSeverityNames = std::to_array<util::EnumName<Severity>>(
    {{Severity::kInfo, "info"}, {Severity::kWarning, "warning"}, {Severity::kError, "error"}});
static_assert(util::NamesEvery(kSeverityNames));

}  // namespace

std::string DataVersion::str() const { return date + "+" + digest.substr(0, 12); }

std::string_view SeverityName(Severity severity) {
  return util::Name(kSeverityNames, severity, "error");
}

std::optional<Severity> ParseSeverity(std::string_view name) {
  return util::Parse(kSeverityNames, name);
}

Knowledge Knowledge::Load(const std::vector<std::string>& dirs) {
  std::vector<DataFile> files = LoadDataFiles(dirs);
  // The catalog cannot tell a CUDA library from any other without it.
  if (std::none_of(files.begin(), files.end(),
                   [](const DataFile& f) { return f.name == "libraries.json"; }))
    throw util::Fatal("no library families: the rules directory has no libraries.json");
  return FromFiles(std::move(files));
}

Knowledge Knowledge::FromFiles(std::vector<DataFile> files) {
  Knowledge k;
  k.files_ = std::move(files);
  const auto& f = k.files_;
  // A third of the load on a core of its own (a warm scan waits for it); `f` does not change
  // until get(), and the future's destructor waits for it on a throw.
  std::future<std::string> digest = std::async(std::launch::async, DataDigest, std::cref(f));
  LoadRules(f, k.rules_);
  if (k.rules_.empty())
    throw util::Fatal("no rule catalogue: the rules directory has no rules.json");
  k.version_ = ReadVersion(f);
  for (const Row& r : TableRows(f, "cuda_driver"))
    k.drivers_.push_back({VersionField(r, "cuda"), VersionField(r, "min_driver"),
                          r.String("release", false), r.String("source")});
  for (const Row& r : TableRows(f, "cuda_releases"))
    k.cuda_releases_.push_back(VersionField(r, "cuda"));
  for (const Row& r : TableRows(f, "cuda_minor_compat"))
    k.minor_compat_.push_back(
        {r.Int("cuda_major"), VersionField(r, "min_driver"), r.String("source")});
  for (const Row& r : TableRows(f, "cuda_sm"))
    k.cuda_sm_.push_back(
        {r.Int("cuda_major"), r.Int("min_sm"), r.Int("max_sm"), r.String("source")});
  for (const Row& r : TableRows(f, "container_mounts")) k.mounts_.push_back(r.String("dir"));
  for (const Row& r : TableRows(f, "cudnn_encoding")) {
    CudnnEncodingRow e{r.Int("from_major"), r.Int("to_major"), r.Int("major_scale"),
                       r.Int("minor_scale")};
    if (e.major_scale <= e.minor_scale || e.minor_scale < 100)
      r.Fail("major_scale", "major_scale must exceed minor_scale, and minor_scale be at least 100");
    k.encodings_.push_back(e);
  }
  for (const Row& r : TableRows(f, "cudnn_releases"))
    k.cudnn_releases_.push_back({VersionField(r, "from"), VersionField(r, "to"),
                                 r.Ints("cuda_majors"), r.Int("min_sm"), r.Int("max_sm", false),
                                 r.String("source")});
  k.libraries_ = catalog::LibraryRules::FromFiles(f);
  if (const catalog::Family* cudnn = k.libraries_.Find("cudnn"))
    for (const auto& [major, names] : cudnn->sub_libraries)
      k.sublibraries_.push_back({major, names});
  for (const Row& r : TableRows(f, "dlopen"))
    k.dlopen_.push_back({r.String("caller"), DlopenCalls(r), r.String("source"),
                         r.Int("cuda_major", false),
                         VersionField(r, "framework_before", false).str()});
  // True for RTLD_GLOBAL; a preload row without a mode loads RTLD_GLOBAL (ctypes.CDLL(path,
  // RTLD_GLOBAL), as torch's _load_global_deps), an imports row must say.
  auto global = [](const Row& r, bool required) {
    std::string mode = r.String("mode", required);
    if (mode.empty()) return true;
    if (mode != "RTLD_GLOBAL" && mode != "RTLD_LOCAL")
      r.Fail("mode", "must be RTLD_GLOBAL or RTLD_LOCAL");
    return mode == "RTLD_GLOBAL";
  };
  for (const Row& r : TableRows(f, "preload"))
    k.preload_.push_back({r.String("package"),
                          r.Strings("files"),
                          r.Strings("dirs"),
                          r.String("unless_loads", false),
                          r.String("source"),
                          global(r, false),
                          {}});
  for (const Row& r : TableRows(f, "imports"))
    k.imports_.push_back({r.String("package"), r.Strings("files"), r.Strings("dirs"), "",
                          r.String("source"), global(r, true), r.Strings("imported_by", false)});
  for (const Row& r : TableRows(f, "preload_calls"))
    k.preload_calls_.push_back({r.String("package"), VersionField(r, "from"), r.String("call"),
                                r.String("before"), r.String("source")});
  for (const Row& r : TableRows(f, "optional")) {
    OptionalRow row{
        r.String("package"),       r.Strings("files"),
        r.String("when"),          r.String("source"),
        r.String("select", false), r.String("major_of", !r.String("select", false).empty())};
    // "loads_first": [module glob, the library glob loaded by path before it]
    if (std::vector<std::string> pair = r.Strings("loads_first", false); !pair.empty()) {
      if (pair.size() != 2) r.Fail("loads_first", "must be [module glob, library glob]");
      row.loads_first.push_back({pair[0], pair[1]});
    }
    row.system = r.String("system", false);
    k.optional_.push_back(std::move(row));
  }
  for (const Row& r : TableRows(f, "on_call")) {
    k.on_call_.push_back(
        {r.String("package"), r.String("module"), r.Strings("names"), r.Strings("dirs"),
         r.String("when"), r.String("source"), r.String("fails", false),
         r.String("fix", !r.String("fails", false).empty()), r.Strings("ctk_dirs", false),
         r.Strings("canary", false), r.Strings("with", false)});
    if (!k.on_call_.back().with.empty() && k.on_call_.back().with.size() != 2)
      r.Fail("with", "must be [distribution, glob on its major]");
  }
  for (const Row& r : TableRows(f, "wheel_libraries"))
    k.wheel_libraries_.push_back(
        {r.String("project"), r.String("version"), r.String("dir"), r.Strings("libraries")});
  for (const Row& r : TableRows(f, "cpu_fallback"))
    k.cpu_fallback_.push_back(
        {r.String("caller"), r.Strings("names"), r.String("runs"), r.String("source")});
  for (const Row& r : TableRows(f, "tensorflow_builds"))
    k.tensorflow_.push_back({VersionField(r, "tensorflow"), VersionField(r, "cudnn"),
                             VersionField(r, "cuda"), r.String("package"), r.String("source")});
  for (const Row& r : TableRows(f, "torch_builds"))
    k.torch_.push_back({VersionField(r, "torch"), VersionField(r, "cuda"), VersionField(r, "cudnn"),
                        r.String("channel", false), r.String("source")});
  for (const Row& r : TableRows(f, "jax_plugins"))
    k.jax_.push_back(
        {r.String("plugin"), r.String("module"), r.Int("cuda_major"), r.Int("min_sm"),
         VersionField(r, "built_cuda"), VersionField(r, "built_cudnn"), VersionField(r, "min_cuda"),
         VersionField(r, "min_cudnn"), VersionField(r, "max_cudnn"), VersionField(r, "min_driver"),
         VersionField(r, "from", false), VersionField(r, "to", false), r.String("source")});
  for (const Row& r : TableRows(f, "onnxruntime_builds"))
    k.onnxruntime_.push_back({VersionField(r, "from"), VersionField(r, "to"),
                              VersionField(r, "cuda", false), VersionField(r, "cudnn", false),
                              r.Int("cudnn_major", false), r.String("source")});
  for (const Row& r : TableRows(f, "companions"))
    k.companions_.push_back({r.String("framework"), VersionField(r, "release"), r.String("package"),
                             VersionField(r, "version"), r.String("source")});
  for (const Row& r : TableRows(f, "cupy_packages"))
    k.cupy_.push_back({r.String("package"), r.Int("cuda_major"), r.String("source")});
  for (const Row& r : TableRows(f, "cudnn_acceptance")) {
    AcceptanceRow a;
    a.framework = r.String("framework");
    a.from = VersionField(r, "from");
    a.to = VersionField(r, "to");
    std::string minor = r.String("minor");
    if (minor != "equal" && minor != "at_least")
      r.Fail("minor", "minor must be \"equal\" or \"at_least\"");
    a.minor_at_least = minor == "at_least";
    a.minor_at_least_from_major = r.Int("minor_at_least_from_major", false, 0);
    a.message = r.String("message");
    a.version_format = r.String("version_format");
    if (a.version_format != "int" && a.version_format != "dotted" && a.version_format != "tuple")
      r.Fail("version_format", "version_format must be int, dotted or tuple");
    a.source = r.String("source");
    k.acceptance_.push_back(std::move(a));
  }
  for (const Row& r : TableRows(f, "cudnn_sm_floor"))
    k.sm_floor_.push_back({r.String("framework"), VersionField(r, "cudnn_from"), r.Int("min_sm"),
                           r.String("message"), r.String("source")});
  for (const Row& r : TableRows(f, "gpu_names"))
    k.gpus_.push_back({r.String("name"), r.Int("sm"), r.String("source")});
  for (const Row& r : TableRows(f, "sm_architectures"))
    k.archs_.push_back({r.Int("min_sm"), r.Int("max_sm"), r.String("name")});
  k.version_.digest = digest.get();
  return k;
}

const RuleInfo* Knowledge::Rule(std::string_view id) const {
  std::string want = util::AsciiLower(id);
  for (const auto& r : rules_)
    if (util::AsciiLower(r.id) == want || r.name == want) return &r;
  return nullptr;
}

std::string Knowledge::SuggestRule(std::string_view word) const {
  std::string want = util::AsciiLower(word);
  // "IC0051", "51", "ic-51": the same number as a rule is the likeliest meaning.
  std::string digits;
  for (char c : want)
    if (c >= '0' && c <= '9') digits += c;
  if (!digits.empty() && digits.size() <= 6)
    for (const auto& r : rules_)
      if (std::stoi(digits) == std::stoi(r.id.substr(2))) return r.id + " (" + r.name + ")";
  std::string best;
  size_t best_distance = 3;  // further than two edits is not a typo
  for (const auto& r : rules_) {
    for (const std::string& candidate : {util::AsciiLower(r.id), r.name}) {
      size_t d = util::EditDistance(want, candidate);
      if (d < best_distance) {
        best_distance = d;
        best = r.id + " (" + r.name + ")";
      }
    }
  }
  return best;
}

const MinorCompatRow* Knowledge::MinorCompat(int cuda_major) const {
  for (const auto& r : minor_compat_)
    if (r.cuda_major == cuda_major) return &r;
  return nullptr;
}

bool Knowledge::IsContainerMount(std::string_view dir) const {
  return std::find(mounts_.begin(), mounts_.end(), dir) != mounts_.end();
}

const CudaSmRow* Knowledge::CudaSm(int cuda_major) const {
  for (const auto& r : cuda_sm_)
    if (r.cuda_major == cuda_major) return &r;
  return nullptr;
}

std::optional<Version> Knowledge::MinDriver(const Version& cuda, std::string* how) const {
  if (cuda.empty()) return std::nullopt;
  if (const auto* mvc = MinorCompat(cuda.major())) {
    if (how) *how = "minor-version compatibility for CUDA " + std::to_string(cuda.major()) + ".x";
    return mvc->min_driver;
  }
  // No minor-version compatibility: the toolkit release's own driver. When only major.minor is
  // known, the most lenient release of that minor (the check must not guess high).
  const DriverRow* best = nullptr;
  for (const auto& r : drivers_) {
    size_t n = std::min(cuda.size(), r.cuda.size());
    if (n < 2 || cuda.Prefix(n) != r.cuda.Prefix(n)) continue;
    if (!best || r.min_driver < best->min_driver) best = &r;
  }
  if (!best) return std::nullopt;
  if (how)
    *how = "the CUDA " + best->release +
           " toolkit driver (no minor-version compatibility before CUDA 11)";
  return best->min_driver;
}

std::optional<Version> Knowledge::DecodeCudnn(long value) const {
  if (value <= 0) return std::nullopt;
  for (const auto& e : encodings_) {
    long major = value / e.major_scale;
    if (major < e.from_major || major > e.to_major) continue;
    long rest = value % e.major_scale;
    return Version({static_cast<int>(major), static_cast<int>(rest / e.minor_scale),
                    static_cast<int>(rest % e.minor_scale)});
  }
  return std::nullopt;
}

long Knowledge::EncodeCudnn(const Version& v) const {
  for (const auto& e : encodings_)
    if (v.major() >= e.from_major && v.major() <= e.to_major)
      return static_cast<long>(v.major()) * e.major_scale +
             static_cast<long>(v.minor()) * e.minor_scale + v.patch();
  return -1;
}

const CudnnReleaseRow* Knowledge::CudnnRelease(const Version& cudnn) const {
  for (const auto& r : cudnn_releases_)
    if (InRange(cudnn.Prefix(3), r.from, r.to)) return &r;
  return nullptr;
}

const TensorflowBuildRow* Knowledge::TensorflowBuild(const Version& tensorflow) const {
  // Releases are listed as X.Y.0 (or X.Y.1): a patch release has its minor's configuration.
  for (const auto& r : tensorflow_)
    if (PrefixMatches(r.tensorflow.Prefix(2), tensorflow)) return &r;
  return nullptr;
}

const TorchBuildRow* Knowledge::TorchBuild(const Version& torch, const Version& cuda) const {
  for (const auto& r : torch_)
    if (PrefixMatches(r.torch.Prefix(2), torch) && r.cuda.Prefix(2) == cuda.Prefix(2)) return &r;
  return nullptr;
}

const OnnxruntimeRow* Knowledge::OnnxruntimeBuild(const Version& ort) const {
  for (const auto& r : onnxruntime_)
    if (InRange(ort, r.from, r.to)) return &r;
  return nullptr;
}

const AcceptanceRow* Knowledge::Acceptance(std::string_view framework,
                                           const Version& version) const {
  for (const auto& r : acceptance_)
    if (r.framework == framework && InRange(version.Prefix(3), r.from, r.to)) return &r;
  return nullptr;
}

const CompanionRow* Knowledge::Companion(std::string_view framework, const Version& release,
                                         std::string_view package) const {
  for (const auto& r : companions_)
    if (r.framework == framework && r.package == package &&
        r.release.Prefix(2) == release.Prefix(2))
      return &r;
  return nullptr;
}

bool Knowledge::HasCompanions(std::string_view framework, std::string_view package) const {
  return std::any_of(companions_.begin(), companions_.end(), [&](const CompanionRow& r) {
    return r.framework == framework && r.package == package;
  });
}

const SmFloorRow* Knowledge::SmFloor(std::string_view framework, const Version& cudnn) const {
  for (const auto& r : sm_floor_)
    if (r.framework == framework && cudnn >= r.cudnn_from) return &r;
  return nullptr;
}

std::optional<Knowledge::KnownRelease> Knowledge::NewestKnown(std::string_view what) const {
  std::optional<KnownRelease> best;
  auto offer = [&best](const Version& v, const std::function<std::string()>& row) {
    if (v.size() > 0 && (!best || v > best->version)) best = KnownRelease{v, row()};
  };
  if (what == "torch") {
    for (const auto& r : torch_)
      offer(r.torch, [&r] {
        return "torch_builds row torch " + r.torch.str() + " / CUDA " + r.cuda.str() + " (" +
               r.source + ")";
      });
  } else if (what == "tensorflow") {
    for (const auto& r : tensorflow_)
      offer(r.tensorflow, [&r] {
        return "tensorflow_builds row tensorflow " + r.tensorflow.str() + " (" + r.source + ")";
      });
  } else if (what == "cuda") {
    // A newer release is judged by its major's minor-version compatibility row, else by the
    // toolkit table's nearest release.
    auto judged_by = [this](const Version& cuda) {
      if (const MinorCompatRow* compat = MinorCompat(cuda.major()))
        return "cuda_minor_compat row CUDA " + std::to_string(compat->cuda_major) +
               " (driver >= " + compat->min_driver.str() + "; " + compat->source + ")";
      return "cuda_driver rows of CUDA " + cuda.Prefix(2).str();
    };
    for (const auto& r : drivers_) offer(r.cuda, [&r, &judged_by] { return judged_by(r.cuda); });
    for (const auto& v : cuda_releases_) offer(v, [&v, &judged_by] { return judged_by(v); });
  } else if (what == "cudnn") {
    auto named = [](const Version& v, const std::string& table, const std::string& source) {
      return [v, table, source] { return table + " names cuDNN " + v.str() + " (" + source + ")"; };
    };
    for (const auto& r : torch_) offer(r.cudnn, named(r.cudnn, "torch_builds", r.source));
    for (const auto& r : tensorflow_) offer(r.cudnn, named(r.cudnn, "tensorflow_builds", r.source));
    for (const auto& r : jax_) offer(r.built_cudnn, named(r.built_cudnn, "jax_plugins", r.source));
  } else {
    const JaxPluginRow* fallback = nullptr;
    for (const auto& r : jax_)
      if (r.plugin == what && r.from.size() == 0 && !fallback) fallback = &r;
    for (const auto& r : jax_)
      if (r.plugin == what && r.to.size() > 0)
        offer(r.to, [fallback, &r] {
          const JaxPluginRow& row = fallback ? *fallback : r;
          return "jax_plugins " + std::string(fallback ? "fallback row" : "row") + " of " +
                 row.plugin + " (built with cuDNN " + row.built_cudnn.str() + "; " + row.source +
                 ")";
        });
  }
  return best;
}

std::optional<int> Knowledge::GpuSm(std::string_view gpu) const {
  std::string g = util::AsciiLower(gpu);
  while (!g.empty() && g.back() == ' ') g.pop_back();
  // "sm_86", "sm86", "compute_86", "86", "8.6"
  std::string_view digits = g;
  for (std::string_view prefix : {"sm_", "sm", "compute_"})
    if (digits.starts_with(prefix)) {
      digits.remove_prefix(prefix.size());
      break;
    }
  if (!digits.empty() && std::isdigit(static_cast<unsigned char>(digits[0]))) {
    auto v = Version::Parse(digits);
    if (v && v->str().size() == digits.size()) {
      if (v->size() == 2 && v->minor() < 10) return v->major() * 10 + v->minor();
      if (v->size() == 1 && v->major() >= 10 && v->major() < 200) return v->major();
    }
    return std::nullopt;
  }
  // A product name: the longest table name contained in it, ignoring a leading "nvidia ".
  if (g.starts_with("nvidia ")) g.erase(0, 7);
  const GpuRow* best = nullptr;
  size_t best_size = 0;
  for (const auto& r : gpus_) {
    // "GeForce RTX 4090" also answers to "RTX 4090": the brand word is optional.
    std::string full = util::AsciiLower(r.name);
    std::vector<std::string> names = {full};
    for (std::string_view brand : {"geforce ", "tesla ", "quadro "})
      if (full.starts_with(brand)) names.push_back(full.substr(brand.size()));
    for (const auto& name : names) {
      size_t at = g.find(name);
      if (at == std::string::npos) continue;
      // Whole words only: "a10" must not match inside "a100".
      size_t end = at + name.size();
      bool left_ok = at == 0 || !std::isalnum(static_cast<unsigned char>(g[at - 1]));
      bool right_ok = end == g.size() || !std::isalnum(static_cast<unsigned char>(g[end]));
      if (left_ok && right_ok && name.size() > best_size) {
        best = &r;
        best_size = name.size();
      }
    }
  }
  if (!best) return std::nullopt;
  return best->sm;
}

std::string Knowledge::ArchName(int sm) const {
  for (const auto& r : archs_)
    if (sm >= r.min_sm && sm <= r.max_sm) return r.name;
  return "";
}

}  // namespace imgcheck::rules
