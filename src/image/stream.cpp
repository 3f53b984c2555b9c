#include "image/stream.h"

#include <isa-l/igzip_lib.h>
#include <zstd.h>

#include <cstring>

#include "util/error.h"

namespace imgcheck::image {

namespace {
constexpr size_t kInputBuffer = 1 << 20;
}  // namespace

size_t HashingReader::Read(char* buf, size_t n) {
  size_t got = in_.Read(buf, n);
  sha_.Update(std::string_view(buf, got));
  count_ += got;
  return got;
}

std::string HashingReader::Finish() {
  if (!done_) {
    auto buf = std::make_unique<char[]>(kInputBuffer);
    while (Read(buf.get(), kInputBuffer) > 0) {
    }
    done_ = true;
  }
  return "sha256:" + sha_.HexDigest();
}

const char* CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone: return "uncompressed";
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
  }
  return "?";
}

bool IsSha256Digest(const std::string& digest) {
  if (digest.size() != 71 || digest.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < digest.size(); ++i) {
    char c = digest[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

struct Decompressor::Gzip {
  inflate_state state;
};

struct Decompressor::Zstd {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  size_t last = 0;  // ZSTD_decompressStream's last return: 0 when a frame is complete
  ~Zstd() { ZSTD_freeDCtx(ctx); }
};

Decompressor::Decompressor(BlobReader& in) : in_(in), in_buf_(std::make_unique<char[]>(kInputBuffer)) {
  // Gather enough bytes to recognise the format (a short first read is allowed).
  while (in_len_ < 6 && !in_eof_) FillInput();
  auto starts = [&](std::string_view magic) {
    return in_len_ >= magic.size() && std::memcmp(in_buf_.get(), magic.data(), magic.size()) == 0;
  };
  if (starts("\x1f\x8b")) {
    compression_ = Compression::kGzip;
    gzip_ = std::make_unique<Gzip>();
    isal_inflate_init(&gzip_->state);
    gzip_->state.crc_flag = ISAL_GZIP;
  } else if (starts("\x28\xb5\x2f\xfd")) {
    compression_ = Compression::kZstd;
    zstd_ = std::make_unique<Zstd>();
    if (zstd_->ctx == nullptr) throw util::Fatal("out of memory for zstd");
    // Windows up to 2 GiB (zstd --long=31) are accepted; larger ones are refused by zstd.
    ZSTD_DCtx_setParameter(zstd_->ctx, ZSTD_d_windowLogMax, 31);
  } else if (starts("BZh")) {
    throw util::Fatal("bzip2-compressed layers are not supported");
  } else if (starts("\xfd" "7zXZ")) {
    throw util::Fatal("xz-compressed layers are not supported");
  }
}

Decompressor::~Decompressor() = default;

// Moves unread input to the front and appends what `in_` gives. False when nothing was added
// (the end of input, or a full buffer).
bool Decompressor::FillInput() {
  if (in_eof_) return false;
  if (in_pos_ > 0) {
    std::memmove(in_buf_.get(), in_buf_.get() + in_pos_, in_len_ - in_pos_);
    in_len_ -= in_pos_;
    in_pos_ = 0;
  }
  if (in_len_ == kInputBuffer) return false;
  size_t got = in_.Read(in_buf_.get() + in_len_, kInputBuffer - in_len_);
  if (got == 0) in_eof_ = true;
  in_len_ += got;
  return got > 0;
}

size_t Decompressor::Read(char* buf, size_t n) {
  if (n == 0) return 0;
  switch (compression_) {
    case Compression::kGzip: return ReadGzip(buf, n);
    case Compression::kZstd: return ReadZstd(buf, n);
    case Compression::kNone: break;
  }
  if (in_pos_ < in_len_) {
    size_t k = std::min(n, in_len_ - in_pos_);
    std::memcpy(buf, in_buf_.get() + in_pos_, k);
    in_pos_ += k;
    return k;
  }
  return in_eof_ ? 0 : in_.Read(buf, n);
}

size_t Decompressor::ReadGzip(char* buf, size_t n) {
  inflate_state& s = gzip_->state;
  while (true) {
    if (stream_end_) {
      // A member ended. Another member may follow (gzip allows concatenation); anything else
      // after the last member is ignored, as gzip(1) does.
      if (in_len_ - in_pos_ < 2 && !in_eof_) {
        FillInput();
        continue;
      }
      if (in_len_ - in_pos_ >= 2 && std::memcmp(in_buf_.get() + in_pos_, "\x1f\x8b", 2) == 0) {
        isal_inflate_reset(&s);
        s.crc_flag = ISAL_GZIP;
        stream_end_ = false;
      } else {
        in_pos_ = in_len_;
        return 0;
      }
    }
    if (in_pos_ == in_len_ && !FillInput()) throw util::Fatal("truncated gzip stream");
    size_t before = in_pos_;
    s.next_in = reinterpret_cast<uint8_t*>(in_buf_.get() + in_pos_);
    s.avail_in = static_cast<uint32_t>(in_len_ - in_pos_);
    s.next_out = reinterpret_cast<uint8_t*>(buf);
    s.avail_out = static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX));
    int rc = isal_inflate(&s);
    in_pos_ = in_len_ - s.avail_in;
    size_t produced = std::min<size_t>(n, UINT32_MAX) - s.avail_out;
    if (rc < 0) {
      throw util::Fatal(rc == ISAL_INCORRECT_CHECKSUM ? "corrupt gzip stream (checksum mismatch)"
                        : rc == ISAL_INVALID_WRAPPER  ? "corrupt gzip stream (bad header)"
                                                      : "corrupt gzip stream (invalid deflate data)");
    }
    if (s.block_state == ISAL_BLOCK_FINISH) stream_end_ = true;
    if (produced > 0) return produced;
    // No output yet: inflate needs more input than the buffer holds now.
    if (!stream_end_ && in_pos_ == before && !FillInput())
      throw util::Fatal(in_eof_ ? "truncated gzip stream" : "corrupt gzip stream (no progress)");
  }
}

size_t Decompressor::ReadZstd(char* buf, size_t n) {
  while (true) {
    if (in_pos_ == in_len_ && !FillInput()) {
      if (zstd_->last != 0) throw util::Fatal("truncated zstd stream");
      return 0;
    }
    ZSTD_inBuffer in{in_buf_.get(), in_len_, in_pos_};
    ZSTD_outBuffer out{buf, n, 0};
    size_t rc = ZSTD_decompressStream(zstd_->ctx, &out, &in);
    if (ZSTD_isError(rc)) throw util::Fatal(std::string("corrupt zstd stream (") + ZSTD_getErrorName(rc) + ")");
    in_pos_ = in.pos;
    zstd_->last = rc;
    if (out.pos > 0) return out.pos;
  }
}

}  // namespace imgcheck::image
