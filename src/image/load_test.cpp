// Load() end to end over images written by tests/support/image_writer: every transport, platform
// selection, config mapping, and bad input.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "image/image.h"
#include "image/transports.h"
#include "image_writer.h"
#include "support.h"
#include "util/sha256.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;

ImageRecipe SampleRecipe() {
  ImageRecipe r;
  r.env = {"PATH=/usr/local/nvidia/bin:/usr/bin", "CUDA_VERSION=12.1.1"};
  r.labels = {{"maintainer", "NVIDIA CORPORATION"}};
  r.cmd = {"bash"};
  r.layers.push_back(
      MakeLayer({Dir("usr"), Dir("usr/lib"), File("usr/lib/libcudart.so.12", "cudart"),
                 Symlink("usr/lib/libcudart.so", "libcudart.so.12"), Dir("etc"),
                 File("etc/os-release", "ID=ubuntu\n")},
                Compression::kGzip, "ADD rootfs.tar /"));
  r.layers.push_back(EmptyLayer("ENV CUDA_VERSION=12.1.1"));
  r.layers.push_back(MakeLayer({File("usr/lib/libcudnn.so.8", "cudnn"), Whiteout("etc/os-release")},
                               Compression::kZstd, "RUN apt-get install libcudnn8"));
  r.layers.push_back(EmptyLayer("CMD [\"bash\"]"));
  r.layers.push_back(MakeLayer({File("app.py", "print()")}, Compression::kNone, "COPY app.py /"));
  return r;
}

LoadOptions CaptureAll() {
  LoadOptions o;
  o.capture = [](std::string_view, uint64_t, uint32_t) { return CapturePrefix(1 << 20); };
  return o;
}

std::string Content(const Image& img, const std::string& path) {
  const Node* n = img.tree.Find(path);
  if (n == nullptr || !n->content) return "<none>";
  return std::string(*n->content->View(0, n->content->size()));
}

// The merged tree as comparable text: path, type, link, content.
std::string Dump(const Image& img) {
  std::string out;
  for (const auto& [path, n] : img.tree.nodes()) {
    out += path + " " + std::to_string(static_cast<int>(n.type)) + " " + n.link_target;
    if (n.content) out += " " + util::Sha256Digest(*n.content->View(0, n.content->size()));
    out += "\n";
  }
  return out;
}

TEST_CASE("a reading pinned to a manifest digest refuses another manifest", "[load]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", SampleRecipe(), "v1");
  std::string ref = "oci:" + (tmp / "layout").string() + ":v1";
  LoadOptions pinned;
  pinned.manifest_digest = w.manifest_digest;
  CHECK(Load(ref, pinned).manifest_digest == w.manifest_digest);
  // The tag now names another image (the layout rebuilt in its place): the reading stops,
  // saying which.
  ImageRecipe other = SampleRecipe();
  other.env.push_back("REBUILT=1");
  WrittenImage w2 = WriteOciLayout(tmp / "rebuilt", other, "v1");
  std::filesystem::remove_all(tmp / "layout");
  std::filesystem::rename(tmp / "rebuilt", tmp / "layout");
  REQUIRE(w2.manifest_digest != w.manifest_digest);
  CHECK_THROWS_WITH(Load(ref, pinned), Contains("manifest is now " + w2.manifest_digest) &&
                                           Contains("not the " + w.manifest_digest));
}

TEST_CASE("an OCI layout loads with config, history and layer provenance", "[load]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", SampleRecipe(), "v1");
  Image img = Load("oci:" + (tmp / "layout").string() + ":v1", CaptureAll());
  CHECK(img.transport == "oci");
  CHECK(img.manifest_digest == w.manifest_digest);
  CHECK(img.config_digest == w.config_digest);
  CHECK(img.config.env ==
        std::vector<std::string>{"PATH=/usr/local/nvidia/bin:/usr/bin", "CUDA_VERSION=12.1.1"});
  CHECK(img.config.labels.at("maintainer") == "NVIDIA CORPORATION");
  CHECK(img.config.cmd == std::vector<std::string>{"bash"});
  CHECK(img.config.os == "linux");
  CHECK(img.config.architecture == "amd64");
  REQUIRE(img.layers.size() == 3);
  // empty_layer history entries are skipped when history is matched to layers.
  CHECK(img.layers[0].created_by == "ADD rootfs.tar /");
  CHECK(img.layers[1].created_by == "RUN apt-get install libcudnn8");
  CHECK(img.layers[2].created_by == "COPY app.py /");
  for (size_t i = 0; i < 3; ++i) {
    CHECK(img.layers[i].digest == w.layers[i].digest);
    CHECK(img.layers[i].diff_id == w.layers[i].diff_id);
    CHECK(img.layers[i].compressed_size == w.layers[i].compressed_size);
    CHECK(img.layers[i].size == w.layers[i].size);
  }
  CHECK(img.layers[0].added == 6);
  CHECK(img.layers[1].added == 1);
  CHECK(img.layers[1].deleted == 1);
  CHECK(Content(img, "/usr/lib/libcudnn.so.8") == "cudnn");
  CHECK(img.tree.Find("/usr/lib/libcudnn.so.8")->layer == 1);
  CHECK(img.tree.Find("/etc/os-release") == nullptr);
  REQUIRE(img.tree.FindDeleted("/etc/os-release"));
  CHECK(img.tree.FindDeleted("/etc/os-release")->layer == 1);
  CHECK(img.tree.Resolve("/usr/lib/libcudart.so")->path == "/usr/lib/libcudart.so.12");
  CHECK(img.diagnostics.empty());
}

TEST_CASE("every transport reads the same image identically", "[load]") {
  TempDir tmp;
  ImageRecipe r = SampleRecipe();
  // docker save writes uncompressed layers.
  for (LayerRecipe& l : r.layers) l.compression = Compression::kNone;
  WriteOciLayout(tmp / "layout", r);
  WriteOciArchive(tmp / "layout", tmp / "oci.tar");
  WriteDockerArchive(tmp / "legacy.tar", r, "example/cuda:12");
  WriteDockerArchive(tmp / "new.tar", r, "example/cuda:12", DockerArchiveForm::kOci);
  ImageRecipe docker = r;
  docker.docker_media_types = true;
  WriteOciLayout(tmp / "docker-types", docker);

  std::string want = Dump(Load("oci:" + (tmp / "layout").string(), CaptureAll()));
  CHECK(Dump(Load("oci-archive:" + (tmp / "oci.tar").string(), CaptureAll())) == want);
  Image legacy = Load("docker-archive:" + (tmp / "legacy.tar").string(), CaptureAll());
  CHECK(Dump(legacy) == want);
  CHECK(legacy.layers[1].created_by == "RUN apt-get install libcudnn8");
  CHECK(legacy.config.env.size() == 2);
  CHECK(Dump(Load("docker-archive:" + (tmp / "legacy.tar").string() + ":example/cuda:12",
                  CaptureAll())) == want);
  CHECK(Dump(Load("docker-archive:" + (tmp / "legacy.tar").string() + ":@0", CaptureAll())) ==
        want);
  // An index is all digits and fits: no sign, no trailing text, no wrap-around.
  for (std::string bad : {"@", "@x", "@0x", "@-1", "@+0", "@ 0", "@99999999999999999999999"})
    CHECK_THROWS_WITH(Load("docker-archive:" + (tmp / "legacy.tar").string() + ":" + bad, {}),
                      Contains(": bad image index '" + bad + "'"));
  CHECK_THROWS_WITH(Load("docker-archive:" + (tmp / "legacy.tar").string() + ":@1", {}),
                    Contains(": no image @1; it holds 1"));
  CHECK(Dump(Load("docker-archive:" + (tmp / "new.tar").string(), CaptureAll())) == want);
  CHECK(Dump(Load("oci:" + (tmp / "docker-types").string(), CaptureAll())) == want);
  CHECK_THROWS_WITH(Load("docker-archive:" + (tmp / "legacy.tar").string() + ":other:1", {}),
                    Contains("no image tagged 'other:1'; tags: example/cuda:12"));
  CHECK_THROWS_WITH(Load("oci:" + (tmp / "layout").string() + ":nope", {}),
                    Contains("no image named 'nope' in index.json; names: latest"));
}

TEST_CASE("dir: reads an unpacked root file system as one layer, links unfollowed", "[load]") {
  TempDir tmp;
  fs::path root = tmp / "rootfs";
  WriteFile(root / "usr/lib/libcuda.so.1", "driver");
  fs::create_symlink("libcuda.so.1", root / "usr/lib/libcuda.so");
  fs::create_symlink("/etc/shadow", root / "usr/lib/host");  // must stay a link, never read
  fs::create_directories(tmp / "outside");
  fs::create_directory_symlink(tmp / "outside", root / "escape");
  WriteFile(tmp / "outside/secret", "host data");
  Image img = Load("dir:" + root.string(), CaptureAll());
  CHECK(img.transport == "dir");
  REQUIRE(img.layers.size() == 1);
  CHECK(Content(img, "/usr/lib/libcuda.so.1") == "driver");
  CHECK(img.tree.Find("/usr/lib/host")->type == NodeType::kSymlink);
  CHECK(img.tree.Find("/escape")->type == NodeType::kSymlink);
  CHECK(img.tree.Find("/escape/secret") == nullptr);
  CHECK(img.tree.Resolve("/usr/lib/libcuda.so")->path == "/usr/lib/libcuda.so.1");
  // The absolute link resolves inside the image, where there is no /etc/shadow.
  CHECK(img.tree.Resolve("/usr/lib/host")->node == nullptr);
}

TEST_CASE("an index: the platform is chosen, and the available ones are listed", "[load]") {
  TempDir tmp;
  ImageRecipe amd = SampleRecipe(), arm = SampleRecipe(), armv7 = SampleRecipe();
  arm.architecture = "arm64";
  arm.variant = "v8";
  arm.layers[0].entries.push_back(File("arch", "arm64"));
  armv7.architecture = "arm";
  armv7.variant = "v7";
  WriteMultiPlatformLayout(tmp / "multi", {amd, arm, armv7});
  std::string ref = "oci:" + (tmp / "multi").string();
  LoadOptions o = CaptureAll();
  CHECK(Load(ref, o).config.architecture == "amd64");
  o.platform = "linux/arm64";
  Image a = Load(ref, o);
  CHECK(a.config.architecture == "arm64");
  CHECK(Content(a, "/arch") == "arm64");
  o.platform = "linux/arm/v7";
  CHECK(Load(ref, o).config.variant == "v7");
  o.platform = "linux/s390x";
  CHECK_THROWS_WITH(Load(ref, o), Contains("no image for platform linux/s390x; available: "
                                           "linux/amd64, linux/arm64/v8, linux/arm/v7"));
  o.platform = "linux";
  CHECK_THROWS_WITH(Load(ref, o), Contains("bad --platform 'linux'"));

  ImageRecipe docker_amd = SampleRecipe();
  docker_amd.docker_media_types = true;
  WriteMultiPlatformLayout(tmp / "list", {docker_amd});
  CHECK(Load("oci:" + (tmp / "list").string(), {}).layers.size() == 3);
}

TEST_CASE("references name their transport from one table", "[load]") {
  CHECK(SplitReference("oci:/x:tag").first->name == "oci");
  CHECK(SplitReference("oci:/x:tag").second == "/x:tag");
  CHECK(SplitReference("docker://nvidia/cuda:12").first->name == "docker");
  CHECK(SplitReference("docker://nvidia/cuda:12").second == "nvidia/cuda:12");
  CHECK(SplitReference("localhost:5000/x").first->name == "docker");
  CHECK(SplitReference("localhost:5000/x").second == "localhost:5000/x");
  CHECK(TransportSyntaxList().find("docker-archive:PATH[:REF]") != std::string::npos);
  CHECK_THROWS_WITH(Load("oci:", {}), Contains("names no image; expected oci:PATH[:REF]"));
}

TEST_CASE("a reference without its tag or digest: the same for every build of one image",
          "[load]") {
  CHECK(WithoutTagOrDigest("docker-daemon:app:1") == "docker-daemon:app");
  CHECK(WithoutTagOrDigest("docker-daemon:app:2") == "docker-daemon:app");
  CHECK(WithoutTagOrDigest("docker-daemon:app") == "docker-daemon:app");
  CHECK(WithoutTagOrDigest("nvidia/cuda:12.2.0-runtime-ubuntu22.04") == "nvidia/cuda");
  CHECK(WithoutTagOrDigest("docker://localhost:5000/x/app@sha256:" + std::string(64, 'a')) ==
        "docker://localhost:5000/x/app");
  CHECK(WithoutTagOrDigest("localhost:5000/app:3@sha256:" + std::string(64, 'b')) ==
        "localhost:5000/app");
  CHECK(WithoutTagOrDigest("localhost:5000/app") == "localhost:5000/app");
  CHECK(WithoutTagOrDigest("oci:/tmp/layout:v2") == "oci:/tmp/layout");
  CHECK(WithoutTagOrDigest("oci-archive:image.tar") == "oci-archive:image.tar");
  CHECK(WithoutTagOrDigest("dir:/tmp/a:b") == "dir:/tmp/a:b");
}

// ---- bad input: each gives one precise util::Fatal ----

std::string Compressed(const std::vector<Entry>& entries, Compression c, const fs::path& dir,
                       std::string* diff_id) {
  *diff_id = WriteLayerTar(entries, dir / "layer.tar");
  CompressFile(dir / "layer.tar", dir / "layer.packed", c);
  return ReadFile(dir / "layer.packed");
}

std::string LoadError(const fs::path& layout) {
  try {
    Load("oci:" + layout.string(), {});
  } catch (const util::Fatal& e) {
    return e.what();
  }
  return "(loaded)";
}

std::vector<Entry> SomeFiles() {
  std::vector<Entry> e{Dir("data")};
  for (int i = 0; i < 20; ++i)
    e.push_back(File("data/f" + std::to_string(i), std::string(5000, char('a' + i))));
  return e;
}

TEST_CASE("truncated or corrupt layer streams stop the run", "[load][bad]") {
  TempDir tmp;
  for (Compression c : {Compression::kGzip, Compression::kZstd}) {
    std::string diff_id;
    std::string packed = Compressed(SomeFiles(), c, tmp.path(), &diff_id);
    ImageRecipe r;
    LayerRecipe l;
    l.compression = c;
    l.raw = packed.substr(0, packed.size() / 2);
    l.raw_diff_id = diff_id;
    r.layers.push_back(l);
    fs::path dir = tmp / (c == Compression::kGzip ? "gz" : "zst");
    WriteOciLayout(dir, r);
    CHECK_THAT(LoadError(dir), Contains(c == Compression::kGzip ? "truncated gzip stream"
                                                                : "truncated zstd stream"));
  }
  SECTION("a corrupt tar header") {
    std::string diff_id;
    std::string tar = Compressed(SomeFiles(), Compression::kNone, tmp.path(), &diff_id);
    tar[512 + 148] ^= 0x55;  // second header's checksum field
    ImageRecipe r;
    LayerRecipe l;
    l.raw = tar;
    r.layers.push_back(l);
    WriteOciLayout(tmp / "tar", r);
    CHECK_THAT(LoadError(tmp / "tar"),
               Contains("corrupt tar after entry 'data/': Damaged tar archive"));
  }
  SECTION("a truncated plain tar") {
    std::string diff_id;
    std::string tar = Compressed(SomeFiles(), Compression::kNone, tmp.path(), &diff_id);
    ImageRecipe r;
    LayerRecipe l;
    l.raw = tar.substr(0, 3000);
    r.layers.push_back(l);
    WriteOciLayout(tmp / "short", r);
    CHECK_THAT(LoadError(tmp / "short"), Contains("corrupt tar") && Contains("runcated"));
  }
}

TEST_CASE("digest and diff_id mismatches, missing blobs", "[load][bad]") {
  TempDir tmp;
  ImageRecipe r = SampleRecipe();
  WrittenImage w = WriteOciLayout(tmp / "layout", r);
  std::string layer_blob = ReadFile(BlobPath(tmp / "layout", w.layers[2].digest));

  SECTION("a layer blob changed on disk") {
    std::string b = layer_blob;
    b[b.size() / 2] ^= 1;
    WriteFile(BlobPath(tmp / "layout", w.layers[2].digest), b);
    CHECK_THAT(LoadError(tmp / "layout"),
               Contains("layer 2 " + w.layers[2].digest + ": digest mismatch: content is sha256:"));
  }
  SECTION("a gzip layer changed on disk: the mismatch, not the corrupt stream, is reported") {
    std::string b = ReadFile(BlobPath(tmp / "layout", w.layers[0].digest));
    for (size_t i = 20; i < b.size() - 10; ++i) b[i] = 0;
    WriteFile(BlobPath(tmp / "layout", w.layers[0].digest), b);
    CHECK_THAT(LoadError(tmp / "layout"),
               Contains("layer 0 " + w.layers[0].digest + ": digest mismatch"));
  }
  SECTION("a config whose diff_id does not match the layer") {
    ImageRecipe bad = r;
    bad.edit_config = [](nlohmann::json& c) {
      c["rootfs"]["diff_ids"][1] = "sha256:" + std::string(64, '0');
    };
    WrittenImage b = WriteOciLayout(tmp / "diffid", bad);
    CHECK_THAT(
        LoadError(tmp / "diffid"),
        Contains("layer 1 " + b.layers[1].digest + ": diff_id mismatch: config says sha256:000") &&
            Contains("uncompressed content is " + b.layers[1].diff_id));
  }
  SECTION("a config whose diff_id does not match an uncompressed layer (hashed once)") {
    ImageRecipe bad = r;
    bad.edit_config = [](nlohmann::json& c) {
      c["rootfs"]["diff_ids"][2] = "sha256:" + std::string(64, '1');
    };
    WrittenImage b = WriteOciLayout(tmp / "diffid", bad);
    REQUIRE(b.layers[2].digest == b.layers[2].diff_id);
    CHECK_THAT(
        LoadError(tmp / "diffid"),
        Contains("layer 2 " + b.layers[2].digest + ": diff_id mismatch: config says sha256:111") &&
            Contains("uncompressed content is " + b.layers[2].diff_id));
  }
  SECTION("a missing layer blob") {
    fs::remove(BlobPath(tmp / "layout", w.layers[1].digest));
    CHECK_THAT(LoadError(tmp / "layout"), Contains(w.layers[1].digest.substr(7) + ": missing"));
  }
  SECTION("a missing config blob") {
    fs::remove(BlobPath(tmp / "layout", w.config_digest));
    CHECK_THAT(LoadError(tmp / "layout"), Contains(w.config_digest.substr(7) + ": missing"));
  }
  SECTION("a manifest that does not match its digest") {
    WriteFile(BlobPath(tmp / "layout", w.manifest_digest),
              ReadFile(BlobPath(tmp / "layout", w.manifest_digest)) + " ");
    CHECK_THAT(LoadError(tmp / "layout"),
               Contains("manifest " + w.manifest_digest + ": size mismatch"));
  }
  SECTION("a descriptor size that lies") {
    ImageRecipe bad = r;
    bad.edit_manifest = [](nlohmann::json& m) {
      m["layers"][0]["size"] = m["layers"][0]["size"].get<int>() + 1;
    };
    WriteOciLayout(tmp / "size", bad);
    CHECK_THAT(LoadError(tmp / "size"), Contains("layer 0") && Contains("size mismatch"));
  }
}

TEST_CASE("malformed, huge and unknown JSON documents", "[load][bad]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", SampleRecipe());
  SECTION("malformed index.json") {
    WriteFile(tmp / "layout/index.json", "{\"manifests\": [");
    CHECK_THAT(LoadError(tmp / "layout"), Contains("index.json: malformed JSON"));
  }
  SECTION("huge index.json") {
    WriteFile(tmp / "layout/index.json", "{\"x\":\"" + std::string(5 << 20, 'a') + "\"}");
    CHECK_THAT(LoadError(tmp / "layout"),
               Contains("index.json: larger than the limit of 4194304 bytes"));
  }
  SECTION("deeply nested JSON") {
    WriteFile(tmp / "layout/index.json",
              "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}");
    CHECK_THAT(LoadError(tmp / "layout"), Contains("JSON nested too deeply"));
  }
  SECTION("unknown layer media type") {
    ImageRecipe r = SampleRecipe();
    r.edit_manifest = [](nlohmann::json& m) {
      m["layers"][1]["mediaType"] = "application/x-squashfs";
    };
    WriteOciLayout(tmp / "mt", r);
    CHECK_THAT(LoadError(tmp / "mt"), Contains("unknown layer media type application/x-squashfs"));
  }
  SECTION("unknown manifest media type") {
    ImageRecipe r = SampleRecipe();
    r.edit_manifest = [](nlohmann::json& m) { m["mediaType"] = "application/vnd.example+json"; };
    WriteOciLayout(tmp / "mm", r);
    std::string idx = ReadFile(tmp / "mm/index.json");
    nlohmann::json j = nlohmann::json::parse(idx);
    j["manifests"][0]["mediaType"] = "application/vnd.example+json";
    WriteFile(tmp / "mm/index.json", j.dump());
    CHECK_THAT(LoadError(tmp / "mm"), Contains("unknown media type application/vnd.example+json"));
  }
  SECTION("a digest that tries to leave the layout") {
    nlohmann::json j = nlohmann::json::parse(ReadFile(tmp / "layout/index.json"));
    j["manifests"][0]["digest"] = "sha256:../../../../etc/passwd";
    WriteFile(tmp / "layout/index.json", j.dump());
    CHECK_THAT(LoadError(tmp / "layout"),
               Contains("malformed digest 'sha256:../../../../etc/passwd'"));
  }
  SECTION("config with wrong types and a diff_id count that does not match") {
    ImageRecipe r = SampleRecipe();
    r.edit_config = [](nlohmann::json& c) { c["config"]["Env"] = "PATH=/bin"; };
    WriteOciLayout(tmp / "env", r);
    CHECK_THAT(LoadError(tmp / "env"), Contains("'Env' is not a list of strings"));
    ImageRecipe r2 = SampleRecipe();
    r2.edit_config = [](nlohmann::json& c) { c["rootfs"]["diff_ids"].erase(0); };
    WriteOciLayout(tmp / "count", r2);
    CHECK_THAT(LoadError(tmp / "count"),
               Contains("lists 2 diff_ids but the manifest has 3 layers"));
  }
  CHECK(w.layers.size() == 3);
}

TEST_CASE("hostile entries are clamped or recorded, never fatal", "[load][bad]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(
      MakeLayer({Dir("etc"), File("../../etc/climbed", "up"), File("/abs/file", "abs"),
                 Symlink("loop", "loop"), Symlink("out", "../../../../host"),
                 Hardlink("hl", "missing/target"), CharDevice("dev/nvidia0", 195, 0),
                 BlockDevice("dev/sda", 8, 0), Fifo("run/fifo"), File("dup", "one"),
                 File("dup", "two"), File("loop/under", "x")},
                Compression::kGzip, "hostile"));
  WriteOciLayout(tmp / "layout", r);
  Image img = Load("oci:" + (tmp / "layout").string(), CaptureAll());
  CHECK(Content(img, "/etc/climbed") == "up");
  CHECK(Content(img, "/abs/file") == "abs");
  CHECK(Content(img, "/dup") == "two");
  CHECK(img.tree.Find("/dev/nvidia0")->type == NodeType::kCharDevice);
  CHECK(img.tree.Find("/dev/sda")->type == NodeType::kBlockDevice);
  CHECK(img.tree.Find("/run/fifo")->type == NodeType::kFifo);
  CHECK_FALSE(img.tree.Resolve("/loop"));
  CHECK(img.tree.Resolve("/out/x")->path == "/host/x");
  CHECK(img.tree.Find("/hl") == nullptr);
  std::vector<std::string> messages;
  for (const auto& d : img.diagnostics) {
    CHECK(d.layer == 0);
    messages.push_back(d.path + ": " + d.message);
  }
  CHECK(
      messages ==
      std::vector<std::string>{
          "/etc/climbed: tar entry '../../etc/climbed' climbs above the root; read as /etc/climbed",
          "/abs/file: tar entry '/abs/file' is absolute; read as /abs/file",
          "/hl: hard link to missing target /missing/target; skipped",
          "/loop/under: parent directory is not a directory or is a symlink loop; entry skipped",
      });
}

TEST_CASE("GNU long names, PAX names and multi-member gzip are read", "[load]") {
  TempDir tmp;
  std::string long_name = "opt/" + std::string(150, 'n') + "/libcudnn_ops.so.9";
  ImageRecipe r;
  LayerRecipe gnu = MakeLayer({File(long_name, "gnu"), Symlink("opt/short", std::string(120, 't'))},
                              Compression::kGzip, "gnu");
  gnu.format = TarFormat::kGnu;
  r.layers.push_back(gnu);
  r.layers.push_back(
      MakeLayer({File("pax/" + std::string(200, 'p'), "pax")}, Compression::kNone, "pax"));
  // Two gzip members, concatenated: one stream (as pigz and some registries write).
  std::string diff_id;
  std::string tar =
      Compressed({File("a", "1"), File("b", "2")}, Compression::kNone, tmp.path(), &diff_id);
  WriteFile(tmp / "part1", tar.substr(0, 1024));
  WriteFile(tmp / "part2", tar.substr(1024));
  CompressFile(tmp / "part1", tmp / "part1.gz", Compression::kGzip);
  CompressFile(tmp / "part2", tmp / "part2.gz", Compression::kGzip);
  LayerRecipe multi;
  multi.raw = ReadFile(tmp / "part1.gz") + ReadFile(tmp / "part2.gz");
  multi.raw_diff_id = diff_id;
  r.layers.push_back(multi);
  WriteOciLayout(tmp / "layout", r);
  Image img = Load("oci:" + (tmp / "layout").string(), CaptureAll());
  CHECK(Content(img, "/" + long_name) == "gnu");
  CHECK(img.tree.Find("/opt/short")->link_target == std::string(120, 't'));
  CHECK(Content(img, "/pax/" + std::string(200, 'p')) == "pax");
  CHECK(Content(img, "/a") == "1");
  CHECK(Content(img, "/b") == "2");
}

TEST_CASE("read_layer: the layers it refuses are neither read nor merged", "[load]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(MakeLayer({Dir("a"), File("a/one", "1")}, Compression::kGzip, "one"));
  r.layers.push_back(MakeLayer({File("a/two", "2")}, Compression::kZstd, "two"));
  r.layers.push_back(
      MakeLayer({File("a/three", "3"), Whiteout("a/one")}, Compression::kGzip, "three"));
  WrittenImage written = WriteOciLayout(tmp / "layout", r);
  WriteFile(BlobPath(tmp / "layout", written.layers[1].digest), "garbage");  // unreadable now
  LoadOptions o = CaptureAll();
  o.read_layer = [](int layer) { return layer != 1; };
  Image img = Load("oci:" + (tmp / "layout").string(), o);
  CHECK(img.layers.size() == 3);
  CHECK_FALSE(img.tree.Find("/a/one"));  // layer 2's whiteout still applies
  CHECK_FALSE(img.tree.Find("/a/two"));
  CHECK(Content(img, "/a/three") == "3");
  CHECK(img.tree.Find("/a/three")->layer == 2);
}

TEST_CASE("capture keeps prefixes, never whole large files", "[load]") {
  TempDir tmp;
  ImageRecipe r;
  r.layers.push_back(MakeLayer({File("big", std::string(3 << 20, 'B')), File("small", "s")},
                               Compression::kGzip, "x"));
  WriteOciLayout(tmp / "layout", r);
  LoadOptions o;
  o.capture = [](std::string_view path, uint64_t, uint32_t) {
    return path == "/big" ? CapturePrefix(4096) : nullptr;
  };
  Image img = Load("oci:" + (tmp / "layout").string(), o);
  const Node* big = img.tree.Find("/big");
  REQUIRE(big->content);
  CHECK(big->content->size() == (3u << 20));
  CHECK(big->content->captured_bytes() == 4096);
  CHECK(img.tree.Find("/small")->content == nullptr);
}

TEST_CASE("capture with MD5 or SHA-256 digests the whole file, keeps what the inner one keeps",
          "[load]") {
  TempDir tmp;
  std::string big(3 << 20, 'B');
  big[12345] = 'x';
  ImageRecipe r;
  r.layers.push_back(
      MakeLayer({File("big", big), File("plain", "p"), File("sha", big)}, Compression::kGzip, "x"));
  WriteOciLayout(tmp / "layout", r);
  LoadOptions o;
  o.capture = [](std::string_view path, uint64_t, uint32_t) {
    if (path == "/sha") return CaptureWithSha256(CaptureWithMd5(CapturePrefix(4096)));
    return path == "/big" ? CaptureWithMd5(CapturePrefix(4096)) : CapturePrefix(4096);
  };
  Image img = Load("oci:" + (tmp / "layout").string(), o);
  const Node* n = img.tree.Find("/big");
  REQUIRE(n->content);
  CHECK(n->content->captured_bytes() == 4096);
  CHECK(n->content->md5() == util::Md5Hex(big));
  REQUIRE(img.tree.Find("/plain")->content);
  CHECK(img.tree.Find("/plain")->content->md5().empty());  // not asked for
  CHECK(n->content->sha256().empty());
  // Both digests over one stream (an SBOM reading of a file IC015 also compares).
  const Node* both = img.tree.Find("/sha");
  REQUIRE(both->content);
  CHECK(both->content->captured_bytes() == 4096);
  CHECK(both->content->md5() == util::Md5Hex(big));
  CHECK(both->content->sha256() == util::Sha256Digest(big).substr(7));
}

}  // namespace
}  // namespace imgcheck::image
