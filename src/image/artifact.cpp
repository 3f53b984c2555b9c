#include "image/artifact.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "image/manifest.h"
#include "image/sources.h"
#include "image/store.h"
#include "util/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace imgcheck::image {

namespace {

constexpr char kRefAnnotation[] = "org.opencontainers.image.ref.name";

// "PATH[:REF]" of an oci: reference, split at the first colon as skopeo does.
std::pair<std::string, std::string> LayoutPathAndRef(std::string_view rest) {
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return {std::string(rest), ""};
  return {std::string(rest.substr(0, colon)), std::string(rest.substr(colon + 1))};
}

std::unique_ptr<Source> OpenArtifactSource(const std::string& reference,
                                           const RegistryOptions& options) {
  std::string_view r = reference;
  if (r.starts_with("oci:")) {
    auto [path, ref] = LayoutPathAndRef(r.substr(4));
    return OpenOciLayout(OpenDirStore(path), ref, reference);
  }
  if (r.starts_with("docker://")) r.remove_prefix(9);
  return OpenRegistry(std::string(r), options);
}

// The blob `d` names, exactly its size and digest: a short read is a truncated blob, other
// bytes a tampered one.
std::string ReadVerified(Source& src, const Descriptor& d, uint64_t limit,
                         const std::string& what) {
  if (d.size < 0 || static_cast<uint64_t>(d.size) > limit)
    throw util::Fatal(what + " " + d.digest + " is " + std::to_string(d.size) +
                      " bytes, more than the " + std::to_string(limit) + " allowed");
  auto reader = src.OpenBlob(d);
  std::string bytes;
  std::string buf(size_t{64} * 1024, '\0');
  while (bytes.size() <= static_cast<uint64_t>(d.size)) {
    size_t n = reader->Read(buf.data(), buf.size());
    if (n == 0) break;
    bytes.append(buf.data(), n);
  }
  if (bytes.size() != static_cast<uint64_t>(d.size))
    throw util::Fatal(what + " " + d.digest + " of " + src.Describe() + " is truncated: " +
                      std::to_string(bytes.size()) + " bytes of " + std::to_string(d.size));
  if (util::Sha256Digest(bytes) != d.digest)
    throw util::Fatal(what + " " + d.digest + " of " + src.Describe() +
                      " does not match its digest (tampered or corrupt)");
  return bytes;
}

nlohmann::ordered_json DescriptorJson(std::string_view media_type, const std::string& bytes) {
  return {{"mediaType", media_type}, {"digest", util::Sha256Digest(bytes)}, {"size", bytes.size()}};
}

// The artifact manifest: deterministic, so the same data always has the same digest.
std::string ManifestJson(const ArtifactTypes& types, const std::string& config,
                         const std::string& layer,
                         const std::map<std::string, std::string>& layer_annotations) {
  nlohmann::ordered_json m;
  m["schemaVersion"] = 2;
  m["mediaType"] = media::kOciManifest;
  if (!types.artifact.empty()) m["artifactType"] = types.artifact;
  m["config"] = DescriptorJson(types.config, config);
  nlohmann::ordered_json l = DescriptorJson(types.layer, layer);
  if (!layer_annotations.empty()) l["annotations"] = layer_annotations;
  m["layers"] = nlohmann::ordered_json::array({std::move(l)});
  return m.dump();
}

void WriteBlob(const std::filesystem::path& layout, const std::string& bytes) {
  std::string digest = util::Sha256Digest(bytes);
  std::filesystem::path p = layout / "blobs/sha256" / digest.substr(7);
  util::WriteFileAtomic(p, bytes);
}

// Adds (or moves) the manifest to index.json under `ref`.
std::string PushToLayout(const std::string& rest, const ArtifactTypes& types,
                         const std::string& config, const std::string& layer,
                         const std::map<std::string, std::string>& layer_annotations) {
  auto [path, ref] = LayoutPathAndRef(rest);
  if (ref.empty()) ref = "latest";
  std::filesystem::path dir(path);
  std::error_code ec;
  std::filesystem::create_directories(dir / "blobs/sha256", ec);
  if (ec) throw util::Fatal("cannot create the layout " + path + ": " + ec.message());
  std::string manifest = ManifestJson(types, config, layer, layer_annotations);
  WriteBlob(dir, config);
  WriteBlob(dir, layer);
  WriteBlob(dir, manifest);
  nlohmann::ordered_json index{{"schemaVersion", 2},
                               {"mediaType", media::kOciIndex},
                               {"manifests", nlohmann::ordered_json::array()}};
  if (std::filesystem::exists(dir / "index.json", ec)) {
    util::Expected<std::string> text = util::ReadFile((dir / "index.json").string());
    if (!text) throw util::Fatal(text.error().message);
    auto old = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (old.is_object() && old.contains("manifests") && old["manifests"].is_array())
      for (const auto& e : old["manifests"])
        if (!(e.contains("annotations") && e["annotations"].is_object() &&
              e["annotations"].value(kRefAnnotation, "") == ref))
          index["manifests"].push_back(e);
  }
  nlohmann::ordered_json entry = DescriptorJson(media::kOciManifest, manifest);
  if (!types.artifact.empty()) entry["artifactType"] = types.artifact;
  entry["annotations"] = {{kRefAnnotation, ref}};
  index["manifests"].push_back(entry);
  util::WriteFileAtomic(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  util::WriteFileAtomic(dir / "index.json", index.dump());
  return util::Sha256Digest(manifest);
}

}  // namespace

Artifact PullArtifact(const std::string& reference, const ArtifactTypes& types, uint64_t limit,
                      const RegistryOptions& options) {
  std::unique_ptr<Source> src = OpenArtifactSource(reference, options);
  Artifact a;
  a.describe = src->Describe();
  Descriptor root = src->Root();
  std::string what = "the manifest of " + a.describe;
  std::string body = src->ReadBlob(root, kMaxManifestBytes);
  if (!root.digest.empty() && util::Sha256Digest(body) != root.digest)
    throw util::Fatal(what + " does not match its digest " + root.digest +
                      " (tampered or corrupt)");
  a.manifest_digest = util::Sha256Digest(body);
  a.manifest = body;
  nlohmann::json j = ParseJson(body, kMaxManifestBytes, what);
  if (!j.is_object() ||
      j.value("mediaType", std::string(media::kOciManifest)) != media::kOciManifest)
    throw util::Fatal(a.describe + " is not an OCI artifact manifest");
  // Not ParseManifest: that one wants an image's config type.
  if (!j.contains("config") || !j.contains("layers") || !j["layers"].is_array())
    throw util::Fatal(what + " has no config or no layers");
  Manifest m;
  m.config = ParseDescriptor(j["config"], what);
  for (const auto& l : j["layers"]) m.layers.push_back(ParseDescriptor(l, what));
  if (m.config.media_type != types.config)
    throw util::Fatal(a.describe + " is not a " + std::string(types.artifact) +
                      " artifact (its config is '" + m.config.media_type + "')");
  if (m.layers.size() != 1 || m.layers[0].media_type != types.layer)
    throw util::Fatal(a.describe + " must have exactly one layer of type " +
                      std::string(types.layer));
  a.config = ReadVerified(*src, m.config, 1 << 20, "config");
  a.layer = ReadVerified(*src, m.layers[0], limit, "layer");
  return a;
}

std::string PushArtifact(const std::string& reference, const ArtifactTypes& types,
                         const std::string& config, const std::string& layer,
                         const RegistryOptions& options,
                         const std::map<std::string, std::string>& layer_annotations) {
  std::string_view r = reference;
  if (r.starts_with("oci:"))
    return PushToLayout(std::string(r.substr(4)), types, config, layer, layer_annotations);
  if (r.starts_with("docker://")) r.remove_prefix(9);
  return PushToRegistry(std::string(r), {config, layer},
                        ManifestJson(types, config, layer, layer_annotations), media::kOciManifest,
                        options);
}

std::string PackFiles(const std::map<std::string, std::string>& files) {
  std::string out;
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(),
                                                            archive_write_free);
  archive_write_set_format_pax_restricted(a.get());
  archive_write_add_filter_gzip(a.get());
  archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr);  // no mtime
  auto open_cb = [](archive*, void*) -> int { return ARCHIVE_OK; };
  auto write_cb = [](archive*, void* data, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(data)->append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  };
  archive_write_set_bytes_in_last_block(a.get(), 1);
  if (archive_write_open(a.get(), &out, open_cb, write_cb, nullptr) != ARCHIVE_OK)
    throw util::Fatal(std::string("cannot pack files: ") + archive_error_string(a.get()));
  for (const auto& [name, bytes] : files) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(),
                                                                    archive_entry_free);
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_mtime(e.get(), 0, 0);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK ||
        archive_write_data(a.get(), bytes.data(), bytes.size()) !=
            static_cast<la_ssize_t>(bytes.size()))
      throw util::Fatal("cannot pack " + name + ": " + archive_error_string(a.get()));
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    throw util::Fatal(std::string("cannot pack files: ") + archive_error_string(a.get()));
  return out;
}

std::map<std::string, std::string> UnpackFiles(const std::string& layer, size_t max_files,
                                               uint64_t max_file) {
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_none(a.get());
  auto corrupt = [&a](const std::string& what) {
    const char* why = archive_error_string(a.get());
    throw util::Fatal("the rules layer is corrupt" + (what.empty() ? "" : " at " + what) +
                      (why ? std::string(": ") + why : std::string()));
  };
  if (archive_read_open_memory(a.get(), layer.data(), layer.size()) != ARCHIVE_OK) corrupt("");
  std::map<std::string, std::string> files;
  archive_entry* e = nullptr;
  for (;;) {
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK) corrupt(files.empty() ? "" : "the entry after " + files.rbegin()->first);
    const char* p = archive_entry_pathname(e);
    std::string name = p ? p : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
        archive_entry_filetype(e) != AE_IFREG)
      throw util::Fatal("the rules layer holds '" + name.substr(0, 100) +
                        "', not a file at its top level");
    if (files.size() >= max_files)
      throw util::Fatal("the rules layer holds more than " + std::to_string(max_files) + " files");
    la_int64_t size = archive_entry_size(e);
    if (size < 0 || static_cast<uint64_t>(size) > max_file)
      throw util::Fatal("the rules layer's " + name + " is larger than " +
                        std::to_string(max_file) + " bytes");
    std::string bytes(static_cast<size_t>(size), '\0');
    if (archive_read_data(a.get(), bytes.data(), bytes.size()) != size) corrupt(name);
    if (!files.emplace(name, std::move(bytes)).second)
      throw util::Fatal("the rules layer holds " + name + " twice");
  }
  return files;
}

}  // namespace imgcheck::image
