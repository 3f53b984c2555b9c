#include "image/docker_daemon.h"

#include <catch2/catch.hpp>

#include "util/error.h"

using namespace imgcheck::image;

TEST_CASE("docker-daemon: DOCKER_HOST and the export path") {
  DaemonEndpoint def = DaemonFromEnv(nullptr);
  CHECK(def.unix_socket == "/var/run/docker.sock");
  CHECK(def.base_url == "http://localhost");
  CHECK(DaemonFromEnv("").unix_socket == "/var/run/docker.sock");
  DaemonEndpoint sock = DaemonFromEnv("unix:///run/user/1000/podman/podman.sock");
  CHECK(sock.unix_socket == "/run/user/1000/podman/podman.sock");
  DaemonEndpoint tcp = DaemonFromEnv("tcp://10.0.0.2:2375");
  CHECK(tcp.unix_socket.empty());
  CHECK(tcp.base_url == "http://10.0.0.2:2375");
  CHECK_THROWS_AS(DaemonFromEnv("ssh://me@host"), imgcheck::util::Fatal);
  CHECK_THROWS_AS(DaemonFromEnv("tcp://"), imgcheck::util::Fatal);

  // As docker does: no tag means :latest; a registry port is not a tag.
  CHECK(DaemonExportPath("app") == "/images/app:latest/get");
  CHECK(DaemonExportPath("nvidia/cuda:12.4.1-runtime") == "/images/nvidia/cuda:12.4.1-runtime/get");
  CHECK(DaemonExportPath("localhost:5000/app") == "/images/localhost:5000/app:latest/get");
  CHECK(DaemonExportPath("app@sha256:ab") == "/images/app@sha256:ab/get");
  CHECK(DaemonExportPath("a b?c") == "/images/a%20b%3Fc:latest/get");
}
