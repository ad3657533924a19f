#include "pipette/topology/link_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "pipette/core/units.hpp"

namespace pipette {
namespace {

constexpr std::int64_t kDecember1 = 1796144400;  // 2026-12-01T17:00:00Z

PairMeasurement pair(std::string a, std::string b, double gb_per_s, double latency_us, std::int64_t at) {
  PairMeasurement p;
  p.node_a = std::move(a);
  p.node_b = std::move(b);
  p.measured_at_unix_seconds = at;
  p.nccl_version = "2.21.5";
  p.bandwidth_bytes_per_second = gb_per_s * units::gigabyte;
  p.latency_seconds = latency_us * units::microsecond;
  p.points = {{1048576, (latency_us + 1048576 / (gb_per_s * 1e3)) * units::microsecond},
              {67108864, (latency_us + 67108864 / (gb_per_s * 1e3)) * units::microsecond}};
  return p;
}

NodeMeasurement node(std::string name, std::int64_t at, int gpus) {
  NodeMeasurement n;
  n.name = std::move(name);
  n.measured_at_unix_seconds = at;
  n.nccl_version = "2.21.5";
  n.fingerprint = "H100-SXM-80GB.x8.nvswitch.mlx5x8";
  n.gpus = gpus;
  for (int i = 0; i < gpus * gpus; ++i) {
    n.bandwidth_bytes_per_second.push_back(i % (gpus + 1) == 0 ? 0 : 360 * units::gigabyte);
    n.latency_seconds.push_back(i % (gpus + 1) == 0 ? 0 : 3.25 * units::microsecond);
  }
  return n;
}

CollectiveMeasurement collective(int nodes, std::int64_t at, double all_reduce_gb_per_s) {
  CollectiveMeasurement entry;
  entry.nodes = nodes;
  entry.measured_at_unix_seconds = at;
  entry.nccl_version = "2.21.5";
  entry.message_bytes = 268435456;
  entry.all_reduce_bus_bytes_per_second = all_reduce_gb_per_s * 1e9;
  entry.all_gather_bus_bytes_per_second = 0.9 * all_reduce_gb_per_s * 1e9;
  return entry;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pipette-link-cache-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST(Timestamp, RoundTripsAndRejectsNonUtc) {
  EXPECT_EQ(*parse_utc_timestamp("2026-12-01T17:00:00Z"), kDecember1);
  EXPECT_EQ(*parse_utc_timestamp("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*parse_utc_timestamp("2024-02-29T12:34:56.789+00:00"), 1709210096);
  EXPECT_EQ(format_utc_timestamp(kDecember1), "2026-12-01T17:00:00Z");
  EXPECT_EQ(format_utc_timestamp(1709210096), "2024-02-29T12:34:56Z");
  for (const char* bad : {"2026-12-01T17:00:00", "2026-12-01T17:00:00+02:00", "2026-13-01T00:00:00Z",
                          "2026-02-30T00:00:00Z", "yesterday", "2026-12-01"})
    EXPECT_FALSE(parse_utc_timestamp(bad).ok()) << bad;
}

TEST(LinkCacheFormat, RoundTripsExactlyAndIsValidYaml) {
  LinkCache cache;
  cache.nodes = {node("gpu001", kDecember1, 4), node("gpu002", kDecember1 + 60, 0)};
  cache.pairs = {pair("gpu001", "gpu002", 45.25, 12.5, kDecember1 + 300)};
  const std::string text = format_link_cache(cache);
  auto parsed = parse_link_cache(text, "cache.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(format_link_cache(*parsed), text);
  ASSERT_EQ(parsed->nodes.size(), 2u);
  EXPECT_EQ(parsed->nodes[0].gpus, 4);
  EXPECT_NEAR(parsed->nodes[0].bandwidth_bytes_per_second[1], 360e9, 1);
  EXPECT_EQ(parsed->nodes[0].fingerprint, "H100-SXM-80GB.x8.nvswitch.mlx5x8");
  ASSERT_EQ(parsed->pairs.size(), 1u);
  EXPECT_NEAR(parsed->pairs[0].bandwidth_bytes_per_second, 45.25e9, 1);
  EXPECT_NEAR(parsed->pairs[0].latency_seconds, 12.5e-6, 1e-15);
  EXPECT_EQ(parsed->pairs[0].points.size(), 2u);
  EXPECT_EQ(parsed->pairs[0].measured_at_unix_seconds, kDecember1 + 300);

  // Any YAML reader sees the same document.
  const YAML::Node yaml = YAML::Load(text);
  EXPECT_EQ(yaml["pipette_link_cache"].as<int>(), 1);
  EXPECT_DOUBLE_EQ(yaml["pairs"]["gpu001 gpu002"]["bandwidth_gb_per_s"].as<double>(), 45.25);
  EXPECT_DOUBLE_EQ(yaml["nodes"]["gpu001"]["bandwidth_gb_per_s"][0][1].as<double>(), 360);
  EXPECT_EQ(yaml["nodes"]["gpu001"]["measured_at"].as<std::string>(), "2026-12-01T17:00:00Z");
}

// Issue 18: version 2 adds a pair's cross-rail sample; files without one stay version 1, so
// older readers keep reading them, and readers stay strict about both versions.
TEST(LinkCacheFormat, CrossRailSampleNeedsVersionTwoAndAllFourFields) {
  LinkCache cache;
  cache.pairs = {pair("gpu001", "gpu002", 360, 8, kDecember1), pair("gpu001", "gpu003", 350, 8, kDecember1)};
  EXPECT_NE(format_link_cache(cache).find("pipette_link_cache: 1\n"), std::string::npos);
  cache.pairs[0].rail_bandwidth_bytes_per_second = 46 * units::gigabyte;
  cache.pairs[0].rail_latency_seconds = 8 * units::microsecond;
  cache.pairs[0].cross_rail_bandwidth_bytes_per_second = 41.5 * units::gigabyte;
  cache.pairs[0].cross_rail_latency_seconds = 9.25 * units::microsecond;
  const std::string text = format_link_cache(cache);
  EXPECT_NE(text.find("pipette_link_cache: 2\n"), std::string::npos);
  auto parsed = parse_link_cache(text, "cache.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(format_link_cache(*parsed), text);
  EXPECT_NEAR(parsed->pairs[0].cross_rail_bandwidth_bytes_per_second, 41.5e9, 1);
  EXPECT_NEAR(parsed->pairs[0].rail_latency_seconds, 8e-6, 1e-15);
  EXPECT_FALSE(parsed->pairs[1].has_cross_rail());
  EXPECT_DOUBLE_EQ(YAML::Load(text)["pairs"]["gpu001 gpu002"]["cross_rail_gb_per_s"].as<double>(), 41.5);

  const std::string entry =
      "  a b: {measured_at: 2026-12-01T17:00:00Z, bandwidth_gb_per_s: 360, latency_us: 8, rail_gb_per_s: 46, "
      "rail_latency_us: 8, cross_rail_gb_per_s: 41, cross_rail_latency_us: 9}\n";
  auto old_version = parse_link_cache("pipette_link_cache: 1\npairs:\n" + entry, "v1.yaml");
  ASSERT_FALSE(old_version.ok());
  EXPECT_NE(old_version.error().message.find("needs `pipette_link_cache: 2`"), std::string::npos) << old_version.error().message;
  EXPECT_TRUE(parse_link_cache("pipette_link_cache: 2\npairs:\n" + entry, "v2.yaml").ok());
  auto partial = parse_link_cache(
      "pipette_link_cache: 2\npairs:\n  a b: {measured_at: 2026-12-01T17:00:00Z, bandwidth_gb_per_s: 360, latency_us: 8, "
      "cross_rail_gb_per_s: 41}\n",
      "partial.yaml");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("go together"), std::string::npos);
  EXPECT_FALSE(parse_link_cache("pipette_link_cache: 4\npairs: {}\n", "v4.yaml").ok());
}

TEST(LinkCacheFormat, AcceptsPartialAndHandWrittenCaches) {
  auto only_version = parse_link_cache("pipette_link_cache: 1\n", "c.yaml");
  ASSERT_TRUE(only_version.ok());
  EXPECT_TRUE(only_version->nodes.empty());
  auto hand = parse_link_cache(
      "# measured by hand\r\npipette_link_cache: 1\r\npairs:\n  # a comment\n"
      "  b a: {latency_us: 9, bandwidth_gb_per_s: 20, measured_at: 2026-01-01T00:00:00Z}  # trailing\n"
      "nodes:\n  a: {measured_at: \"2026-01-01T00:00:00Z\"}\n",
      "c.yaml");
  ASSERT_TRUE(hand.ok()) << hand.error().message;
  ASSERT_EQ(hand->pairs.size(), 1u);
  EXPECT_EQ(hand->pairs[0].node_a, "a");  // names sorted
  EXPECT_TRUE(hand->pairs[0].points.empty());
  EXPECT_EQ(hand->nodes[0].gpus, 0);
}

TEST(LinkCacheFormat, BadValuesAreErrorsNamingFileLineAndEntry) {
  const std::string head = "pipette_link_cache: 1\npairs:\n";
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: nan, latency_us: 3}\n",
       "c.yaml:3: pair a b: bandwidth_gb_per_s is nan"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: .inf, latency_us: 3}\n",
       "pair a b: bandwidth_gb_per_s is inf"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: -4, latency_us: 3}\n",
       "bandwidth_gb_per_s is -4"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: -3}\n", "latency_us is -3"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: 3, message_bytes: [1, 2], "
              "time_us: [1, inf]}\n",
       "time_us[1] is inf"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4}\n", "latency_us are required"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: 3, color: red}\n",
       "unknown field \"color\""},
      {head + "  a b: {measured_at: 2026-01-01, bandwidth_gb_per_s: 4, latency_us: 3}\n", "measured_at:"},
      {head + "  a a: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: 3}\n", "two different nodes"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: 3\n", "expected ',' or '}'"},
      {head + "  a b: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 4, latency_us: 3}\n"
              "  b a: {measured_at: 2026-01-01T00:00:00Z, bandwidth_gb_per_s: 5, latency_us: 3}\n",
       "c.yaml:4: this node pair is listed twice (also on line 3)"},
      {"pipette_link_cache: 1\nnodes:\n  n: {measured_at: 2026-01-01T00:00:00Z, gpus: 2, bandwidth_gb_per_s: [[0, 1], "
       "[1, 0]], latency_us: [[0, 1], [1]]}\n",
       "node n: latency_us must be a square matrix"},
      {"pipette_link_cache: 1\nnodes:\n  n: {measured_at: 2026-01-01T00:00:00Z, gpus: 2, bandwidth_gb_per_s: [[0, 0], "
       "[1, 0]], latency_us: [[0, 1], [1, 0]]}\n",
       "node n: bandwidth_gb_per_s[0][1] is 0"},
      {"pipette_link_cache: 4\n", "format version 4 is not supported"},
      {"nodes:\n", "the first key must be `pipette_link_cache: 1`"},
      {"hello: world\n", "unknown top-level key \"hello\""},
      {"", "not a Pipette link cache"},
  };
  for (const auto& c : cases) {
    auto parsed = parse_link_cache(c.text, "c.yaml");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_NE(parsed.error().message.find(c.expected), std::string::npos)
        << "got: " << parsed.error().message << "\nwanted: " << c.expected;
    EXPECT_EQ(parsed.error().message.rfind("c.yaml", 0), 0u) << parsed.error().message;
  }
}

TEST(LinkCacheMerge, NewerWinsAndNothingIsDropped) {
  LinkCache base;
  base.nodes = {node("a", kDecember1, 2), node("b", kDecember1, 2)};
  base.pairs = {pair("a", "b", 40, 10, kDecember1), pair("a", "c", 30, 10, kDecember1 + 100)};
  LinkCache incoming;
  incoming.nodes = {node("b", kDecember1 + 1, 0), node("c", kDecember1 + 1, 2)};
  incoming.pairs = {pair("b", "a", 44, 9, kDecember1 + 50),   // newer, reversed names
                    pair("c", "a", 10, 99, kDecember1 + 50),  // older than base: loses
                    pair("b", "c", 35, 11, kDecember1 + 50)};
  const LinkCache merged = merge_link_caches(base, incoming);
  ASSERT_EQ(merged.nodes.size(), 3u);
  EXPECT_EQ(merged.nodes[1].name, "b");
  EXPECT_EQ(merged.nodes[1].gpus, 0);  // the newer entry replaced the old one
  ASSERT_EQ(merged.pairs.size(), 3u);
  EXPECT_NEAR(merged.pairs[0].bandwidth_bytes_per_second, 44e9, 1);  // a b: newer
  EXPECT_NEAR(merged.pairs[1].bandwidth_bytes_per_second, 30e9, 1);  // a c: base newer
  EXPECT_EQ(merged.pairs[2].node_a, "b");
}

TEST_F(TempDir, UpdateWritesAtomicallyAndMergesWithTheFile) {
  const std::string file = path("links.yaml");
  LinkCache first;
  first.pairs = {pair("n1", "n2", 40, 10, kDecember1)};
  ASSERT_TRUE(update_link_cache(file, first).ok());
  LinkCache second;
  second.pairs = {pair("n2", "n3", 41, 10, kDecember1 + 10)};
  second.nodes = {node("n1", kDecember1, 8)};
  auto merged = update_link_cache(file, second);
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  auto reread = read_link_cache(file);
  ASSERT_TRUE(reread.ok()) << reread.error().message;
  EXPECT_EQ(reread->pairs.size(), 2u);
  EXPECT_EQ(reread->nodes.size(), 1u);
  EXPECT_EQ(format_link_cache(*reread), format_link_cache(*merged));
  // No temporary files are left behind: the cache, its index and the lock file.
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"links.yaml", "links.yaml.index", "links.yaml.lock"}));
  EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read);
}

TEST_F(TempDir, UpdateRefusesToOverwriteACorruptCache) {
  const std::string file = path("links.yaml");
  std::ofstream(file) << "pipette_link_cache: 1\npairs:\n  a b: {bandwidth_gb_per_s: nan}\n";
  LinkCache incoming;
  incoming.pairs = {pair("n1", "n2", 40, 10, kDecember1)};
  auto result = update_link_cache(file, incoming);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("not overwriting"), std::string::npos) << result.error().message;
  std::ifstream in(file);
  std::stringstream contents;
  contents << in.rdbuf();
  EXPECT_NE(contents.str().find("nan"), std::string::npos);
}

TEST_F(TempDir, ConcurrentWritersLoseNothing) {
  const std::string file = path("links.yaml");
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int k = 0; k < 5; ++k) {
        LinkCache one;
        one.pairs = {pair('w' + std::to_string(w), 'k' + std::to_string(k), 40, 10, kDecember1)};
        EXPECT_TRUE(update_link_cache(file, one).ok());
      }
    });
  }
  for (auto& writer : writers) writer.join();
  auto cache = read_link_cache(file);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->pairs.size(), 20u);
}

TEST_F(TempDir, MissingAndUnwritableLocationsAreOneLineErrors) {
  auto missing = read_link_cache(path("nope.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope.yaml"), std::string::npos);
  EXPECT_NE(missing.error().message.find("pipette-probe"), std::string::npos);
  auto unwritable = update_link_cache(path("no/such/dir/links.yaml"), LinkCache{});
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.error().message.find("no/such/dir"), std::string::npos);
}

void expect_same_table(const LinkTable& a, const LinkTable& b) {
  EXPECT_EQ(a.names, b.names);
  ASSERT_EQ(a.pairs.size(), b.pairs.size());
  for (std::size_t i = 0; i < a.pairs.size(); ++i) {
    EXPECT_EQ(a.pairs[i].node_a, b.pairs[i].node_a);
    EXPECT_EQ(a.pairs[i].node_b, b.pairs[i].node_b);
    EXPECT_EQ(a.pairs[i].measured_at_unix_seconds, b.pairs[i].measured_at_unix_seconds);
    EXPECT_EQ(std::memcmp(&a.pairs[i].bandwidth_bytes_per_second, &b.pairs[i].bandwidth_bytes_per_second, 8), 0);
    EXPECT_EQ(std::memcmp(&a.pairs[i].latency_seconds, &b.pairs[i].latency_seconds, 8), 0);
    EXPECT_EQ(a.pairs[i].rail_bandwidth_bytes_per_second, b.pairs[i].rail_bandwidth_bytes_per_second);
    EXPECT_EQ(a.pairs[i].rail_latency_seconds, b.pairs[i].rail_latency_seconds);
    EXPECT_EQ(a.pairs[i].cross_rail_bandwidth_bytes_per_second, b.pairs[i].cross_rail_bandwidth_bytes_per_second);
    EXPECT_EQ(a.pairs[i].cross_rail_latency_seconds, b.pairs[i].cross_rail_latency_seconds);
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
    EXPECT_EQ(a.nodes[i].fingerprint, b.nodes[i].fingerprint);
    EXPECT_EQ(a.nodes[i].gpus, b.nodes[i].gpus);
    EXPECT_EQ(a.nodes[i].bandwidth_bytes_per_second, b.nodes[i].bandwidth_bytes_per_second);
    EXPECT_EQ(a.nodes[i].latency_seconds, b.nodes[i].latency_seconds);
  }
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (std::size_t i = 0; i < a.collectives.size(); ++i) {
    EXPECT_EQ(a.collectives[i].nodes, b.collectives[i].nodes);
    EXPECT_EQ(a.collectives[i].measured_at_unix_seconds, b.collectives[i].measured_at_unix_seconds);
    EXPECT_EQ(a.collectives[i].message_bytes, b.collectives[i].message_bytes);
    EXPECT_EQ(a.collectives[i].all_reduce_bus_bytes_per_second, b.collectives[i].all_reduce_bus_bytes_per_second);
    EXPECT_EQ(a.collectives[i].all_gather_bus_bytes_per_second, b.collectives[i].all_gather_bus_bytes_per_second);
  }
}

TEST_F(TempDir, IndexGivesExactlyWhatParsingGives) {
  const std::string file = path("links.yaml");
  LinkCache cache;
  cache.nodes = {node("n1", kDecember1, 4), node("n2", kDecember1, 0)};
  cache.pairs = {pair("n1", "n2", 45.123456789, 10.987654321, kDecember1), pair("n2", "n3", 1.0 / 3, 1.0 / 7, kDecember1)};
  cache.pairs[1].rail_bandwidth_bytes_per_second = 46.5e9;  // the cross-rail sample travels in the index too
  cache.pairs[1].rail_latency_seconds = 8e-6;
  cache.pairs[1].cross_rail_bandwidth_bytes_per_second = 41.25e9;
  cache.pairs[1].cross_rail_latency_seconds = 9.5e-6;
  cache.collectives = {collective(2, kDecember1, 361.75), collective(8, kDecember1, 99.56)};  // the curve too
  ASSERT_TRUE(update_link_cache(file, cache).ok());
  auto indexed = read_link_table(file);
  ASSERT_TRUE(indexed.ok()) << indexed.error().message;
  EXPECT_TRUE(indexed->from_index);
  auto parsed = read_link_cache(file);
  ASSERT_TRUE(parsed.ok());
  const LinkTable from_yaml = link_table_of(*parsed);
  EXPECT_FALSE(from_yaml.from_index);
  expect_same_table(*indexed, from_yaml);
}

TEST_F(TempDir, EditedOrCopiedYamlIsParsedAndADamagedIndexIgnored) {
  const std::string file = path("links.yaml");
  LinkCache cache;
  cache.pairs = {pair("n1", "n2", 40, 10, kDecember1)};
  ASSERT_TRUE(update_link_cache(file, cache).ok());
  // A hand edit: the index no longer matches the YAML, so the YAML is read.
  std::string text = format_link_cache(*read_link_cache(file));
  text.replace(text.find("bandwidth_gb_per_s: 40"), 22, "bandwidth_gb_per_s: 41");
  std::ofstream(file, std::ios::trunc) << text;
  auto edited = read_link_table(file);
  ASSERT_TRUE(edited.ok());
  EXPECT_FALSE(edited->from_index);
  EXPECT_DOUBLE_EQ(edited->pairs[0].bandwidth_bytes_per_second, 41e9);

  ASSERT_TRUE(update_link_cache(file, cache).ok());  // same measured_at as the edit: the incoming entry wins
  for (const std::uintmax_t keep : {std::uintmax_t{0}, std::uintmax_t{10}, std::uintmax_t{100}}) {
    std::filesystem::resize_file(file + ".index", keep);
    auto table = read_link_table(file);
    ASSERT_TRUE(table.ok()) << keep;
    EXPECT_FALSE(table->from_index);
    EXPECT_DOUBLE_EQ(table->pairs[0].bandwidth_bytes_per_second, 40e9);
  }
  std::ofstream(file + ".index", std::ios::trunc) << std::string(4096, 'x');
  auto garbage = read_link_table(file);
  ASSERT_TRUE(garbage.ok());
  EXPECT_FALSE(garbage->from_index);
}

TEST(Staleness, WeightsDecayAndBlendGeometrically) {
  StalenessPolicy policy;
  policy.fresh_for_seconds = 100;
  policy.half_life_seconds = 50;
  policy.max_age_seconds = 1000;
  EXPECT_EQ(staleness_weight(policy, -5), 1.0);  // clock skew: a future time counts as fresh
  EXPECT_EQ(staleness_weight(policy, 100), 1.0);
  EXPECT_DOUBLE_EQ(staleness_weight(policy, 150), 0.5);
  EXPECT_DOUBLE_EQ(staleness_weight(policy, 200), 0.25);
  EXPECT_EQ(staleness_weight(policy, 1001), 0.0);

  const Link measured{40e9, 10e-6, true};
  const Link prior{50e9, 5e-6, false};
  const Link blended = blend_toward_prior(measured, prior, 0.25);
  EXPECT_NEAR(blended.bandwidth_bytes_per_second, std::pow(40e9, 0.25) * std::pow(50e9, 0.75), 1);
  EXPECT_NEAR(blended.latency_seconds, std::pow(10e-6, 0.25) * std::pow(5e-6, 0.75), 1e-15);
  EXPECT_TRUE(blended.measured);
  EXPECT_FALSE(blend_toward_prior(measured, prior, 0).measured);
  EXPECT_EQ(blend_toward_prior(measured, prior, 0).bandwidth_bytes_per_second, 50e9);
  EXPECT_EQ(blend_toward_prior(measured, prior, 1).bandwidth_bytes_per_second, 40e9);
}

// Issue 14: version 3 adds the collective curve of pipette-probe --collectives beside the pairs.
TEST(LinkCacheFormat, CollectiveCurveRoundTripsAsVersionThreeAndMergesPerNodeCount) {
  LinkCache cache;
  cache.pairs = {pair("a", "b", 45, 10, kDecember1)};
  cache.collectives = {collective(2, kDecember1, 361.75), collective(8, kDecember1, 99.56)};
  const std::string text = format_link_cache(cache);
  EXPECT_NE(text.find("pipette_link_cache: 3\n"), std::string::npos) << text;
  auto parsed = parse_link_cache(text, "curve.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(format_link_cache(*parsed), text);
  ASSERT_EQ(parsed->collectives.size(), 2u);
  EXPECT_EQ(parsed->collectives[0].nodes, 2);
  EXPECT_NEAR(parsed->collectives[1].all_reduce_bus_bytes_per_second, 99.56e9, 1);
  EXPECT_NEAR(parsed->collectives[1].all_gather_bus_bytes_per_second, 0.9 * 99.56e9, 1);
  EXPECT_EQ(parsed->collectives[1].message_bytes, 268435456);
  EXPECT_EQ(parsed->collectives[1].nccl_version, "2.21.5");
  const YAML::Node yaml = YAML::Load(text);  // any YAML reader sees the same document
  EXPECT_DOUBLE_EQ(yaml["collectives"][8]["all_reduce_bus_gb_per_s"].as<double>(), 99.56);

  // A cache without a curve stays what older readers read; old files load unchanged.
  cache.collectives.clear();
  EXPECT_NE(format_link_cache(cache).find("pipette_link_cache: 1\n"), std::string::npos);
  auto old_file = parse_link_cache("pipette_link_cache: 2\npairs:\n  a b: {measured_at: 2026-12-01T17:00:00Z, "
                                   "bandwidth_gb_per_s: 45, latency_us: 10}\n",
                                   "old.yaml");
  ASSERT_TRUE(old_file.ok());
  EXPECT_TRUE(old_file->collectives.empty());

  // Newer entry per node count wins; counts only one side has are kept.
  LinkCache base, incoming;
  base.collectives = {collective(2, kDecember1, 300), collective(4, kDecember1, 200)};
  incoming.collectives = {collective(4, kDecember1 + 60, 150), collective(16, kDecember1 + 60, 80)};
  const LinkCache merged = merge_link_caches(base, incoming);
  ASSERT_EQ(merged.collectives.size(), 3u);
  EXPECT_NEAR(merged.collectives[0].all_reduce_bus_bytes_per_second, 300e9, 1);
  EXPECT_NEAR(merged.collectives[1].all_reduce_bus_bytes_per_second, 150e9, 1);
  EXPECT_EQ(merged.collectives[2].nodes, 16);
}

TEST(LinkCacheFormat, MalformedCollectiveCurveIsAOneLineErrorNamingLineAndEntry) {
  const std::string head = "pipette_link_cache: 3\ncollectives:\n";
  const std::string good = "{measured_at: 2026-12-01T17:00:00Z, message_bytes: 268435456, all_reduce_bus_gb_per_s: 160, "
                           "all_gather_bus_gb_per_s: 150}";
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"pipette_link_cache: 2\ncollectives:\n  4: " + good + "\n", "c.yaml:2: collectives: needs `pipette_link_cache: 3`"},
      {head + "  1: " + good + "\n", "c.yaml:3: collective over 1 nodes: a collective entry is named by its node count"},
      {head + "  4.5: " + good + "\n", "named by its node count, an integer"},
      {head + "  four: " + good + "\n", "named by its node count, an integer"},
      {head + "  4: {measured_at: 2026-12-01T17:00:00Z, message_bytes: 268435456, all_reduce_bus_gb_per_s: 160}\n",
       "c.yaml:3: collective over 4 nodes: measured_at, message_bytes, all_reduce_bus_gb_per_s and all_gather_bus_gb_per_s "
       "are required"},
      {head + "  4: {measured_at: 2026-12-01T17:00:00Z, message_bytes: 268435456, all_reduce_bus_gb_per_s: -1, "
              "all_gather_bus_gb_per_s: 150}\n",
       "collective over 4 nodes: all_reduce_bus_gb_per_s is -1; it must be a finite number > 0"},
      {head + "  4: {measured_at: 2026-12-01T17:00:00Z, message_bytes: 268435456, all_reduce_bus_gb_per_s: .nan, "
              "all_gather_bus_gb_per_s: 150}\n",
       "all_reduce_bus_gb_per_s is nan"},
      {head + "  4: {measured_at: 2026-12-01T17:00:00Z, message_bytes: 0, all_reduce_bus_gb_per_s: 160, "
              "all_gather_bus_gb_per_s: 150}\n",
       "message_bytes is 0"},
      {head + "  4: {measured_at: 2026-12-01T17:00:00Z, message_bytes: 1, all_reduce_bus_gb_per_s: 160, "
              "all_gather_bus_gb_per_s: 150, busbw: 3}\n",
       "unknown field \"busbw\"; collective fields are"},
      {head + "  4: " + good + "\n  4: " + good + "\n", "c.yaml:4: this node count is listed twice (also on line 3)"},
  };
  for (const auto& c : cases) {
    auto parsed = parse_link_cache(c.text, "c.yaml");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_NE(parsed.error().message.find(c.expected), std::string::npos) << parsed.error().message;
    EXPECT_EQ(parsed.error().message.find('\n'), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace pipette
