// fuzz_seeds DIR: writes each fuzz target's seed corpus into DIR/<target>/, from the recipes
// the tests use (image_writer's layers and layouts, elf_builder's objects, fake_image's caches
// and dist-info files) and a few texts as real images hold them. Nothing is downloaded; the
// corpora are generated at build time, never committed.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "attest/bundle.h"
#include "attest/keys.h"
#include "attest/statement.h"
#include "elf_builder.h"
#include "fake_image.h"
#include "fuzz_input.h"
#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using imgcheck::elf::fixture::BuildElf;
using imgcheck::elf::fixture::BuildFatbin;
using imgcheck::elf::fixture::ElfSpec;
using imgcheck::elf::fixture::FatbinSpecEntry;

namespace {

fs::path out_dir;

void Seed(const std::string& target, const std::string& name, const std::string& bytes) {
  WriteFile(out_dir / target / name, bytes);
}

/// Files joined as the multi-file targets read them (fuzz::SplitFiles).
std::string Join(const std::vector<std::string>& files) {
  std::string out;
  for (const std::string& f : files) {
    if (!out.empty()) out += imgcheck::fuzz::kFileSeparator;
    out += f;
  }
  return out;
}

const std::string kLib = "usr/lib/x86_64-linux-gnu";

/// Layers whose merge exercises replacement, links, whiteouts and hostile names.
std::vector<std::pair<std::string, std::vector<Entry>>> LayerRecipes() {
  std::string long_name = kLib + "/" + std::string(180, 'n') + ".so";
  return {
      {"basic",
       {Dir("usr"), Dir(kLib),
        File(kLib + "/libcudnn.so.9.1.0",
             "\x7f"
             "ELF",
             0755),
        Symlink(kLib + "/libcudnn.so.9", "libcudnn.so.9.1.0"),
        Hardlink(kLib + "/libcudnn_copy.so", kLib + "/libcudnn.so.9.1.0"),
        File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n")}},
      {"whiteouts",
       {Whiteout(kLib + "/libcudnn.so.9"), Opaque("etc"), File("etc/ld.so.conf", "/opt/lib\n"),
        Dir("opt"), Symlink("opt/lib", "/usr/lib")}},
      {"special", {CharDevice("dev/null", 1, 3), BlockDevice("dev/sda", 8, 0), Fifo("run/fifo")}},
      {"hostile",
       {File("../escape", "x"), File("/abs/path", "y"), Symlink("loop", "loop"),
        Symlink("up", "../../.."), File(long_name, "long"), Hardlink("hl", "missing")}},
  };
}

void LayerSeeds(const fs::path& tmp) {
  int n = 0;
  for (const auto& [name, entries] : LayerRecipes()) {
    for (TarFormat format : {TarFormat::kPax, TarFormat::kGnu, TarFormat::kUstar}) {
      if (format == TarFormat::kUstar && name == "hostile") continue;  // names over 100 bytes
      fs::path tar = tmp / (name + std::to_string(n++) + ".tar");
      WriteLayerTar(entries, tar, format);
      Seed("fuzz_layer", tar.filename(), ReadFile(tar));
    }
    fs::path tar = tmp / (name + ".tar");
    WriteLayerTar(entries, tar);
    for (auto [c, ext] : {std::pair{Compression::kGzip, ".gz"}, {Compression::kZstd, ".zst"}}) {
      fs::path packed = tmp / (name + ".tar" + ext);
      CompressFile(tar, packed, c);
      std::string bytes = ReadFile(packed);
      Seed("fuzz_layer", packed.filename(), bytes);
      // fuzz_stream: the first byte sets the chunk size (here 16 and 256 bytes).
      Seed("fuzz_stream", packed.filename().string() + ".16", "\x0f" + bytes);
      Seed("fuzz_stream", packed.filename().string() + ".256", "\xff" + bytes);
      if (c == Compression::kGzip) Seed("fuzz_stream", name + ".multi.gz", "\x3f" + bytes + bytes);
    }
  }
}

void ManifestSeeds(const fs::path& tmp) {
  for (bool docker : {false, true}) {
    ImageRecipe r;
    r.docker_media_types = docker;
    r.env = {"PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/cuda/lib64"};
    r.labels = {{"maintainer", "x"}};
    r.entrypoint = {"/bin/sh"};
    r.layers.push_back(MakeLayer({File("a", "1")}, Compression::kGzip, "COPY a /"));
    r.layers.push_back(EmptyLayer("ENV X=1"));
    r.layers.push_back(MakeLayer({Whiteout("a")}, Compression::kZstd, "RUN rm /a"));
    fs::path layout = tmp / (docker ? "docker" : "oci");
    WrittenImage img = WriteOciLayout(layout, r);
    std::string kind = docker ? "docker" : "oci";
    Seed("fuzz_manifest", kind + "-index.json", ReadFile(layout / "index.json"));
    Seed("fuzz_manifest", kind + "-manifest.json", ReadFile(BlobPath(layout, img.manifest_digest)));
    Seed("fuzz_manifest", kind + "-config.json", ReadFile(BlobPath(layout, img.config_digest)));

    ImageRecipe arm = r;
    arm.architecture = "arm64";
    arm.variant = "v8";
    fs::path multi = tmp / (kind + "-multi");
    WriteMultiPlatformLayout(multi, {r, arm});
    Seed("fuzz_manifest", kind + "-multi-index.json", ReadFile(multi / "index.json"));
    for (const auto& blob : fs::directory_iterator(multi / "blobs/sha256")) {
      std::string bytes = ReadFile(blob.path());
      if (bytes.size() < 4096 && bytes.starts_with("{"))
        Seed("fuzz_manifest", kind + "-multi-" + blob.path().filename().string(), bytes);
    }
  }
}

void ElfSeeds(const fs::path& tmp) {
  std::string fatbin = BuildFatbin({{.ptx = true, .sm = 90, .major = 8, .minor = 3},
                                    {.sm = 80, .compressed = true},
                                    {.sm = 90, .payload = std::string(300, 'c')}});
  Seed("fuzz_fatbin", "three-entries", fatbin);
  Seed("fuzz_fatbin", "two-containers", fatbin + BuildFatbin({{.sm = 75}}));

  ElfSpec full;
  full.soname = "libcudnn.so.9";
  full.needed = {"libc.so.6", "libcudnn_ops.so.9"};
  full.rpath = "$ORIGIN";
  full.runpath = "/usr/local/cuda/lib64:$ORIGIN/../lib";
  full.flags_1 = 0x800;
  full.exported = {"cudnnCreate", "cudnnGetVersion"};
  full.imported = {"malloc", "cudaMalloc"};
  full.version_definitions = {"libcudnn.so.9", "libcudnn.so.9.1"};
  full.version_needs = {{"libc.so.6", {"GLIBC_2.2.5", "GLIBC_2.34"}}};
  full.build_id = std::string("\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
  full.fatbin = fatbin;
  Seed("fuzz_elf", "full64", BuildElf(full));
  ElfSpec v = full;
  v.dynamic_first = true;
  Seed("fuzz_elf", "dynamic-first", BuildElf(v));
  v = full;
  v.is64 = false;
  v.machine = 3;  // EM_386
  Seed("fuzz_elf", "full32", BuildElf(v));
  v = full;
  v.big_endian = true;
  v.machine = 21;  // EM_PPC64
  Seed("fuzz_elf", "big-endian", BuildElf(v));
  Seed("fuzz_elf", "minimal", BuildElf({}));

  // A real shared object from the host's compiler (section headers, GNU hash, versioning).
  if (HaveProgram("cc")) {
    SharedObject so;
    so.soname = "libfixture.so.1";
    so.rpath = "$ORIGIN";
    fs::path out = tmp / "libfixture.so.1";
    Compile(so, out);
    Seed("fuzz_elf", "compiled.so", ReadFile(out));
  }
}

void LdSoSeeds() {
  Seed("fuzz_ld_so_cache", "old-x86-64",
       OldCache({{"libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"},
                 {"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"}},
                0x0303));
  Seed("fuzz_ld_so_cache", "old-aarch64", OldCache({{"liba.so.1", "/lib/liba.so.1"}}, 0x0a03));
  // The host's own cache: the new format as this glibc's ldconfig writes it.
  if (fs::is_regular_file("/etc/ld.so.cache") && fs::file_size("/etc/ld.so.cache") < (1 << 20))
    Seed("fuzz_ld_so_cache", "host", ReadFile("/etc/ld.so.cache"));

  Seed("fuzz_ld_so_conf", "debian",
       Join({"include /etc/ld.so.conf.d/*.conf\n", "# libc default configuration\n/usr/local/lib\n",
             "# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n"
             "/usr/lib/x86_64-linux-gnu\n"}));
  Seed("fuzz_ld_so_conf", "cuda",
       Join({"include ld.so.conf.d/*.conf\n/opt/lib=libc6\nhwcap 0 nosegneg\n",
             "/usr/local/cuda/lib64\n/usr/local/cuda/compat\n",
             "include /etc/ld.so.conf.d/1.conf 3.conf\n", "/usr/local/nvidia/lib64\n"}));
  Seed("fuzz_ld_so_conf", "loop",
       Join({"include /etc/ld.so.conf\ninclude /etc/ld.so.conf.d/*\n", "include ../ld.so.conf\n",
             "include /etc/ld.so.conf.d/?.conf\n"}));
}

void PackageSeeds() {
  std::string status =
      "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u4\n"
      "Architecture: amd64\nDescription: GNU C Library\n continued line\n .\n\n"
      "Package: libcudnn9-cuda-12\nStatus: hold ok installed\nVersion: 9.1.0.70-1\n"
      "Architecture: amd64\n\n"
      "Package: libcublas-12-1\nStatus: deinstall ok config-files\nVersion: 12.1.3.1-1\n";
  std::string list = "/.\n/usr\n/usr/lib/x86_64-linux-gnu\n/" + kLib + "/libcudnn.so.9.1.0\n";
  std::string record = "Package: libcudnn9-cuda-12\nVersion: 1:9.1.0.70-1+cuda12.4\n";
  std::string md5sums = "0123456789abcdef0123456789abcdef  " + kLib + "/libcudnn.so.9.1.0\n";
  Seed("fuzz_dpkg", "status-and-list", Join({status, list}));
  Seed("fuzz_dpkg", "distroless", Join({"", "", record, md5sums}));

  std::vector<std::string> files = {"nvidia/cudnn/lib/libcudnn.so.9",
                                    "nvidia/cudnn/include/cudnn_version.h"};
  std::string metadata, rec;
  for (const auto& [path, text] :
       DistInfo("nvidia-cudnn-cu12", "9.1.0.70", {"nvidia-cublas-cu12"}, files)) {
    if (path.ends_with("/METADATA")) metadata = text;
    if (path.ends_with("/RECORD")) rec = text;
  }
  Seed("fuzz_pip", "dist-info", Join({metadata, rec}));
  Seed("fuzz_pip", "markers",
       Join({"Metadata-Version: 2.1\nName: torch\nVersion: 2.3.0+cu121\n"
             "Requires-Dist: nvidia-cudnn-cu12 (==8.9.2.26) ; platform_system == 'Linux'\n"
             "Requires-Dist: typing-extensions>=4.8.0\n\nlong description\n",
             "torch/lib/libtorch_cuda.so,sha256=abc,123\n\"a,b.py\",,\n"}));
}

void TextSeeds() {
  const std::string digest = "sha256:" + std::string(64, 'a');
  int n = 0;
  for (const std::string& s : {
           std::string(
               "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\""
               ",scope=\"repository:library/ubuntu:pull\""),
           std::string("Basic realm=\"Registry Realm\", Bearer realm=\"a\\\"b\",error=x"),
           std::string("{\"token\":\"abc\",\"access_token\":\"def\",\"expires_in\":300}"),
           std::string("dXNlcjpwYXNzd29yZA=="),
           std::string("nvidia/cuda:12.1.1-runtime-ubuntu22.04"),
           "docker://127.0.0.1:5000/a/b:tag@" + digest,
           "https://registry.example:5000/v2/x/blobs/" + digest + std::string(1, '\0') +
               "https://cdn.example/blob?sig=1%2F",
           std::string("http://[::1]:80/v2/") + std::string(1, '\0') + "../../other",
       }) {
    Seed("fuzz_registry", "seed" + std::to_string(n++), s);
  }
  for (const char* path : {"docker/Dockerfile", "testdata/demo/Dockerfile"}) {
    if (fs::exists(SourceDir() / path))
      Seed("fuzz_dockerfile", fs::path(path).parent_path().filename(),
           ReadFile(SourceDir() / path));
  }
  Seed("fuzz_dockerfile", "stages",
       "# syntax=docker/dockerfile:1\n# escape=`\nARG BASE=ubuntu:22.04\nFROM ${BASE} AS build\n"
       "RUN apt-get update && `\n    apt-get install -y gcc\nCOPY <<EOF /etc/ld.so.conf.d/x.conf\n"
       "/opt/lib\nEOF\nFROM build\nENV LD_LIBRARY_PATH=/opt/lib\nRUN <<-'END' bash\n\techo hi\n"
       "\tEND\nCOPY --from=build /opt /opt\n");
}

// A signed envelope, the bundle around it, and the lists that name them.
void AttestSeeds() {
  using namespace imgcheck::attest;
  const std::string hex(64, 'a');
  Signer signer = *Signer::FromPem(GenerateKeyPair().private_pem, "fuzz");
  std::string envelope = SignEnvelope(
      kInTotoPayloadType,
      R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"r/app","digest":)"
      R"({"sha256":")" +
          hex + R"("}}],"predicateType":")" + std::string(kPredicateType) +
          R"(","predicate":{"verdict":"pass","policy":{"identity":"x"}}})",
      signer);
  Seed("fuzz_attest", "envelope.json", envelope);
  Seed("fuzz_attest", "bundle.json", MakeBundle(envelope, signer.KeyId()));
  const std::string entry = R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","size":2,)"
                            R"("digest":"sha256:)" +
                            hex + R"(","artifactType":")" + std::string(kBundleMediaType) + R"("})";
  Seed("fuzz_attest", "index.json",
       R"({"schemaVersion":2,"manifests":[)" + entry + "]," + R"("layers":[)" + entry + "]}");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds DIR\n";
    return 2;
  }
  out_dir = argv[1];
  try {
    TempDir tmp;
    LayerSeeds(tmp.path());
    ManifestSeeds(tmp.path());
    ElfSeeds(tmp.path());
    LdSoSeeds();
    PackageSeeds();
    TextSeeds();
    AttestSeeds();
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seeds: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
