// The wall clock as reports print it.
#pragma once

#include <string>

namespace imgcheck::util {

/// The current UTC time through strftime's `format` ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d").
std::string UtcNow(const char* format);

}  // namespace imgcheck::util
