// Parse against binutils' readelf (the oracle) on shared objects generated from tiny C sources,
// and against hand-written ELF files for the classes and byte orders the compiler cannot make.
#include "elf/elf.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "elf_builder.h"
#include "elf_test_util.h"
#include "support.h"

using namespace imgcheck;
using namespace imgcheck::elf;
using imgcheck::testing::Compile;
using imgcheck::testing::HaveProgram;
using imgcheck::testing::Run;
using imgcheck::testing::SharedObject;
using imgcheck::testing::TempDir;

namespace {

/// What readelf says about a file, reduced to the fields Parse reports.
struct Oracle {
  std::string soname;
  std::vector<std::string> needed, rpath, runpath;
  bool has_runpath = false;
  bool nodeflib = false;
  std::string build_id;
  std::set<std::string> exported, imported;  // "name", "name@@ver", "name@ver"
  std::vector<std::string> version_definitions;
  std::vector<VersionNeed> version_needs;
};

std::string Bracketed(const std::string& line) {
  auto open = line.find('['), close = line.rfind(']');
  return open == std::string::npos || close < open ? "" : line.substr(open + 1, close - open - 1);
}

std::string After(const std::string& line, const std::string& key) {
  auto p = line.find(key);
  if (p == std::string::npos) return "";
  std::istringstream in(line.substr(p + key.size()));
  std::string word;
  in >> word;
  return word;
}

/// `use_dynamic`: read the symbols through the dynamic section (-D), for files without section
/// headers.
Oracle RunReadelf(const std::filesystem::path& path, bool use_dynamic = false) {
  Oracle o;
  auto d = Run("readelf -dW '" + path.string() + "'");
  std::istringstream dyn(d.output);
  for (std::string line; std::getline(dyn, line);) {
    if (line.find("(SONAME)") != std::string::npos) o.soname = Bracketed(line);
    if (line.find("(NEEDED)") != std::string::npos) o.needed.push_back(Bracketed(line));
    if (line.find("(RPATH)") != std::string::npos) o.rpath = util::Split(Bracketed(line), ':');
    if (line.find("(RUNPATH)") != std::string::npos) {
      o.has_runpath = true;
      o.runpath = util::Split(Bracketed(line), ':');
    }
    if (line.find("(FLAGS_1)") != std::string::npos && line.find("NODEFLIB") != std::string::npos)
      o.nodeflib = true;
  }
  auto n = Run("readelf -nW '" + path.string() + "'");
  o.build_id = After(n.output, "Build ID:");

  auto s = Run(std::string(use_dynamic ? "readelf -D -s -W '" : "readelf --dyn-syms -W '") +
               path.string() + "'");
  std::istringstream syms(s.output);
  for (std::string line; std::getline(syms, line);) {
    std::istringstream in(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(in >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (num.back() != ':' || bind == "LOCAL" || bind == "Bind") continue;
    (ndx == "UND" ? o.imported : o.exported).insert(name);
  }

  auto v = Run("readelf -VW '" + path.string() + "'");
  std::istringstream ver(v.output);
  bool in_needs = false;
  for (std::string line; std::getline(ver, line);) {
    if (line.find("Version needs section") != std::string::npos) in_needs = true;
    if (line.find("Version definition section") != std::string::npos) in_needs = false;
    if (line.find("Rev:") != std::string::npos)
      o.version_definitions.push_back(After(line, "Name:"));
    if (in_needs && line.find("File:") != std::string::npos)
      o.version_needs.push_back({After(line, "File:"), {}});
    else if (in_needs && line.find("Name:") != std::string::npos && !o.version_needs.empty())
      o.version_needs.back().versions.push_back(After(line, "Name:"));
  }
  return o;
}

/// Symbols spelled the way readelf prints them (which shows a version's own ABS symbol bare).
std::set<std::string> Spelled(const std::vector<Symbol>& symbols, bool defined) {
  std::set<std::string> out;
  for (const auto& s : symbols) {
    if (s.version.empty() || (defined && s.name == s.version))
      out.insert(s.name);
    else if (defined && !s.hidden_version)
      out.insert(s.name + "@@" + s.version);
    else
      out.insert(s.name + "@" + s.version);
  }
  return out;
}

/// Every field Parse shares with readelf must agree.
void CheckAgainstReadelf(const std::filesystem::path& path) {
  if (!HaveProgram("readelf")) return imgcheck::testing::Skip("readelf (binutils) not installed");
  INFO(path.string());
  ElfInfo info = ParseFile(path);
  Oracle o = RunReadelf(path);
  CHECK(info.soname == o.soname);
  CHECK(info.needed == o.needed);
  CHECK(info.rpath == o.rpath);
  CHECK(info.runpath == o.runpath);
  CHECK(info.has_runpath == o.has_runpath);
  CHECK(info.nodeflib() == o.nodeflib);
  CHECK(info.build_id == o.build_id);
  CHECK(Spelled(info.exported, true) == o.exported);
  CHECK(Spelled(info.imported, false) == o.imported);
  CHECK(info.version_definitions == o.version_definitions);
  REQUIRE(info.version_needs.size() == o.version_needs.size());
  for (size_t i = 0; i < o.version_needs.size(); ++i) {
    CHECK(info.version_needs[i].file == o.version_needs[i].file);
    CHECK(info.version_needs[i].versions == o.version_needs[i].versions);
  }
  CHECK(info.problems.empty());
}

}  // namespace

TEST_CASE("Parse agrees with readelf on SONAME, NEEDED and RPATH") {
  TempDir dir;
  SharedObject dep;
  dep.soname = "libdep.so.3";
  dep.source = "int dep_fn(void) { return 3; }\n";
  Compile(dep, dir / "libdep.so");
  SharedObject so;
  so.soname = "libtop.so.1";
  so.source = "int dep_fn(void);\nint top_fn(void) { return dep_fn(); }\n";  // keeps NEEDED under
                                                                             // --as-needed
  so.needed = {(dir / "libdep.so").string()};
  so.rpath = "$ORIGIN/../lib:/opt/x";
  Compile(so, dir / "libtop.so");

  ElfInfo info = ParseFile(dir / "libtop.so");
  CHECK(info.soname == "libtop.so.1");
  CHECK(std::count(info.needed.begin(), info.needed.end(), "libdep.so.3") == 1);
  CHECK(info.rpath == std::vector<std::string>{"$ORIGIN/../lib", "/opt/x"});
  CHECK_FALSE(info.has_runpath);
  CHECK(info.is64);
  CHECK(info.machine != 0);
  CHECK(info.type == 3);
  CheckAgainstReadelf(dir / "libtop.so");
  CheckAgainstReadelf(dir / "libdep.so");
}

TEST_CASE("Parse tells RUNPATH from RPATH and reads FLAGS and FLAGS_1") {
  // GNU ld 2.40 ignores -z nodeflib ("warning: -z nodeflib ignored"), so NODEFLIB itself is
  // checked on hand-written files below; here the same DT_FLAGS_1 word carries NODELETE and NOW.
  TempDir dir;
  SharedObject so;
  so.soname = "librun.so";
  so.runpath = "/a::/b";
  so.extra_flags = {"-Wl,-z,nodelete", "-Wl,-z,now"};
  Compile(so, dir / "librun.so");
  ElfInfo info = ParseFile(dir / "librun.so");
  CHECK(info.has_runpath);
  CHECK(info.runpath == std::vector<std::string>{"/a", "", "/b"});
  CHECK(info.rpath.empty());
  CHECK((info.flags_1 & 0x8) != 0);  // DF_1_NODELETE
  CHECK((info.flags_1 & 0x1) != 0);  // DF_1_NOW
  CHECK((info.flags & 0x8) != 0);    // DF_BIND_NOW
  CheckAgainstReadelf(dir / "librun.so");
}

TEST_CASE("Parse reads version definitions, hidden versions and version needs") {
  TempDir dir;
  SharedObject lib;
  lib.soname = "libfoo.so.1";
  lib.source =
      "int foo_v1(void) { return 1; }\n"
      "int foo_v2(void) { return 2; }\n"
      "int bar(void) { return 3; }\n"
      "__attribute__((weak)) int baz(void) { return 4; }\n"
      "__asm__(\".symver foo_v1,foo@LIBFOO_1.0\");\n"
      "__asm__(\".symver foo_v2,foo@@LIBFOO_2.0\");\n";
  lib.version_script =
      "LIBFOO_1.0 { global: foo; bar; baz; local: *; };\n"
      "LIBFOO_2.0 { global: foo; } LIBFOO_1.0;\n";
  Compile(lib, dir / "libfoo.so");

  ElfInfo info = ParseFile(dir / "libfoo.so");
  CHECK(info.version_definitions ==
        std::vector<std::string>{"libfoo.so.1", "LIBFOO_1.0", "LIBFOO_2.0"});
  auto find = [&](const std::string& name, const std::string& version) -> const Symbol* {
    for (const auto& s : info.exported)
      if (s.name == name && s.version == version) return &s;
    return nullptr;
  };
  REQUIRE(find("foo", "LIBFOO_1.0"));
  CHECK(find("foo", "LIBFOO_1.0")->hidden_version);
  REQUIRE(find("foo", "LIBFOO_2.0"));
  CHECK_FALSE(find("foo", "LIBFOO_2.0")->hidden_version);
  REQUIRE(find("baz", "LIBFOO_1.0"));
  CHECK(find("baz", "LIBFOO_1.0")->weak);
  CheckAgainstReadelf(dir / "libfoo.so");

  SharedObject user;
  user.soname = "libuser.so";
  user.source = "int foo(void); int bar(void);\nint use(void) { return foo() + bar(); }\n";
  user.needed = {(dir / "libfoo.so").string()};
  Compile(user, dir / "libuser.so");
  ElfInfo u = ParseFile(dir / "libuser.so");
  bool needs_foo = false;
  for (const auto& n : u.version_needs)
    if (n.file == "libfoo.so.1")
      needs_foo = std::find(n.versions.begin(), n.versions.end(), "LIBFOO_2.0") != n.versions.end();
  CHECK(needs_foo);
  std::set<std::string> imported = Spelled(u.imported, false);
  CHECK(imported.count("foo@LIBFOO_2.0") == 1);
  CHECK(imported.count("bar@LIBFOO_1.0") == 1);
  CheckAgainstReadelf(dir / "libuser.so");
}

TEST_CASE("Parse reads the GNU build-id") {
  TempDir dir;
  SharedObject so;
  so.extra_flags = {"-Wl,--build-id=sha1"};
  Compile(so, dir / "libid.so");
  ElfInfo info = ParseFile(dir / "libid.so");
  CHECK(info.build_id.size() == 40);
  CheckAgainstReadelf(dir / "libid.so");
}

TEST_CASE("Parse reads 32-bit objects linked by ld") {
  TempDir dir;
  auto r = Run("cd '" + dir.path().string() +
               "' && printf 'int dep(void){return 1;}\\n' > dep.c && "
               "printf 'int dep(void);\\nint f(void){return dep();}\\n' > top.c && "
               "cc -m32 -fPIC -c dep.c top.c && "
               "ld -m elf_i386 -shared -soname libdep32.so.2 -o libdep32.so dep.o && "
               "ld -m elf_i386 -shared -soname libtop32.so --build-id=sha1 "
               "--enable-new-dtags -rpath '/opt/lib32' -o libtop32.so top.o libdep32.so 2>&1");
  if (r.status != 0)
    return imgcheck::testing::Skip("cannot build 32-bit objects here (cc -m32 / ld -m elf_i386): " +
                                   r.output);
  ElfInfo info = ParseFile(dir / "libtop32.so");
  CHECK_FALSE(info.is64);
  CHECK_FALSE(info.big_endian);
  CHECK(info.machine == 3);  // EM_386
  CHECK(info.soname == "libtop32.so");
  CHECK(info.needed == std::vector<std::string>{"libdep32.so.2"});
  CHECK(info.runpath == std::vector<std::string>{"/opt/lib32"});
  CHECK(Spelled(info.exported, true).count("f") == 1);
  CHECK(Spelled(info.imported, false).count("dep") == 1);
  CheckAgainstReadelf(dir / "libtop32.so");
}

TEST_CASE("Parse reads hand-written ELF files of every class and byte order") {
  for (bool is64 : {true, false}) {
    for (bool big : {true, false}) {
      fixture::ElfSpec spec;
      spec.is64 = is64;
      spec.big_endian = big;
      spec.machine = big ? 43 : 40;  // EM_SPARCV9 / EM_ARM: any value round-trips
      spec.soname = "libbe.so.7";
      spec.needed = {"libc.so.6", "libm.so.6"};
      spec.rpath = "/r1:/r2";
      spec.runpath = "$ORIGIN";
      spec.flags_1 = 0x800;
      spec.exported = {"alpha", "beta"};
      spec.imported = {"gamma"};
      spec.build_id = std::string("\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
      INFO("is64=" << is64 << " big_endian=" << big);
      std::string bytes = fixture::BuildElf(spec);
      auto parsed = Parse(util::SparseFile::Whole(bytes));
      REQUIRE(parsed);
      REQUIRE(parsed->has_value());
      const ElfInfo& info = **parsed;
      CHECK(info.is64 == is64);
      CHECK(info.big_endian == big);
      CHECK(info.machine == spec.machine);
      CHECK(info.soname == "libbe.so.7");
      CHECK(info.needed == spec.needed);
      CHECK(info.rpath == std::vector<std::string>{"/r1", "/r2"});
      CHECK(info.runpath == std::vector<std::string>{"$ORIGIN"});
      CHECK(info.nodeflib());
      CHECK(info.build_id == "0123456789abcdef");
      CHECK(Spelled(info.exported, true) == std::set<std::string>{"alpha", "beta"});
      CHECK(Spelled(info.imported, false) == std::set<std::string>{"gamma"});
      CHECK(info.problems.empty());
      if (HaveProgram("readelf")) {
        // The builder itself is checked by the oracle, so the test does not grade its own homework.
        TempDir dir;
        imgcheck::testing::WriteFile(dir / "x.so", bytes);
        Oracle o = RunReadelf(dir / "x.so", true);
        CHECK(o.soname == info.soname);
        CHECK(o.needed == info.needed);
        CHECK(o.runpath == info.runpath);
        CHECK(o.build_id == info.build_id);
        CHECK(o.nodeflib);
        CHECK(o.exported == Spelled(info.exported, true));
      }
    }
  }
}

TEST_CASE("Parse reads the symbol versions of hand-written ELF files (DT_VERSYM)") {
  // What a C++ library built with a version script looks like: a default and a hidden version
  // of one symbol, one without version, and a reference needing a version of another file.
  fixture::ElfSpec spec;
  spec.soname = "libcublasLt.so.12";
  spec.needed = {"libcudart.so.12"};
  spec.version_definitions = {"libcublasLt.so.12", "libcublasLt.so.12.1", "libcublasLt.so.12.4"};
  spec.version_needs = {{"libcudart.so.12", {"libcudart.so.12"}}};
  spec.exported = {"cublasLtCreate@@libcublasLt.so.12.4", "cublasLtCreate@libcublasLt.so.12.1",
                   "cublasLtPlain"};
  spec.imported = {"cudaMalloc@libcudart.so.12", "cudaFree"};
  std::string bytes = fixture::BuildElf(spec);
  auto parsed = Parse(util::SparseFile::Whole(bytes));
  REQUIRE(parsed);
  REQUIRE(parsed->has_value());
  const ElfInfo& info = **parsed;
  CHECK(info.problems.empty());
  CHECK(Spelled(info.exported, true) == std::set<std::string>{"cublasLtCreate@@libcublasLt.so.12.4",
                                                              "cublasLtCreate@libcublasLt.so.12.1",
                                                              "cublasLtPlain"});
  CHECK(Spelled(info.imported, false) ==
        std::set<std::string>{"cudaMalloc@libcudart.so.12", "cudaFree"});
  if (HaveProgram("readelf")) {
    // readelf reads the builder's DT_VERSYM the same way (the builder is not its own judge).
    TempDir dir;
    imgcheck::testing::WriteFile(dir / "v.so", bytes);
    Oracle o = RunReadelf(dir / "v.so", true);
    CHECK(o.exported == Spelled(info.exported, true));
    CHECK(o.imported == Spelled(info.imported, false));
  }
}

TEST_CASE("Parse says not mine for non-ELF bytes and reports corrupt headers with an offset") {
  CHECK_FALSE(Parse(util::SparseFile::Whole("#!/bin/sh\necho hi\n"))->has_value());
  CHECK_FALSE(Parse(util::SparseFile::Whole(""))->has_value());
  CHECK_FALSE(Parse(util::SparseFile::Whole("\x7f"
                                            "EL"))
                  ->has_value());

  fixture::ElfSpec spec;
  spec.soname = "libx.so";
  std::string good = fixture::BuildElf(spec);

  std::string bad_class = good;
  bad_class[4] = 9;
  auto r = Parse(util::SparseFile::Whole(bad_class));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("offset 4") != std::string::npos);

  std::string truncated = good.substr(0, 40);
  r = Parse(util::SparseFile::Whole(truncated));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("truncated") != std::string::npos);

  std::string bad_phentsize = good;
  bad_phentsize[0x36] = 3;  // e_phentsize of ELF64, little-endian
  bad_phentsize[0x37] = 0;
  r = Parse(util::SparseFile::Whole(bad_phentsize));
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("offset 54") != std::string::npos);
}

TEST_CASE("Parse reports parts that were not captured and keeps the rest") {
  fixture::ElfSpec spec;
  spec.soname = "libpart.so";
  spec.needed = {"libc.so.6"};
  spec.build_id = "abcd";
  std::string bytes = fixture::BuildElf(spec);
  // Keep the headers and the note, drop everything from .dynstr on.
  const size_t keep = 64 + 3 * 56 + 20;
  util::SparseFile partial(bytes.size());
  partial.Add(0, std::string_view(bytes).substr(0, keep));
  auto r = Parse(partial);
  REQUIRE(r);
  REQUIRE(r->has_value());
  const ElfInfo& info = **r;
  CHECK(info.build_id == "61626364");
  CHECK(info.soname.empty());
  CHECK_FALSE(info.problems.empty());
  CHECK(info.problems[0].find("not captured") != std::string::npos);
}

TEST_CASE("Parse agrees with readelf on system and CUDA libraries") {
  int checked = 0;
  for (const char* path :
       {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
        "/usr/local/cuda/lib/libcudnn.so.9", "/usr/local/cuda/lib/libcudnn_graph.so.9",
        "/usr/local/cuda/lib/libcudart.so.13"}) {
    if (!std::filesystem::exists(path)) continue;
    CheckAgainstReadelf(path);
    ++checked;
  }
  if (checked == 0) imgcheck::testing::Skip("no system libraries found to compare with readelf");
}

TEST_CASE("Parse materialises at most ParseOptions::table_bytes of the dynamic tables") {
  fixture::ElfSpec spec;
  spec.soname = "libmany.so";
  for (int i = 0; i < 1000; ++i) spec.exported.push_back("symbol_" + std::to_string(i));
  util::SparseFile file = util::SparseFile::Whole(fixture::BuildElf(spec));
  auto whole = Parse(file);
  REQUIRE(whole);
  REQUIRE(whole->has_value());
  CHECK((*whole)->exported.size() == 1000);
  CHECK_FALSE((*whole)->table_limit_reached);
  auto bounded = Parse(file, {uint64_t{16} * 1024});  // about 200 of the symbols
  REQUIRE(bounded);
  REQUIRE(bounded->has_value());
  CHECK((*bounded)->table_limit_reached);
  CHECK((*bounded)->exported.size() < 1000);
  CHECK((*bounded)->soname == "libmany.so");
}
