// The loader's search rules on hand-made ELF facts: each phase of glibc's _dl_map_object.
#include "loader/loader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "fake_image.h"
#include "loader/bind.h"
#include "loader/why.h"
#include "support.h"
#include "util/path.h"

namespace imgcheck::loader {
namespace {

// An image whose files are described by hand: each library an ElfInfo, plus symlinks.
struct FakeImage {
  image::Tree tree;
  std::map<std::string, elf::ElfInfo, std::less<>> elves;

  elf::ElfInfo& Lib(const std::string& path, const std::string& soname,
                    std::vector<std::string> needed = {}) {
    testing::AddFile(tree, path);
    elf::ElfInfo& e = elves[path];
    e.machine = 62;
    e.type = 3;
    e.soname = soname;
    e.needed = std::move(needed);
    return e;
  }
  void File(const std::string& path) { testing::AddFile(tree, path); }  // not ELF
  void Link(const std::string& path, const std::string& target) {
    testing::AddLink(tree, path, target);
  }
  ElfLookup Lookup() const {
    return [this](std::string_view p) -> const elf::ElfInfo* {
      auto it = elves.find(p);
      return it == elves.end() ? nullptr : &it->second;
    };
  }
  LoadGraph Load(const std::string& root, const Options& o) const {
    return loader::Load(tree, Lookup(), root, o);
  }
};

Options Upstream() {
  Options o;
  o.platform.hwcaps.clear();
  o.platform.interpreter.clear();
  return o;
}

// A copy: callers pass temporary graphs.
Resolution Res(const LoadGraph& g, std::string_view consumer, std::string_view name) {
  for (const Resolution* r : g.Resolutions())
    if (r->name == name && r->consumer == consumer) return *r;
  FAIL("no resolution of " << name << " by " << consumer);
  throw;
}

TEST_CASE("dynamic string tokens expand as glibc's _dl_dst_substitute does", "[loader]") {
  Platform p;
  p.platform = "haswell";
  p.lib = "lib/x86_64-linux-gnu";
  CHECK(ExpandDynamicTokens("$ORIGIN/../lib", "/opt/a", p) == "/opt/a/../lib");
  CHECK(ExpandDynamicTokens("${ORIGIN}/x:$ORIGIN", "/o", p) == "/o/x:/o");
  CHECK(ExpandDynamicTokens("/usr/$LIB/${PLATFORM}", "/o", p) ==
        "/usr/lib/x86_64-linux-gnu/haswell");
  // A token runs on into no identifier character: $ORIGINX is another (unknown) name.
  CHECK(ExpandDynamicTokens("$ORIGINX/lib", "/o", p) == "$ORIGINX/lib");
  CHECK(ExpandDynamicTokens("$ORIGIN_1", "/o", p) == "$ORIGIN_1");
  CHECK(ExpandDynamicTokens("$ORIGIN-1", "/o", p) == "/o-1");
  CHECK(ExpandDynamicTokens("${ORIGIN", "/o", p) == "${ORIGIN");
  CHECK(ExpandDynamicTokens("$HOME/$", "/o", p) == "$HOME/$");
}

TEST_CASE("search order: RPATH, LD_LIBRARY_PATH, RUNPATH, cache, default dirs", "[loader]") {
  FakeImage img;
  for (std::string d : {"/rp", "/llp", "/run", "/cached", "/usr/lib64"})
    img.Lib(d + "/libd.so.1", "libd.so.1");
  img.Lib("/app/rpath.so", "rpath.so", {"libd.so.1"}).rpath = {"/rp"};
  img.Lib("/app/runpath.so", "runpath.so", {"libd.so.1"}).runpath = {"/run"};
  img.elves["/app/runpath.so"].has_runpath = true;
  img.Lib("/app/plain.so", "plain.so", {"libd.so.1"});
  catalog::LdCacheFile cache;
  cache.entries.push_back({"libd.so.1", "/cached/libd.so.1", 0x0303, 0, 0, ""});

  Options o = Upstream();
  o.ld_library_path = "/llp";
  o.cache = &cache;
  const Resolution& a = Res(img.Load("/app/rpath.so", o), "/app/rpath.so", "libd.so.1");
  CHECK(a.reason == Reason::kRpath);
  CHECK(a.path == "/rp/libd.so.1");
  CHECK(a.rpath_owner == "/app/rpath.so");
  CHECK(a.entry == "/rp");
  CHECK(Res(img.Load("/app/runpath.so", o), "/app/runpath.so", "libd.so.1").reason ==
        Reason::kLdLibraryPath);
  o.ld_library_path.reset();
  const Resolution& c = Res(img.Load("/app/runpath.so", o), "/app/runpath.so", "libd.so.1");
  CHECK(c.reason == Reason::kRunpath);
  CHECK(c.path == "/run/libd.so.1");
  const Resolution& d = Res(img.Load("/app/plain.so", o), "/app/plain.so", "libd.so.1");
  CHECK(d.reason == Reason::kLdCache);
  CHECK(d.path == "/cached/libd.so.1");
  o.cache = nullptr;
  const Resolution& e = Res(img.Load("/app/plain.so", o), "/app/plain.so", "libd.so.1");
  CHECK(e.reason == Reason::kDefaultDir);
  CHECK(e.path == "/usr/lib64/libd.so.1");
  CHECK(e.tried.front().path == "/lib64/libd.so.1");
  CHECK(e.tried.front().outcome == Outcome::kMissing);
}

TEST_CASE("resolved paths are shared by the link maps of one tree, never another's", "[loader]") {
  FakeImage a, b;
  a.Lib("/app/main.so", "main.so", {"libd.so.1"});
  a.Link("/usr/lib64/libd.so.1", "libd-a.so");
  a.Lib("/usr/lib64/libd-a.so", "libd.so.1");
  b.Lib("/app/main.so", "main.so", {"libd.so.1"});
  b.Link("/usr/lib64/libd.so.1", "libd-b.so");
  b.Lib("/usr/lib64/libd-b.so", "libd.so.1");

  Options o = Upstream();
  o.resolved = std::make_shared<ResolvedPaths>(a.tree);
  // Two link maps of tree a through one memo: the second answers from it, alike.
  for (int i = 0; i < 2; ++i)
    CHECK(Res(a.Load("/app/main.so", o), "/app/main.so", "libd.so.1").real_path ==
          "/usr/lib64/libd-a.so");
  REQUIRE(o.resolved->Resolve("/usr/lib64/libd.so.1"));
  CHECK(o.resolved->Resolve("/usr/lib64/libd.so.1")->path == "/usr/lib64/libd-a.so");
  // Tree b with tree a's memo: b's own files, not what a's memo remembers of the same paths.
  const Resolution& r = Res(b.Load("/app/main.so", o), "/app/main.so", "libd.so.1");
  CHECK(r.real_path == "/usr/lib64/libd-b.so");
  CHECK(r.tried.front().path == "/lib64/libd.so.1");
}

TEST_CASE("RPATH is inherited from loaders unless the consumer has RUNPATH", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libmid.so", "libmid2.so"}).rpath = {"/chain"};
  img.Lib("/chain/libmid.so", "libmid.so", {"libleaf.so"});
  elf::ElfInfo& mid2 = img.Lib("/chain/libmid2.so", "libmid2.so", {"libleaf2.so"});
  mid2.has_runpath = true;
  mid2.runpath = {"/nowhere"};
  img.Lib("/chain/libleaf.so", "libleaf.so");
  img.Lib("/chain/libleaf2.so", "libleaf2.so");
  LoadGraph g = img.Load("/app/main.so", Upstream());
  const Resolution& leaf = Res(g, "/chain/libmid.so", "libleaf.so");
  CHECK(leaf.reason == Reason::kRpath);
  CHECK(leaf.rpath_owner == "/app/main.so");
  const Resolution& leaf2 = Res(g, "/chain/libmid2.so", "libleaf2.so");
  CHECK(leaf2.status == Status::kNotFound);
  std::vector<std::string> tried;
  for (const Attempt& t : leaf2.tried) tried.push_back(t.path);
  CHECK(tried == std::vector<std::string>{"/nowhere/libleaf2.so", "/lib64/libleaf2.so",
                                          "/usr/lib64/libleaf2.so"});
  // Breadth-first load order.
  REQUIRE(g.objects.size() == 4);  // libleaf2 is not found
  CHECK(g.objects[1].real_path == "/chain/libmid.so");
  CHECK(g.objects[2].real_path == "/chain/libmid2.so");
  CHECK(g.objects[3].real_path == "/chain/libleaf.so");
  CHECK(g.objects[3].loader == 1);
}

TEST_CASE("the same soname resolves differently for different consumers", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"liba.so", "libb.so"});
  img.Lib("/usr/lib64/liba.so", "liba.so", {"libcudnn.so.8"}).runpath = {"/a"};
  img.elves["/usr/lib64/liba.so"].has_runpath = true;
  img.Lib("/usr/lib64/libb.so", "libb.so", {"libcudnn.so.8"}).runpath = {"/b"};
  img.elves["/usr/lib64/libb.so"].has_runpath = true;
  img.Lib("/a/libcudnn.so.8", "libcudnn.so.8");
  img.Lib("/b/libcudnn.so.8", "libcudnn.so.8");
  LoadGraph g = img.Load("/app/main.so", Upstream());
  CHECK(Res(g, "/usr/lib64/liba.so", "libcudnn.so.8").path == "/a/libcudnn.so.8");
  // ld.so: the soname is already in the link map, so libb gets liba's copy.
  const Resolution& b = Res(g, "/usr/lib64/libb.so", "libcudnn.so.8");
  CHECK(b.reason == Reason::kAlreadyLoaded);
  CHECK(b.real_path == "/a/libcudnn.so.8");
  // Loaded on its own, libb finds its own copy.
  LoadGraph alone = img.Load("/usr/lib64/libb.so", Upstream());
  CHECK(Res(alone, "/usr/lib64/libb.so", "libcudnn.so.8").path == "/b/libcudnn.so.8");
}

TEST_CASE("$ORIGIN, $LIB, $PLATFORM and glibc-hwcaps", "[loader]") {
  FakeImage img;
  elf::ElfInfo& app = img.Lib("/opt/x/bin/app.so", "app.so", {"libo.so", "libl.so", "libp.so"});
  app.has_runpath = true;
  app.runpath = {"$ORIGIN/../lib", "/opt/${LIB}", "/opt/$PLATFORM/", "$ORIGINAL"};
  img.Lib("/opt/x/lib/libo.so", "libo.so");
  img.Lib("/opt/lib64/libl.so", "libl.so");
  img.Lib("/opt/x86_64/glibc-hwcaps/x86-64-v2/libp.so", "libp.so");
  img.Lib("/opt/x86_64/libp.so", "libp.so");
  Options o = Upstream();
  o.platform.hwcaps = {"x86-64-v3", "x86-64-v2"};
  LoadGraph g = img.Load("/opt/x/bin/app.so", o);
  CHECK(Res(g, "/opt/x/bin/app.so", "libo.so").path == "/opt/x/bin/../lib/libo.so");
  CHECK(Res(g, "/opt/x/bin/app.so", "libo.so").real_path == "/opt/x/lib/libo.so");
  CHECK(Res(g, "/opt/x/bin/app.so", "libl.so").entry == "/opt/${LIB}");
  const Resolution& p = Res(g, "/opt/x/bin/app.so", "libp.so");
  CHECK(p.path == "/opt/x86_64/glibc-hwcaps/x86-64-v2/libp.so");
  // libp is searched for in x86-64-v3 first, under every earlier directory too.
  CHECK(std::any_of(p.tried.begin(), p.tried.end(), [](const Attempt& a) {
    return a.path == "/opt/x86_64/glibc-hwcaps/x86-64-v3/libp.so";
  }));
  o.platform.hwcaps.clear();
  CHECK(Res(img.Load("/opt/x/bin/app.so", o), "/opt/x/bin/app.so", "libp.so").path ==
        "/opt/x86_64/libp.so");
}

TEST_CASE("$ORIGIN of a library opened through a symlink is the symlink's directory", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libsym.so"}).rpath = {"/usr/local/lib"};
  img.Link("/usr/local/lib/libsym.so", "/opt/real/libsym.so");
  elf::ElfInfo& sym = img.Lib("/opt/real/libsym.so", "libsym.so", {"libdep.so"});
  sym.has_runpath = true;
  sym.runpath = {"$ORIGIN/dep"};
  img.Lib("/usr/local/lib/dep/libdep.so", "libdep.so");
  img.Lib("/opt/real/dep/libdep.so", "libdep.so");
  LoadGraph g = img.Load("/app/main.so", Upstream());
  const Resolution& s = Res(g, "/app/main.so", "libsym.so");
  CHECK(s.path == "/usr/local/lib/libsym.so");
  CHECK(s.real_path == "/opt/real/libsym.so");
  CHECK(Res(g, "/opt/real/libsym.so", "libdep.so").path == "/usr/local/lib/dep/libdep.so");
}

TEST_CASE("NODEFLIB skips default dirs and system-dir cache entries", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libsys.so", "libconf.so"}).flags_1 = 0x800;
  img.Lib("/usr/lib64/libsys.so", "libsys.so");
  img.Lib("/opt/conf/libconf.so", "libconf.so");
  catalog::LdCacheFile cache;
  cache.entries.push_back({"libsys.so", "/usr/lib64/libsys.so", 0x0303, 0, 0, ""});
  cache.entries.push_back({"libconf.so", "/opt/conf/libconf.so", 0x0303, 0, 0, ""});
  Options o = Upstream();
  o.cache = &cache;
  LoadGraph g = img.Load("/app/main.so", o);
  const Resolution& sys = Res(g, "/app/main.so", "libsys.so");
  CHECK(sys.status == Status::kNotFound);
  REQUIRE(sys.tried.size() == 1);
  CHECK(sys.tried[0].outcome == Outcome::kRejected);
  CHECK(Res(g, "/app/main.so", "libconf.so").reason == Reason::kLdCache);
}

TEST_CASE("wrong machine or class is skipped, a non-ELF candidate stops the load", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libd.so"}).rpath = {"/arm", "/x32", "/good"};
  img.Lib("/arm/libd.so", "libd.so").machine = 183;
  img.Lib("/x32/libd.so", "libd.so").is64 = false;
  img.Lib("/good/libd.so", "libd.so");
  LoadGraph g = img.Load("/app/main.so", Upstream());
  const Resolution& d = Res(g, "/app/main.so", "libd.so");
  CHECK(d.path == "/good/libd.so");
  REQUIRE(d.tried.size() == 3);
  CHECK(d.tried[0].outcome == Outcome::kWrongMachine);
  CHECK(d.tried[1].outcome == Outcome::kWrongClass);
  img.File("/x32/libd.so");  // now a text file
  img.elves.erase("/x32/libd.so");
  const Resolution& e = Res(img.Load("/app/main.so", Upstream()), "/app/main.so", "libd.so");
  CHECK(e.status == Status::kError);
  CHECK(e.error.find("/x32/libd.so") != std::string::npos);
}

TEST_CASE("LD_LIBRARY_PATH: a semicolon separates, empty elements are the working directory",
          "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libw.so", "libs.so"});
  img.Lib("/work/libw.so", "libw.so");
  img.Lib("/semi/libs.so", "libs.so");
  Options o = Upstream();
  o.working_dir = "/work";
  o.ld_library_path = "/nope::/x;/semi";
  LoadGraph g = img.Load("/app/main.so", o);
  const Resolution& w = Res(g, "/app/main.so", "libw.so");
  CHECK(w.path == "/work/libw.so");
  CHECK(w.entry.empty());
  CHECK(Res(g, "/app/main.so", "libs.so").entry == "/semi");
  o.ld_library_path = "";  // set but empty: no list at all
  CHECK(Res(img.Load("/app/main.so", o), "/app/main.so", "libw.so").status == Status::kNotFound);
}

TEST_CASE("dlopen by name: rules from data, caller's RUNPATH, already-loaded reuse", "[loader]") {
  FakeImage img;
  img.Lib("/app/main.so", "main.so", {"libcudnn.so.9"}).rpath = {"/lib/cudnn", "/rp"};
  elf::ElfInfo& cudnn = img.Lib("/lib/cudnn/libcudnn.so.9", "libcudnn.so.9");
  cudnn.has_runpath = true;
  cudnn.runpath = {"$ORIGIN"};
  img.Lib("/lib/cudnn/libcudnn_ops.so.9", "libcudnn_ops.so.9", {"libcudnn.so.9"});
  img.Lib("/rp/libcudnn_graph.so.9", "libcudnn_graph.so.9");
  Options o = Upstream();
  o.dlopen = {{"libcudnn.so.*", {"libcudnn_ops.so.9", "libcudnn_graph.so.9", "libcuda.so.1"}, "t"}};
  LoadGraph g = img.Load("/app/main.so", o);
  const Resolution& ops = Res(g, "/lib/cudnn/libcudnn.so.9", "libcudnn_ops.so.9");
  CHECK(ops.kind == Kind::kDlopen);
  CHECK(ops.reason == Reason::kRunpath);
  CHECK(ops.path == "/lib/cudnn/libcudnn_ops.so.9");
  // libcudnn has RUNPATH: the main program's RPATH is not searched for its dlopens.
  CHECK(Res(g, "/lib/cudnn/libcudnn.so.9", "libcudnn_graph.so.9").status == Status::kNotFound);
  CHECK(Res(g, "/lib/cudnn/libcudnn.so.9", "libcuda.so.1").status == Status::kNotFound);
  // The dlopened library's own NEEDED finds libcudnn.so.9 already loaded.
  CHECK(Res(g, "/lib/cudnn/libcudnn_ops.so.9", "libcudnn.so.9").reason == Reason::kAlreadyLoaded);
  int at = g.Find("/lib/cudnn/libcudnn_ops.so.9");
  REQUIRE(at > 0);
  CHECK(g.objects[static_cast<size_t>(at)].loaded_by == Kind::kDlopen);
  CHECK(g.objects[static_cast<size_t>(at)].loader == g.Find("/lib/cudnn/libcudnn.so.9"));
}

TEST_CASE("a dlopen of several names: the first that loads wins, else one unresolved", "[loader]") {
  // cuDNN 9's shim opens libcudnn_graph.so.<its release>, then .<major.minor>, then .<major>.
  const std::string shim = "/lib/cudnn/libcudnn.so.9";
  auto image = [&](const std::vector<std::string>& graphs) {
    FakeImage img;
    img.Lib("/app/main.so", "main.so", {"libcudnn.so.9"}).rpath = {"/lib/cudnn"};
    img.Lib(shim, "libcudnn.so.9");
    for (const std::string& g : graphs) img.Lib(g, "libcudnn_graph.so.9");
    return img;
  };
  Options o = Upstream();
  o.ld_library_path = "/llp";
  o.dlopen = {{"libcudnn.so.9*",
               {loader::DlopenCall({"libcudnn_graph.so.{version:3}",
                                    "libcudnn_graph.so.{version:2}", "libcudnn_graph.so.9"})},
               "t"}};
  o.version_of = [&](std::string_view p) { return p == shim ? "9.1.0.70" : ""; };
  auto dlopens = [&](const LoadGraph& g) {
    std::vector<Resolution> out;
    for (const Resolution* r : g.Resolutions())
      if (r->consumer == shim && r->kind == Kind::kDlopen) out.push_back(*r);
    return out;
  };

  SECTION("only the major's name is there: it loads, the misses are not findings") {
    auto rs = dlopens(image({"/lib/cudnn/libcudnn_graph.so.9"}).Load("/app/main.so", o));
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].name == "libcudnn_graph.so.9");
    CHECK(rs[0].found());
  }
  SECTION("a file named for the shim's exact release wins over the major's") {
    auto rs = dlopens(image({"/lib/cudnn/libcudnn_graph.so.9", "/llp/libcudnn_graph.so.9.1.0"})
                          .Load("/app/main.so", o));
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].name == "libcudnn_graph.so.9.1.0");
    CHECK(rs[0].real_path == "/llp/libcudnn_graph.so.9.1.0");
  }
  SECTION("none loads: one unresolved dlopen, the last name, with every attempt") {
    auto rs = dlopens(image({}).Load("/app/main.so", o));
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].name == "libcudnn_graph.so.9");
    CHECK(rs[0].status == Status::kNotFound);
    std::set<std::string> tried;
    for (const Attempt& a : rs[0].tried) tried.insert(std::string(util::BaseName(a.path)));
    CHECK(tried == std::set<std::string>{"libcudnn_graph.so.9.1.0", "libcudnn_graph.so.9.1",
                                         "libcudnn_graph.so.9"});
  }
  SECTION("the shim's release unknown: only the names without it are tried") {
    o.version_of = nullptr;
    auto rs = dlopens(image({"/llp/libcudnn_graph.so.9.1.0"}).Load("/app/main.so", o));
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].status == Status::kNotFound);
    for (const Attempt& a : rs[0].tried) CHECK(util::BaseName(a.path) == "libcudnn_graph.so.9");
  }
}

TEST_CASE("the link map is bounded and symlink loops are just missing", "[loader]") {
  FakeImage img;
  std::vector<std::string> needed;
  for (int i = 0; i < 50; ++i) {
    std::string n = "lib" + std::to_string(i) + ".so";
    needed.push_back(n);
    img.Lib("/usr/lib64/" + n, n);
  }
  needed.push_back("libloop.so");
  img.Link("/usr/lib64/libloop.so", "libloop.so");
  img.Lib("/app/main.so", "main.so", needed);
  Options o = Upstream();
  LoadGraph g = img.Load("/app/main.so", o);
  CHECK(g.objects.size() == 51);
  CHECK(Res(g, "/app/main.so", "libloop.so").status == Status::kNotFound);
  CHECK(img.Load("/nothing", o).objects.empty());
  // Past the bound the run stops (a partial link map would hide what it did not load).
  o.limits.loader_objects = 10;
  CHECK_THROWS_WITH(img.Load("/app/main.so", o),
                    "the link map of /app/main.so exceeds imgcheck's limit of 10 (raise it with "
                    "--max-loader-objects)");
}

TEST_CASE("platform detection: Debian multiarch vs upstream layout", "[loader]") {
  FakeImage deb;
  deb.Link("/lib", "usr/lib");
  deb.Lib("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6");
  Platform p = DetectPlatform(deb.tree, 62, true);
  CHECK(p.lib == "lib/x86_64-linux-gnu");
  CHECK(p.default_dirs.front() == "/lib/x86_64-linux-gnu");
  CHECK(p.interpreter == "/lib64/ld-linux-x86-64.so.2");
  CHECK(p.hwcaps == std::vector<std::string>{"x86-64-v2"});
  deb.Lib("/usr/lib/x86_64-linux-gnu/libc-2.31.so", "libc.so.6");  // Ubuntu 20.04's glibc
  CHECK(DetectPlatform(deb.tree, 62, true).hwcaps.empty());
  // A version in a file name too long for any integer is not a version (it once overflowed: a
  // minor of 2^32 + 32 wrapped around to 32).
  FakeImage huge;
  huge.Lib("/lib64/libc.so.6", "libc.so.6");
  huge.Lib("/lib64/libc-2.4294967328.so", "libc.so.6");
  huge.Lib("/lib64/libc-2." + std::string(400, '9') + ".so", "libc.so.6");
  CHECK(DetectPlatform(huge.tree, 62, true).hwcaps == std::vector<std::string>{"x86-64-v2"});
  FakeImage rh;
  rh.Lib("/usr/lib64/libc.so.6", "libc.so.6");
  Platform q = DetectPlatform(rh.tree, 183, true);
  CHECK(q.lib == "lib64");
  CHECK(q.platform == "aarch64");
  CHECK(q.default_dirs == std::vector<std::string>{"/lib64", "/usr/lib64"});
  CHECK(q.hwcaps.empty());
}

// The machine comes from the image's own libc (or interpreter), not from a guess: a 32-bit or
// aarch64 image is simulated as such, and a machine the loader does not model is an error.
TEST_CASE("image platform: from the libc's ELF header, else the configuration", "[loader]") {
  auto platform = [](const FakeImage& img, std::string_view arch) {
    catalog::Catalog cat;
    cat.mutable_elves() = img.elves;
    return ImagePlatform(img.tree, cat, arch);
  };
  FakeImage i386;
  i386.Lib("/lib/i386-linux-gnu/libc.so.6", "libc.so.6").machine = 3;
  i386.elves["/lib/i386-linux-gnu/libc.so.6"].is64 = false;
  auto p = platform(i386, "amd64");  // the configuration may be wrong; the libc is not
  REQUIRE(p);
  CHECK(p->machine == 3);
  CHECK_FALSE(p->is64);
  CHECK(p->platform == "i686");
  CHECK(p->default_dirs.front() == "/lib/i386-linux-gnu");
  CHECK(p->interpreter == "/lib/ld-linux.so.2");
  CHECK(p->hwcaps.empty());

  FakeImage arm;  // glibc < 2.34: libc.so.6 links to libc-2.31.so
  arm.Lib("/lib/aarch64-linux-gnu/libc-2.31.so", "libc.so.6").machine = 183;
  arm.Link("/lib/aarch64-linux-gnu/libc.so.6", "libc-2.31.so");
  p = platform(arm, "");
  REQUIRE(p);
  CHECK(p->machine == 183);
  CHECK(p->platform == "aarch64");
  CHECK(p->lib == "lib/aarch64-linux-gnu");

  FakeImage musl;  // no libc.so.6: the interpreter an executable names
  musl.Lib("/lib/ld-musl-aarch64.so.1", "libc.musl-aarch64.so.1").machine = 183;
  musl.Lib("/bin/busybox", "").interpreter = "/lib/ld-musl-aarch64.so.1";
  p = platform(musl, "amd64");
  REQUIRE(p);
  CHECK(p->machine == 183);

  FakeImage ppc;  // EM_PPC64, little-endian: not modelled
  ppc.Lib("/lib/powerpc64le-linux-gnu/libc.so.6", "libc.so.6").machine = 21;
  ppc.Lib("/usr/lib/libcudnn.so.9", "libcudnn.so.9").machine = 21;
  auto bad = platform(ppc, "ppc64le");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "/lib/powerpc64le-linux-gnu/libc.so.6 is for ELF machine 21 (64-bit), which the loader "
        "does not model: library resolution skipped");

  FakeImage empty;  // nothing to read: the configuration decides
  p = platform(empty, "arm64");
  REQUIRE(p);
  CHECK(p->machine == 183);
  p = platform(empty, "");
  REQUIRE(p);
  CHECK(p->machine == 62);
  CHECK(p->hwcaps == std::vector<std::string>{"x86-64-v2"});
  bad = platform(empty, "s390x");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "architecture s390x is not one the loader models: library resolution skipped");
}

TEST_CASE("binding: of thousands of references, exactly those no object defines fail",
          "[loader][bind]") {
  // Objects export many symbols: each reference is looked up in every object of its scope,
  // where most lookups miss (the exports' filter answers them) and one finds it.
  FakeImage img;
  elf::ElfInfo& main = img.Lib("/app/main", "", {"liba.so", "libb.so"});
  main.interpreter = "/lib64/ld-linux-x86-64.so.2";
  elf::ElfInfo& a = img.Lib("/lib64/liba.so", "liba.so");
  elf::ElfInfo& b = img.Lib("/lib64/libb.so", "libb.so");
  std::set<std::string> absent;
  for (int i = 0; i < 6000; ++i) {
    std::string name = "sym_" + std::to_string(i);
    if (i % 3 == 0) a.exported.push_back({name, "", false, false, false, 0});
    if (i % 3 == 1) b.exported.push_back({name, "V1", false, false, false, 0});
    if (i % 3 == 2 && i % 7 != 0) a.exported.push_back({name, "", false, false, false, 0});
    if (i % 3 == 2 && i % 7 == 0) absent.insert(name);
    main.imported.push_back({name, "", false, false, false, 0});
  }
  main.imported.push_back({"sym_1", "V1", false, false, false, 0});  // versioned, defined
  Options o = Upstream();
  LoadGraph g = img.Load("/app/main", o);
  REQUIRE(g.objects.size() == 3);
  SymbolIndex index(img.Lookup());
  std::set<std::string> failed;
  for (const Unbound& u : Bind(g, BindScope{}, index)) failed.insert(u.name);
  CHECK(failed == absent);
  CHECK(absent.size() == 286);
}

TEST_CASE("binding: what an RTLD_LOCAL import loaded is found by name, bound only as a dependency",
          "[loader][bind]") {
  // torch/_C (imported RTLD_LOCAL) brings libtorch_python.so and libc10.so; an extension that
  // NEEDS libc10.so alone finds it already loaded and binds to it, but libtorch_python's
  // symbols are not in its scope unless it NEEDS that library too (or it was RTLD_GLOBAL).
  FakeImage img;
  img.Lib("/site/torch/_C.so", "", {"libtorch_python.so"}).runpath = {"$ORIGIN/lib"};
  img.elves["/site/torch/_C.so"].has_runpath = true;
  img.Lib("/site/torch/lib/libtorch_python.so", "libtorch_python.so", {"libc10.so"})
      .exported.push_back({"python_sym", "", false, false, false, 0});
  img.elves["/site/torch/lib/libtorch_python.so"].runpath = {"$ORIGIN"};
  img.elves["/site/torch/lib/libtorch_python.so"].has_runpath = true;
  img.Lib("/site/torch/lib/libc10.so", "libc10.so")
      .exported.push_back({"c10_sym", "", false, false, false, 0});
  elf::ElfInfo& ext = img.Lib("/site/vision/_C.so", "", {"libc10.so"});
  ext.imported.push_back({"c10_sym", "", false, false, false, 0});
  ext.imported.push_back({"python_sym", "", false, false, false, 0});
  ext.imported.push_back({"nowhere_sym", "", false, true, false, 0});  // weak: never missing
  auto unbound = [&](bool global) {
    Options o = Upstream();
    o.preload = {{"/site/torch/_C.so", "imported by torch", global}};
    LoadGraph g = img.Load("/site/vision/_C.so", o);
    const Resolution& c10 = Res(g, "/site/vision/_C.so", "libc10.so");
    CHECK(c10.reason == Reason::kAlreadyLoaded);
    CHECK(c10.real_path == "/site/torch/lib/libc10.so");
    SymbolIndex index(img.Lookup());
    std::set<std::string> failed;
    for (const Unbound& u : Bind(g, BindScope{}, index)) failed.insert(u.name);
    return failed;
  };
  CHECK(unbound(false) == std::set<std::string>{"python_sym"});
  CHECK(unbound(true).empty());
}

TEST_CASE("why: every consumer's resolution of a name or path, libtree style", "[loader][why]") {
  FakeImage img;
  img.Lib("/app/a.so", "a.so", {"libcudnn.so.9"}).rpath = {"$ORIGIN/../nv"};
  img.tree.mutable_nodes()["/app/a.so"].layer = 2;
  elf::ElfInfo& b = img.Lib("/app/b.so", "b.so", {"libcudnn.so.9"});
  b.has_runpath = true;
  b.runpath = {"/none"};
  img.Lib("/nv/libcudnn.so.9.1.0", "libcudnn.so.9");
  img.tree.mutable_nodes()["/nv/libcudnn.so.9.1.0"].layer = 3;
  img.Link("/nv/libcudnn.so.9", "libcudnn.so.9.1.0");
  Options o = Upstream();
  LoadGraph ga = img.Load("/app/a.so", o), gb = img.Load("/app/b.so", o);
  LoadGraph ga2 = img.Load("/app/a.so", o);
  std::vector<Root> roots = {
      {"/app/a.so", "framework x", &ga}, {"/app/b.so", "", &gb}, {"/app/a.so", "again", &ga2}};
  auto entries = FindWhy(img.tree, roots, "libcudnn.so.9");
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].roots.size() == 2);  // the same resolution in two link maps, listed once
  // What `imgcheck why` renders (report/why.cpp): the hit with its reason and RPATH owner, and
  // the miss with every candidate tried.
  const Resolution& hit = entries[0].resolution;
  CHECK(hit.consumer == "/app/a.so");
  CHECK(hit.reason == Reason::kRpath);
  CHECK(hit.rpath_owner == "/app/a.so");
  CHECK(hit.entry == "$ORIGIN/../nv");
  CHECK(hit.path == "/app/../nv/libcudnn.so.9");
  CHECK(hit.real_path == "/nv/libcudnn.so.9.1.0");
  auto labels = [](const WhyEntry& e) {
    std::vector<std::string> out;
    for (const Root& r : e.roots) out.push_back(r.Label());
    return out;
  };
  CHECK(labels(entries[0]) ==
        std::vector<std::string>{"/app/a.so (framework x)", "/app/a.so (again)"});
  const Resolution& miss = entries[1].resolution;
  CHECK(miss.status == Status::kNotFound);
  CHECK(std::any_of(miss.tried.begin(), miss.tried.end(), [](const Attempt& a) {
    return a.phase == Reason::kRunpath && a.entry == "/none" && a.path == "/none/libcudnn.so.9" &&
           a.outcome == Outcome::kMissing;
  }));
  CHECK(labels(entries[1]) == std::vector<std::string>{"/app/b.so"});
  // By path: the link and the real file name the same resolution.
  CHECK(FindWhy(img.tree, roots, "/nv/libcudnn.so.9.1.0").size() == 1);
  CHECK(FindWhy(img.tree, roots, "/nv/libcudnn.so.9").size() == 1);
  CHECK(FindWhy(img.tree, roots, "libnone.so").empty());
}

}  // namespace
}  // namespace imgcheck::loader
