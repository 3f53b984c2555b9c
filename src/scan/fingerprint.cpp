#include "scan/fingerprint.h"

#include <cctype>
#include <map>

#include "catalog/metadata.h"
#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::scan {

namespace {

// "libcudnn.so.8.9.2" -> "libcudnn"; a file that is no library: its name, digits as "N"
// ("torch-2.3.0.dist-info" -> "torch-N.N.N.dist-info"), so a version bump keeps it.
std::string StableName(std::string_view path) {
  std::string_view file = util::BaseName(path);
  std::string_view base = catalog::LibraryBaseName(file);
  if (!base.empty()) return std::string(base);
  std::string out;
  for (char c : file) {
    bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!digit) {
      out += c;
    } else if (out.empty() || out.back() != 'N') {
      out += 'N';
    }
  }
  return out;
}

}  // namespace

std::string FingerprintKey(const rules::Finding& f, const catalog::Catalog& catalog) {
  std::string main = f.paths.empty() ? "" : f.paths[0];
  std::string owner;
  if (const catalog::PackageRef* p = catalog.Owner(main)) owner = p->name;
  std::string asked;
  for (const rules::Evidence& e : f.evidence)
    if (e.resolution) {
      asked = StableName(e.resolution->name);
      break;
    }
  std::string key = f.rule;
  for (const std::string& part : {owner, main.empty() ? "" : StableName(main), asked, f.env})
    key += '\0' + part;
  return key;
}

void AssignFingerprints(std::vector<rules::Finding>& findings, const catalog::Catalog& catalog) {
  std::map<std::string, int> seen;
  for (rules::Finding& f : findings) {
    std::string hex = util::Sha256Digest(FingerprintKey(f, catalog)).substr(7);  // no "sha256:"
    int n = ++seen[hex];
    f.fingerprint = n == 1 ? hex : hex + "#" + std::to_string(n);
  }
}

}  // namespace imgcheck::scan
