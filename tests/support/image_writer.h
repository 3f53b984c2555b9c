// Test fixtures: container images written from readable recipes, in every on-disk form imgcheck
// reads. Nothing here is clever: a layer is a list of tar entries, an image a list of layers.
//
//   using namespace imgcheck::testing;
//   ImageRecipe r;
//   r.env = {"PATH=/usr/bin"};
//   r.layers.push_back({{Dir("usr/lib"), File("usr/lib/a.so", "bytes"), Symlink("usr/lib/b",
//   "a.so")},
//                       Compression::kGzip, "COPY a.so /usr/lib/"});
//   r.layers.push_back(EmptyLayer("ENV X=1"));             // history only, no blob
//   r.layers.push_back({{Whiteout("usr/lib/b"), Opaque("etc")}, Compression::kZstd, "RUN rm b"});
//   WrittenImage img = WriteOciLayout(dir / "layout", r);     // "oci:<dir>/layout:latest"
//   WriteOciArchive(dir / "layout", dir / "img.tar");          // "oci-archive:<dir>/img.tar"
//   WriteDockerArchive(dir / "d.tar", r);                      // "docker-archive:<dir>/d.tar"
//
// Entry paths go into the tar verbatim (so "../x" and "/abs" make hostile fixtures). Layers are
// streamed to disk, never held whole in memory, so FileFrom() may copy large host files.
// Corrupting fixtures: edit the bytes under BlobPath() afterwards, give a layer `raw` bytes, or
// change the JSON through the edit_* hooks before it is written (and digested).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace imgcheck::testing {

enum class EntryKind { kFile, kDir, kSymlink, kHardlink, kCharDevice, kBlockDevice, kFifo };

/// One tar entry. Build them with the helpers below.
struct Entry {
  EntryKind kind = EntryKind::kFile;
  std::string path;                 ///< name as stored in the tar ("usr/lib/x")
  std::string content;              ///< kFile: the bytes (unless host_path is set)
  std::filesystem::path host_path;  ///< kFile: copy the bytes from this host file instead
  std::string target;               ///< kSymlink: link text; kHardlink: the linked tar name
  uint32_t mode = 0644;             ///< permission bits
  uint32_t dev_major = 0, dev_minor = 0;
};

Entry File(std::string path, std::string content, uint32_t mode = 0644);
Entry FileFrom(std::string path, std::filesystem::path host_path, uint32_t mode = 0755);
Entry Dir(std::string path, uint32_t mode = 0755);
Entry Symlink(std::string path, std::string target);
Entry Hardlink(std::string path, std::string target);
/// `.wh.NAME` beside NAME: deletes "dir/NAME" from the layers below (OCI layer.md "Whiteouts").
Entry Whiteout(const std::string& path);
/// `dir/.wh..wh..opq`: hides everything the layers below had under `dir`.
Entry Opaque(std::string dir);
Entry CharDevice(std::string path, uint32_t major, uint32_t minor);
Entry BlockDevice(std::string path, uint32_t major, uint32_t minor);
Entry Fifo(std::string path);

enum class Compression { kNone, kGzip, kZstd };
enum class TarFormat { kPax, kGnu, kUstar };

struct LayerRecipe {
  std::vector<Entry> entries;
  Compression compression = Compression::kGzip;
  std::string created_by;    ///< its history line
  bool empty_layer = false;  ///< history entry only ("ENV ..."): no blob, no diff_id
  TarFormat format = TarFormat::kPax;
  /// When set, the blob's bytes verbatim (entries and compression are ignored); its diff_id is
  /// `raw_diff_id` or else the digest of `raw` itself.
  std::optional<std::string> raw = std::nullopt;
  std::optional<std::string> raw_diff_id = std::nullopt;
};

/// A layer of `entries`, compressed with `c`, made by the history line `created_by`.
LayerRecipe MakeLayer(std::vector<Entry> entries, Compression c, std::string created_by);
LayerRecipe EmptyLayer(std::string created_by);

struct ImageRecipe {
  std::vector<LayerRecipe> layers;  ///< bottom first; empty_layer ones only add history
  std::vector<std::string> env;
  std::map<std::string, std::string> labels;
  std::vector<std::string> entrypoint, cmd;
  std::string os = "linux", architecture = "amd64", variant;
  bool docker_media_types = false;  ///< Docker v2 schema 2 media types instead of OCI ones
  /// Change the JSON before it is serialised and digested (for malformed-input tests).
  std::function<void(nlohmann::json&)> edit_config, edit_manifest;
};

struct WrittenLayer {
  std::string digest;   ///< "sha256:..." of the stored (compressed) blob
  std::string diff_id;  ///< "sha256:..." of the uncompressed tar
  std::string media_type;
  uint64_t compressed_size = 0, size = 0;
  std::string created_by;
};

struct WrittenImage {
  std::string manifest_digest, config_digest;
  uint64_t manifest_size = 0;
  std::string manifest_media_type;
  std::vector<WrittenLayer> layers;  ///< real layers only, bottom first
};

/// Writes the uncompressed tar of `entries` to `out`; returns its "sha256:..." digest.
std::string WriteLayerTar(const std::vector<Entry>& entries, const std::filesystem::path& out,
                          TarFormat format = TarFormat::kPax);
/// Compresses file `in` into `out` (kNone copies).
void CompressFile(const std::filesystem::path& in, const std::filesystem::path& out, Compression c);

/// Writes the layers, config and manifest of `r` as blobs under `blob_dir` (<blob_dir>/<hex>).
WrittenImage WriteImageBlobs(const std::filesystem::path& blob_dir, const ImageRecipe& r);

/// An OCI image layout at `dir` (created) holding `r`, tagged `ref` in index.json
/// ("org.opencontainers.image.ref.name"). An existing layout gains the new image.
WrittenImage WriteOciLayout(const std::filesystem::path& dir, const ImageRecipe& r,
                            const std::string& ref = "latest");

/// A layout whose index.json points at an image index (OCI) or manifest list (Docker media types
/// when the first recipe has docker_media_types) with one manifest per recipe, each carrying
/// its recipe's os/architecture/variant as platform. Returns the images in order.
std::vector<WrittenImage> WriteMultiPlatformLayout(const std::filesystem::path& dir,
                                                   const std::vector<ImageRecipe>& recipes,
                                                   const std::string& ref = "latest");

/// The path of blob `digest` inside OCI layout `dir`.
std::filesystem::path BlobPath(const std::filesystem::path& dir, const std::string& digest);

/// A tar of the directory `dir` (names relative to it): an oci-archive when `dir` is a layout.
void TarDirectory(const std::filesystem::path& dir, const std::filesystem::path& out_tar);
inline void WriteOciArchive(const std::filesystem::path& layout, const std::filesystem::path& out) {
  TarDirectory(layout, out);
}

enum class DockerArchiveForm {
  kLegacy,  ///< manifest.json + <id>/layer.tar + <config-hex>.json (docker save before 25)
  kOci,     ///< index.json + oci-layout + blobs/sha256 + manifest.json (docker save 25+)
};
/// A `docker save` tarball of `r` tagged `repo_tag`. Legacy archives store layers as the recipe
/// compresses them (real ones are uncompressed: use Compression::kNone for realism).
WrittenImage WriteDockerArchive(const std::filesystem::path& out_tar, const ImageRecipe& r,
                                const std::string& repo_tag = "example/image:latest",
                                DockerArchiveForm form = DockerArchiveForm::kLegacy);

/// The catalog's worked example, its libraries compiled under `dir`/so. Layer 0: cuDNN 8.9.2
/// from dpkg (libcudnn.so.8.9.2, its soname link, libcudnn_adv_infer.so.8.9.2), ld.so.conf
/// including nvidia.conf (/usr/local/nvidia/lib64), Ubuntu 22.04's os-release and a 200 kB file
/// nothing reads. Layer 1 (zstd): deletes libcudnn_adv_infer, adds the driver's
/// libcuda.so.535.104.05 and CUDA 12.1's compat libcuda.so.530.30.02. Env and labels name
/// cuDNN 8.9.2.26.
ImageRecipe CudnnDriverRecipe(const std::filesystem::path& dir);
inline constexpr const char* kCudnnDriverLibDir = "usr/lib/x86_64-linux-gnu/";

}  // namespace imgcheck::testing
