// Inputs the fuzzers in fuzz/ found (scripts/fuzz.sh), kept as regression tests: each failed a
// fuzz property before the fix named in its comment.
#include <gtest/gtest.h>

#include <string>

#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/topology_conf.hpp"

namespace pipette {
namespace {

constexpr const char* kHeader = "pipette_link_cache: 1\nnodes:\n";

// link_cache_fuzz: a plain fingerprint holding a '"' was accepted, then written inside quotes the
// reader cannot take back, so update_link_cache refused every later merge into that cache.
TEST(FuzzRegression, LinkCacheRejectsAQuoteInAFingerprint) {
  const auto cache = parse_link_cache(std::string(kHeader) +
                                          "  gpu001: {measured_at: 2026-12-01T15:00:00Z, fingerprint: odeM*f: \"H105-vswitch}\n",
                                      "cache.yaml");
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.error().message.find("cache.yaml:3: node gpu001: fingerprint may not contain '\"'"), std::string::npos)
      << cache.error().message;
}

// link_cache_fuzz (CI, 2026-12-01): a plain fingerprint or nccl_version holding a backslash was
// accepted, then written inside quotes, where the reader refuses a backslash as an escape it does
// not implement; the rewritten cache did not parse.
TEST(FuzzRegression, LinkCacheRejectsABackslashInText) {
  for (const std::string field : {"fingerprint: H100\\SXM", "nccl_version: 2.21\\5"}) {
    const auto cache =
        parse_link_cache(std::string(kHeader) + "  gpu001: {measured_at: 2026-12-01T15:00:00Z, " + field + "}\n", "cache.yaml");
    ASSERT_FALSE(cache.ok()) << field;
    EXPECT_NE(cache.error().message.find("cache.yaml:3: node gpu001: "), std::string::npos) << cache.error().message;
    EXPECT_NE(cache.error().message.find("may not contain"), std::string::npos) << cache.error().message;
  }
}

TEST(FuzzRegression, LinkCacheRejectsNodeNamesTheWriterCannotWrite) {
  for (const char* name : {"\"a:b\"", "\"a b\"", "\"a,b\"", "\"#a\""}) {
    const auto cache =
        parse_link_cache(std::string(kHeader) + "  " + name + ": {measured_at: 2026-12-01T15:00:00Z}\n", "cache.yaml");
    ASSERT_FALSE(cache.ok()) << name;
    EXPECT_NE(cache.error().message.find("node names are hostnames"), std::string::npos) << cache.error().message;
  }
}

// A quoted nccl_version may hold what a plain one cannot; the writer quotes it again.
TEST(FuzzRegression, LinkCacheWriterQuotesTextThatNeedsIt) {
  const auto cache = parse_link_cache(std::string(kHeader) +
                                          "  gpu001: {measured_at: 2026-12-01T15:00:00Z, nccl_version: \"2.21, patched: [x]\"}\n",
                                      "cache.yaml");
  ASSERT_TRUE(cache.ok()) << cache.error().message;
  const auto again = parse_link_cache(format_link_cache(*cache), "rewritten.yaml");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->nodes.at(0).nccl_version, "2.21, patched: [x]");
}

// A bandwidth of 1e300 GB/s overflowed to inf bytes/s after conversion and was written as "inf";
// a time of 1e-320 µs underflowed to 0 s. Both are now out of the plausible range on reading.
TEST(FuzzRegression, LinkCacheRejectsQuantitiesThatOverflowOrUnderflowInSiUnits) {
  const std::string pair_prefix = "pipette_link_cache: 1\nnodes: {}\npairs:\n  a b: {measured_at: 2026-12-01T15:00:00Z, ";
  for (const std::string fields : {"bandwidth_gb_per_s: 1e300, latency_us: 1",
                                   "bandwidth_gb_per_s: 10, latency_us: 1e300",
                                   "bandwidth_gb_per_s: 10, latency_us: 1, message_bytes: [1, 2], time_us: [1e-320, 1]"}) {
    const auto cache = parse_link_cache(pair_prefix + fields + "}\n", "cache.yaml");
    ASSERT_FALSE(cache.ok()) << fields;
    EXPECT_NE(cache.error().message.find("cache.yaml:4: pair a b:"), std::string::npos) << cache.error().message;
  }
}

// topology_conf_fuzz (2026-12-01, 4-minute run): Nodes= lists of a million names, each several
// hundred bytes of binary junk, on several lines ran the fuzzer out of its 2 GB. Names are now
// bounded in length, and a topology.conf in the number of names it holds in all.
TEST(FuzzRegression, HostlistRejectsNamesLongerThanAnyHostName) {
  const auto hosts = expand_hostlist(std::string(250, 'x') + "[99990-100000]");
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.error().message.find("names a host longer than 255 characters"), std::string::npos) << hosts.error().message;
  EXPECT_TRUE(expand_hostlist(std::string(250, 'x') + "[99990-99999]").ok());  // 255 characters
}

TEST(FuzzRegression, TopologyConfBoundsTheNamesOfTheWholeFile) {
  const auto tree = parse_topology_conf(
      "SwitchName=s1 Nodes=a[0-65535]b[0-9]\nSwitchName=s2 Nodes=c[0-65535]d[0-9]\n", "topology.conf");
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.error().message.find("topology.conf:2: the file names more than 1048576 nodes and switches"),
            std::string::npos)
      << tree.error().message;
}

}  // namespace
}  // namespace pipette
