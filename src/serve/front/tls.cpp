#include "serve/front/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include "serve/log.h"
#include "util/error.h"

namespace imgcheck::serve::front {

struct CertificateFiles::Pair {
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509) * chain = nullptr;
  ~Pair() {
    X509_free(cert);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
  }
};

namespace {

std::filesystem::file_time_type Mtime(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(path, ec);
  return ec ? std::filesystem::file_time_type::min() : t;
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no PEM data";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace

CertificateFiles::CertificateFiles(std::string cert, std::string key,
                                   std::chrono::milliseconds check_every)
    : cert_(std::move(cert)), key_(std::move(key)), every_(check_every) {
  cert_time_ = Mtime(cert_);
  key_time_ = Mtime(key_);
  std::string why;
  current_ = Load(why);
  if (!current_) throw util::Fatal(why);
  generation_ = 1;
  watcher_ = std::thread([this] { Watch(); });
}

CertificateFiles::~CertificateFiles() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  watcher_.join();
}

int CertificateFiles::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

std::shared_ptr<CertificateFiles::Pair> CertificateFiles::Load(std::string& why) const {
  auto p = std::make_shared<Pair>();
  std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_file(cert_.c_str(), "r"), BIO_free);
  if (!cb) {
    why = "--tls-cert: cannot read " + cert_;
    return nullptr;
  }
  p->cert = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr);
  if (!p->cert) {
    why = "--tls-cert: " + cert_ + ": " + OpenSslError();
    return nullptr;
  }
  p->chain = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr))
    sk_X509_push(p->chain, extra);
  ERR_clear_error();  // the end of the file reads as an error
  std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_file(key_.c_str(), "r"), BIO_free);
  if (!kb) {
    why = "--tls-key: cannot read " + key_;
    return nullptr;
  }
  p->key = PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr);
  if (!p->key) {
    why = "--tls-key: " + key_ + ": " + OpenSslError();
    return nullptr;
  }
  if (X509_check_private_key(p->cert, p->key) != 1) {
    ERR_clear_error();
    why = "--tls-key: " + key_ + " is not the key of " + cert_;
    return nullptr;
  }
  return p;
}

void CertificateFiles::Watch() {
  std::unique_lock lock(mu_);
  while (!stop_cv_.wait_for(lock, every_, [&] { return stop_; })) {
    auto ct = Mtime(cert_), kt = Mtime(key_);
    if (ct == cert_time_ && kt == key_time_) continue;
    lock.unlock();
    std::string why;
    auto p = Load(why);  // a half-written pair fails the key check; the next look retries
    lock.lock();
    if (!p) {
      Log("certificate files changed but do not load yet: " + why);
      continue;
    }
    cert_time_ = ct;
    key_time_ = kt;
    current_ = std::move(p);
    ++generation_;
    Log("reloaded " + cert_);
  }
}

int CertificateFiles::OnCertificate(SSL* ssl, void* self) {
  auto* files = static_cast<CertificateFiles*>(self);
  std::shared_ptr<Pair> p;
  {
    std::lock_guard lock(files->mu_);
    p = files->current_;
  }
  return SSL_use_cert_and_key(ssl, p->cert, p->key, p->chain, 1) == 1 ? 1 : 0;
}

void CertificateFiles::Attach(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, OnCertificate, this); }

}  // namespace imgcheck::serve::front
