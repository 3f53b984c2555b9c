// A tiny JSON writer for imgcheck-probe: the probe prints one object on stdout and must not
// depend on anything that throws (it runs untrusted libraries in its own address space).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace imgcheck::probe::child {

/// Builds one JSON document; the caller nests Begin/End correctly. Commas are handled here.
class JsonOut {
 public:
  void BeginObject(std::string_view key = {});
  void EndObject();
  void BeginArray(std::string_view key = {});
  void EndArray();
  void String(std::string_view key, std::string_view value);
  void Int(std::string_view key, int64_t value);
  void Double(std::string_view key, double value);
  void Bool(std::string_view key, bool value);
  void Null(std::string_view key);
  const std::string& str() const { return out_; }

 private:
  void Key(std::string_view key);
  void Quoted(std::string_view s);
  std::string out_;
  bool need_comma_ = false;
};

}  // namespace imgcheck::probe::child
