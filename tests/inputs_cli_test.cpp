// Black-box tests of what the command line takes in and must never turn into a silent "clean":
// dir: over a real tree, images on disk named by the wrong transport or by a bare path, cached
// layers whose blob went away, names that are not UTF-8, and words that are not images.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;

namespace {

// A shared object with `soname`, compiled once per soname.
fs::path So(const std::string& soname) {
  static TempDir dir;
  fs::path out = dir / soname;
  if (!fs::exists(out)) {
    SharedObject so;
    so.soname = soname;
    Compile(so, out);
  }
  return out;
}

// A small root file system: a cuDNN owned by a pip wheel, an unmanaged cuBLAS, a directory
// symlink (/lib -> usr/lib, as on merged-/usr distributions), soname links, ld.so.conf.
std::vector<Entry> RootEntries() {
  const std::string site = "usr/local/lib/python3.10/dist-packages/";
  return {
      Dir("etc"),
      File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
      Dir("etc/ld.so.conf.d"),
      File("etc/ld.so.conf.d/cuda.conf", "/usr/local/cuda/lib64\n"),
      Dir("usr"),
      Dir("usr/lib"),
      Symlink("lib", "usr/lib"),
      Dir("usr/local"),
      Dir("usr/local/cuda"),
      Dir("usr/local/cuda/lib64"),
      FileFrom("usr/local/cuda/lib64/libcublas.so.12.1.3.1", So("libcublas.so.12")),
      Symlink("usr/local/cuda/lib64/libcublas.so.12", "libcublas.so.12.1.3.1"),
      Dir("usr/local/lib"),
      Dir("usr/local/lib/python3.10"),
      Dir(site),
      Dir(site + "nvidia"),
      Dir(site + "nvidia/cudnn"),
      Dir(site + "nvidia/cudnn/lib"),
      FileFrom(site + "nvidia/cudnn/lib/libcudnn.so.8", So("libcudnn.so.8")),
      Dir(site + "nvidia_cudnn_cu12-8.9.2.26.dist-info"),
      File(site + "nvidia_cudnn_cu12-8.9.2.26.dist-info/METADATA",
           "Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 8.9.2.26\n"),
      File(site + "nvidia_cudnn_cu12-8.9.2.26.dist-info/RECORD",
           "nvidia/cudnn/lib/libcudnn.so.8,,\n"),
      Dir("empty"),
  };
}

// The entries written out as a directory tree, as `docker export | tar x` would leave them.
void WriteTree(const fs::path& root, const std::vector<Entry>& entries) {
  fs::create_directories(root);
  for (const Entry& e : entries) {
    fs::path p = root / e.path;
    switch (e.kind) {
      case EntryKind::kDir:
        fs::create_directories(p);
        break;
      case EntryKind::kFile:
        if (e.host_path.empty())
          WriteFile(p, e.content);
        else
          fs::copy_file(e.host_path, p);
        fs::permissions(p, static_cast<fs::perms>(e.mode));
        break;
      case EntryKind::kSymlink:
        fs::create_symlink(e.target, p);
        break;
      default:
        FAIL("WriteTree: unsupported entry kind for " << e.path);
    }
  }
}

// Each {"layer": {"index", "digest", "created_by"}} in `j` cut to its index.
void WithoutLayerIdentity(nlohmann::json& j) {
  if (j.is_object()) {
    if (auto l = j.find("layer"); l != j.end() && l->is_object()) *l = (*l)["index"];
    for (auto& [key, value] : j.items()) WithoutLayerIdentity(value);
  } else if (j.is_array()) {
    for (auto& e : j) WithoutLayerIdentity(e);
  }
}

nlohmann::json Json(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.output);
}

// Runs `command` without root's right to read what it may not (CAP_DAC_OVERRIDE), so that
// permissions mean what they say.
std::string Unprivileged(const std::string& command) {
  if (geteuid() != 0) return command;
  return "setpriv --reuid=65534 --regid=65534 --clear-groups " + command;
}

}  // namespace

TEST_CASE("dir: of a root and the same tree as one OCI layer give the same catalog", "[cli][dir]") {
  TempDir tmp;
  std::vector<Entry> entries = RootEntries();
  WriteTree(tmp / "rootfs", entries);
  ImageRecipe r;
  r.layers.push_back(MakeLayer(entries, Compression::kGzip, "ADD rootfs.tar /"));
  WriteOciLayout(tmp / "layout", r);
  auto catalog = [&](const std::string& image) {
    nlohmann::json j = Json(
        Run(ImgcheckCommand("catalog --quiet --no-cache --format json " + image) + " 2>/dev/null"));
    // Image identity (reference, digests, the history line) differs by construction.
    j.erase("image");
    j.erase("layers");
    WithoutLayerIdentity(j);
    return j;
  };
  nlohmann::json dir = catalog("dir:" + (tmp / "rootfs").string());
  nlohmann::json oci = catalog("oci:" + (tmp / "layout").string());
  CHECK(dir.dump(1) == oci.dump(1));
  // The catalog saw the stack: not two empty documents that agree.
  CHECK(dir["components"].size() >= 3);
}

TEST_CASE("dir: goes on past a directory it cannot list, and says which", "[cli][dir]") {
  REQUIRE((geteuid() != 0 || HaveProgram("setpriv")));
  TempDir tmp;
  fs::path root = tmp / "rootfs";
  // Readdir order is the file system's: files on both sides of the locked directory by name.
  WriteFile(root / "a/first", "1");
  WriteFile(root / "m/locked/secret", "s");
  for (int i = 0; i < 20; ++i) WriteFile(root / ("z" + std::to_string(i)) / "last", "2");
  fs::permissions(tmp.path(),
                  fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(root / "m/locked", fs::perms::none);
  // The unprivileged run needs the program and its rule data where it may read them: the
  // checkout may sit under a directory only root can enter (mktemp -d makes them 0700).
  fs::copy_file(BinaryDir() / "imgcheck", tmp / "imgcheck");
  fs::copy(SourceDir() / "rules", tmp / "rules");
  CommandResult r =
      Run("IMGCHECK_RULES_DIR=" + Quote(tmp / "rules") + " " +
          Unprivileged(Quote(tmp / "imgcheck") +
                       " layers --quiet --no-cache --format json dir:" + root.string()) +
          " 2>/dev/null");
  fs::permissions(root / "m/locked", fs::perms::owner_all);
  nlohmann::json j = Json(r);
  // a, a/first, m, m/locked, 20 x (z<i>, z<i>/last); not m/locked/secret.
  CHECK(j["layers"][0]["added"] == 44);
  REQUIRE(j["diagnostics"].size() == 1);
  CHECK(j["diagnostics"][0]["path"] == "/m/locked");
  CHECK_THAT(j["diagnostics"][0]["message"].get<std::string>(), Contains("cannot list directory"));
}

TEST_CASE("dir: on an image on disk is refused with the transport to use", "[cli][dir]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(MakeLayer({File("etc/os-release", "ID=debian\n")}, Compression::kGzip, "ADD"));
  WriteOciLayout(tmp / "layout", r);
  WriteOciArchive(tmp / "layout", tmp / "oci.tar");
  WriteDockerArchive(tmp / "docker.tar", r);
  WriteDockerArchive(tmp / "docker25.tar", r, "example/image:latest", DockerArchiveForm::kOci);
  struct Case {
    std::string file, transport;
  };
  for (const Case& c :
       {Case{"layout", "oci"}, Case{"oci.tar", "oci-archive"}, Case{"docker.tar", "docker-archive"},
        Case{"docker25.tar", "docker-archive"}}) {
    std::string path = (tmp / c.file).string();
    CommandResult refused = Run(ImgcheckCommand("scan --quiet --no-cache dir:" + path));
    INFO(c.file << ": " << refused.output);
    CHECK(refused.status == 2);
    CHECK_THAT(refused.output, Contains("use " + c.transport + ":" + path));
    // The bare path is read by the transport that recognises it, not sent to a registry.
    nlohmann::json j = Json(
        Run(ImgcheckCommand("layers --quiet --no-cache --format json " + path) + " 2>/dev/null"));
    CHECK(j["transport"] == c.transport);
    CHECK(j["layers"].size() == 1);
  }
}

TEST_CASE("a cached layer whose blob is gone or resized stops the scan", "[cli][cache]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(
      MakeLayer({File("usr/lib/libcudnn.so.8", "x")}, Compression::kGzip, "COPY cudnn"));
  WrittenImage w = WriteOciLayout(tmp / "layout", r);
  std::string scan = ImgcheckCommand("scan --quiet --cache-dir " + Quote(tmp / "cache") +
                                     " oci:" + (tmp / "layout").string());
  REQUIRE(Run(scan).status == 0);  // fills the cache
  fs::path blob = BlobPath(tmp / "layout", w.layers[0].digest);
  std::string bytes = ReadFile(blob);

  WriteFile(blob, bytes + "extra");
  CommandResult resized = Run(scan);
  CHECK(resized.status == 2);
  CHECK_THAT(resized.output, Contains("layer 0 " + w.layers[0].digest + ": size mismatch"));

  fs::remove(blob);
  CommandResult missing = Run(scan);
  CHECK(missing.status == 2);
  CHECK_THAT(missing.output, Contains("layer 0 " + w.layers[0].digest));
  CHECK_THAT(missing.output, Contains("missing"));

  WriteFile(blob, bytes);  // back as it was: the cache serves it again
  CHECK(Run(scan).status == 0);
}

TEST_CASE("names that are not UTF-8 or hold control characters, in every format", "[cli][names]") {
  REQUIRE(HaveProgram("python3"));
  TempDir tmp;
  // An unmanaged cuDNN (IC051 names its directory and file) under a Latin-1 name with an ESC.
  const std::string dir = "usr/lib/caf\xE9\x1B[31m";
  ImageRecipe r;
  r.layers.push_back(MakeLayer({Dir(dir), FileFrom(dir + "/libcudnn.so.8", So("libcudnn.so.8"))},
                               Compression::kGzip, "COPY cafe /"));
  WriteOciLayout(tmp / "layout", r);
  std::string image = "oci:" + (tmp / "layout").string();
  for (std::string format : {"json", "sarif", "junit", "text"}) {
    fs::path out = tmp / ("report." + format);
    CommandResult run = Run(ImgcheckCommand("scan --quiet --no-cache --fail-on warning --format " +
                                            format + " --output " + Quote(out) + " " + image));
    INFO(format << ": " << run.output);
    // IC012 (a warning: no consumer loads the shim whose sub-libraries are missing); not 2.
    CHECK(run.status == 1);
    std::string text = ReadFile(out);
    CHECK(text.find('\x1B') == std::string::npos);
    CHECK(text.find('\xE9') == std::string::npos);
    if (format == "text") {
      CHECK_THAT(text, Contains("caf\\xE9\\x1B[31m/libcudnn.so.8"));
    } else if (format == "junit") {
      CommandResult parsed =
          Run("python3 -c 'import sys, xml.etree.ElementTree as E; "
              "print(E.parse(sys.argv[1]).getroot().tag)' " +
              Quote(out));
      CHECK(parsed.status == 0);
      CHECK_THAT(parsed.output, Contains("testsuites"));
      CHECK_THAT(text, Contains("caf\\xE9\\x1B[31m/libcudnn.so.8"));
    } else {
      // Strict: nlohmann rejects invalid UTF-8; python decodes as strict UTF-8.
      nlohmann::json j = nlohmann::json::parse(text);
      CHECK(Run("python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))' " +
                Quote(out))
                .status == 0);
      // The invalid byte is "\xE9" text and the valid ESC stays a character (JSON's \u001b).
      CHECK_THAT(j.dump(), Contains("caf\\\\xE9\\u001b[31m/libcudnn.so.8"));
    }
  }
  for (std::string format : {"json", "cyclonedx", "table"}) {
    CommandResult c =
        Run(ImgcheckCommand("catalog --quiet --no-cache --format " + format + " " + image) +
            " 2>/dev/null");
    INFO(format << ": " << c.output);
    CHECK(c.status == 0);
    CHECK(c.output.find('\xE9') == std::string::npos);
    CHECK(c.output.find('\x1B') == std::string::npos);
    if (format != "table")
      CHECK_THAT(nlohmann::json::parse(c.output).dump(), Contains("caf\\\\xE9"));
  }
  CommandResult why =
      Run(ImgcheckCommand("why --quiet --no-cache " + image + " '/" + dir + "/libcudnn.so.8'") +
          " 2>/dev/null");
  CHECK(why.output.find('\x1B') == std::string::npos);
  CHECK_THAT(why.output, Contains("caf\\xE9\\x1B[31m/libcudnn.so.8"));
}

TEST_CASE("words are not images: help, version, typos and flags before the image", "[cli]") {
  CommandResult help = Run(ImgcheckCommand("help"));
  CHECK(help.status == 0);
  CHECK_THAT(help.output, Contains("scan"));
  CHECK_THAT(help.output, Contains("layers"));
  CommandResult help_scan = Run(ImgcheckCommand("help scan"));
  CHECK(help_scan.status == 0);
  CHECK_THAT(help_scan.output, Contains("--fail-on"));
  CommandResult version = Run(ImgcheckCommand("version"));
  CHECK(version.status == 0);
  CHECK(version.output.starts_with("imgcheck "));  // then the commit and the rule data
  CHECK_THAT(version.output, Contains("\ncommit: "));
  CHECK_THAT(version.output, Contains("\nrules: sha256:"));
  CHECK_THAT(version.output, Contains("\nrules data: 20"));  // the rule data's version too

  // Refused before any registry is asked: no registry error, no retries.
  CommandResult list = Run(ImgcheckCommand("list"));
  CommandResult typo = Run(ImgcheckCommand("sacn x"));
  CHECK(list.output.find("registry") == std::string::npos);
  CHECK(typo.output.find("registry") == std::string::npos);
  CHECK(list.status == 2);
  CHECK_THAT(list.output, Contains("unknown command 'list'"));
  CHECK(typo.status == 2);
  CHECK_THAT(typo.output, Contains("did you mean 'scan'?"));

  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(MakeLayer({File("etc/os-release", "ID=debian\n")}, Compression::kGzip, "ADD"));
  WriteOciLayout(tmp / "layout", r);
  CommandResult flags_first =
      Run(ImgcheckCommand("-q --no-cache --format json oci:" + (tmp / "layout").string()));
  INFO(flags_first.output);
  CHECK(flags_first.status == 0);
  CHECK_THAT(flags_first.output, Contains("\"schema\": \"imgcheck-report/1\""));

  fs::create_directories(tmp / "rules");
  CHECK(Run(ImgcheckCommand("rules list --rules " + Quote(tmp / "rules"))).status == 0);
  CHECK(Run(ImgcheckCommand("rules --rules " + Quote(tmp / "rules") + " list")).status == 0);

  // Extra arguments are named in the order they were given.
  CommandResult extra = Run(ImgcheckCommand("layers one two three"));
  CHECK(extra.status == 2);
  CHECK_THAT(extra.output, Contains("two three"));
}

TEST_CASE("bare imgcheck prints the help, and in a script exits 2", "[cli]") {
  CommandResult bare = Run(ImgcheckCommand(""));
  CHECK(bare.status == 2);  // stdout is no terminal here
  CHECK_THAT(bare.output, Contains("scan"));
  CHECK_THAT(bare.output, Contains("Exit codes: 0"));
  CHECK(bare.output.find("A subcommand is required") == std::string::npos);
}

TEST_CASE("a path that does not exist is no such file, never a registry lookup", "[cli]") {
  TempDir tmp;
  for (std::string ref : {"/nonexistent/image", "./missing", "x.tar", "x.tar.gz"}) {
    CommandResult r =
        Run("cd " + Quote(tmp.path()) + " && " + ImgcheckCommand("scan -q " + ref) + " 2>&1");
    INFO(ref << ": " << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains("imgcheck: " + ref + ": no such file"));
    CHECK(r.output.find("registry") == std::string::npos);
    CHECK(r.output.find("repository") == std::string::npos);
  }
}

TEST_CASE("libcurl is loaded to talk HTTP only: a local image needs none, a registry says so",
          "[cli]") {
  // First where ld.so looks, a libcurl.so.4 that is no shared object: linked at start-up it
  // would stop every run; loaded at the first request, it fails that request alone.
  TempDir tmp;
  WriteFile(tmp / "libs/libcurl.so.4", "not a shared object\n");
  const std::string env = "LD_LIBRARY_PATH=" + Quote(tmp / "libs") + " ";
  ImageRecipe r;
  r.layers.push_back(
      MakeLayer({File("etc/os-release", "ID=debian\n")}, Compression::kGzip, "ADD rootfs.tar /"));
  WriteOciLayout(tmp / "layout", r);
  CommandResult local =
      Run(env + ImgcheckCommand("scan --quiet --no-cache oci:" + (tmp / "layout").string()));
  INFO(local.output);
  CHECK(local.status == 0);
  CommandResult version = Run(env + ImgcheckCommand("version"));
  CHECK(version.status == 0);

  // Port 1 on loopback: nothing is asked of it, libcurl fails to load before any connection.
  CommandResult remote =
      Run(env + ImgcheckCommand("layers --no-cache docker://127.0.0.1:1/x:latest 2>&1"));
  INFO(remote.output);
  CHECK(remote.status == 2);
  CHECK(std::count(remote.output.begin(), remote.output.end(), '\n') == 1);
  CHECK_THAT(remote.output, Contains("cannot load libcurl.so.4"));
  CHECK_THAT(remote.output, Contains("needs libcurl"));
}

TEST_CASE("output: -o FORMAT=FILE refuses an unknown FORMAT with the list", "[cli]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(MakeLayer({File("etc/os-release", "ID=debian\n")}, Compression::kGzip, "ADD"));
  WriteOciLayout(tmp / "layout", r);
  std::string image = " oci:" + (tmp / "layout").string();
  CommandResult typo = Run("cd " + Quote(tmp.path()) + " && " +
                           ImgcheckCommand("scan -q --output xml=foo.xml" + image) + " 2>&1");
  INFO(typo.output);
  CHECK(typo.status == 2);
  CHECK_THAT(typo.output, Contains("unknown format 'xml'"));
  CHECK_THAT(typo.output, Contains("text|json|sarif|junit|codequality"));
  CHECK_FALSE(fs::exists(tmp / "xml=foo.xml"));
  // -o is --output; a path holding '=' is still a file.
  CommandResult short_form = Run("cd " + Quote(tmp.path()) + " && " +
                                 ImgcheckCommand("scan -q -o json=r.json -o ./a=b.txt" + image));
  CHECK(short_form.status == 0);
  CHECK(fs::exists(tmp / "r.json"));
  CHECK(fs::exists(tmp / "a=b.txt"));
}

TEST_CASE("completion scripts parse in their shells, and the man page is roff", "[cli]") {
  CommandResult bash = Run(ImgcheckCommand("completion bash") + " > /dev/null");
  CHECK(bash.status == 0);
  TempDir tmp;
  CHECK(Run(ImgcheckCommand("completion bash") + " > " + Quote(tmp / "c.bash")).status == 0);
  CommandResult parsed = Run("bash -n " + Quote(tmp / "c.bash") + " 2>&1");
  INFO(parsed.output);
  CHECK(parsed.status == 0);
  // Loaded into bash, it completes a subcommand's flags.
  CommandResult completes = Run(
      "bash -c 'source " + (tmp / "c.bash").string() +
      "; COMP_WORDS=(imgcheck scan --fail); COMP_CWORD=2; _imgcheck; echo \"${COMPREPLY[*]}\"'");
  CHECK_THAT(completes.output, Contains("--fail-on"));
  if (HaveProgram("zsh")) {
    CHECK(Run(ImgcheckCommand("completion zsh") + " > " + Quote(tmp / "_imgcheck")).status == 0);
    CHECK(Run("zsh -n " + Quote(tmp / "_imgcheck")).status == 0);
  }
  CommandResult fish = Run(ImgcheckCommand("completion fish"));
  CHECK(fish.status == 0);
  CHECK_THAT(fish.output, Contains("complete -c imgcheck"));
  CommandResult tcsh = Run(ImgcheckCommand("completion tcsh") + " 2>&1");
  CHECK(tcsh.status == 2);
  CHECK_THAT(tcsh.output, Contains("bash|zsh|fish"));
  CommandResult man = Run(ImgcheckCommand("man"));
  CHECK(man.status == 0);
  CHECK(man.output.find(".TH IMGCHECK 1") != std::string::npos);
  CHECK(man.output.find(".SH EXIT STATUS") != std::string::npos);
}

TEST_CASE("IMGCHECK_<FLAG>: flag over environment over config file", "[cli][config]") {
  TempDir tmp;
  ImageRecipe r;
  // An unpackaged cuDNN: IC051, info.
  r.layers.push_back(
      MakeLayer({Dir("opt/lib"), FileFrom("opt/lib/libcudnn.so.8", So("libcudnn.so.8"))},
                Compression::kGzip, "COPY lib /opt/lib"));
  WriteOciLayout(tmp / "layout", r);
  WriteFile(tmp / ".imgcheck.yaml", "fail-on: info\n");
  auto scan = [&](const std::string& env, const std::string& flags) {
    return Run(
        "cd " + Quote(tmp.path()) + " && " + env + " " +
        ImgcheckCommand("scan -q --no-cache " + flags + " oci:" + (tmp / "layout").string()));
  };
  CHECK(scan("", "").status == 1);                                     // the config file
  CHECK(scan("IMGCHECK_FAIL_ON=none", "").status == 0);                // env over config
  CHECK(scan("IMGCHECK_FAIL_ON=none", "--fail-on info").status == 1);  // flag over env
  CommandResult json = scan("IMGCHECK_FORMAT=json", "");
  CHECK_THAT(json.output, Contains("\"schema\": \"imgcheck-report/1\""));
  CHECK(scan("IMGCHECK_FORMAT=json", "--format text").output.find("\"schema\"") ==
        std::string::npos);
  CHECK(scan("IMGCHECK_FAIL_ON=bogus", "").status == 2);  // checked like the flag
}
