#include "image/curl_lib.h"

#include <dlfcn.h>

namespace imgcheck::image {
namespace {

struct Loaded {
  CurlLib lib{};
  bool ok = false;
  std::string error;
};

const Loaded& Load() {
  static const Loaded loaded = [] {
    Loaded l;
    // RTLD_LOCAL: its symbols stay its own; the handle is kept for the process's life.
    void* handle = dlopen(kCurlSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      l.error = std::string("cannot load ") + kCurlSoname + " (" +
                (why != nullptr ? why : "dlopen failed") +
                "): talking to a registry or the docker daemon needs libcurl";
      return l;
    }
#define IMGCHECK_CURL_FUNCTION(name)                                                 \
  l.lib.name = reinterpret_cast<decltype(l.lib.name)>(dlsym(handle, "curl_" #name)); \
  if (l.lib.name == nullptr && l.error.empty())                                      \
    l.error = std::string(kCurlSoname) + " has no curl_" #name " (too old a libcurl)";
#include "image/curl_functions.inc"
#undef IMGCHECK_CURL_FUNCTION
    if (!l.error.empty()) return l;
    // Once per process, before any handle, as libcurl asks (not thread-safe itself; the
    // static's initialisation is).
    if (CURLcode rc = l.lib.global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
      l.error = std::string("curl_global_init failed (") + l.lib.easy_strerror(rc) + ")";
      return l;
    }
    l.ok = true;
    return l;
  }();
  return loaded;
}

}  // namespace

const CurlLib* Curl() { return Load().ok ? &Load().lib : nullptr; }

const std::string& CurlLoadError() { return Load().error; }

}  // namespace imgcheck::image
