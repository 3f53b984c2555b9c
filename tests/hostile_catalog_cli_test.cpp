// Hostile images for the catalog, ELF and loader stages, through the built binary under a 1 GiB
// data limit and a kill timeout (HostileCommand): each either completes with the right answer or
// stops with exit 2 and one line naming the limit and its flag.
#include <catch2/catch.hpp>
#include <cstring>

#include "elf_builder.h"
#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;
using imgcheck::elf::fixture::BuildElf;
using imgcheck::elf::fixture::ElfSpec;

namespace {

/// `imgcheck <command> --quiet --no-cache oci:<layout> <rest>` under HostileCommand, on an image
/// of one layer of `entries`.
CommandResult RunOn(const TempDir& tmp, std::vector<Entry> entries, const std::string& command,
                    const std::string& rest = "", std::vector<std::string> env = {}) {
  ImageRecipe r;
  r.env = std::move(env);
  r.layers.push_back(MakeLayer(std::move(entries), Compression::kGzip, "RUN hostile"));
  WriteOciLayout(tmp / "layout", r);
  return Run(HostileCommand(command + " --quiet --no-cache oci:" + (tmp / "layout").string() +
                            (rest.empty() ? "" : " " + rest)) +
             " 2>&1");
}

/// The run stopped at a limit: exit 2 and exactly one line, `message`.
void CheckStopped(const CommandResult& r, const std::string& message) {
  INFO(r.output.substr(0, 2000));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains(message));
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
}

std::string Lib(const std::string& soname, std::vector<std::string> needed = {},
                const std::string& rpath = "") {
  ElfSpec spec;
  spec.soname = soname;
  spec.needed = std::move(needed);
  spec.rpath = rpath;
  return BuildElf(spec);
}

// `n` files that each include all `n` (and name a directory): followed naively, n^16 reads.
std::vector<Entry> IncludeBomb(int n) {
  std::vector<Entry> bomb = {Dir("etc"), Dir("etc/ld.so.conf.d"),
                             File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")};
  for (int i = 0; i < n; ++i)
    bomb.push_back(File("etc/ld.so.conf.d/" + std::to_string(i) + ".conf",
                        "include *.conf\n/opt/lib" + std::to_string(i) + "\n"));
  return bomb;
}

TEST_CASE("hostile ld.so.conf: include bombs read each file once, nesting and files are bounded",
          "[hostile][catalog]") {
  {
    TempDir tmp;
    CommandResult r = RunOn(tmp, IncludeBomb(12), "catalog", "--format json");
    INFO(r.output.substr(0, 2000));
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("/opt/lib11"));
  }
  {
    TempDir tmp;
    CheckStopped(RunOn(tmp, IncludeBomb(12), "catalog", "--max-include-files 8"),
                 "exceeds imgcheck's limit of 8 (raise it with --max-include-files)");
  }
  // Read once each, 20 files that include each other still nest 20 deep (0 includes 1, which
  // includes 2, ...): past the default of 16.
  TempDir tmp;
  CheckStopped(RunOn(tmp, IncludeBomb(20), "catalog"),
               "the ld.so.conf include nesting (/etc/ld.so.conf.d/6.conf) exceeds imgcheck's "
               "limit of 16 (raise it with --max-include-depth)");
}

TEST_CASE("hostile ld.so.cache: entries sharing one 1 MB string stop at the metadata limit",
          "[hostile][catalog]") {
  // Old format (glibc dl-cache.h): magic, nlibs, {flags, key, value} entries, then the strings.
  // 200 entries whose key and value are the same 1 MB string: 400 MB once materialised.
  constexpr uint32_t kEntries = 200;
  std::string cache("ld.so-1.7.0", 11);
  cache.resize(12, '\0');
  auto u32 = [&cache](uint32_t v) { cache.append(reinterpret_cast<const char*>(&v), 4); };
  u32(kEntries);
  for (uint32_t i = 0; i < kEntries; ++i) {
    u32(0x0303);
    u32(0);
    u32(0);
  }
  cache += std::string(1 << 20, 'a') + '\0';
  TempDir tmp;
  CheckStopped(RunOn(tmp, {Dir("etc"), File("etc/ld.so.cache", cache)}, "catalog"),
               "the entries of ld.so.cache exceeds imgcheck's limit of 64 MiB (raise it with "
               "--max-metadata-mb)");
}

TEST_CASE("hostile ELF: a 4 GB DT_STRSZ costs nothing, tables that expand are bounded",
          "[hostile][catalog]") {
  std::string elf = Lib("libcudnn.so.9", {"libc.so.6"});
  // DT_STRSZ (tag 10) now claims 4 GiB.
  bool patched = false;
  for (size_t at = 0; at + 16 <= elf.size() && !patched; at += 8) {
    uint64_t tag, value;
    std::memcpy(&tag, elf.data() + at, 8);
    std::memcpy(&value, elf.data() + at + 8, 8);
    if (tag != 10 || value == 0 || value >= elf.size()) continue;
    value = uint64_t{4} << 30;
    std::memcpy(elf.data() + at + 8, &value, 8);
    patched = true;
  }
  REQUIRE(patched);
  {
    TempDir tmp;
    CommandResult r =
        RunOn(tmp, {Dir("usr"), Dir("usr/lib64"), File("usr/lib64/libcudnn.so.9", elf, 0755)},
              "catalog", "--format json");
    INFO(r.output.substr(0, 2000));
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("/usr/lib64/libcudnn.so.9"));
  }
  // 30,000 symbols of 40 characters: about 3 MiB of records and strings.
  ElfSpec many;
  many.soname = "libmany.so";
  for (int i = 0; i < 30000; ++i) {
    std::string n = std::to_string(i);
    many.exported.push_back("symbol_" + std::string(33 - n.size(), 'x') + n);
  }
  TempDir tmp;
  CheckStopped(RunOn(tmp, {Dir("lib"), File("lib/libmany.so", BuildElf(many), 0755)}, "catalog",
                     "--max-elf-table-mb 1"),
               "the dynamic tables of /lib/libmany.so exceeds imgcheck's limit of 1 MiB (raise it "
               "with --max-elf-table-mb)");
}

TEST_CASE("hostile dpkg and pip metadata: files and records past the metadata limit stop the run",
          "[hostile][catalog]") {
  const std::string status =
      "Package: libfoo\nStatus: install ok installed\nVersion: 1.0\nArchitecture: amd64\n\n";
  std::string list;
  for (int i = 0; list.size() < (8u << 20) - 16; ++i) list += "/x/" + std::to_string(i) + "\n";
  std::vector<Entry> dpkg = {Dir("var"),
                             Dir("var/lib"),
                             Dir("var/lib/dpkg"),
                             Dir("var/lib/dpkg/info"),
                             File("var/lib/dpkg/status", status),
                             File("var/lib/dpkg/info/libfoo.list", list)};
  {
    TempDir tmp;
    CheckStopped(RunOn(tmp, dpkg, "catalog"), "the records of /var/lib/dpkg/info/libfoo.list (");
  }
  {
    TempDir tmp;
    CheckStopped(RunOn(tmp, dpkg, "catalog", "--max-metadata-mb 4"),
                 "/var/lib/dpkg/info/libfoo.list (" + std::to_string(list.size()) +
                     " bytes) exceeds imgcheck's limit of 4 MiB (raise it with "
                     "--max-metadata-mb)");
  }
  std::string metadata = "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n";
  while (metadata.size() < (20u << 20)) metadata += "Requires-Dist: a\n";
  const std::string dist = "usr/lib/python3/dist-packages/evil-1.0.dist-info";
  TempDir tmp;
  CheckStopped(
      RunOn(tmp,
            {Dir("usr"), Dir("usr/lib"), Dir("usr/lib/python3"),
             Dir("usr/lib/python3/dist-packages"), Dir(dist), File(dist + "/METADATA", metadata)},
            "catalog"),
      "the records of /" + dist + "/METADATA (");
}

// A chain lib0 -> lib1 -> ... -> lib<n-1>. Where `all_cuda`, each links the CUDA runtime, so
// each is a consumer with its own link map (else only lib0). In one directory (/usr/lib64), or
// each in its own directory with DT_RPATH $ORIGIN and found through LD_LIBRARY_PATH (every
// lookup walks the RPATHs of its loaders and the LD_LIBRARY_PATH entries before its own).
std::vector<Entry> Chain(int n, bool all_cuda, bool own_dirs, std::string& llp) {
  std::vector<Entry> entries = {Dir("opt"), Dir("usr"), Dir("usr/lib64"),
                                File("usr/lib64/libcudart.so.12", Lib("libcudart.so.12"), 0755)};
  for (int i = 0; i < n; ++i) {
    std::string dir = own_dirs ? "opt/" + std::to_string(i) : "usr/lib64";
    std::string name = "libchain" + std::to_string(i) + ".so";
    std::vector<std::string> needed;
    if (all_cuda || i == 0) needed.push_back("libcudart.so.12");
    if (i + 1 < n) needed.push_back("libchain" + std::to_string(i + 1) + ".so");
    if (own_dirs) {
      entries.push_back(Dir(dir));
      llp += (i == 0 ? "/" : ":/") + dir;
    }
    entries.push_back(File(dir + "/" + name, Lib(name, needed, own_dirs ? "$ORIGIN" : ""), 0755));
  }
  return entries;
}

TEST_CASE("hostile loader: a chain of 2,000 libraries resolves within the bound",
          "[hostile][loader]") {
  std::string llp;
  std::vector<Entry> chain = Chain(2000, false, false, llp);
  {
    TempDir tmp;
    CommandResult r = RunOn(tmp, chain, "why", "libchain1999.so");
    INFO(r.output.substr(0, 2000));
    CHECK(r.status == 0);  // the consumer (lib0) finds it
    CHECK_THAT(r.output, Contains("/usr/lib64/libchain1999.so"));
  }
  {
    // The link map of lib0 holds the 2,000 and the runtime: past a bound of 1,000 it stops.
    TempDir tmp;
    CheckStopped(RunOn(tmp, chain, "why", "libchain1999.so --max-loader-objects 1000"),
                 "the link map of /usr/lib64/libchain0.so exceeds imgcheck's limit of 1000 "
                 "(raise it with --max-loader-objects)");
  }
  // Each of the 2,000 a consumer: 2,000 link maps of up to 2,000 objects, 2 million together.
  TempDir tmp;
  CheckStopped(RunOn(tmp, Chain(2000, true, false, llp), "why", "libchain1999.so"),
               "the loader's work on this image (objects mapped and files tried) exceeds "
               "imgcheck's limit of 1000000 (raise it with --max-loader-work)");
}

TEST_CASE("hostile loader: a chain through RPATHs and LD_LIBRARY_PATH resolves within the bound",
          "[hostile][loader]") {
  std::string llp;
  std::vector<Entry> chain = Chain(500, false, true, llp);
  TempDir tmp;
  CommandResult r = RunOn(tmp, chain, "why", "libchain499.so", {"LD_LIBRARY_PATH=" + llp});
  INFO(r.output.substr(0, 2000));
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("/opt/499/libchain499.so"));
}

TEST_CASE("hostile loader: a 1 MB LD_LIBRARY_PATH is searched once per link map",
          "[hostile][loader]") {
  // 1 MB of one directory repeated, and one of distinct directories past --max-search-dirs.
  std::string repeated, distinct;
  while (repeated.size() < (1u << 20)) repeated += "/usr/lib64:";
  for (int i = 0; distinct.size() < (1u << 20); ++i) distinct += "/d" + std::to_string(i) + ":";
  std::vector<Entry> entries = {Dir("usr"), Dir("usr/lib64"), Dir("app"),
                                File("usr/lib64/libcudart.so.12", Lib("libcudart.so.12"), 0755),
                                File("app/libapp.so", Lib("libapp.so", {"libcudart.so.12"}), 0755)};
  {
    TempDir tmp;
    CommandResult r = RunOn(tmp, entries, "why", "libcudart.so.12",
                            {"LD_LIBRARY_PATH=" + repeated + "/usr/lib64"});
    INFO(r.output.substr(0, 2000));
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("/usr/lib64/libcudart.so.12"));
  }
  TempDir tmp;
  CheckStopped(RunOn(tmp, entries, "why", "libcudart.so.12", {"LD_LIBRARY_PATH=" + distinct}),
               "the directories of the image's LD_LIBRARY_PATH exceeds imgcheck's limit of 4096 "
               "(raise it with --max-search-dirs)");
}

}  // namespace
