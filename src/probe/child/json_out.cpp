#include "probe/child/json_out.h"

#include <cmath>
#include <cstdio>

namespace imgcheck::probe::child {

void JsonOut::Key(std::string_view key) {
  if (need_comma_) out_ += ',';
  if (!key.empty()) {
    Quoted(key);
    out_ += ':';
  }
  need_comma_ = true;
}

void JsonOut::Quoted(std::string_view s) {
  out_ += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out_ += '\\';
      out_ += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      // Library error strings are untrusted: anything outside printable ASCII is escaped, so the
      // document stays valid JSON whatever bytes dlerror() or a library returned.
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out_ += buf;
    } else {
      out_ += static_cast<char>(c);
    }
  }
  out_ += '"';
}

void JsonOut::BeginObject(std::string_view key) {
  Key(key);
  out_ += '{';
  need_comma_ = false;
}

void JsonOut::EndObject() {
  out_ += '}';
  need_comma_ = true;
}

void JsonOut::BeginArray(std::string_view key) {
  Key(key);
  out_ += '[';
  need_comma_ = false;
}

void JsonOut::EndArray() {
  out_ += ']';
  need_comma_ = true;
}

void JsonOut::String(std::string_view key, std::string_view value) {
  Key(key);
  Quoted(value);
}

void JsonOut::Int(std::string_view key, int64_t value) {
  Key(key);
  out_ += std::to_string(value);
}

void JsonOut::Double(std::string_view key, double value) {
  Key(key);
  if (!std::isfinite(value)) {
    out_ += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  out_ += buf;
}

void JsonOut::Bool(std::string_view key, bool value) {
  Key(key);
  out_ += value ? "true" : "false";
}

void JsonOut::Null(std::string_view key) {
  Key(key);
  out_ += "null";
}

}  // namespace imgcheck::probe::child
