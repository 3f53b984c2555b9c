// Hostile images against the image stage (issue #13), through the built binary under
// HostileCommand (1 GiB of data memory, killed when it hangs): files of a layout that are links
// out of it, FIFOs or devices; a descriptor whose size lies; tars that would fill memory with
// names or entries; a zstd frame asking for a 2 GB window; an oci-archive read once per blob; a
// registry that drips, never ends or outlasts the deadline; a petabyte sparse file in dir:. Each
// run ends at its bound with exit 2 and one line naming the flag that raises it (or, where the
// input is fine, with the right answer), never with a crash or a hang.
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;

namespace {

constexpr int kSeconds = 60;  // HostileCommand's kill timeout: far above any bounded run here

// A one-layer image; `extra` entries are added to its layer.
ImageRecipe SmallImage(std::vector<Entry> extra = {}, Compression c = Compression::kGzip) {
  ImageRecipe r;
  std::vector<Entry> entries = {Dir("etc"), File("etc/os-release", "ID=debian\n")};
  entries.insert(entries.end(), extra.begin(), extra.end());
  r.layers.push_back(MakeLayer(std::move(entries), c, "ADD rootfs.tar /"));
  return r;
}

CommandResult Layers(const std::string& image, const std::string& flags = "") {
  return Run(HostileCommand("layers --quiet --no-cache " + flags + " " + image, kSeconds));
}

// Exit 2 with one line (no trailing newline counted) containing each of `parts`.
void ExpectOneLineError(const CommandResult& r, const std::vector<std::string>& parts) {
  INFO(r.output);
  CHECK(r.status == 2);
  std::string line = r.output;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  CHECK(line.find('\n') == std::string::npos);
  for (const std::string& p : parts) CHECK_THAT(line, Contains(p));
}

std::string Oci(const fs::path& layout) { return "oci:" + layout.string(); }

}  // namespace

TEST_CASE("layout files that are links out of it, FIFOs or devices are refused, never read",
          "[cli][hostile]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", SmallImage());
  fs::path layer = BlobPath(tmp / "layout", w.layers[0].digest);
  WriteFile(tmp / "secret", "host file outside the layout\n");

  SECTION("a layer blob that is a symlink out of the layout") {
    fs::remove(layer);
    fs::create_symlink(tmp / "secret", layer);
    ExpectOneLineError(Layers(Oci(tmp / "layout")),
                       {layer.string(), "symbolic link", "not followed"});
  }
  SECTION("index.json that is a symlink out of the layout") {
    fs::rename(tmp / "layout/index.json", tmp / "index.json");
    fs::create_symlink(tmp / "index.json", tmp / "layout/index.json");
    ExpectOneLineError(Layers(Oci(tmp / "layout")),
                       {(tmp / "layout/index.json").string(), "symbolic link"});
  }
  SECTION("a blob behind a symlinked directory") {
    fs::rename(tmp / "layout/blobs", tmp / "blobs");
    fs::create_symlink(tmp / "blobs", tmp / "layout/blobs");
    ExpectOneLineError(Layers(Oci(tmp / "layout")), {"symbolic link or lies behind one"});
  }
  SECTION("a layer blob that is a FIFO (no writer: reading it would block for ever)") {
    fs::remove(layer);
    REQUIRE(mkfifo(layer.c_str(), 0644) == 0);
    ExpectOneLineError(Layers(Oci(tmp / "layout")), {layer.string(), "is a FIFO"});
  }
  SECTION("a layer blob that is a link to /dev/zero (endless)") {
    fs::remove(layer);
    fs::create_symlink("/dev/zero", layer);
    ExpectOneLineError(Layers(Oci(tmp / "layout")), {layer.string(), "symbolic link"});
  }
  SECTION("an oci-archive that is a FIFO") {
    fs::path fifo = tmp / "archive.tar";
    REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
    ExpectOneLineError(Layers("oci-archive:" + fifo.string()), {fifo.string(), "is a FIFO"});
  }
}

TEST_CASE("a layer whose descriptor size lies fails before a byte of it is read",
          "[cli][hostile]") {
  TempDir tmp;
  ImageRecipe r = SmallImage();
  r.edit_manifest = [](nlohmann::json& m) { m["layers"][0]["size"] = int64_t{1} << 40; };
  WrittenImage w = WriteOciLayout(tmp / "layout", r);
  ExpectOneLineError(Layers(Oci(tmp / "layout")),
                     {"layer 0 " + w.layers[0].digest,
                      "size mismatch: descriptor says " + std::to_string(int64_t{1} << 40) +
                          " bytes, blob has " + std::to_string(w.layers[0].compressed_size)});
}

TEST_CASE("tars that would fill memory stop at the image's limits", "[cli][hostile]") {
  TempDir tmp;
  SECTION("many long PAX names") {
    std::vector<Entry> entries;
    entries.reserve(200);
    for (int i = 0; i < 200; ++i)
      entries.push_back(
          File(std::string(60'000, static_cast<char>('a' + i % 26)) + std::to_string(i), "x"));
    WriteOciLayout(tmp / "layout", SmallImage(entries));
    ExpectOneLineError(
        Layers(Oci(tmp / "layout"), "--max-names-mb 4"),
        {"paths and link targets", "limit of 4 MiB", "raise it with --max-names-mb"});
    // Under the default limit the same image is read.
    CommandResult ok = Layers(Oci(tmp / "layout"));
    INFO(ok.output);
    CHECK(ok.status == 0);
  }
  SECTION("too many entries, counted over all layers") {
    ImageRecipe r;
    for (int layer = 0; layer < 3; ++layer) {
      std::vector<Entry> entries;
      entries.reserve(400);
      for (int i = 0; i < 400; ++i)
        entries.push_back(File("f" + std::to_string(layer) + "_" + std::to_string(i), ""));
      r.layers.push_back(MakeLayer(entries, Compression::kGzip, "RUN touch"));
    }
    WriteOciLayout(tmp / "layout", r);
    // 1,200 entries: each layer alone is under 1,000, the image is not, whatever --jobs does.
    ExpectOneLineError(Layers(Oci(tmp / "layout"), "--jobs 3 --max-files 1000"),
                       {"tar entries (all layers)", "limit of 1000", "--max-files"});
    CHECK(Layers(Oci(tmp / "layout"), "--jobs 3 --max-files 1300").status == 0);
  }
  SECTION("too many captured bytes") {
    // Catalogued metadata is captured whole: three 600 KiB dpkg status files in three layers.
    ImageRecipe r;
    for (int layer = 0; layer < 3; ++layer)
      r.layers.push_back(MakeLayer(
          {File("var/lib/dpkg/status", std::string(600 << 10, static_cast<char>('a' + layer)))},
          Compression::kGzip, "RUN apt-get install"));
    WriteOciLayout(tmp / "layout", r);
    ExpectOneLineError(Layers(Oci(tmp / "layout"), "--max-captured-mb 1"),
                       {"file contents kept", "limit of 1 MiB", "--max-captured-mb"});
  }
}

TEST_CASE("a zstd frame asking for a 2 GB window is refused, not allocated", "[cli][hostile]") {
  TempDir tmp;
  ImageRecipe r;
  // RFC 8878: magic, Frame_Header_Descriptor 0 (a Window_Descriptor follows, no content size),
  // Window_Descriptor 0xA8 (exponent 21: 2^31 bytes), then one empty last raw block.
  LayerRecipe layer = EmptyLayer("");
  layer.empty_layer = false;
  layer.raw = std::string("\x28\xB5\x2F\xFD\x00\xA8\x01\x00\x00", 9);
  layer.raw_diff_id = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  r.layers.push_back(layer);
  WriteOciLayout(tmp / "layout", r);
  ExpectOneLineError(Layers(Oci(tmp / "layout")),
                     {"zstd frame's window", "limit of 128 MiB", "--max-zstd-window-mb"});
}

TEST_CASE("an oci-archive is indexed once, not re-read for every blob", "[cli][hostile]") {
  TempDir tmp;
  // 2,000 layers (the same small blob) behind 40,000 other members (the archive is written in
  // name order: a-junk/ before blobs/): reading the archive again for each blob, as imgcheck once
  // did, meant 2,000 passes over 40,000 headers.
  ImageRecipe r;
  for (int i = 0; i < 2000; ++i)
    r.layers.push_back(MakeLayer({File("etc/x", "same")}, Compression::kGzip, "RUN x"));
  WriteOciLayout(tmp / "layout", r);
  // Compressed, it is decompressed once to a private temporary file and read in place from
  // there (it was once decompressed again for every blob: 2,000 blobs took 82 s).
  WriteOciArchive(tmp / "layout", tmp / "small.tar");
  CompressFile(tmp / "small.tar", tmp / "small.tar.gz", Compression::kGzip);
  CommandResult gz = Run(HostileCommand(
      "layers --quiet --no-cache --format json oci-archive:" + (tmp / "small.tar.gz").string(),
      30));
  INFO(gz.output.substr(0, 2000));
  REQUIRE(gz.status == 0);
  CHECK(nlohmann::json::parse(gz.output)["layers"].size() == 2000);
  // The temporary file is bounded: a decompression bomb is refused at once.
  fs::create_directories(tmp / "bomb");
  WriteFile(tmp / "bomb/zeros", std::string(3 << 20, '\0'));
  TarDirectory(tmp / "bomb", tmp / "bomb.tar");
  CompressFile(tmp / "bomb.tar", tmp / "bomb.tar.gz", Compression::kGzip);
  ExpectOneLineError(Layers("oci-archive:" + (tmp / "bomb.tar.gz").string(), "--max-spool-mb 1"),
                     {"the decompressed size of", "limit of 1 MiB", "--max-spool-mb"});

  fs::create_directories(tmp / "layout/a-junk");
  for (int i = 0; i < 40'000; ++i) WriteFile(tmp / "layout/a-junk" / std::to_string(i), "");
  WriteOciArchive(tmp / "layout", tmp / "image.tar");
  // One pass takes a fraction of a second; a pass per blob took about a minute.
  CommandResult ok = Run(HostileCommand(
      "layers --quiet --no-cache --format json oci-archive:" + (tmp / "image.tar").string(), 30));
  INFO(ok.output.substr(0, 2000));
  REQUIRE(ok.status == 0);
  CHECK(nlohmann::json::parse(ok.output)["layers"].size() == 2000);
}

namespace {

// A registry on a loopback port, serving one image whose blob `endless_digest` never ends and
// whose manifest drips when `drip` says so.
class HostileRegistry {
 public:
  /// kEndlessLayerNoSize: as kEndlessLayer, with no size in the layer's descriptor.
  enum class Mode { kDripManifest, kFastManifestForever, kEndlessLayer, kEndlessLayerNoSize };

  explicit HostileRegistry(Mode mode) : mode_(mode), port_(FreeLoopbackPort()) {
    config_ = nlohmann::json{{"architecture", "amd64"},
                             {"os", "linux"},
                             {"rootfs", {{"type", "layers"}, {"diff_ids", {kLayerDigest}}}}}
                  .dump();
    manifest_ = nlohmann::json{{"schemaVersion", 2},
                               {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                               {"config",
                                {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                                 {"digest", Digest(config_)},
                                 {"size", config_.size()}}},
                               {"layers",
                                {{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                                  {"digest", kLayerDigest},
                                  {"size", 2048}}}}}
                    .dump();
    if (mode_ == Mode::kEndlessLayerNoSize) {
      nlohmann::json m = nlohmann::json::parse(manifest_);
      m["layers"][0].erase("size");
      manifest_ = m.dump();
    }
    server_.Get("/v2/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{}", "application/json");
    });
    server_.Get(R"(/v2/img/manifests/.*)", [this](const httplib::Request&, httplib::Response& res) {
      if (mode_ == Mode::kEndlessLayer || mode_ == Mode::kEndlessLayerNoSize) {
        res.set_content(manifest_, "application/vnd.oci.image.manifest.v1+json");
        return;
      }
      // One byte a second, or 2 KiB every 100 ms (fast enough for --read-timeout) for ever.
      bool drip = mode_ == Mode::kDripManifest;
      res.set_chunked_content_provider(
          "application/vnd.oci.image.manifest.v1+json",
          [this, drip](size_t, httplib::DataSink& sink) {
            std::string piece = drip ? std::string(" ") : std::string(2048, ' ');
            std::this_thread::sleep_for(std::chrono::milliseconds(drip ? 1000 : 100));
            return !stop_ && sink.write(piece.data(), piece.size());
          });
    });
    server_.Get(R"(/v2/img/blobs/(.*))",
                [this](const httplib::Request& req, httplib::Response& res) {
                  if (req.matches[1] == Digest(config_)) {
                    res.set_content(config_, "application/octet-stream");
                    return;
                  }
                  res.set_chunked_content_provider(
                      "application/octet-stream", [this](size_t, httplib::DataSink& sink) {
                        static const std::string kBlock(1 << 16, '\0');
                        return !stop_ && sink.write(kBlock.data(), kBlock.size());
                      });
                });
    REQUIRE(server_.bind_to_port("127.0.0.1", port_));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~HostileRegistry() {
    stop_ = true;
    server_.stop();
    thread_.join();
  }
  std::string Reference() const { return "127.0.0.1:" + std::to_string(port_) + "/img:latest"; }

 private:
  static constexpr const char* kLayerDigest =
      "sha256:1111111111111111111111111111111111111111111111111111111111111111";
  static std::string Digest(const std::string& bytes) {
    TempDir d;
    WriteFile(d / "b", bytes);
    CommandResult r = Run("sha256sum " + Quote(d / "b"));
    return "sha256:" + r.output.substr(0, 64);
  }

  Mode mode_;
  int port_;
  std::string config_, manifest_;
  std::atomic<bool> stop_{false};
  httplib::Server server_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("a registry that drips, never ends or outlasts the deadline is cut off",
          "[cli][hostile][registry]") {
  SECTION("one byte a second: the per-read bound") {
    HostileRegistry reg(HostileRegistry::Mode::kDripManifest);
    ExpectOneLineError(Layers(reg.Reference(), "--read-timeout 2 --deadline 50"),
                       {"less than 1024 bytes in 2 s", "--read-timeout"});
  }
  SECTION("fast enough for every read, but for ever: the deadline") {
    HostileRegistry reg(HostileRegistry::Mode::kFastManifestForever);
    ExpectOneLineError(Layers(reg.Reference(), "--read-timeout 5 --deadline 3"),
                       {"from 127.0.0.1", "limit of 3 s", "raise it with --deadline"});
  }
  SECTION("a layer blob without end stops at its descriptor's size") {
    HostileRegistry reg(HostileRegistry::Mode::kEndlessLayer);
    ExpectOneLineError(Layers(reg.Reference()),
                       {"layer 0", "sent more than its size of 2048 bytes"});
  }
  SECTION("a layer descriptor without a size is refused before its blob is read") {
    // Without the size, the endless blob above would be read until --deadline (an hour).
    HostileRegistry reg(HostileRegistry::Mode::kEndlessLayerNoSize);
    ExpectOneLineError(Layers(reg.Reference(), "--deadline 3600"),
                       {"descriptor of " + std::string(64, '1').insert(0, "sha256:") +
                        " has no size (the OCI image spec requires one)"});
  }
}

TEST_CASE("a petabyte sparse library in dir: is read by its data, not its holes",
          "[cli][hostile][dir]") {
  TempDir tmp;
  fs::create_directories(tmp / "root/usr/lib");
  fs::path lib = tmp / "root/usr/lib/libcudnn.so.8";
  SharedObject so;
  so.soname = "libcudnn.so.8";
  Compile(so, lib);
  // As large as the file system allows, up to 1 PB (ext4 stops at 16 TiB, tmpfs and xfs do not).
  uint64_t size = uint64_t{1} << 50;
  while (truncate(lib.c_str(), static_cast<off_t>(size)) != 0) {
    REQUIRE(errno == EFBIG);
    size >>= 1;
    REQUIRE(size >= (uint64_t{1} << 40));
  }
  CommandResult r = Run(HostileCommand(
      "catalog --quiet --no-cache --format json dir:" + (tmp / "root").string(), kSeconds));
  INFO(r.output.substr(0, 2000));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("libcudnn.so.8"));
}
