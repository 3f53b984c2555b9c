// The captured parts of a file: what the streaming stage kept of it, by offset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace imgcheck::util {

/// A file of known size of which only some byte ranges were kept. Later stages (ELF, metadata
/// parsers) read through View(), which answers only for ranges that were captured whole.
class SparseFile {
 public:
  struct Extent {
    uint64_t offset;
    std::string bytes;
  };

  SparseFile() = default;
  explicit SparseFile(uint64_t size) : size_(size) {}
  /// A fully captured file.
  static SparseFile Whole(std::string bytes);

  uint64_t size() const { return size_; }
  void set_size(uint64_t size) { size_ = size; }
  /// True when every byte of the file was kept.
  bool complete() const;
  /// Keeps bytes at `offset`; overlapping or adjacent extents are merged.
  void Add(uint64_t offset, std::string_view bytes);
  /// The same, taking the buffer over when it does not touch a kept extent.
  void Take(uint64_t offset, std::string&& bytes);
  /// [offset, offset+len) if that whole range was captured, else nullopt.
  std::optional<std::string_view> View(uint64_t offset, uint64_t len) const;
  /// The captured extent containing `offset`, from `offset` to that extent's end.
  std::optional<std::string_view> ViewFrom(uint64_t offset) const;
  const std::vector<Extent>& extents() const { return extents_; }
  /// Bytes held in memory.
  uint64_t captured_bytes() const;
  /// Lower-case hex MD5 of the whole file when the capturer computed one while it streamed past
  /// (the capture policy asks for it where a package database states one), else empty.
  const std::string& md5() const { return md5_; }
  void set_md5(std::string md5) { md5_ = std::move(md5); }
  /// Lower-case hex SHA-256 of the whole file, computed the same way, only when the reading was
  /// asked for SBOM hashes (catalog::CapturePolicy); else empty.
  const std::string& sha256() const { return sha256_; }
  void set_sha256(std::string sha256) { sha256_ = std::move(sha256); }
  /// What the capturer derived from bytes it did not keep, in its own encoding (elf: the
  /// hashes of symbol names past the kept string table, and the sorted binding keys), so a
  /// cached reading carries it too; empty when none.
  const std::string& annex() const { return annex_; }
  void set_annex(std::string annex) { annex_ = std::move(annex); }

 private:
  uint64_t size_ = 0;
  std::vector<Extent> extents_;  // sorted by offset, disjoint, non-adjacent
  std::string md5_;
  std::string sha256_;
  std::string annex_;
};

}  // namespace imgcheck::util
