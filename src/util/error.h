// Errors and diagnostics shared by every stage.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace imgcheck::util {

/// A failure that stops the run: the image cannot be read (or a digest does not match).
/// Thrown by the stages and caught once, in main, which prints it on one line and exits 2.
class Fatal : public std::runtime_error {
 public:
  explicit Fatal(const std::string& message) : std::runtime_error(message) {}
};

/// A recoverable problem tied to a place in the image (a corrupt ELF, an unreadable
/// metadata file). Recorded, reported, and the scan goes on.
struct Diagnostic {
  std::string path;     ///< path inside the image, or empty for image-level problems
  int layer = -1;       ///< layer index, -1 when not tied to one layer
  std::string message;  ///< one line, no trailing period
};

struct Error {
  std::string message;
};

/// Result of an operation that may fail with a message: `expected`-style, between modules.
template <class T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

/// An operation that returns nothing but may fail: `return {};` on success.
template <>
class Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool has_value() const { return !error_.has_value(); }
  explicit operator bool() const { return has_value(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

inline Error MakeError(std::string message) { return Error{std::move(message)}; }

}  // namespace imgcheck::util
