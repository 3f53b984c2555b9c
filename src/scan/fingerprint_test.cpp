#include "scan/fingerprint.h"

#include <catch2/catch.hpp>

namespace imgcheck::scan {
namespace {

// IC001 as the check reports it: the cuDNN file loaded first, found through LD_LIBRARY_PATH.
rules::Finding Mismatch(const std::string& dir, const std::string& file) {
  rules::Finding f;
  f.rule = "IC001";
  f.paths = {dir + "/" + file, "/usr/lib/python3/dist-packages/torch/version.py"};
  f.message = "compiled with cuDNN 8.9 but loads " + file;
  loader::Resolution r;
  r.name = "libcudnn.so." + file.substr(std::string("libcudnn.so.").size(), 1);
  r.status = loader::Status::kFound;
  r.real_path = f.paths[0];
  f.evidence = {rules::ResolvedEvidence(r)};
  return f;
}

catalog::Catalog OwnedBy(const std::string& path, const std::string& package,
                         const std::string& version) {
  catalog::Catalog c;
  c.mutable_owners()[path] = {catalog::PackageManager::kPip, package, version, "", 3};
  return c;
}

}  // namespace

TEST_CASE("fingerprint: stable across moves and version bumps, apart for what differs") {
  catalog::Catalog none;
  std::string before =
      FingerprintKey(Mismatch("/usr/local/cudnn/lib64", "libcudnn.so.8.9.2"), none);
  // Another directory (a rebuild that moves the file to another layer) and cuDNN 9.
  CHECK(FingerprintKey(Mismatch("/opt/cudnn/lib", "libcudnn.so.9.1.0"), none) == before);
  // The owning package by name: its version is no part of it.
  std::string owned = "/site/nvidia/cudnn/lib/libcudnn.so.8.9.2";
  std::string moved = "/site2/nvidia/cudnn/lib/libcudnn.so.9.1.0";
  CHECK(FingerprintKey(Mismatch("/site/nvidia/cudnn/lib", "libcudnn.so.8.9.2"),
                       OwnedBy(owned, "nvidia-cudnn-cu12", "8.9.2.26")) ==
        FingerprintKey(Mismatch("/site2/nvidia/cudnn/lib", "libcudnn.so.9.1.0"),
                       OwnedBy(moved, "nvidia-cudnn-cu12", "9.1.0.70")));
  CHECK(FingerprintKey(Mismatch("/site/nvidia/cudnn/lib", "libcudnn.so.8.9.2"),
                       OwnedBy(owned, "nvidia-cudnn-cu12", "8.9.2.26")) != before);
  // Another rule, another library, another variable: another fingerprint.
  rules::Finding other = Mismatch("/usr/local/cudnn/lib64", "libcudnn.so.8.9.2");
  other.rule = "IC002";
  CHECK(FingerprintKey(other, none) != before);
  rules::Finding ops = Mismatch("/usr/local/cudnn/lib64", "libcudnn_ops.so.8.9.2");
  CHECK(FingerprintKey(ops, none) != before);
  rules::Finding env = Mismatch("/usr/local/cudnn/lib64", "libcudnn.so.8.9.2");
  env.env = "LD_LIBRARY_PATH";
  CHECK(FingerprintKey(env, none) != before);
  // A file that is no library keeps its name, digits aside.
  rules::Finding dist;
  dist.rule = "IC020";
  dist.paths = {"/site/torch-2.3.0.dist-info"};
  rules::Finding bumped = dist;
  bumped.paths = {"/site/torch-2.4.1.dist-info"};
  CHECK(FingerprintKey(dist, none) == FingerprintKey(bumped, none));
}

TEST_CASE("fingerprint: colliding findings numbered in report order, hex otherwise") {
  catalog::Catalog none;
  std::vector<rules::Finding> findings = {Mismatch("/a", "libcudnn.so.8.9.2"),
                                          Mismatch("/b", "libcudnn.so.8.9.2"),
                                          Mismatch("/c", "libcudnn_ops.so.8.9.2")};
  AssignFingerprints(findings, none);
  CHECK(findings[0].fingerprint.size() == 64);
  CHECK(findings[1].fingerprint == findings[0].fingerprint + "#2");
  CHECK(findings[2].fingerprint.size() == 64);
  CHECK(findings[2].fingerprint != findings[0].fingerprint);
  // The same scan again: the same fingerprints.
  std::vector<rules::Finding> again = findings;
  AssignFingerprints(again, none);
  for (size_t i = 0; i < findings.size(); ++i)
    CHECK(again[i].fingerprint == findings[i].fingerprint);
}

}  // namespace imgcheck::scan
