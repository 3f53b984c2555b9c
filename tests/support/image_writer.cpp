#include "image_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "support.h"
#include "util/sha256.h"

namespace imgcheck::testing {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr time_t kMtime = 1700000000;

// Writes what libarchive produces to a file, hashing it on the way.
struct HashingFile {
  std::ofstream out;
  util::Sha256 sha;
  uint64_t size = 0;
};

la_ssize_t WriteCallback(struct archive*, void* client, const void* buf, size_t n) {
  auto* f = static_cast<HashingFile*>(client);
  std::string_view bytes(static_cast<const char*>(buf), n);
  f->sha.Update(bytes);
  f->out.write(bytes.data(), static_cast<std::streamsize>(n));
  f->size += n;
  return f->out ? static_cast<la_ssize_t>(n) : -1;
}

using ArchivePtr = std::unique_ptr<struct archive, decltype(&archive_write_free)>;
using EntryPtr = std::unique_ptr<struct archive_entry, decltype(&archive_entry_free)>;

void Check(struct archive* a, int rc, const std::string& what) {
  if (rc < ARCHIVE_WARN) throw std::runtime_error(what + ": " + archive_error_string(a));
}

uint64_t FileSize(const fs::path& p) { return fs::file_size(p); }

void CopyStreamInto(struct archive* a, std::istream& in) {
  std::array<char, 1 << 16> buf;
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    if (archive_write_data(a, buf.data(), static_cast<size_t>(in.gcount())) < 0)
      throw std::runtime_error(std::string("tar write: ") + archive_error_string(a));
  }
}

std::string Hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

std::string LayerMediaType(Compression c, bool docker) {
  if (docker && c == Compression::kGzip) return "application/vnd.docker.image.rootfs.diff.tar.gzip";
  if (docker && c == Compression::kNone) return "application/vnd.docker.image.rootfs.diff.tar";
  switch (c) {
    case Compression::kNone:
      return "application/vnd.oci.image.layer.v1.tar";
    case Compression::kGzip:
      return "application/vnd.oci.image.layer.v1.tar+gzip";
    case Compression::kZstd:
      return "application/vnd.oci.image.layer.v1.tar+zstd";
  }
  return "";
}

// Stores `bytes` as blob <blob_dir>/<hex>; returns its digest.
std::string PutBlob(const fs::path& blob_dir, const std::string& bytes) {
  std::string digest = util::Sha256Digest(bytes);
  fs::create_directories(blob_dir);
  std::ofstream(blob_dir / Hex(digest), std::ios::binary) << bytes;
  return digest;
}

// Moves a finished temp file to its content-addressed name.
std::string MoveToBlob(const fs::path& blob_dir, const fs::path& tmp) {
  std::ifstream in(tmp, std::ios::binary);
  util::Sha256 sha;
  std::array<char, 1 << 16> buf;
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0)
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  std::string digest = "sha256:" + sha.HexDigest();
  fs::rename(tmp, blob_dir / Hex(digest));
  return digest;
}

json Descriptor(const std::string& media_type, const std::string& digest, uint64_t size) {
  return json{{"mediaType", media_type}, {"digest", digest}, {"size", size}};
}

json Platform(const ImageRecipe& r) {
  json p{{"os", r.os}, {"architecture", r.architecture}};
  if (!r.variant.empty()) p["variant"] = r.variant;
  return p;
}

void WriteText(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << s;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

// index.json of a layout, read or fresh.
json ReadIndex(const fs::path& dir) {
  fs::path p = dir / "index.json";
  if (!fs::exists(p))
    return json{{"schemaVersion", 2},
                {"mediaType", "application/vnd.oci.image.index.v1+json"},
                {"manifests", json::array()}};
  std::ifstream f(p);
  return json::parse(f);
}

void AddToIndex(const fs::path& dir, json desc, const std::string& ref) {
  json index = ReadIndex(dir);
  if (!ref.empty()) desc["annotations"] = {{"org.opencontainers.image.ref.name", ref}};
  index["manifests"].push_back(desc);
  WriteText(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  WriteText(dir / "index.json", index.dump());
}

}  // namespace

Entry File(std::string path, std::string content, uint32_t mode) {
  Entry e;
  e.path = std::move(path);
  e.content = std::move(content);
  e.mode = mode;
  return e;
}

Entry FileFrom(std::string path, fs::path host_path, uint32_t mode) {
  Entry e = File(std::move(path), "", mode);
  e.host_path = std::move(host_path);
  return e;
}

Entry Dir(std::string path, uint32_t mode) {
  Entry e;
  e.kind = EntryKind::kDir;
  e.path = std::move(path);
  e.mode = mode;
  return e;
}

Entry Symlink(std::string path, std::string target) {
  Entry e;
  e.kind = EntryKind::kSymlink;
  e.path = std::move(path);
  e.target = std::move(target);
  e.mode = 0777;
  return e;
}

Entry Hardlink(std::string path, std::string target) {
  Entry e;
  e.kind = EntryKind::kHardlink;
  e.path = std::move(path);
  e.target = std::move(target);
  return e;
}

Entry Whiteout(const std::string& path) {
  size_t k = path.rfind('/');
  std::string dir = k == std::string::npos ? "" : path.substr(0, k + 1);
  std::string base = k == std::string::npos ? path : path.substr(k + 1);
  return File(dir + ".wh." + base, "", 0644);
}

Entry Opaque(std::string dir) {
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return File(dir + ".wh..wh..opq", "", 0644);
}

Entry CharDevice(std::string path, uint32_t major, uint32_t minor) {
  Entry e;
  e.kind = EntryKind::kCharDevice;
  e.path = std::move(path);
  e.dev_major = major;
  e.dev_minor = minor;
  e.mode = 0666;
  return e;
}

Entry BlockDevice(std::string path, uint32_t major, uint32_t minor) {
  Entry e = CharDevice(std::move(path), major, minor);
  e.kind = EntryKind::kBlockDevice;
  e.mode = 0660;
  return e;
}

Entry Fifo(std::string path) {
  Entry e;
  e.kind = EntryKind::kFifo;
  e.path = std::move(path);
  return e;
}

LayerRecipe MakeLayer(std::vector<Entry> entries, Compression c, std::string created_by) {
  LayerRecipe l;
  l.entries = std::move(entries);
  l.compression = c;
  l.created_by = std::move(created_by);
  return l;
}

LayerRecipe EmptyLayer(std::string created_by) {
  LayerRecipe l;
  l.created_by = std::move(created_by);
  l.empty_layer = true;
  return l;
}

std::string WriteLayerTar(const std::vector<Entry>& entries, const fs::path& out,
                          TarFormat format) {
  HashingFile f;
  f.out.open(out, std::ios::binary);
  ArchivePtr a(archive_write_new(), archive_write_free);
  switch (format) {
    case TarFormat::kPax:
      archive_write_set_format_pax_restricted(a.get());
      break;
    case TarFormat::kGnu:
      archive_write_set_format_gnutar(a.get());
      break;
    case TarFormat::kUstar:
      archive_write_set_format_ustar(a.get());
      break;
  }
  archive_write_set_bytes_in_last_block(a.get(), 1);
  Check(a.get(), archive_write_open(a.get(), &f, nullptr, WriteCallback, nullptr), "tar open");
  for (const Entry& e : entries) {
    EntryPtr ae(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(ae.get(), e.path.c_str());
    archive_entry_set_mtime(ae.get(), kMtime, 0);
    archive_entry_set_uid(ae.get(), 0);
    archive_entry_set_gid(ae.get(), 0);
    archive_entry_set_perm(ae.get(), e.mode);
    uint64_t size = 0;
    std::ifstream host;
    switch (e.kind) {
      case EntryKind::kFile:
        archive_entry_set_filetype(ae.get(), AE_IFREG);
        if (!e.host_path.empty()) {
          host.open(e.host_path, std::ios::binary);
          if (!host) throw std::runtime_error("cannot read " + e.host_path.string());
          size = FileSize(e.host_path);
        } else {
          size = e.content.size();
        }
        break;
      case EntryKind::kDir:
        archive_entry_set_filetype(ae.get(), AE_IFDIR);
        break;
      case EntryKind::kSymlink:
        archive_entry_set_filetype(ae.get(), AE_IFLNK);
        archive_entry_set_symlink(ae.get(), e.target.c_str());
        break;
      case EntryKind::kHardlink:
        archive_entry_set_filetype(ae.get(), AE_IFREG);
        archive_entry_set_hardlink(ae.get(), e.target.c_str());
        break;
      case EntryKind::kCharDevice:
      case EntryKind::kBlockDevice:
        archive_entry_set_filetype(ae.get(),
                                   e.kind == EntryKind::kCharDevice ? AE_IFCHR : AE_IFBLK);
        archive_entry_set_rdevmajor(ae.get(), e.dev_major);
        archive_entry_set_rdevminor(ae.get(), e.dev_minor);
        break;
      case EntryKind::kFifo:
        archive_entry_set_filetype(ae.get(), AE_IFIFO);
        break;
    }
    archive_entry_set_size(ae.get(), static_cast<la_int64_t>(size));
    Check(a.get(), archive_write_header(a.get(), ae.get()), "tar header for " + e.path);
    if (e.kind == EntryKind::kFile) {
      if (host.is_open()) {
        CopyStreamInto(a.get(), host);
      } else if (!e.content.empty() &&
                 archive_write_data(a.get(), e.content.data(), e.content.size()) < 0) {
        throw std::runtime_error(std::string("tar write: ") + archive_error_string(a.get()));
      }
    }
  }
  Check(a.get(), archive_write_close(a.get()), "tar close");
  f.out.close();
  return "sha256:" + f.sha.HexDigest();
}

void CompressFile(const fs::path& in, const fs::path& out, Compression c) {
  if (c == Compression::kNone) {
    fs::copy_file(in, out, fs::copy_options::overwrite_existing);
    return;
  }
  // libarchive's "raw" format writes one file's bytes through the compression filter.
  HashingFile f;
  f.out.open(out, std::ios::binary);
  ArchivePtr a(archive_write_new(), archive_write_free);
  archive_write_set_format_raw(a.get());
  Check(a.get(),
        c == Compression::kGzip ? archive_write_add_filter_gzip(a.get())
                                : archive_write_add_filter_zstd(a.get()),
        "compression filter");
  archive_write_set_bytes_per_block(a.get(), 0);  // no padding of the compressed stream
  // No time in the gzip header: the same recipe gives the same blob digest in any second.
  if (c == Compression::kGzip)
    Check(a.get(), archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr),
          "gzip timestamp");
  Check(a.get(), archive_write_open(a.get(), &f, nullptr, WriteCallback, nullptr), "open");
  EntryPtr ae(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(ae.get(), "layer.tar");
  archive_entry_set_filetype(ae.get(), AE_IFREG);
  archive_entry_set_size(ae.get(), static_cast<la_int64_t>(FileSize(in)));
  Check(a.get(), archive_write_header(a.get(), ae.get()), "raw header");
  std::ifstream src(in, std::ios::binary);
  CopyStreamInto(a.get(), src);
  Check(a.get(), archive_write_close(a.get()), "compress close");
}

WrittenImage WriteImageBlobs(const fs::path& blob_dir, const ImageRecipe& r) {
  fs::create_directories(blob_dir);
  WrittenImage img;
  json history = json::array();
  json diff_ids = json::array();
  json layer_descs = json::array();
  int n = 0;
  for (const LayerRecipe& l : r.layers) {
    json h{{"created", "2023-11-14T22:13:20Z"}, {"created_by", l.created_by}};
    if (l.empty_layer) {
      h["empty_layer"] = true;
      history.push_back(h);
      continue;
    }
    history.push_back(h);
    WrittenLayer w;
    w.created_by = l.created_by;
    w.media_type = LayerMediaType(l.compression, r.docker_media_types);
    fs::path tar = blob_dir / ("tmp-layer-" + std::to_string(n));
    fs::path packed = blob_dir / ("tmp-packed-" + std::to_string(n++));
    if (l.raw) {
      WriteText(packed, *l.raw);
      w.diff_id = l.raw_diff_id ? *l.raw_diff_id : util::Sha256Digest(*l.raw);
      w.size = l.raw->size();
    } else {
      w.diff_id = WriteLayerTar(l.entries, tar, l.format);
      w.size = FileSize(tar);
      CompressFile(tar, packed, l.compression);
      fs::remove(tar);
    }
    w.compressed_size = FileSize(packed);
    w.digest = MoveToBlob(blob_dir, packed);
    diff_ids.push_back(w.diff_id);
    layer_descs.push_back(Descriptor(w.media_type, w.digest, w.compressed_size));
    img.layers.push_back(w);
  }

  json cfg_inner = json::object();
  if (!r.env.empty()) cfg_inner["Env"] = r.env;
  if (!r.labels.empty()) cfg_inner["Labels"] = r.labels;
  if (!r.entrypoint.empty()) cfg_inner["Entrypoint"] = r.entrypoint;
  if (!r.cmd.empty()) cfg_inner["Cmd"] = r.cmd;
  json config{{"created", "2023-11-14T22:13:20Z"},
              {"architecture", r.architecture},
              {"os", r.os},
              {"config", cfg_inner},
              {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
              {"history", history}};
  if (!r.variant.empty()) config["variant"] = r.variant;
  if (r.edit_config) r.edit_config(config);
  std::string config_bytes = config.dump();
  img.config_digest = PutBlob(blob_dir, config_bytes);

  std::string config_type = r.docker_media_types ? "application/vnd.docker.container.image.v1+json"
                                                 : "application/vnd.oci.image.config.v1+json";
  img.manifest_media_type = r.docker_media_types
                                ? "application/vnd.docker.distribution.manifest.v2+json"
                                : "application/vnd.oci.image.manifest.v1+json";
  json manifest{{"schemaVersion", 2},
                {"mediaType", img.manifest_media_type},
                {"config", Descriptor(config_type, img.config_digest, config_bytes.size())},
                {"layers", layer_descs}};
  if (r.edit_manifest) r.edit_manifest(manifest);
  std::string manifest_bytes = manifest.dump();
  img.manifest_digest = PutBlob(blob_dir, manifest_bytes);
  img.manifest_size = manifest_bytes.size();
  return img;
}

WrittenImage WriteOciLayout(const fs::path& dir, const ImageRecipe& r, const std::string& ref) {
  WrittenImage img = WriteImageBlobs(dir / "blobs" / "sha256", r);
  AddToIndex(dir, Descriptor(img.manifest_media_type, img.manifest_digest, img.manifest_size), ref);
  return img;
}

std::vector<WrittenImage> WriteMultiPlatformLayout(const fs::path& dir,
                                                   const std::vector<ImageRecipe>& recipes,
                                                   const std::string& ref) {
  std::vector<WrittenImage> images;
  json manifests = json::array();
  for (const ImageRecipe& r : recipes) {
    images.push_back(WriteImageBlobs(dir / "blobs" / "sha256", r));
    json d = Descriptor(images.back().manifest_media_type, images.back().manifest_digest,
                        images.back().manifest_size);
    d["platform"] = Platform(r);
    manifests.push_back(d);
  }
  bool docker = !recipes.empty() && recipes.front().docker_media_types;
  std::string type = docker ? "application/vnd.docker.distribution.manifest.list.v2+json"
                            : "application/vnd.oci.image.index.v1+json";
  json index{{"schemaVersion", 2}, {"mediaType", type}, {"manifests", manifests}};
  std::string bytes = index.dump();
  std::string digest = PutBlob(dir / "blobs" / "sha256", bytes);
  AddToIndex(dir, Descriptor(type, digest, bytes.size()), ref);
  return images;
}

fs::path BlobPath(const fs::path& dir, const std::string& digest) {
  return dir / "blobs" / "sha256" / Hex(digest);
}

void TarDirectory(const fs::path& dir, const fs::path& out_tar) {
  std::vector<Entry> entries;
  std::vector<fs::path> paths;
  for (const auto& de : fs::recursive_directory_iterator(dir)) paths.push_back(de.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    std::string rel = fs::relative(p, dir).generic_string();
    if (fs::is_directory(p))
      entries.push_back(Dir(rel));
    else
      entries.push_back(FileFrom(rel, p, 0644));
  }
  WriteLayerTar(entries, out_tar);
}

WrittenImage WriteDockerArchive(const fs::path& out_tar, const ImageRecipe& r,
                                const std::string& repo_tag, DockerArchiveForm form) {
  fs::path stage = out_tar.string() + ".stage";
  fs::remove_all(stage);
  WrittenImage img;
  json entry;
  if (form == DockerArchiveForm::kOci) {
    img = WriteOciLayout(stage, r, repo_tag);
    entry["Config"] = "blobs/sha256/" + Hex(img.config_digest);
    entry["Layers"] = json::array();
    for (const auto& l : img.layers) entry["Layers"].push_back("blobs/sha256/" + Hex(l.digest));
  } else {
    fs::path blobs = stage / "blobs-tmp";
    img = WriteImageBlobs(blobs, r);
    entry["Config"] = Hex(img.config_digest) + ".json";
    fs::rename(blobs / Hex(img.config_digest), stage / entry["Config"].get<std::string>());
    entry["Layers"] = json::array();
    for (const auto& l : img.layers) {
      // Legacy layer directories are named by a v1 id; the diff_id's hex is a fine stand-in.
      std::string id = Hex(l.diff_id);
      fs::create_directories(stage / id);
      if (!fs::exists(stage / id / "layer.tar"))
        fs::copy_file(blobs / Hex(l.digest), stage / id / "layer.tar");
      WriteText(stage / id / "VERSION", "1.0");
      entry["Layers"].push_back(id + "/layer.tar");
    }
    fs::remove_all(blobs);
  }
  entry["RepoTags"] = json::array({repo_tag});
  WriteText(stage / "manifest.json", json::array({entry}).dump());
  TarDirectory(stage, out_tar);
  fs::remove_all(stage);
  return img;
}

ImageRecipe CudnnDriverRecipe(const fs::path& dir) {
  auto so = [&](const std::string& soname) {
    SharedObject obj;
    obj.soname = soname;
    fs::path out = dir / "so" / soname;
    Compile(obj, out);
    return out;
  };
  const std::string lib = kCudnnDriverLibDir;
  ImageRecipe r;
  r.env = {"PATH=/usr/bin", "LD_LIBRARY_PATH=/usr/local/nvidia/lib64", "NV_CUDNN_VERSION=8.9.2.26"};
  r.labels = {{"com.nvidia.cudnn.version", "8.9.2.26"}};
  LayerRecipe base;
  base.created_by = "RUN apt-get install -y libcudnn8=8.9.2.26-1+cuda12.1";
  base.entries = {
      Dir("usr"),
      Dir("usr/lib"),
      Dir("usr/lib/x86_64-linux-gnu"),
      FileFrom(lib + "libcudnn.so.8.9.2", so("libcudnn.so.8")),
      Symlink(lib + "libcudnn.so.8", "libcudnn.so.8.9.2"),
      FileFrom(lib + "libcudnn_adv_infer.so.8.9.2", so("libcudnn_adv_infer.so.8")),
      File("var/lib/dpkg/status",
           "Package: libcudnn8\nStatus: hold ok installed\nVersion: 8.9.2.26-1+cuda12.1\n"),
      File("var/lib/dpkg/info/libcudnn8:amd64.list",
           "/" + lib + "libcudnn.so.8.9.2\n/" + lib + "libcudnn_adv_infer.so.8.9.2\n"),
      File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
      File("etc/ld.so.conf.d/nvidia.conf", "/usr/local/nvidia/lib64\n"),
      File("etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\n"),
      File("usr/share/doc/big.txt", std::string(200000, 'x')),
  };
  LayerRecipe top;
  top.created_by = "RUN rm libcudnn_adv_infer && install driver";
  top.compression = Compression::kZstd;
  top.entries = {Whiteout(lib + "libcudnn_adv_infer.so.8.9.2"),
                 FileFrom(lib + "libcuda.so.535.104.05", so("libcuda.so.1")),
                 FileFrom("usr/local/cuda-12.1/compat/libcuda.so.530.30.02", so("libcuda.so.1"))};
  r.layers = {base, top};
  return r;
}

}  // namespace imgcheck::testing
