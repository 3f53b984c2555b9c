#include "rules/target.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "util/error.h"

using namespace imgcheck::rules;

TEST_CASE("Host target: the driver from /proc/driver/nvidia/version") {
  CHECK(ParseProcDriverVersion(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
            "01:15:15 UTC 2023\nGCC version:  gcc version 12.2.0\n")
            ->str() == "535.104.05");
  CHECK(ParseProcDriverVersion(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release "
            "Build  (dvs-builder@U16-I3-B03-4-3)\n")
            ->str() == "570.86.15");
  CHECK_FALSE(ParseProcDriverVersion(""));
}

TEST_CASE("Host target: the GPU from nvidia-smi's CSV") {
  auto g = ParseNvidiaSmi(
      "NVIDIA A100-SXM4-80GB, 8.0, 535.104.05\nNVIDIA A100-SXM4-80GB, 8.0, 535.104.05\n");
  REQUIRE(g);
  CHECK(g->name == "NVIDIA A100-SXM4-80GB");
  CHECK(g->sm == 80);
  CHECK(g->driver->str() == "535.104.05");
  CHECK_FALSE(ParseNvidiaSmi(""));
}

TEST_CASE("Target from --driver and --gpu, and the notes when they are missing") {
  const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  Target t;
  NoteMissingTarget(t, k);
  CHECK(t.notes.size() == 3);  // IC030 (driver), IC040 and IC041 (GPU)
  SetDriver(t, "470.57.02", "--driver");
  SetGpu(t, "RTX 4090", k, "--gpu RTX 4090");
  CHECK(t.driver->str() == "470.57.02");
  CHECK(t.sm == 89);
  CHECK_THROWS_AS(SetDriver(t, "latest", "--driver"), imgcheck::util::Fatal);
  CHECK_THROWS_AS(SetGpu(t, "Voodoo 3", k, "--gpu"), imgcheck::util::Fatal);
}

TEST_CASE("Rules that could not run: no target, no probe") {
  const Knowledge k = Knowledge::Load({IMGCHECK_RULES_DIR});
  Target t;
  auto ids = [](const std::vector<NotRun>& list) {
    std::vector<std::string> out;
    out.reserve(list.size());
    for (const auto& n : list) out.push_back(n.rule);
    return out;
  };
  std::vector<std::string> static_rules = ImplementedRules();
  auto without = RulesNotRun(t, k, static_rules, "no probe");
  std::vector<std::string> expect = {"IC030", "IC040", "IC041"};
  for (const auto& r : k.rules())
    if (std::find(static_rules.begin(), static_rules.end(), r.id) == static_rules.end())
      expect.push_back(r.id);
  std::sort(expect.begin(), expect.end());
  auto got = ids(without);
  std::sort(got.begin(), got.end());
  CHECK(got == expect);
  CHECK(expect.size() > 3);  // the probe's rules are in the table
  SetDriver(t, "535.104.05", "--driver");
  SetGpu(t, "A100", k, "--gpu A100");
  CHECK(RulesNotRun(t, k, static_rules, "").empty());  // target given, probe ran
  auto probe_only = RulesNotRun(t, k, static_rules, "no GPU");
  REQUIRE_FALSE(probe_only.empty());
  CHECK(probe_only[0].reason == "no GPU");
}
