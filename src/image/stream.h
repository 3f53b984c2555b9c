// Byte streams of a layer: hashing on the way through, and decompression chosen by magic bytes.
#pragma once

#include <archive.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "image/source.h"
#include "util/limits.h"
#include "util/sha256.h"

namespace imgcheck::image {

/// A stream handed out in chunks, without copying: a chunk stays valid until the second
/// following call of Next(), so a consumer may still hold the previous one.
class ChunkReader {
 public:
  virtual ~ChunkReader() = default;
  /// The next chunk; empty at the end. Throws util::Fatal on failure.
  virtual std::string_view Next() = 0;
};

/// libarchive's input from a ChunkReader, read in place (a chunk outlives the next callback, as
/// libarchive requires): archive_read_open(a, &input, nullptr, ArchiveInput::Read, nullptr). An
/// exception the reader throws is kept in `error`; rethrow it when a libarchive call fails.
struct ArchiveInput {
  ChunkReader* in = nullptr;
  std::exception_ptr error;
  static la_ssize_t Read(struct archive*, void* client, const void** out);
};
/// A libarchive reader of tar streams (POSIX and GNU), not opened yet.
std::unique_ptr<struct archive, decltype(&archive_read_free)> NewTarReader();

/// Reads `in` in chunks of 1 MiB (the last may be shorter), counting them and (unless `hash` is
/// false) hashing them on a thread of its own while the consumer works on them (two buffers,
/// used in turn).
class HashingReader : public ChunkReader {
 public:
  explicit HashingReader(BlobReader& in, bool hash = true);
  ~HashingReader() override;
  std::string_view Next() override;
  uint64_t count() const { return count_; }
  /// Reads what is left of the stream and returns "sha256:<hex>" of everything read ("" when
  /// not hashing).
  std::string Finish();

 private:
  static constexpr int kSlots = 2;
  BlobReader& in_;
  std::unique_ptr<char[]> slots_[kSlots];
  uint64_t tickets_[kSlots] = {};
  int next_ = 0;
  uint64_t count_ = 0;
  bool eof_ = false;
  bool finished_ = false;
  std::string digest_;
  std::optional<util::AsyncSha256> sha_;  // declared last, joined first: it may read a slot
};

enum class Compression { kNone, kGzip, kZstd };
/// The compression the first bytes of a stream announce (gzip, zstd magic); kNone otherwise.
Compression CompressionOf(std::string_view head);

/// The uncompressed bytes of the chunks of `in`. The compression is detected from the first bytes
/// (gzip, zstd, or none); bzip2 and xz are recognised and refused. Gzip goes through ISA-L
/// (multi-member streams included), zstd through ZSTD_decompressStream. A stream that ends early,
/// or a corrupt one, throws util::Fatal with the reason.
class Decompressor : public BlobReader {
 public:
  /// `max_zstd_window`: the largest zstd window decoded (util::Limits::zstd_window); a frame
  /// asking for more throws util::LimitExceeded's Fatal.
  explicit Decompressor(ChunkReader& in, uint64_t max_zstd_window = util::Limits{}.zstd_window);
  ~Decompressor() override;
  size_t Read(char* buf, size_t n) override;
  Compression compression() const { return compression_; }

 private:
  // The unread input: bytes carried over from an earlier chunk first, then the current chunk's.
  std::string_view Input() const { return carry_.empty() ? chunk_ : std::string_view(carry_); }
  void Consume(size_t n);
  bool Pull();
  size_t Peek(size_t n);
  bool Grow();
  size_t ReadGzip(char* buf, size_t n);
  size_t ReadZstd(char* buf, size_t n);

  ChunkReader& in_;
  uint64_t max_zstd_window_;
  Compression compression_ = Compression::kNone;
  std::string_view chunk_;
  std::string carry_;  // a look-ahead that straddled two chunks; a few bytes
  bool in_eof_ = false;
  bool stream_end_ = false;  // the current gzip member has ended
  bool finished_ = false;    // the last gzip member has ended
  struct Gzip;
  std::unique_ptr<Gzip> gzip_;
  struct Zstd;
  std::unique_ptr<Zstd> zstd_;
};

}  // namespace imgcheck::image
