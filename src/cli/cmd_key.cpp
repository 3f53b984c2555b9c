// `imgcheck key generate`: an ECDSA P-256 key pair for signing attestations (scan --attest) and
// verifying them (verify, serve --trust-key).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "attest/keys.h"
#include "cli/commands.h"
#include "util/error.h"

namespace imgcheck::cli {

namespace {

// Writes `text` to a new file `path` with `mode`; never replaces an existing key.
void WriteNew(const std::string& path, const std::string& text, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw util::Fatal("cannot create " + path + ": " + std::strerror(errno));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = close(fd) == 0 && ok;
  if (!ok) throw util::Fatal("cannot write " + path);
}

}  // namespace

Runner DefineKey(CLI::App& sub) {
  auto prefix = std::make_shared<std::string>("imgcheck");
  sub.require_subcommand(1);
  // `key generate --output-key-prefix P` as well as `key --output-key-prefix P generate`.
  sub.fallthrough();
  sub.add_option("--output-key-prefix", *prefix,
                 "the files' path without .key/.pub (existing files are never replaced)")
      ->capture_default_str();
  sub.add_subcommand("generate",
                     "write a new ECDSA P-256 key pair: PREFIX.key (PKCS#8 PEM, mode 0600) and "
                     "PREFIX.pub (SubjectPublicKeyInfo PEM, what cosign.pub is)");
  return [prefix]() -> int {
    attest::KeyPair pair = attest::GenerateKeyPair();
    std::string key = *prefix + ".key", pub = *prefix + ".pub";
    if (access(pub.c_str(), F_OK) == 0) throw util::Fatal(pub + " exists; not replacing it");
    WriteNew(key, pair.private_pem, 0600);
    WriteNew(pub, pair.public_pem, 0644);
    std::cout << "private key " << key << " (keep it secret; scan --attest --key " << key
              << ")\npublic key " << pub << " (verify --key " << pub << ", serve --trust-key "
              << pub << ")\n";
    return 0;
  };
}

}  // namespace imgcheck::cli
