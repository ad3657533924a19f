#include "pipette/topology/site_config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "pipette/core/gpu_catalog.hpp"
#include "pipette/core/units.hpp"

namespace pipette {
namespace {

TEST(SiteConfig, ShippedFileLoadsAndSetsEveryKey) {
  auto site = load_site_config(PIPETTE_SOURCE_DIR "/etc/pipette.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->default_mode, PipetteMode::off);
  EXPECT_EQ(site->failure_policy, FailurePolicy::run_unplanned);
  EXPECT_EQ(site->link_cache, "/var/lib/pipette/links.yaml");
  EXPECT_DOUBLE_EQ(site->priors.nic_bandwidth_bytes_per_second, 25e9);  // 200 Gb/s = 25 GB/s
  EXPECT_DOUBLE_EQ(site->staleness.half_life_seconds, 336 * 3600.0);
  EXPECT_DOUBLE_EQ(site->search.memory_safety_margin_bytes, 2 * units::gibibyte);
  EXPECT_EQ(site->search.placement.seed, 0x9E3779B97F4A7C15ULL);
  EXPECT_EQ(site->defaults.sequence_length, 4096);
  EXPECT_TRUE(site->gpus.empty());
}

TEST(SiteConfig, ExpandableSegmentsAreASiteFact) {
  EXPECT_FALSE(load_site_config(PIPETTE_SOURCE_DIR "/etc/pipette.yaml")->search.overheads.expandable_segments);
  auto site = parse_site_config("memory:\n  expandable_segments: true\n", "s.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_TRUE(site->search.overheads.expandable_segments);
  auto bad = parse_site_config("memory:\n  expandable_segments: maybe\n", "s.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("s.yaml:2: key 'memory.expandable_segments'"), std::string::npos)
      << bad.error().message;
}

TEST(SiteConfig, SiteGpusOverrideAndExtendTheCatalog) {
  auto site = parse_site_config(
      "gpus:\n  - name: H100-SXM\n    memory_gib: 79.6\n  - name: Example-GPU-96GB\n    memory_gib: 94.5\n"
      "    peak_fp32_tflops: 60\n    peak_fp16_tflops: 800\n    peak_bf16_tflops: 800\n    hbm_gb_per_s: 4000\n",
      "s.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  ASSERT_EQ(site->gpus.size(), 2u);
  // A catalog GPU with one field changed keeps the rest of its datasheet.
  const GpuSpec* h100 = find_site_gpu(*site, "h100-sxm");
  ASSERT_NE(h100, nullptr);
  EXPECT_DOUBLE_EQ(h100->memory_bytes, 79.6 * units::gibibyte);
  EXPECT_DOUBLE_EQ(h100->peak_bf16_flop_per_second, find_gpu("H100-SXM")->peak_bf16_flop_per_second);
  const GpuSpec* added = find_site_gpu(*site, "Example-GPU-96GB");
  ASSERT_NE(added, nullptr);
  EXPECT_DOUBLE_EQ(added->hbm_bytes_per_second, 4000e9);
  EXPECT_EQ(added->peak_fp8_flop_per_second, 0);
  EXPECT_EQ(find_site_gpu(*site, "A100-80GB"), find_gpu("A100-80GB"));
  EXPECT_EQ(find_site_gpu(*site, "Z100"), nullptr);
}

TEST(SiteConfig, RelativePathsAreTakenFromTheSiteFilesDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("pipette-site-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "site.yaml") << "links:\n  cache: links.yaml\npriors:\n  topology_conf: /etc/slurm/topology.conf\n"
                                      "model_dirs: [models, /abs]\n";
  auto site = load_site_config((dir / "site.yaml").string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->link_cache, (dir / "links.yaml").string());
  EXPECT_EQ(site->priors.topology_conf, "/etc/slurm/topology.conf");
  EXPECT_EQ(site->model_dirs, (std::vector<std::string>{(dir / "models").string(), "/abs"}));
}

TEST(SiteConfig, EmptyFileGivesTheDefaults) {
  auto site = parse_site_config("", "empty.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->default_mode, PipetteMode::off);
  EXPECT_EQ(site->search.top_k, SearchOptions{}.top_k);
  auto comments = parse_site_config("# nothing here\n", "c.yaml");
  EXPECT_TRUE(comments.ok());
}

TEST(SiteConfig, GbitPerSecondIsConvertedExplicitly) {
  auto site = parse_site_config("priors:\n  nic_gbit_per_s: 400\n  rails: 8\n", "s.yaml");
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_DOUBLE_EQ(site->priors.nic_bandwidth_bytes_per_second, 50e9);
  EXPECT_EQ(site->priors.rails, 8);
}

// priors.network picks the fabric's collective scaling: InfiniBand (the default) is what Pipette
// priced before the key existed; EFA carries the fall fitted in core/src/cluster.cpp.
TEST(SiteConfig, NetworkKindDefaultsToInfinibandAndReadsEfa) {
  auto plain = parse_site_config("", "s.yaml");
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->priors.network, NetworkKind::infiniband);
  auto efa = parse_site_config("priors:\n  network: efa\n", "s.yaml");
  ASSERT_TRUE(efa.ok()) << efa.error().message;
  EXPECT_EQ(efa->priors.network, NetworkKind::efa);
  auto roce = parse_site_config("priors:\n  network: roce\n", "s.yaml");
  ASSERT_TRUE(roce.ok()) << roce.error().message;
  EXPECT_EQ(roce->priors.network, NetworkKind::roce);
}

TEST(SiteConfig, ErrorsNameFileLineKeyAndFix) {
  const std::pair<const char*, const char*> cases[] = {
      {"mode: sometimes\n", "s.yaml:1: key 'mode' must be auto | plan | off (got 'sometimes')"},
      {"links:\n  cache: /x\n  fresh_for: 3\n", "s.yaml:3: key 'links.fresh_for' is not a known key; expected one of: cache,"},
      {"priors:\n  nic_gbit_per_s: fast\n", "s.yaml:2: key 'priors.nic_gbit_per_s' must be a number from 1 to 1000000 (got 'fast')"},
      {"priors:\n  nic_gbit_per_s: .nan\n", "s.yaml:2: key 'priors.nic_gbit_per_s' must be a number"},
      {"priors:\n  rails: 2.5\n", "s.yaml:2: key 'priors.rails' must be an integer from 0 to 64"},
      {"priors:\n  board_gpus: 65\n", "s.yaml:2: key 'priors.board_gpus' must be an integer from 0 to 64 (got '65')"},
      {"priors:\n  switch_level_factors: [1, 2]\n", "s.yaml:2: key 'priors.switch_level_factors' must hold factors in (0, 1]"},
      {"memory: 3\n", "s.yaml:1: key 'memory' must be a mapping of keys (safety_margin_gib,"},
      {"links:\n  fresh_for_hours: -1\n", "s.yaml:2: key 'links.fresh_for_hours' must be a number of at least 0 (got '-1')"},
      {"search:\n  top_k: 0\n", "key 'search.top_k' must be an integer from 1 to 100 (got '0')"},
      {"planning:\n  time_limit_seconds: 51\n", "key 'planning.time_limit_seconds' must be a number from 1 to 50 (got '51')"},
      {"planning:\n  memory_limit_mib: 32\n", "key 'planning.memory_limit_mib' must be a number from 64 to 1048576 (got '32')"},
      {"search:\n  placement_candidates: 65\n", "key 'search.placement_candidates' must be an integer from 1 to 64 (got '65')"},
      {"placement:\n  max_moves: 10000001\n", "key 'placement.max_moves' must be an integer from 0 to 10000000 (got '10000001')"},
      {"defaults:\n  global_batch: 16777217\n", "key 'defaults.global_batch' must be an integer from 1 to 16777216 (got '16777217')"},
      {"defaults:\n  sequence_length: 16777217\n", "key 'defaults.sequence_length' must be an integer from 1 to 16777216 (got '16777217')"},
      {"links:\n  require_measurements: maybe\n", "s.yaml:2: key 'links.require_measurements' must be true or false"},
      {"gpu: [a]\n", "s.yaml:1: key 'gpu' must be a string (got a list)"},
      {"gpus:\n  - name: Z100\n    memory_gib: 80\n", "s.yaml:2: key 'gpus[0]' describes GPU 'Z100', which the built-in catalog does not know"},
      {"gpus:\n  - memory_gib: 80\n", "key 'gpus[0].name' is required"},
      {"gpus:\n  - name: H100-SXM\n    colour: green\n", "s.yaml:3: key 'gpus[0].colour' is not a known key"},
      {"defaults:\n  fixed: tp=eight\n", "s.yaml:2: key 'defaults.fixed' is not valid: --pipette-fix: \"tp=eight\""},
      {"mode: auto\nmode: off\n", "s.yaml:2: key 'mode' appears twice"},
      {"mode: [auto\n", "s.yaml:2: not valid YAML"},
      {"- a\n- b\n", "s.yaml:1: key '(top level)' must be a mapping"},
      {"placement:\n  seed: -1\n", "key 'placement.seed' must be an integer from 0 to 18446744073709551615"},
      {"priors:\n  network: omnipath\n", "s.yaml:2: key 'priors.network' must be infiniband | roce | efa (got 'omnipath')"},
  };
  for (const auto& [text, expected] : cases) {
    auto site = parse_site_config(text, "s.yaml");
    ASSERT_FALSE(site.ok()) << text;
    EXPECT_NE(site.error().message.find(expected), std::string::npos) << "got:    " << site.error().message
                                                                       << "\nwanted: " << expected;
    EXPECT_EQ(site.error().message.find('\n'), std::string::npos);
  }
}

TEST(SiteConfig, UnreadableFileIsAnError) {
  auto site = load_site_config("/nonexistent/pipette.yaml");
  ASSERT_FALSE(site.ok());
  EXPECT_NE(site.error().message.find("/nonexistent/pipette.yaml: cannot read the site file"), std::string::npos);
}

}  // namespace
}  // namespace pipette

namespace pipette {
namespace {

// Every key the loader accepts appears in the shipped etc/pipette.yaml: the loader's own list of
// keys (from its "not a known key" error) is checked against the file.
TEST(SiteConfig, ShippedFileShowsEveryKeyTheLoaderKnows) {
  std::ifstream file(PIPETTE_SOURCE_DIR "/etc/pipette.yaml");
  const std::string shipped((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (const std::string section : {"", "defaults", "links", "priors", "memory", "search", "placement", "gpus", "defaults.engine"}) {
    const std::string text = section.empty() ? "zzz_unknown: 1\n"
                             : section == "gpus" ? "gpus:\n  - zzz_unknown: 1\n"
                             : section == "defaults.engine" ? "defaults:\n  engine:\n    zzz_unknown: 1\n"
                                                 : section + ":\n  zzz_unknown: 1\n";
    auto site = parse_site_config(text, "probe.yaml");
    ASSERT_FALSE(site.ok());
    const std::string& message = site.error().message;
    const auto list = message.find("expected one of: ");
    ASSERT_NE(list, std::string::npos) << message;
    std::stringstream keys(message.substr(list + 17));
    std::string key;
    int checked = 0;
    while (std::getline(keys, key, ',')) {
      key.erase(0, key.find_first_not_of(' '));
      // Top-level and section keys start a line (indented in a section); gpus' and the engine's
      // keys are shown in commented examples.
      const std::string pattern = section.empty()                                      ? "\n" + key + ":"
                                  : section == "gpus" || section == "defaults.engine" ? key + ":"
                                                                                       : "\n  " + key + ":";
      EXPECT_NE(shipped.find(pattern), std::string::npos) << "etc/pipette.yaml lacks " << (section.empty() ? "" : section + ".") << key;
      ++checked;
    }
    EXPECT_GT(checked, 1) << section;
  }
}

}  // namespace
}  // namespace pipette
