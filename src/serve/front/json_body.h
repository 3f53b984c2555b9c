// Request bodies as JSON, within limits that bound what parsing them costs: the body's size is
// capped by the HTTP layer, but a 3 MiB body of "[[[[..." or "[{},{},..." is a million nested
// or separate values, each a heap object when parsed.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace imgcheck::serve::front {

/// Arrays and objects inside one another; Kubernetes objects nest a few dozen deep at most.
inline constexpr size_t kMaxJsonDepth = 64;
/// Values (counted by their separators and brackets); a large Deployment has a few thousand.
inline constexpr size_t kMaxJsonValues = 200000;

/// `body` parsed; an error says that it is not JSON or which limit it passes.
util::Expected<nlohmann::json> ParseJsonBody(std::string_view body);

/// The string at `key` of object `j`; empty when absent or not a string (never throws).
std::string StringAt(const nlohmann::json& j, const char* key);

/// The JSON Pointer (RFC 6901) naming `tokens` one inside the other: "~" and "/" inside a
/// token are escaped as "~0" and "~1".
std::string JsonPointer(const std::vector<std::string>& tokens);

}  // namespace imgcheck::serve::front
