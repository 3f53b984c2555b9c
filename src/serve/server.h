// `imgcheck serve`'s HTTPS endpoints over the verdicts: admission, registry events, Gatekeeper,
// health and metrics.
#pragma once

#include <chrono>
#include <string>

#include "serve/fleet/fleet.h"
#include "serve/front/front.h"
#include "serve/metrics.h"
#include "serve/trust/trust.h"

namespace imgcheck::serve {

struct ServerOptions {
  std::string listen = "0.0.0.0:8443";  ///< ADDR:PORT; port 0 picks a free one
  std::string tls_cert, tls_key;
  std::string client_ca;  ///< when set, clients must present a certificate it signed
  /// Deadlines and caps of the HTTP layer; max_body: Kubernetes objects are at most ~1.5 MiB
  /// in etcd.
  front::HttpLimits http;
  /// The longest a request may take, also bounded by the API server's own ?timeout=.
  std::chrono::milliseconds request_deadline{10000};
  std::chrono::milliseconds scan_budget{8000};  ///< the longest a request waits for a scan
  std::string platform = "linux/amd64";         ///< when the pod names none
  front::DecideOptions decide;
  size_t max_images = 64;  ///< distinct images one review may name (more: --on-error)
  /// SIGTERM: stop accepting, answer what is in flight, give up on scans, exit within this.
  std::chrono::milliseconds shutdown_grace{10000};
  std::chrono::milliseconds cert_check{1000};
  std::string ready_file;  ///< test hook: "PORT\n" written here once listening
  /// --trust-key (h-attest): consulted for a digest with no known verdict before a scan is
  /// started; null or not enabled: never.
  trust::Attestations* attestations = nullptr;
};

/// Serves until SIGTERM or SIGINT; returns the exit code (or ends the process itself, with 0,
/// when scans or requests are still running at the end of the shutdown grace). Throws util::Fatal
/// when it cannot start (certificates, address).
int Serve(const ServerOptions& options, fleet::Verdicts& verdicts, fleet::Resolver& resolver,
          Metrics& metrics);

}  // namespace imgcheck::serve
