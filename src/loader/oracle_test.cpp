// The real glibc loader is the oracle: small root file systems built from generated shared
// objects, resolved by imgcheck and by this machine's own ld.so under chroot.
#include <sys/utsname.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <sstream>

#include "catalog/ld_so.h"
#include "loader/loader.h"
#include "loader/loader_test_util.h"
#include "support.h"

namespace imgcheck::loader {
namespace {

namespace fs = std::filesystem;
using imgcheck::testing::Run;

constexpr const char* kHostLibc = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr const char* kHostLdso = "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
// The oracle runs with an otherwise empty environment.
const std::string kPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin ";

// Why the oracle cannot run here, or "" when it can.
std::string OracleMissing() {
  utsname u{};
  if (uname(&u) != 0 || std::string(u.machine) != "x86_64") return "not an x86-64 host";
  if (geteuid() != 0) return "chroot needs root";
  if (!fs::exists(kHostLibc) || !fs::exists(kHostLdso)) return "no Debian-layout glibc here";
  if (!imgcheck::testing::HaveProgram("cc") || !imgcheck::testing::HaveProgram("ldconfig"))
    return "no cc or ldconfig";
  return "";
}

// A root file system with this machine's glibc, where fixtures are compiled.
class Root {
 public:
  Root() {
    fs::create_directories(root() / "lib/x86_64-linux-gnu");
    fs::create_directories(root() / "lib64");
    fs::copy_file(kHostLibc, root() / "lib/x86_64-linux-gnu/libc.so.6");
    fs::copy_file(kHostLdso, root() / "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
    fs::create_symlink("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                       root() / "lib64/ld-linux-x86-64.so.2");
    imgcheck::testing::WriteFile(root() / "etc/ld.so.conf", "");
  }
  fs::path root() const { return dir_.path() / "root"; }
  fs::path operator/(const std::string& rel) const { return root() / rel.substr(1); }

  /// Compiles a shared object at image path `path`, linked (not as-needed) against the image
  /// paths `needed`.
  void Lib(const std::string& path, const std::string& soname,
           const std::vector<std::string>& needed = {}, const std::string& rpath = "",
           const std::string& runpath = "", std::vector<std::string> flags = {},
           const std::string& source = "") {
    imgcheck::testing::SharedObject so;
    so.soname = soname;
    so.rpath = rpath;
    so.runpath = runpath;
    if (!source.empty()) so.source = source;
    so.extra_flags = std::move(flags);
    so.extra_flags.push_back("-Wl,--no-as-needed");
    for (const std::string& n : needed) so.extra_flags.push_back("'" + (*this / n).string() + "'");
    imgcheck::testing::Compile(so, *this / path);
    fs::remove(fs::path((*this / path).string() + ".map"));
  }
  void Ldconfig() const {
    auto r = Run("ldconfig -r '" + root().string() + "' 2>&1");
    INFO(r.output);
    REQUIRE(r.status == 0);
  }

 private:
  imgcheck::testing::TempDir dir_;
};

struct Oracle {
  std::map<std::string, std::string> found;  // name -> path, or "not found"
  std::string error_path;                    // the file ld.so stopped at, if it did
  std::string output;
};

// `ld.so --list PROGRAM` inside the root: "\tNAME => PATH (0x...)" / "\tNAME => not found".
Oracle RunOracle(const Root& root, const std::string& program, const std::string& llp) {
  std::string env = kPath + (llp.empty() ? "" : "LD_LIBRARY_PATH='" + llp + "' ");
  auto r = Run("env -i " + env + "chroot '" + root.root().string() +
               "' /lib64/ld-linux-x86-64.so.2 --list " + program);
  Oracle o;
  o.output = r.output;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    size_t arrow = line.find(" => ");
    if (size_t e = line.find("error while loading shared libraries: "); e != std::string::npos) {
      // A missing library stops --list of a shared object: "NAME: cannot open shared object
      // file"; anything else names the file ld.so rejected.
      std::string rest = line.substr(e + 38);
      std::string what = rest.substr(0, rest.find(": "));
      if (r.output.find("cannot open shared object") != std::string::npos)
        o.found[what] = "not found";
      else
        o.error_path = what;
      continue;
    }
    if (arrow == std::string::npos) {
      // "NAME (0x...)": opened by a relative path equal to its name (the working directory,
      // which chroot makes "/").
      std::string name = line.substr(line.find_first_not_of(" \t"));
      name = name.substr(0, name.find(" (0x"));
      if (name.find('/') == std::string::npos && name != "linux-vdso.so.1")
        o.found[name] = "/" + name;
      continue;
    }
    std::string name = line.substr(line.find_first_not_of(" \t"));
    name = name.substr(0, name.find(" => "));
    std::string path = line.substr(arrow + 4);
    if (path != "not found") path = path.substr(0, path.rfind(" (0x"));
    o.found[name] = path;
  }
  return o;
}

// The glibc-hwcaps subdirectories this machine's ld.so searches, in priority order.
std::vector<std::string> HostHwcaps(const Root& root) {
  auto r = Run("chroot '" + root.root().string() + "' /lib64/ld-linux-x86-64.so.2 --help");
  std::vector<std::string> out;
  std::istringstream in(r.output);
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("Subdirectories of glibc-hwcaps") != std::string::npos) {
      in_section = true;
    } else if (in_section && line.rfind("  ", 0) == 0) {
      if (line.find("supported, searched") != std::string::npos)
        out.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_section) {
      in_section = false;
    }
  }
  return out;
}

// This machine's $PLATFORM as its ld.so expands it: glibc replaces the kernel's AT_PLATFORM
// ("x86_64") with "haswell" or "xeon_phi" on Intel CPUs of those features
// (sysdeps/x86/cpu-features.c), so the oracle's answer depends on the CPU the test runs on.
std::string HostPlatform(const Root& root) {
  auto r =
      Run("chroot '" + root.root().string() + "' /lib64/ld-linux-x86-64.so.2 --list-diagnostics");
  std::istringstream in(r.output);
  const std::string key = "dl_platform=\"";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0 && line.size() > key.size() + 1 && line.back() == '"')
      return line.substr(key.size(), line.size() - key.size() - 1);
  return "";
}

struct Simulated {
  image::Tree tree;
  std::unique_ptr<testing::ElfIndex> index;
  std::optional<catalog::LdCacheFile> cache;
  Options options;
};

Simulated Simulate(const Root& root) {
  Simulated s;
  s.tree = testing::TreeFromDir(root.root());
  s.index = std::make_unique<testing::ElfIndex>(s.tree);
  s.options.platform = DetectPlatform(s.tree, 62, true);
  s.options.platform.hwcaps = HostHwcaps(root);
  if (std::string p = HostPlatform(root); !p.empty()) s.options.platform.platform = p;
  if (fs::exists(root / "/etc/ld.so.cache")) {
    auto parsed = catalog::ParseLdCache(imgcheck::testing::ReadFile(root / "/etc/ld.so.cache"));
    REQUIRE(parsed.has_value());
    s.cache = std::move(parsed).value();
    s.options.cache = &*s.cache;
  }
  return s;
}

// imgcheck's link map of `program` against ld.so's, name by name.
void Compare(const Root& root, Simulated& sim, const std::string& program,
             const std::string& llp = "") {
  Oracle oracle = RunOracle(root, program, llp);
  Options o = sim.options;
  if (!llp.empty()) o.ld_library_path = llp;
  LoadGraph g = Load(sim.tree, sim.index->Lookup(), program, o);
  INFO("program " << program << " LD_LIBRARY_PATH=" << llp << "\nld.so says:\n" << oracle.output);
  REQUIRE(!g.objects.empty());
  if (!oracle.error_path.empty()) {
    bool stopped = false;
    for (const Resolution* r : g.Resolutions())
      stopped |= r->status == Status::kError && r->tried.back().path == oracle.error_path;
    CHECK(stopped);
    return;
  }
  REQUIRE(!oracle.found.empty());
  std::map<std::string, std::string> mine;
  for (const Resolution* r : g.Resolutions()) {
    if (r->name.rfind("ld-linux", 0) == 0) continue;  // the interpreter: no "=>" line
    if (!r->found())
      mine.emplace(r->name, "not found");
    else if (r->reason != Reason::kAlreadyLoaded)
      mine.emplace(r->name, r->path);
  }
  if (oracle.found.size() == 1 && oracle.found.begin()->second == "not found") {
    // ld.so stopped at the first missing library: that one must be missing here too.
    CHECK(mine[oracle.found.begin()->first] == "not found");
    return;
  }
  CHECK(mine == oracle.found);
}

// "REASON PATH" of `name` as `program` needs it, or "not found".
std::string PathOf(const Simulated& sim, const std::string& program, const std::string& name,
                   const std::string& llp = "") {
  Options o = sim.options;
  if (!llp.empty()) o.ld_library_path = llp;
  LoadGraph g = Load(sim.tree, sim.index->Lookup(), program, o);
  for (const Resolution* r : g.Resolutions())
    if (r->name == name && r->consumer == program)
      return r->found() ? std::string(ReasonName(r->reason)) + " " + r->path : "not found";
  return "no resolution";
}

TEST_CASE("ld.so agrees: RPATH vs RUNPATH vs LD_LIBRARY_PATH vs cache vs defaults",
          "[loader][oracle]") {
  if (std::string why = OracleMissing(); !why.empty()) {
    return imgcheck::testing::Skip("ld.so oracle: " + why);
  }
  Root r;
  for (std::string d : {"/opt/rp", "/opt/llp", "/opt/run", "/opt/conf"})
    r.Lib(d + "/libd.so.1", "libd.so.1");
  r.Lib("/usr/lib/x86_64-linux-gnu/libdef.so.1", "libdef.so.1");
  r.Lib("/opt/conf/libstale.so.1", "libstale.so.1");
  r.Lib("/usr/lib/libstale.so.1", "libstale.so.1");
  imgcheck::testing::WriteFile(r / "/etc/ld.so.conf", "/opt/conf\n");
  r.Lib("/apps/rpath.so", "rpath.so", {"/opt/rp/libd.so.1"}, "/opt/rp");
  r.Lib("/apps/runpath.so", "runpath.so", {"/opt/rp/libd.so.1"}, "", "/opt/run");
  r.Lib("/apps/plain.so", "plain.so",
        {"/opt/rp/libd.so.1", "/usr/lib/x86_64-linux-gnu/libdef.so.1", "/opt/conf/libstale.so.1"});
  r.Lib("/apps/nodeflib.so", "nodeflib.so",
        {"/opt/rp/libd.so.1", "/usr/lib/x86_64-linux-gnu/libdef.so.1"}, "", "",
        {"-Wl,-z,nodefaultlib"});
  r.Lib("/libcwd.so", "libcwd.so");
  r.Lib("/apps/cwd.so", "cwd.so", {"/libcwd.so"});
  r.Ldconfig();
  fs::remove(r / "/opt/conf/libstale.so.1");  // the cache now names a file that is gone
  fs::remove(r / "/libcwd.so");
  r.Lib("/opt/llp/libcwd.so", "libcwd.so");
  fs::copy_file(r / "/opt/llp/libcwd.so", r / "/libcwd.so");

  Simulated sim = Simulate(r);
  REQUIRE(sim.cache.has_value());
  for (const char* app : {"/apps/rpath.so", "/apps/runpath.so", "/apps/plain.so",
                          "/apps/nodeflib.so", "/apps/cwd.so"}) {
    Compare(r, sim, app);
    Compare(r, sim, app, "/opt/llp");
    Compare(r, sim, app, "/nope::/opt/llp");
  }
  Compare(r, sim, "/apps/cwd.so", "/nope:");
  // What the comparisons above covered, phase by phase.
  CHECK(PathOf(sim, "/apps/rpath.so", "libd.so.1", "/opt/llp") == "rpath /opt/rp/libd.so.1");
  CHECK(PathOf(sim, "/apps/runpath.so", "libd.so.1", "/opt/llp") ==
        "ld-library-path /opt/llp/libd.so.1");
  CHECK(PathOf(sim, "/apps/runpath.so", "libd.so.1") == "runpath /opt/run/libd.so.1");
  CHECK(PathOf(sim, "/apps/plain.so", "libd.so.1") == "ld.so.cache /opt/conf/libd.so.1");
  CHECK(PathOf(sim, "/apps/plain.so", "libstale.so.1") == "default-dir /usr/lib/libstale.so.1");
  CHECK(PathOf(sim, "/apps/plain.so", "libdef.so.1") ==
        "ld.so.cache /usr/lib/x86_64-linux-gnu/libdef.so.1");
  CHECK(PathOf(sim, "/apps/nodeflib.so", "libdef.so.1") == "not found");
  CHECK(PathOf(sim, "/apps/nodeflib.so", "libd.so.1") == "ld.so.cache /opt/conf/libd.so.1");
}

TEST_CASE("ld.so agrees: inherited RPATH, $ORIGIN, $LIB, $PLATFORM, hwcaps, bad candidates",
          "[loader][oracle]") {
  if (std::string why = OracleMissing(); !why.empty()) {
    return imgcheck::testing::Skip("ld.so oracle: " + why);
  }
  Root r;
  // RPATH chain: libmid finds libleaf through chain.so's RPATH; libmid2 has RUNPATH.
  r.Lib("/opt/chain/libleaf.so", "libleaf.so");
  r.Lib("/opt/chain/libleaf2.so", "libleaf2.so");
  r.Lib("/opt/chain/libmid.so", "libmid.so", {"/opt/chain/libleaf.so"});
  r.Lib("/opt/chain/libmid2.so", "libmid2.so", {"/opt/chain/libleaf2.so"}, "", "/nowhere");
  r.Lib("/apps/chain.so", "chain.so", {"/opt/chain/libmid.so", "/opt/chain/libmid2.so"},
        "/opt/chain");
  // $ORIGIN, also for a library opened through a symlink.
  r.Lib("/opt/o/lib/libo.so", "libo.so");
  r.Lib("/usr/local/lib/dep/libsd.so", "libsd.so");
  r.Lib("/opt/real/dep/libsd.so", "libsd.so");
  r.Lib("/opt/real/libsym.so", "libsym.so", {"/opt/real/dep/libsd.so"}, "", "$ORIGIN/dep");
  fs::create_symlink("/opt/real/libsym.so", r / "/usr/local/lib/libsym.so");
  r.Lib("/opt/o/bin/origin.so", "origin.so", {"/opt/o/lib/libo.so", "/opt/real/libsym.so"}, "",
        "$ORIGIN/../lib:/usr/local/lib");
  // $LIB and $PLATFORM: whichever expansion ld.so uses must be the one imgcheck uses.
  r.Lib("/opt/lib64/libl.so", "libl.so");
  r.Lib("/opt/lib/x86_64-linux-gnu/libl.so", "libl.so");
  r.Lib("/opt/x86_64/libp.so", "libp.so");
  r.Lib("/opt/haswell/libp.so", "libp.so");
  r.Lib("/apps/dst.so", "dst.so", {"/opt/lib64/libl.so", "/opt/x86_64/libp.so"}, "",
        "/opt/$LIB:/opt/${PLATFORM}");
  // glibc-hwcaps subdirectories.
  r.Lib("/opt/hw/libhw.so", "libhw.so");
  r.Lib("/opt/hw/glibc-hwcaps/x86-64-v2/libhw.so", "libhw.so");
  r.Lib("/apps/hw.so", "hw.so", {"/opt/hw/libhw.so"}, "/opt/hw");
  // Wrong machine is skipped; a text file stops the load.
  r.Lib("/opt/rp/libd.so.1", "libd.so.1");
  std::string arm = imgcheck::testing::ReadFile(r / "/opt/rp/libd.so.1");
  arm[18] = static_cast<char>(183);  // e_machine = EM_AARCH64
  arm[19] = 0;
  imgcheck::testing::WriteFile(r / "/opt/arm/libd.so.1", arm);
  imgcheck::testing::WriteFile(r / "/opt/bad/libd.so.1", "not a library\n");
  r.Lib("/apps/mach.so", "mach.so", {"/opt/rp/libd.so.1"}, "/opt/arm:/opt/rp");
  r.Lib("/apps/notelf.so", "notelf.so", {"/opt/rp/libd.so.1"}, "/opt/bad:/opt/rp");
  r.Ldconfig();

  Simulated sim = Simulate(r);
  for (const char* app : {"/apps/chain.so", "/opt/o/bin/origin.so", "/apps/dst.so", "/apps/hw.so",
                          "/apps/mach.so", "/apps/notelf.so"})
    Compare(r, sim, app);
}

TEST_CASE("ld.so agrees: dlopen by name from a library uses the caller's search path",
          "[loader][oracle]") {
  if (std::string why = OracleMissing(); !why.empty()) {
    return imgcheck::testing::Skip("ld.so oracle: " + why);
  }
  Root r;
  auto caller = [](const std::string& fn, const std::string& name) {
    return "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <link.h>\n"
           "const char* " +
           fn +
           "(void) {\n  struct link_map* m = 0;\n"
           "  void* h = dlopen(\"" +
           name +
           "\", RTLD_NOW);\n"
           "  if (!h || dlinfo(h, RTLD_DI_LINKMAP, &m) != 0) return \"not found\";\n"
           "  return m->l_name;\n}\n";
  };
  r.Lib("/opt/dlr2/libplug1.so", "libplug1.so");
  r.Lib("/opt/dlr2/libplug2.so", "libplug2.so");
  r.Lib("/opt/rp2/libplug2.so", "libplug2.so");
  r.Lib("/opt/dlr2/libplug3.so", "libplug3.so");
  r.Lib("/opt/dlr/libcaller.so", "libcaller.so", {}, "", "", {}, caller("probe1", "libplug1.so"));
  r.Lib("/opt/dlr/libcaller2.so", "libcaller2.so", {}, "", "/opt/rp2", {},
        caller("probe2", "libplug2.so") + caller("probe3", "libplug1.so") +
            caller("probe4", "libplug3.so"));
  fs::create_directories(r / "/bin");
  imgcheck::testing::WriteFile(
      r / "/src/main.c",
      "#include <stdio.h>\nconst char* probe1(void); const char* probe2(void);\n"
      "const char* probe3(void); const char* probe4(void);\n"
      "int main(void) {\n  printf(\"libplug1.so=%s\\n\", probe1());\n"
      "  printf(\"libplug2.so=%s\\n\", probe2());\n"
      "  printf(\"libplug1.so@2=%s\\n\", probe3());\n"
      "  printf(\"libplug3.so=%s\\n\", probe4());\n  return 0;\n}\n");
  auto cc = Run("cc -o '" + (r / "/bin/dl").string() + "' '" + (r / "/src/main.c").string() +
                "' -Wl,--no-as-needed '" + (r / "/opt/dlr/libcaller.so").string() + "' '" +
                (r / "/opt/dlr/libcaller2.so").string() +
                "' -Wl,--disable-new-dtags -Wl,-rpath,/opt/dlr:/opt/dlr2");
  INFO(cc.output);
  REQUIRE(cc.status == 0);
  auto run = Run("env -i " + kPath + "chroot '" + r.root().string() + "' /bin/dl");
  INFO(run.output);
  REQUIRE(run.status == 0);

  Simulated sim = Simulate(r);
  Options o = sim.options;
  o.dlopen = {{"libcaller.so", {"libplug1.so"}, "test"},
              {"libcaller2.so", {"libplug2.so", "libplug1.so", "libplug3.so"}, "test"}};
  LoadGraph g = Load(sim.tree, sim.index->Lookup(), "/bin/dl", o);
  auto path_of = [&](const char* consumer, const char* name) -> std::string {
    for (const Resolution* res : g.Resolutions())
      if (res->consumer == consumer && res->name == name && res->kind == Kind::kDlopen)
        return res->found() ? res->path : "not found";
    return "no resolution";
  };
  std::string expected = "libplug1.so=" + path_of("/opt/dlr/libcaller.so", "libplug1.so") +
                         "\nlibplug2.so=" + path_of("/opt/dlr/libcaller2.so", "libplug2.so") +
                         "\nlibplug1.so@2=" + path_of("/opt/dlr/libcaller2.so", "libplug1.so") +
                         "\nlibplug3.so=" + path_of("/opt/dlr/libcaller2.so", "libplug3.so") + "\n";
  CHECK(run.output == expected);
  // libcaller (no RUNPATH) reaches /opt/dlr2 through the program's RPATH; libcaller2's RUNPATH
  // hides that RPATH (libplug3 is not found), but libplug1 is already loaded by then.
  CHECK(path_of("/opt/dlr/libcaller.so", "libplug1.so") == "/opt/dlr2/libplug1.so");
  CHECK(path_of("/opt/dlr/libcaller2.so", "libplug2.so") == "/opt/rp2/libplug2.so");
  CHECK(path_of("/opt/dlr/libcaller2.so", "libplug3.so") == "not found");
}

}  // namespace
}  // namespace imgcheck::loader
