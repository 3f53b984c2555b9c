#include "probe/stage.h"

#include <cstdlib>

#include "probe/interrupt.h"
#include "util/error.h"
#include "util/path.h"

namespace imgcheck::probe {

namespace fs = std::filesystem;

PrivateDir::PrivateDir() {
  path_ = CreateDirRemovedOnInterrupt([] {
    std::string tmpl = (fs::temp_directory_path() / "imgcheck-probe-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      throw util::Fatal("cannot create a private directory in " +
                        fs::temp_directory_path().string());
    return fs::path(tmpl);
  });
}

PrivateDir::~PrivateDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  ForgetDir(path_);
}

namespace {

// A file name from the image used as a name in our directory: one plain component only.
bool SafeName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos;
}

}  // namespace

std::vector<StagedLibrary> Materialise(const std::vector<PlannedLibrary>& ordered,
                                       const fs::path& dir,
                                       const std::map<std::string, fs::path>& extracted) {
  std::vector<StagedLibrary> out;
  std::map<std::string, fs::path> placed;  // image path -> its first staged copy
  for (size_t i = 0; i < ordered.size(); ++i) {
    const PlannedLibrary& lib = ordered[i];
    auto it = extracted.find(lib.image_path);
    if (it == extracted.end())
      throw util::Fatal("cannot materialise " + lib.image_path +
                        ": not a regular file in the image");
    std::string file = std::string(util::BaseName(util::NormalizePath(lib.image_path)));
    if (!SafeName(file) || !SafeName(lib.soname))
      throw util::Fatal("cannot materialise " + lib.image_path + " as '" + lib.soname + "'");
    // A directory of its own: no name of another library (its file or its soname) can stand
    // for it, whatever the image names them.
    fs::path own = dir / std::to_string(i);
    fs::path target = own / file;
    std::error_code ec;
    fs::create_directory(own, ec);
    if (ec) throw util::Fatal("cannot create " + own.string() + ": " + ec.message());
    if (auto first = placed.find(lib.image_path); first != placed.end()) {
      fs::copy_file(first->second, target, ec);
    } else {
      fs::rename(it->second, target, ec);
      if (ec) fs::copy_file(it->second, target, ec);
      placed.emplace(lib.image_path, target);
    }
    if (ec) throw util::Fatal("cannot write " + target.string() + ": " + ec.message());
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_exec, ec);
    if (lib.soname != file) {
      fs::create_symlink(file, own / lib.soname, ec);
      if (ec) throw util::Fatal("cannot link " + (own / lib.soname).string() + ": " + ec.message());
    }
    out.push_back({lib, target.string()});
  }
  return out;
}

}  // namespace imgcheck::probe
