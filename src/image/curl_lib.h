// libcurl, loaded when the first HTTP exchange needs it (dlopen), not at start-up: libcurl brings
// 33 shared libraries (TLS, LDAP, Kerberos, SSH, IDN...) whose linking costs every run about
// 5 ms, and a scan of a local image, a warm scan, `rules`, `version` never talk HTTP.
#pragma once

#include <curl/curl.h>

#include <string>

namespace imgcheck::image {

/// The libcurl functions imgcheck calls, as the library exports them.
struct CurlLib {
// A member named as the function without curl_: no parentheses can go round a name declared.
// NOLINTNEXTLINE(bugprone-macro-parentheses)
#define IMGCHECK_CURL_FUNCTION(name) decltype(&::curl_##name) name;
#include "image/curl_functions.inc"
#undef IMGCHECK_CURL_FUNCTION
};

/// libcurl (kCurlSoname), loaded and curl_global_init'ed once, thread-safe; nullptr when it
/// cannot be loaded, and CurlLoadError() says why (one line).
const CurlLib* Curl();
const std::string& CurlLoadError();

/// The library loaded: the soname of the libcurl the build's headers are for (the package
/// that provides it, libcurl4 in Debian, is a run-time dependency: scripts/release.sh).
inline constexpr const char* kCurlSoname = "libcurl.so.4";

}  // namespace imgcheck::image
