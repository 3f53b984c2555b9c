#include "image/stream.h"

#include <isa-l/igzip_lib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <cstring>

#include "util/error.h"
#include "util/limits.h"
#include "util/profile.h"

namespace imgcheck::image {

namespace {
constexpr size_t kChunk = 1 << 20;
constexpr size_t kMaxCarry = 4 << 20;  // the most input inflate may want in one piece
}  // namespace

HashingReader::HashingReader(BlobReader& in, bool hash) : in_(in) {
  for (auto& slot : slots_) slot = std::make_unique<char[]>(kChunk);
  if (hash) sha_.emplace();
}

HashingReader::~HashingReader() = default;

std::string_view HashingReader::Next() {
  if (eof_) return {};
  int k = next_;
  next_ = (next_ + 1) % kSlots;
  if (sha_) {  // the hasher is done with this slot (the consumer long since)
    util::ProfileSpan span(util::Stage::kHashWait);
    sha_->Wait(tickets_[k]);
  }
  char* buf = slots_[k].get();
  size_t len = 0;
  while (len < kChunk) {
    size_t got = in_.Read(buf + len, kChunk - len);
    if (got == 0) {
      eof_ = true;
      break;
    }
    len += got;
  }
  if (len == 0) return {};
  if (sha_) tickets_[k] = sha_->Add(std::string_view(buf, len));
  count_ += len;
  return {buf, len};
}

std::string HashingReader::Finish() {
  if (!finished_) {
    while (!Next().empty()) {
    }
    util::ProfileSpan span(util::Stage::kHashWait);
    if (sha_) digest_ = "sha256:" + sha_->HexDigest();
    finished_ = true;
  }
  return digest_;
}

Compression CompressionOf(std::string_view head) {
  auto starts = [&](std::string_view magic) { return head.substr(0, magic.size()) == magic; };
  if (starts("\x1f\x8b")) return Compression::kGzip;
  if (starts("\x28\xb5\x2f\xfd")) return Compression::kZstd;
  return Compression::kNone;
}

struct Decompressor::Gzip {
  inflate_state state;
};

struct Decompressor::Zstd {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  size_t last = 0;  // ZSTD_decompressStream's last return: 0 when a frame is complete
  ~Zstd() { ZSTD_freeDCtx(ctx); }
};

Decompressor::Decompressor(ChunkReader& in, uint64_t max_zstd_window)
    : in_(in), max_zstd_window_(max_zstd_window) {
  size_t have = Peek(6);  // a shorter stream is not compressed
  std::string_view head = Input().substr(0, have);
  Compression c = CompressionOf(head);
  if (c == Compression::kGzip) {
    compression_ = Compression::kGzip;
    gzip_ = std::make_unique<Gzip>();
    isal_inflate_init(&gzip_->state);
    gzip_->state.crc_flag = ISAL_GZIP;
  } else if (c == Compression::kZstd) {
    compression_ = Compression::kZstd;
    zstd_ = std::make_unique<Zstd>();
    if (zstd_->ctx == nullptr) throw util::Fatal("out of memory for zstd");
    // A frame's window is memory the decoder must allocate: windows above the limit (rounded
    // down to a power of two, as zstd counts them; at most 2 GiB, zstd --long=31) are refused.
    int log = 10;  // ZSTD_WINDOWLOG_ABSOLUTEMIN
    while (log < 31 && (uint64_t{1} << (log + 1)) <= max_zstd_window) ++log;
    ZSTD_DCtx_setParameter(zstd_->ctx, ZSTD_d_windowLogMax, log);
  } else if (head.starts_with("BZh")) {
    throw util::Fatal("bzip2-compressed layers are not supported");
  } else if (head.starts_with("\xfd"
                              "7zXZ")) {
    throw util::Fatal("xz-compressed layers are not supported");
  }
}

Decompressor::~Decompressor() = default;

void Decompressor::Consume(size_t n) {
  if (!carry_.empty())
    carry_.erase(0, n);
  else
    chunk_.remove_prefix(n);
}

// Makes sure there is unread input, taking the next chunk when needed. False at the end.
bool Decompressor::Pull() {
  while (Input().empty()) {
    if (in_eof_) return false;
    chunk_ = in_.Next();
    if (chunk_.empty()) in_eof_ = true;
  }
  return true;
}

// Makes the next `n` unread bytes contiguous in Input(), copying into carry_ only when they
// straddle two chunks. Returns how many there are (fewer than `n` at the end of the stream).
size_t Decompressor::Peek(size_t n) {
  if (!Pull()) return 0;
  if (carry_.empty() && chunk_.size() >= n) return n;
  if (carry_.empty()) {
    carry_.assign(chunk_);
    chunk_ = {};
  }
  while (carry_.size() < n) {
    if (chunk_.empty()) {
      if (in_eof_) break;
      chunk_ = in_.Next();  // the previous chunk stays valid, but its bytes are all in carry_
      if (chunk_.empty()) {
        in_eof_ = true;
        break;
      }
    }
    size_t k = std::min(n - carry_.size(), chunk_.size());
    carry_.append(chunk_.substr(0, k));
    chunk_.remove_prefix(k);
  }
  return std::min(n, carry_.size());
}

// Lengthens the contiguous unread input, for an inflate that cannot go on with what it has.
// False at the end of the stream, or when it already has more than any valid stream needs.
bool Decompressor::Grow() {
  size_t have = Input().size();
  return have < kMaxCarry && Peek(have + 4096) > have;
}

size_t Decompressor::Read(char* buf, size_t n) {
  if (n == 0) return 0;
  util::ProfileSpan span(util::Stage::kInflate);
  switch (compression_) {
    case Compression::kGzip:
      return ReadGzip(buf, n);
    case Compression::kZstd:
      return ReadZstd(buf, n);
    case Compression::kNone:
      break;
  }
  if (!Pull()) return 0;
  size_t k = std::min(n, Input().size());
  std::memcpy(buf, Input().data(), k);
  Consume(k);
  return k;
}

size_t Decompressor::ReadGzip(char* buf, size_t n) {
  inflate_state& s = gzip_->state;
  while (true) {
    if (finished_) return 0;
    if (stream_end_) {
      // A member ended. Another member may follow (gzip allows concatenation); anything else
      // after the last member is ignored, as gzip(1) does.
      if (Peek(2) < 2 || !Input().starts_with("\x1f\x8b")) {
        finished_ = true;
        return 0;
      }
      isal_inflate_reset(&s);
      s.crc_flag = ISAL_GZIP;
      stream_end_ = false;
    }
    Pull();  // none left is fine while inflate still holds decoded bytes
    std::string_view in = Input();
    uint32_t avail = static_cast<uint32_t>(std::min<size_t>(in.size(), UINT32_MAX));
    uint32_t room = static_cast<uint32_t>(std::min<size_t>(n, UINT32_MAX));
    s.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(in.data()));
    s.avail_in = avail;
    s.next_out = reinterpret_cast<uint8_t*>(buf);
    s.avail_out = room;
    int rc = isal_inflate(&s);
    size_t used = avail - s.avail_in;
    Consume(used);
    if (rc < 0) {
      throw util::Fatal(rc == ISAL_INCORRECT_CHECKSUM ? "corrupt gzip stream (checksum mismatch)"
                        : rc == ISAL_INVALID_WRAPPER
                            ? "corrupt gzip stream (bad header)"
                            : "corrupt gzip stream (invalid deflate data)");
    }
    if (s.block_state == ISAL_BLOCK_FINISH) stream_end_ = true;
    if (room > s.avail_out) return room - s.avail_out;
    // No output: inflate needs more input than it was given.
    if (!stream_end_ && used == 0 && !Grow())
      throw util::Fatal(in_eof_ ? "truncated gzip stream" : "corrupt gzip stream (no progress)");
  }
}

size_t Decompressor::ReadZstd(char* buf, size_t n) {
  while (true) {
    bool have = Pull();
    if (!have && zstd_->last == 0) return 0;  // every frame is complete
    std::string_view in = Input();
    ZSTD_inBuffer zin{in.data(), in.size(), 0};
    ZSTD_outBuffer out{buf, n, 0};
    size_t rc = ZSTD_decompressStream(zstd_->ctx, &out, &zin);
    if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge)
      util::LimitExceeded("a zstd frame's window", util::MiBText(max_zstd_window_),
                          "--max-zstd-window-mb");
    if (ZSTD_isError(rc))
      throw util::Fatal(std::string("corrupt zstd stream (") + ZSTD_getErrorName(rc) + ")");
    Consume(zin.pos);
    zstd_->last = rc;
    if (out.pos > 0) return out.pos;
    if (!have) throw util::Fatal("truncated zstd stream");
  }
}

la_ssize_t ArchiveInput::Read(struct archive*, void* client, const void** out) {
  auto* st = static_cast<ArchiveInput*>(client);
  try {
    std::string_view chunk = st->in->Next();
    *out = chunk.data();
    return static_cast<la_ssize_t>(chunk.size());
  } catch (...) {
    st->error = std::current_exception();
    return -1;
  }
}

std::unique_ptr<struct archive, decltype(&archive_read_free)> NewTarReader() {
  std::unique_ptr<struct archive, decltype(&archive_read_free)> a(archive_read_new(),
                                                                  archive_read_free);
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  return a;
}

}  // namespace imgcheck::image
