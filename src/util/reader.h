// Bounds-checked reading of untrusted bytes. Every parser of image data goes through this.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>

namespace imgcheck::util {

/// a + b, or nullopt on overflow.
inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a * b, or nullopt on overflow.
inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// data[offset, offset+len), or nullopt when any part lies outside.
inline std::optional<std::string_view> Slice(std::string_view data, uint64_t offset, uint64_t len) {
  if (offset > data.size() || len > data.size() - offset) return std::nullopt;
  return data.substr(offset, len);
}

/// The NUL-terminated string at `offset` in a string table; nullopt if out of range or
/// unterminated.
inline std::optional<std::string_view> CString(std::string_view table, uint64_t offset) {
  if (offset >= table.size()) return std::nullopt;
  size_t end = table.find('\0', offset);
  if (end == std::string_view::npos) return std::nullopt;
  return table.substr(offset, end - offset);
}

/// A cursor over untrusted bytes. Reads never go past the end; they return nullopt instead.
/// Integers are decoded with the reader's byte order, through memcpy (no aliasing casts).
class Reader {
 public:
  explicit Reader(std::string_view data, bool big_endian = false)
      : data_(data), big_endian_(big_endian) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  std::string_view data() const { return data_; }
  bool big_endian() const { return big_endian_; }

  bool Seek(uint64_t offset) {
    if (offset > data_.size()) return false;
    pos_ = offset;
    return true;
  }
  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    pos_ += n;
    return true;
  }
  std::optional<std::string_view> Bytes(uint64_t n) {
    if (n > remaining()) return std::nullopt;
    std::string_view r = data_.substr(pos_, n);
    pos_ += n;
    return r;
  }
  template <class T>
  std::optional<T> Read() {
    static_assert(std::is_integral_v<T>);
    if (sizeof(T) > remaining()) return std::nullopt;
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    if (big_endian_) v = Swap(v);
    return v;
  }

 private:
  template <class T>
  static T Swap(T v) {
    if constexpr (sizeof(T) == 1) return v;
    if constexpr (sizeof(T) == 2)
      return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
    if constexpr (sizeof(T) == 4)
      return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
    if constexpr (sizeof(T) == 8)
      return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool big_endian_;
};

}  // namespace imgcheck::util
