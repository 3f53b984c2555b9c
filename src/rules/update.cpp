#include "rules/update.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace imgcheck::rules {

namespace fs = std::filesystem;

namespace {

constexpr char kCurrent[] = "current";
// Kept beside installed data: what was signed, so that each load checks it again.
constexpr char kManifestFile[] = ".manifest";
constexpr char kLayerFile[] = ".layer";
constexpr char kSignatureFile[] = ".signature";

// version.json's date and schema, without loading the rest; nullopt when unreadable.
std::optional<DataVersion> PeekVersion(const fs::path& dir) {
  util::Expected<std::string> text = util::ReadFile(dir / "version.json", 1 << 20);
  if (!text) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("date") || !j["date"].is_string() || !j.contains("schema") ||
      !j["schema"].is_number_integer())
    return std::nullopt;
  DataVersion v;
  v.date = j["date"].get<std::string>();
  v.schema = j["schema"].get<int>();
  return v;
}

std::string ConfigJson(const DataVersion& v) {
  nlohmann::ordered_json c{{"schema", v.schema}, {"date", v.date}, {"version", v.str()}};
  return c.dump();
}

// Removes a directory this process made, on every way out.
struct TempDirGuard {
  fs::path path;
  ~TempDirGuard() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

PackedRules PackRules(const std::string& dir) {
  Knowledge k = Knowledge::Load({dir});
  if (k.version().date.empty())
    throw util::Fatal(dir + " has no version.json: it is not a rules data set to publish");
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json" || !e.is_regular_file()) continue;
    util::Expected<std::string> text = util::ReadFile(e.path(), kMaxRulesFile);
    if (!text) throw util::Fatal(text.error().message);
    files[e.path().filename().string()] = std::move(*text);
  }
  PackedRules p;
  p.version = k.version();
  p.layer = image::PackFiles(files);
  p.config = ConfigJson(p.version);
  return p;
}

std::string RulesCacheDir(const std::string& dir) {
  if (!dir.empty()) return dir;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x == '/')
    return (fs::path(x) / "imgcheck/rules").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/") / ".local/share/imgcheck/rules").string();
}

DataVersion InstallRules(const image::Artifact& artifact, const std::string& cache,
                         const std::string& record) {
  const std::string& from = artifact.describe;
  std::map<std::string, std::string> files =
      image::UnpackFiles(artifact.layer, kMaxRulesFiles, kMaxRulesFile);
  for (const auto& [name, bytes] : files)
    if (!name.ends_with(".json"))
      throw util::Fatal("the rules data of " + from + " holds " + name + ", not a .json file");
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) throw util::Fatal("cannot create the rules cache " + cache + ": " + ec.message());
  std::string pattern = (fs::path(cache) / ".new-XXXXXX").string();
  if (!mkdtemp(pattern.data()))
    throw util::Fatal("cannot write to the rules cache " + cache + ": " + std::strerror(errno));
  TempDirGuard tmp{pattern};
  for (const auto& [name, bytes] : files) util::WriteFileAtomic(tmp.path / name, bytes);

  Knowledge k = [&] {
    try {
      return Knowledge::Load({tmp.path.string()});
    } catch (const util::Fatal& e) {
      throw util::Fatal("the rules data of " + from + " is invalid: " + e.what());
    }
  }();
  const DataVersion& v = k.version();
  if (v.schema != kRulesSchema)
    throw util::Fatal("the rules data of " + from + " has schema " + std::to_string(v.schema) +
                      "; this imgcheck reads schema " + std::to_string(kRulesSchema) +
                      " (a newer imgcheck is needed)");
  nlohmann::json config = nlohmann::json::parse(artifact.config, nullptr, false);
  if (!config.is_object() || config.value("version", "") != v.str())
    throw util::Fatal("the rules data of " + from + " is not what its config states (content " +
                      v.str() + ")");

  // One directory per version; `current` moves to it with one rename (atomic on POSIX).
  std::string name = "v-" + v.digest.substr(0, 16);
  // An older signed artifact served again (a replay) must not undo a newer one.
  fs::path current = fs::path(cache) / kCurrent;
  std::optional<DataVersion> installed = PeekVersion(current);
  if (installed && fs::read_symlink(current, ec) != name && !v.NewerThan(*installed))
    throw util::Fatal("the rules data of " + from + " (" + v.str() +
                      ") is not newer than the installed data (of " + installed->date +
                      "): refusing a rollback");
  fs::path final_dir = fs::path(cache) / name;
  // The same content already installed gets this signature (it may have had none).
  fs::path signed_dir = fs::exists(final_dir, ec) ? final_dir : tmp.path;
  util::WriteFileAtomic(signed_dir / kManifestFile, artifact.manifest);
  util::WriteFileAtomic(signed_dir / kLayerFile, artifact.layer);
  util::WriteFileAtomic(signed_dir / kSignatureFile, record);
  if (signed_dir == final_dir) {
    fs::remove_all(tmp.path, ec);
  } else {
    fs::rename(tmp.path, final_dir, ec);
    if (ec) throw util::Fatal("cannot install into " + final_dir.string() + ": " + ec.message());
  }
  tmp.path.clear();
  fs::path link = fs::path(cache) / (".current-" + std::to_string(getpid()));
  fs::remove(link, ec);
  fs::create_directory_symlink(name, link, ec);
  if (!ec) fs::rename(link, fs::path(cache) / kCurrent, ec);
  if (ec) throw util::Fatal("cannot switch " + cache + "/current: " + ec.message());
  // Older versions are no longer reachable (a running server has its data in memory).
  for (const auto& e : fs::directory_iterator(cache, ec))
    if (e.path().filename().string().starts_with("v-") && e.path().filename() != name)
      fs::remove_all(e.path(), ec);
  return v;
}

namespace {

// Why the data installed in `dir` is not what was signed ("" when it is).
std::string Unsigned(const fs::path& dir, const SignatureCheck& check) {
  util::Expected<std::string> manifest = util::ReadFile(dir / kManifestFile, 4 << 20);
  util::Expected<std::string> layer = util::ReadFile(dir / kLayerFile, kMaxRulesLayer);
  util::Expected<std::string> record = util::ReadFile(dir / kSignatureFile, 1 << 20);
  if (!manifest || !layer || !record) return "it has no signature record";
  nlohmann::json m = nlohmann::json::parse(*manifest, nullptr, false);
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array() ||
      m["layers"].size() != 1 || !m["layers"][0].is_object() ||
      m["layers"][0].value("digest", "") != util::Sha256Digest(*layer))
    return "its layer is not the one its manifest names";
  std::map<std::string, std::string> signed_files;
  try {
    signed_files = image::UnpackFiles(*layer, kMaxRulesFiles, kMaxRulesFile);
  } catch (const util::Fatal& e) {
    return e.what();
  }
  size_t seen = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    auto it = signed_files.find(name);
    util::Expected<std::string> bytes = util::ReadFile(e.path(), kMaxRulesFile);
    if (it == signed_files.end() || !bytes || *bytes != it->second)
      return name + " is not the file that was signed";
    ++seen;
  }
  if (ec || seen != signed_files.size()) return "a file that was signed is missing";
  if (!check) return "no signature check";
  std::string why = check(*record, util::Sha256Digest(*manifest));
  return why.empty() ? "" : "its signature: " + why;
}

}  // namespace

std::string ChooseRulesDir(const std::string& cache, const std::string& bundled,
                           const SignatureCheck& check, std::string* note) {
  if (note) note->clear();
  fs::path installed = fs::path(cache) / kCurrent;
  std::error_code ec;
  if (!fs::exists(installed, ec)) return bundled;
  std::optional<DataVersion> mine = PeekVersion(bundled);
  std::optional<DataVersion> theirs = PeekVersion(installed);
  auto pass = [&](const std::string& why) {
    if (note) *note = "not using the rules data in " + installed.string() + ": " + why;
    return bundled;
  };
  if (!theirs) return pass("it has no readable version.json");
  if (theirs->schema != kRulesSchema)
    return pass("its schema is " + std::to_string(theirs->schema) + ", this imgcheck reads " +
                std::to_string(kRulesSchema));
  if (mine && !theirs->NewerThan(*mine))
    return pass("its date " + theirs->date + " is not newer than the bundled data's " + mine->date);
  if (std::string why = Unsigned(installed, check); !why.empty()) return pass(why);
  return installed.string();
}

}  // namespace imgcheck::rules
