// The figures of issue #20 against a running `imgcheck serve` (bench/serve-attack.sh starts one):
// legitimate reviews, each on a new TLS connection, while 300 clients drip a TLS ClientHello one
// byte every 2 s and 800 hold idle TCP connections (both reconnect when cut, as attackers would);
// then the server's RSS under the largest single requests and under a mix of them.
//   serve_attack PORT PID [REVIEWS]
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "attack.h"

using namespace imgcheck::testing;
using Clock = std::chrono::steady_clock;

namespace {

std::string Review(size_t containers, const std::string& image) {
  std::string list;
  for (size_t i = 0; i < containers; ++i)
    list += std::string(i ? "," : "") + R"({"name":"c)" + std::to_string(i) + R"(","image":")" +
            image + R"("})";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},"name":"p","namespace":"n",)"
         R"("operation":"CREATE","object":{"spec":{"containers":[)" +
         list + "]}}}}";
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: serve_attack PORT PID [REVIEWS]\n");
    return 2;
  }
  int port = std::stoi(argv[1]);
  pid_t pid = std::stoi(argv[2]);
  int reviews = argc > 3 ? std::stoi(argv[3]) : 200;
  std::printf("descriptors: %zu\n", RaiseFileLimit());
  std::atomic<bool> stop{false};
  std::atomic<size_t> peak{RssBytes(pid)};
  std::thread sampler([&] {
    while (!stop) {
      peak = std::max<size_t>(peak, RssBytes(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  size_t rss_idle = RssBytes(pid);

  // The attackers: 300 dripping handshakes (127.0.0.2), 800 idle (127.0.0.3, .4).
  std::vector<int> drip(300, -1), idle(800, -1);
  std::atomic<size_t> reconnects{0};
  std::thread attacker([&] {
    while (!stop) {
      for (int& fd : drip) {
        if (fd >= 0 && send(fd, "\x16", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) continue;
        if (fd >= 0) close(fd), ++reconnects;
        fd = ConnectFrom("127.0.0.2", port);
        if (fd >= 0) send(fd, "\x16", 1, MSG_NOSIGNAL);
      }
      for (size_t i = 0; i < idle.size(); ++i) {
        char c;
        int& fd = idle[i];
        if (fd >= 0 && recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN) continue;
        if (fd >= 0) close(fd), ++reconnects;
        fd = ConnectFrom(i % 2 ? "127.0.0.3" : "127.0.0.4", port);
      }
      for (int i = 0; i < 20 && !stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(3));

  std::string request = PostRequest("/v1/admission?timeout=10s", Review(1, "127.0.0.1:2/a:1"));
  std::vector<double> ms;
  int failed = 0;
  for (int i = 0; i < reviews; ++i) {
    auto start = Clock::now();
    TlsClient c("127.0.0.1", port, std::chrono::seconds(10));
    bool ok = c.ok() && c.Write(request) && StatusCodes(c.Read(1)) == std::vector<int>{200};
    double took = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (ok)
      ms.push_back(took);
    else
      ++failed;
  }
  std::printf(
      "under 300 dripping handshakes + 800 idle connections: %d reviews (new connection each): "
      "p50 %.1f ms, p99 %.1f ms, max %.1f ms, failed %d; attacker reconnects %zu\n",
      reviews, Percentile(ms, 0.5), Percentile(ms, 0.99), Percentile(ms, 1.0), failed,
      reconnects.load());
  std::printf("server threads: %d\n", Threads(pid));

  // Single large requests, one at a time, then eight at once.
  std::string nested = std::string(1400000, '[') + std::string(1400000, ']');
  std::string wide = Review(40000, "127.0.0.1:2/a:1");
  std::vector<std::pair<const char*, std::string>> bodies = {
      {"2.8 MB nested JSON", nested}, {"40,000 containers of one image", wide}};
  auto send_body = [&](const std::string& body) {
    TlsClient c("127.0.0.1", port, std::chrono::seconds(30));
    return c.Write(PostRequest("/v1/admission", body)) ? StatusCodes(c.Read(1))
                                                       : std::vector<int>{};
  };
  for (auto& [what, body] : bodies) {
    size_t before = RssBytes(pid);
    peak = before;
    std::vector<int> codes = send_body(body);
    std::printf("%s (%zu bytes): status %d, peak RSS %.0f MB (+%.0f MB)\n", what, body.size(),
                codes.empty() ? 0 : codes[0], static_cast<double>(peak) / 1e6,
                static_cast<double>(peak - std::min(peak.load(), before)) / 1e6);
  }
  peak = RssBytes(pid);
  std::vector<std::thread> mix;
  for (int i = 0; i < 8; ++i)
    mix.emplace_back([&, i] { send_body(bodies[static_cast<size_t>(i) % bodies.size()].second); });
  for (auto& t : mix) t.join();
  std::printf("8 at once, under the attackers: peak RSS %.0f MB (idle server: %.0f MB)\n",
              static_cast<double>(peak) / 1e6, static_cast<double>(rss_idle) / 1e6);
  stop = true;
  attacker.join();
  sampler.join();
  return failed == 0 ? 0 : 1;
}
