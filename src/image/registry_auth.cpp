#include "image/registry_auth.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "image/registry_reference.h"
#include "util/error.h"
#include "util/text.h"

namespace imgcheck::image {
namespace {

constexpr size_t kMaxAuthFile = 4 << 20;
constexpr size_t kMaxHelperOutput = 1 << 20;
constexpr int kHelperTimeoutMs = 30000;

// A variable's value, "" when unset (getenv's name stays a literal: cli's environment test reads
// each one).
std::string OrEmpty(const char* value) { return value == nullptr ? "" : value; }

// The auth files in the order containers/image and docker consult them.
std::vector<std::string> AuthFiles() {
  std::vector<std::string> files;
  if (std::string f = OrEmpty(std::getenv("REGISTRY_AUTH_FILE")); !f.empty()) {
    files.push_back(f);
  } else if (std::string run = OrEmpty(std::getenv("XDG_RUNTIME_DIR")); !run.empty()) {
    files.push_back(run + "/containers/auth.json");
  }
  std::string home = OrEmpty(std::getenv("HOME"));
  if (!home.empty()) files.push_back(home + "/.config/containers/auth.json");
  if (std::string d = OrEmpty(std::getenv("DOCKER_CONFIG")); !d.empty()) {
    files.push_back(d + "/config.json");
  } else if (!home.empty()) {
    files.push_back(home + "/.docker/config.json");
  }
  return files;
}

bool ReadSmallFile(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out.assign(kMaxAuthFile + 1, '\0');
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(f.gcount()));
  if (out.size() > kMaxAuthFile) throw util::Fatal("auth file " + path + " is larger than 4 MiB");
  return true;
}

// "user:pass" -> credential; false when there is no colon.
bool SplitUserPass(const std::string& text, Credential& c) {
  size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  c.username = text.substr(0, colon);
  c.password = text.substr(colon + 1);
  return true;
}

// Writes `input` to the child's stdin and collects its stdout, bounded in size and time.
int RunHelper(const std::string& program, const std::string& input, std::string& output) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return -1;
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  std::array<char*, 3> argv = {const_cast<char*>(program.c_str()), const_cast<char*>("get"),
                               nullptr};
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    errno = rc;
    return -1;
  }
  // The input is one short line: it fits in the pipe buffer, so this cannot block.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old);
  [[maybe_unused]] ssize_t w = write(in_pipe[1], input.data(), input.size());
  sigaction(SIGPIPE, &old, nullptr);
  close(in_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHelperTimeoutMs);
  std::array<char, 4096> buf;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out_pipe[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = read(out_pipe[0], buf.data(), buf.size());
    if (n <= 0) break;
    if (output.size() < kMaxHelperOutput) output.append(buf.data(), static_cast<size_t>(n));
  }
  close(out_pipe[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return 124;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string FirstLine(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) : line;
}

}  // namespace

std::string Credential::Describe() const {
  if (anonymous()) return "no credentials (searched " + source + ")";
  return "user '" + username + "' from " + source;
}

std::vector<std::string> AuthFileKeys(const std::string& domain) {
  if (domain == "docker.io") {
    return {"https://index.docker.io/v1/",
            "index.docker.io",
            "docker.io",
            "registry-1.docker.io",
            "https://index.docker.io/v1",
            "https://registry-1.docker.io"};
  }
  return {domain, "https://" + domain, "http://" + domain, "https://" + domain + "/v1/",
          "https://" + domain + "/v2/"};
}

Credential CredentialFromAuthFile(const std::string& json_text, const std::string& file,
                                  const std::string& domain) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw util::Fatal("auth file " + file + " is not JSON");
  std::vector<std::string> keys = AuthFileKeys(domain);
  auto string_at = [](const nlohmann::json& o, const std::string& k) -> std::string {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
  };
  // credHelpers names the helper per registry; it wins over everything else (docker cli).
  if (auto helpers = j.find("credHelpers"); helpers != j.end() && helpers->is_object()) {
    for (const auto& k : keys) {
      if (std::string h = string_at(*helpers, k); !h.empty()) {
        return CredentialFromHelper(h, domain == "docker.io" ? keys[0] : domain);
      }
    }
  }
  if (auto auths = j.find("auths"); auths != j.end() && auths->is_object()) {
    for (const auto& k : keys) {
      auto entry = auths->find(k);
      if (entry == auths->end() || !entry->is_object()) continue;
      Credential c;
      c.source = file;
      if (std::string encoded = string_at(*entry, "auth"); !encoded.empty()) {
        std::string decoded;
        if (!Base64Decode(encoded, decoded) || !SplitUserPass(decoded, c)) {
          throw util::Fatal("auth file " + file + ": the 'auth' entry for " + k +
                            " is not base64 of USER:PASS");
        }
        return c;
      }
      c.username = string_at(*entry, "username");
      c.password = string_at(*entry, "password");
      if (!c.anonymous()) return c;
    }
  }
  if (std::string store = string_at(j, "credsStore"); !store.empty()) {
    return CredentialFromHelper(store, domain == "docker.io" ? keys[0] : domain);
  }
  return {};
}

Credential CredentialFromHelper(const std::string& helper, const std::string& server_url) {
  std::string program = "docker-credential-" + helper;
  if (helper.find('/') != std::string::npos) {
    throw util::Fatal("credential helper name '" + helper + "' contains '/'");
  }
  std::string output;
  int rc = RunHelper(program, server_url + "\n", output);
  if (rc == -1) {
    throw util::Fatal("cannot run credential helper " + program + ": " + std::strerror(errno));
  }
  Credential none;
  none.source = program;
  if (rc != 0) {
    // The helpers say "credentials not found in native keychain" when they know nothing.
    if (output.find("not found") != std::string::npos) return none;
    throw util::Fatal("credential helper " + program + " failed (exit " + std::to_string(rc) +
                      "): " + FirstLine(output));
  }
  nlohmann::json j = nlohmann::json::parse(output, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("Secret")) {
    throw util::Fatal("credential helper " + program + " printed no credential JSON");
  }
  Credential c;
  c.source = program;
  c.username = j.value("Username", "");
  c.password = j.value("Secret", "");
  // "<token>" marks an identity token for an OAuth2 refresh flow, which is not implemented.
  if (c.username == "<token>") {
    throw util::Fatal("credential helper " + program +
                      " returned an identity token, which imgcheck cannot use; pass --creds");
  }
  return c;
}

namespace {

// "host", "host:5000", "[::1]:5000": a registry name as references spell it (docker.io's
// aliases included), lower case; "" when `text` is not one.
std::string RegistryDomain(const std::string& text) {
  if (text.empty() || text.find_first_of("/@ ") != std::string::npos) return "";
  util::Expected<Reference> ref = ParseReference(text + "/x");
  if (!ref || (ref->path != "x" && ref->path != "library/x")) return "";
  std::string domain = util::AsciiLower(ref->domain);
  return domain == "registry-1.docker.io" ? "docker.io" : domain;
}

}  // namespace

CredsFlag ParseCredsFlag(const std::string& text) {
  CredsFlag f;
  f.credential.source = "--creds";
  // HOST=USER:PASS when what comes before the first '=' names a registry; otherwise the whole
  // text is USER:PASS (a password may hold '=').
  if (size_t eq = text.find('='); eq != std::string::npos) {
    std::string domain = RegistryDomain(text.substr(0, eq));
    Credential c = f.credential;
    if (!domain.empty() && SplitUserPass(text.substr(eq + 1), c) && !c.username.empty()) {
      f.domain = domain;
      f.credential = c;
      f.credential.source = "--creds for " + domain;
      return f;
    }
  }
  if (!SplitUserPass(text, f.credential) || f.credential.username.empty()) {
    throw util::Fatal("--creds must be HOST=USER:PASS or USER:PASS");
  }
  return f;
}

Credential FindCredential(const std::string& domain, const CredentialSources& sources) {
  std::string want = util::AsciiLower(domain);
  std::optional<Credential> bare;
  for (const auto& text : sources.creds) {
    CredsFlag f = ParseCredsFlag(text);
    if (f.domain == want) return f.credential;
    if (f.domain.empty() && !bare) bare = f.credential;
  }
  if (bare) return *bare;
  std::vector<std::string> files = AuthFiles();
  if (!sources.authfile.empty()) files = {sources.authfile};
  std::string searched;
  for (const auto& file : files) {
    std::string text;
    if (!ReadSmallFile(file, text)) {
      if (!sources.authfile.empty()) throw util::Fatal("cannot read --authfile " + file);
      continue;
    }
    Credential c = CredentialFromAuthFile(text, file, domain);
    if (!c.anonymous()) return c;
    searched += (searched.empty() ? "" : ", ") + file;
  }
  Credential none;
  std::string flags = sources.creds.empty() ? "--creds" : "--creds (none for " + domain + ")";
  none.source =
      searched.empty() ? flags + " and auth files, none present" : flags + ", " + searched;
  return none;
}

std::vector<Challenge> ParseChallenges(std::string_view h) {
  std::vector<Challenge> out;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto skip_space = [&](size_t i) {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\t' || h[i] == ',')) ++i;
    return i;
  };
  auto token_end = [&](size_t i) {
    while (i < h.size() && h[i] != ' ' && h[i] != '\t' && h[i] != ',' && h[i] != '=') ++i;
    return i;
  };
  size_t i = skip_space(0);
  while (i < h.size()) {
    size_t end = token_end(i);
    std::string word(h.substr(i, end - i));
    size_t after = end;
    while (after < h.size() && (h[after] == ' ' || h[after] == '\t')) ++after;
    if (after < h.size() && h[after] == '=' && !out.empty()) {  // auth-param
      size_t v = after + 1;
      while (v < h.size() && (h[v] == ' ' || h[v] == '\t')) ++v;
      std::string value;
      if (v < h.size() && h[v] == '"') {
        for (++v; v < h.size() && h[v] != '"'; ++v) {
          if (h[v] == '\\' && v + 1 < h.size()) ++v;
          value += h[v];
        }
        if (v < h.size()) ++v;  // closing quote
      } else {
        size_t e = v;
        while (e < h.size() && h[e] != ',' && h[e] != ' ' && h[e] != '\t') ++e;
        value = std::string(h.substr(v, e - v));
        v = e;
      }
      out.back().params[lower(word)] = value;
      i = skip_space(v);
    } else if (!word.empty()) {  // a new challenge's scheme
      out.push_back({lower(word), {}});
      i = skip_space(end);
    } else {
      i = skip_space(end + 1);
    }
  }
  return out;
}

Token ParseTokenResponse(std::string_view body) {
  Token t;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return t;
  for (const char* key : {"token", "access_token"}) {
    if (auto it = j.find(key);
        it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
      t.value = it->get<std::string>();
      break;
    }
  }
  if (auto it = j.find("expires_in"); it != j.end() && it->is_number_integer()) {
    t.expires_in = std::max<int64_t>(it->get<int64_t>(), 0);
  }
  return t;
}

namespace {
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kBase64[(n >> 18) & 63];
    out += kBase64[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[n & 63] : '=';
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    const char* p = std::strchr(kBase64, c);
    if (c == '\0' || p == nullptr) return false;
    acc = (acc << 6) | static_cast<uint32_t>(p - kBase64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

}  // namespace imgcheck::image
