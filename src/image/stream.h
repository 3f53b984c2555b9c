// Byte streams of a layer: hashing on the way through, and decompression chosen by magic bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "image/source.h"
#include "util/sha256.h"

namespace imgcheck::image {

/// Passes bytes through from `in`, hashing and counting them.
class HashingReader : public BlobReader {
 public:
  explicit HashingReader(BlobReader& in) : in_(in) {}
  size_t Read(char* buf, size_t n) override;
  uint64_t count() const { return count_; }
  /// Reads what is left of the stream (hashed) and returns "sha256:<hex>" of everything read.
  std::string Finish();

 private:
  BlobReader& in_;
  util::Sha256 sha_;
  uint64_t count_ = 0;
  bool done_ = false;
};

enum class Compression { kNone, kGzip, kZstd };
const char* CompressionName(Compression c);

/// The uncompressed bytes of `in`. The compression is detected from the first bytes (gzip,
/// zstd, or none); bzip2 and xz are recognised and refused. Gzip goes through ISA-L (multi-member
/// streams included), zstd through ZSTD_decompressStream. A stream that ends early, or a
/// corrupt one, throws util::Fatal with the reason.
class Decompressor : public BlobReader {
 public:
  explicit Decompressor(BlobReader& in);
  ~Decompressor() override;
  size_t Read(char* buf, size_t n) override;
  Compression compression() const { return compression_; }

 private:
  bool FillInput();
  size_t ReadGzip(char* buf, size_t n);
  size_t ReadZstd(char* buf, size_t n);

  BlobReader& in_;
  Compression compression_ = Compression::kNone;
  std::unique_ptr<char[]> in_buf_;
  size_t in_pos_ = 0, in_len_ = 0;
  bool in_eof_ = false;
  bool stream_end_ = false;  // the (last) compressed member or frame has ended
  struct Gzip;
  std::unique_ptr<Gzip> gzip_;
  struct Zstd;
  std::unique_ptr<Zstd> zstd_;
};

/// True for "sha256:" followed by 64 lower-case hex digits: the only digests imgcheck accepts.
bool IsSha256Digest(const std::string& digest);

}  // namespace imgcheck::image
