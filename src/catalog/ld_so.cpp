#include "catalog/ld_so.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "elf/abi.h"
#include "util/path.h"
#include "util/reader.h"
#include "util/text.h"

namespace imgcheck::catalog {

namespace {

// glibc sysdeps/generic/dl-cache.h.
constexpr std::string_view kOldMagic{"ld.so-1.7.0", 11};
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr uint64_t kOldHeaderSize = 16;  // magic[11], pad, uint32 nlibs
constexpr uint64_t kOldEntrySize = 12;   // int32 flags, uint32 key, uint32 value
constexpr uint64_t kNewHeaderSize = 48;
constexpr uint64_t kNewEntrySize = 24;  // old entry + uint32 osversion + uint64 hwcap
constexpr uint32_t kExtensionMagic = 0xeaa42174;
constexpr uint32_t kExtensionTagGenerator = 0;
constexpr uint32_t kExtensionTagGlibcHwcaps = 1;
constexpr uint8_t kEndianMask = 3, kEndianBig = 3;  // 2: little, 0: unset (host order)

util::Error At(uint64_t offset, std::string_view what) {
  return util::MakeError("ld.so.cache: " + std::string(what) + " at offset " +
                         std::to_string(offset));
}

// What the entries expand to. Every entry may point at one long string (or the old and hwcaps
// forms may repeat it), so the records and strings materialised are counted, not the file.
class Expansion {
 public:
  explicit Expansion(uint64_t limit) : left_(limit), limit_(limit) {}
  void Add(const LdCacheRecord& e) {
    Spend(sizeof(LdCacheRecord) + e.name.size() + e.path.size() + e.hwcaps_subdir.size());
  }
  void Spend(uint64_t bytes) {
    if (bytes > left_)
      util::LimitExceeded("the entries of ld.so.cache", util::MiBText(limit_), "--max-metadata-mb");
    left_ -= bytes;
  }

 private:
  uint64_t left_, limit_;
};

// Header fields and entries of the new format, read with the file's byte order.
struct NewPart {
  uint64_t base = 0;  // file offset of the new header: string offsets are relative to it
  uint32_t nlibs = 0;
  uint32_t len_strings = 0;
  bool big_endian = false;
  uint32_t extension_offset = 0;
};

std::optional<NewPart> ReadNewHeader(std::string_view bytes, uint64_t base) {
  auto header = util::Slice(bytes, base, kNewHeaderSize);
  if (!header || !header->starts_with(kNewMagic)) return std::nullopt;
  NewPart part;
  part.base = base;
  uint8_t endian = static_cast<uint8_t>((*header)[28]) & kEndianMask;
  // "unset" (0, older ldconfig) means the host's order; imgcheck reads little-endian images
  // unless the cache says otherwise.
  part.big_endian = endian == kEndianBig;
  util::Reader r(*header, part.big_endian);
  r.Seek(20);
  part.nlibs = *r.Read<uint32_t>();
  part.len_strings = *r.Read<uint32_t>();
  r.Seek(32);
  part.extension_offset = *r.Read<uint32_t>();
  return part;
}

// The glibc-hwcaps names (extension tag 1) and the generator string (tag 0).
util::Expected<void> ReadExtensions(std::string_view bytes, const NewPart& part,
                                    std::vector<std::string>& hwcaps, std::string& generator,
                                    Expansion& expansion) {
  if (part.extension_offset == 0) return {};
  // ldconfig writes extension and section offsets as file offsets.
  util::Reader r(bytes, part.big_endian);
  if (!r.Seek(part.extension_offset)) return At(part.extension_offset, "extension out of range");
  auto magic = r.Read<uint32_t>();
  auto count = r.Read<uint32_t>();
  if (!magic || !count) return At(part.extension_offset, "truncated extension header");
  if (*magic != kExtensionMagic) return {};  // glibc ignores an unknown extension block
  if (*count > r.remaining() / 16) return At(part.extension_offset, "extension count too large");
  for (uint32_t i = 0; i < *count; ++i) {
    uint32_t tag = *r.Read<uint32_t>();
    r.Skip(4);  // flags
    uint32_t offset = *r.Read<uint32_t>();
    uint32_t size = *r.Read<uint32_t>();
    auto data = util::Slice(bytes, offset, size);
    if (!data) return At(offset, "extension section out of range");
    if (tag == kExtensionTagGenerator) {
      expansion.Spend(data->size());
      generator.assign(*data);
    } else if (tag == kExtensionTagGlibcHwcaps) {
      if (size % 4 != 0) return At(offset, "glibc-hwcaps section size not a multiple of 4");
      util::Reader names(*data, part.big_endian);
      while (names.remaining() >= 4) {
        uint32_t string_offset = *names.Read<uint32_t>();
        auto name = util::CString(bytes, *util::CheckedAdd(part.base, string_offset));
        if (!name) return At(offset, "glibc-hwcaps name out of range");
        expansion.Spend(sizeof(std::string) + name->size());
        hwcaps.emplace_back(*name);
      }
    }
  }
  return {};
}

util::Expected<void> ReadNewEntries(std::string_view bytes, const NewPart& part, LdCacheFile& cache,
                                    Expansion& expansion) {
  auto table_size = util::CheckedMul(part.nlibs, kNewEntrySize);
  auto table = util::Slice(bytes, part.base + kNewHeaderSize, table_size.value_or(UINT64_MAX));
  if (!table) return At(part.base + kNewHeaderSize, "entry table runs past the end");
  std::vector<std::string> hwcaps;
  if (auto ext = ReadExtensions(bytes, part, hwcaps, cache.generator, expansion); !ext)
    return ext.error();
  std::string_view strings = bytes.substr(part.base);
  util::Reader r(*table, part.big_endian);
  for (uint32_t i = 0; i < part.nlibs; ++i) {
    uint64_t at = part.base + kNewHeaderSize + i * kNewEntrySize;
    LdCacheRecord e;
    e.flags = *r.Read<int32_t>();
    uint32_t key = *r.Read<uint32_t>();
    uint32_t value = *r.Read<uint32_t>();
    e.osversion = *r.Read<uint32_t>();
    e.hwcap = *r.Read<uint64_t>();
    auto name = util::CString(strings, key);
    auto path = util::CString(strings, value);
    if (!name || !path) return At(at, "entry string out of range");
    e.name.assign(*name);
    e.path.assign(*path);
    if (e.hwcap & kCacheHwcapExtension) {
      uint32_t index = static_cast<uint32_t>(e.hwcap);
      if (index < hwcaps.size()) e.hwcaps_subdir = hwcaps[index];
    }
    expansion.Add(e);
    cache.entries.push_back(std::move(e));
  }
  return {};
}

util::Expected<void> ReadOldEntries(std::string_view bytes, uint32_t nlibs, LdCacheFile& cache,
                                    Expansion& expansion) {
  auto table_size = util::CheckedMul(nlibs, kOldEntrySize);
  auto table = util::Slice(bytes, kOldHeaderSize, table_size.value_or(UINT64_MAX));
  if (!table) return At(kOldHeaderSize, "entry table runs past the end");
  // The old format's strings follow the entries; offsets are relative to that point.
  std::string_view strings = bytes.substr(kOldHeaderSize + table->size());
  util::Reader r(*table);
  for (uint32_t i = 0; i < nlibs; ++i) {
    LdCacheRecord e;
    e.flags = *r.Read<int32_t>();
    auto name = util::CString(strings, *r.Read<uint32_t>());
    auto path = util::CString(strings, *r.Read<uint32_t>());
    if (!name || !path) return At(kOldHeaderSize + i * kOldEntrySize, "entry string out of range");
    e.name.assign(*name);
    e.path.assign(*path);
    expansion.Add(e);
    cache.entries.push_back(std::move(e));
  }
  return {};
}

}  // namespace

int32_t CacheFlagsFor(uint16_t machine, bool is64) {
  const elf::Abi* abi = elf::FindAbi(machine, is64);
  return abi != nullptr ? abi->cache_flags : kCacheFlagElfLibc6;  // the generic default id
}

const LdCacheRecord* LdCacheFile::Lookup(std::string_view name, int32_t flags,
                                         const std::vector<std::string>& hwcaps) const {
  // x86-64 and aarch64 accept exactly their id; the generic check also accepts 1 (libc5-era).
  auto flags_ok = [&](int32_t f) { return f == flags || (flags == kCacheFlagElfLibc6 && f == 1); };
  const LdCacheRecord* best = nullptr;
  size_t best_priority = std::numeric_limits<size_t>::max();  // baseline ranks below every hwcaps
  for (const LdCacheRecord& e : entries) {
    if (e.name != name || !flags_ok(e.flags)) continue;
    size_t priority;
    if (e.hwcap & kCacheHwcapExtension) {
      auto it = std::find(hwcaps.begin(), hwcaps.end(), e.hwcaps_subdir);
      if (e.hwcaps_subdir.empty() || it == hwcaps.end()) continue;  // CPU not assumed to have it
      priority = static_cast<size_t>(it - hwcaps.begin());
    } else if (e.hwcap != 0) {
      continue;  // legacy hwcap subdirectory entry
    } else {
      priority = std::numeric_limits<size_t>::max() - 1;
    }
    if (best == nullptr || priority < best_priority) {
      best = &e;
      best_priority = priority;
    }
  }
  return best;
}

util::Expected<LdCacheFile> ParseLdCache(std::string_view bytes, const util::Limits& limits) {
  LdCacheFile cache;
  Expansion expansion(limits.metadata_bytes);
  if (auto part = ReadNewHeader(bytes, 0)) {
    cache.format = LdCacheFile::Format::kNew;
    cache.big_endian = part->big_endian;
    if (auto ok = ReadNewEntries(bytes, *part, cache, expansion); !ok) return ok.error();
    return cache;
  }
  if (!bytes.starts_with(kOldMagic) || bytes.size() < kOldHeaderSize)
    return util::MakeError("ld.so.cache: not a glibc ld.so.cache (unknown magic)");
  util::Reader r(bytes);
  r.Seek(12);
  uint32_t nlibs = *r.Read<uint32_t>();
  auto old_end = util::CheckedAdd(kOldHeaderSize, *util::CheckedMul(nlibs, kOldEntrySize));
  if (!old_end || *old_end > bytes.size())
    return At(kOldHeaderSize, "entry table runs past the end");
  // The combined form puts the new format right after the old entries, 8-byte aligned; the
  // loader then reads only the new part (glibc elf/dl-cache.c).
  uint64_t aligned = (*old_end + 7) & ~uint64_t{7};
  if (auto part = ReadNewHeader(bytes, aligned)) {
    cache.format = LdCacheFile::Format::kCombined;
    cache.big_endian = part->big_endian;
    if (auto ok = ReadNewEntries(bytes, *part, cache, expansion); !ok) return ok.error();
    return cache;
  }
  cache.format = LdCacheFile::Format::kOld;
  if (auto ok = ReadOldEntries(bytes, nlibs, cache, expansion); !ok) return ok.error();
  return cache;
}

// ---- ld.so.conf ----

namespace {

// Work (lines read, include patterns, directory entries matched against them) over all the files
// of one ld.so.conf: real ones need a few hundred; a hostile image must not make it unbounded.
constexpr size_t kIncludeBudget = size_t{1} << 16;

std::optional<std::string> ReadWhole(const image::Tree& tree, std::string_view path) {
  auto resolved = tree.Resolve(path);
  if (!resolved || !resolved->node || resolved->node->type != image::NodeType::kRegular ||
      !resolved->node->content)
    return std::nullopt;
  const util::SparseFile& f = *resolved->node->content;
  if (f.size() == 0) return std::string();
  auto view = f.View(0, f.size());
  if (!view) return std::nullopt;
  return std::string(*view);
}

// One ReadLdSoConf: what is read so far, and the work left.
struct ConfReader {
  ConfReader(const image::Tree& t, const util::Limits& l, LdSoConf& c)
      : tree(t), limits(l), conf(c) {}

  const image::Tree& tree;
  const util::Limits& limits;
  LdSoConf& conf;
  std::set<std::string> read;    // files read or being read: each is read once
  std::set<std::string> active;  // the include chain being read now
  std::set<std::pair<std::string, std::string>> loops;  // (includer, included), reported once
  std::set<std::string, std::less<>> dirs;
  size_t budget = kIncludeBudget;
  bool over_budget = false;

  // Takes one unit of work; false (with one diagnostic) once the budget is spent.
  bool Spend(const std::string& file) {
    if (budget > 0) {
      --budget;
      return true;
    }
    if (!over_budget)
      conf.diagnostics.push_back({file, -1,
                                  "ld.so.conf includes stopped after " +
                                      std::to_string(kIncludeBudget) +
                                      " lines, patterns and glob matches; the rest is ignored"});
    over_budget = true;
    return false;
  }

  // Paths of the tree matching an absolute glob pattern (glob(3) with no flags, unsorted).
  void ExpandGlob(const std::string& file, const std::vector<std::string>& parts, size_t i,
                  const std::string& prefix, std::vector<std::string>& out) {
    if (i == parts.size()) {
      if (tree.Resolve(prefix)) out.push_back(prefix);
      return;
    }
    const std::string& part = parts[i];
    if (part.empty()) return ExpandGlob(file, parts, i + 1, prefix, out);
    if (part.find_first_of("*?[") == std::string::npos) {
      return ExpandGlob(file, parts, i + 1, util::JoinPath(prefix, part), out);
    }
    auto dir = tree.Resolve(prefix);
    if (!dir || !dir->node || dir->node->type != image::NodeType::kDirectory) return;
    for (const std::string& name : tree.List(dir->path)) {
      if (!Spend(file)) return;
      if (name[0] == '.' && part[0] != '.') continue;  // glob(3): a leading dot must be explicit
      if (util::GlobMatch(part, name))
        ExpandGlob(file, parts, i + 1, util::JoinPath(prefix, name), out);
    }
  }

  void Include(const std::string& from, const std::string& file, int depth) {
    if (active.count(file)) {
      if (loops.emplace(from, file).second)
        conf.diagnostics.push_back(
            {from, -1, "ld.so.conf include loop: " + file + " is already being read"});
      return;
    }
    // ldconfig reads a file named twice twice, but its directories are already listed: files
    // that include each other would otherwise grow as fan-out^depth.
    if (!read.insert(file).second) return;
    if (read.size() > limits.include_files)
      util::LimitExceeded("the number of ld.so.conf files (" + file + ")",
                          std::to_string(limits.include_files), "--max-include-files");
    active.insert(file);
    Parse(file, depth);
    active.erase(file);
  }

  void Parse(const std::string& file, int depth) {
    if (depth > limits.include_depth)
      util::LimitExceeded("the ld.so.conf include nesting (" + file + ")",
                          std::to_string(limits.include_depth), "--max-include-depth");
    auto text = ReadWhole(tree, file);
    const image::Node* node = tree.Find(file);
    int layer = node ? node->layer : -1;
    if (!text) {
      if (depth > 0 || tree.Resolve(file).value_or(image::Tree::Resolved{}).node)
        conf.diagnostics.push_back({file, layer, "ld.so.conf file not readable (not captured)"});
      return;
    }
    conf.files.push_back(file);
    int line_no = 0;
    for (std::string_view rest = *text; !rest.empty();) {
      if (!Spend(file)) return;
      size_t eol = rest.find('\n');
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
      ++line_no;
      line = util::Trim(line.substr(0, line.find('#')));
      if (line.empty()) continue;
      auto keyword = [&](std::string_view word, bool nocase) {
        if (line.size() <= word.size() || (line[word.size()] != ' ' && line[word.size()] != '\t'))
          return false;
        for (size_t k = 0; k < word.size(); ++k) {
          char c = line[k];
          if (nocase) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (c != word[k]) return false;
        }
        return true;
      };
      if (keyword("include", false)) {
        for (std::string_view args = line.substr(8); !args.empty();) {
          size_t end = args.find_first_of(" \t");
          std::string_view pattern = args.substr(0, end);
          args = end == std::string_view::npos ? std::string_view() : args.substr(end + 1);
          if (pattern.empty()) continue;
          if (!Spend(file)) return;
          std::string absolute = util::JoinPath(util::DirName(file), pattern);
          std::vector<std::string> matches;
          ExpandGlob(file, util::Split(absolute, '/'), 0, "/", matches);
          std::sort(matches.begin(), matches.end());
          for (const std::string& m : matches) Include(file, m, depth + 1);
        }
      } else if (keyword("hwcap", true)) {
        continue;  // ldconfig: "hwcap directive ignored"
      } else {
        std::string normalized = util::NormalizePath(util::Trim(line.substr(0, line.find('='))));
        if (dirs.insert(normalized).second)
          conf.dirs.push_back({std::move(normalized), file, line_no, layer});
      }
    }
  }
};

}  // namespace

LdSoConf ReadLdSoConf(const image::Tree& tree, const util::Limits& limits, std::string_view path) {
  LdSoConf conf;
  ConfReader reader(tree, limits, conf);
  std::string file = util::NormalizePath(path);
  reader.read.insert(file);
  reader.active.insert(file);
  reader.Parse(file, 0);
  return conf;
}

}  // namespace imgcheck::catalog
