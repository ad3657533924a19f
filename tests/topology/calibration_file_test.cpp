#include "pipette/topology/calibration_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipette/topology/job_planner.hpp"

namespace pipette {
namespace {

CalibrationEntry entry(const std::string& framework, const std::string& gpu, std::int64_t fitted_at, double factor) {
  CalibrationEntry e;
  e.range = {framework, gpu, 7e9, 7.1e10, 1, 8, 12};
  e.fitted_at_unix_seconds = fitted_at;
  e.calibration.gemm_16bit_efficiency_factor = factor;
  e.calibration.allocator_reserve_fraction = 0.12;
  e.uncertainty["gemm_16bit_efficiency_factor"] = 0.01;
  return e;
}

class CalibrationFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pipette-calibration-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::filesystem::path dir_;
};

TEST_F(CalibrationFileTest, RoundTripsAndMergesNewerPerFrameworkAndGpu) {
  const std::string file = path("calibration.yaml");
  ASSERT_TRUE(update_calibration_file(file, entry("megatron", "H100-SXM", 1000, 0.9)).ok());
  ASSERT_TRUE(update_calibration_file(file, entry("torchtitan", "H100-SXM", 1000, 0.8)).ok());
  ASSERT_TRUE(update_calibration_file(file, entry("megatron", "H100-SXM", 500, 0.7)).ok());  // older: kept out
  auto merged = update_calibration_file(file, entry("megatron", "h100-sxm", 2000, 0.95));     // newer, any case
  ASSERT_TRUE(merged.ok()) << merged.error().message;
  auto read_back = read_calibration_file(file);
  ASSERT_TRUE(read_back.ok()) << read_back.error().message;
  ASSERT_EQ(read_back->entries.size(), 2u);
  const CalibrationEntry* megatron = find_calibration(*read_back, "megatron", "H100-SXM");
  ASSERT_NE(megatron, nullptr);
  EXPECT_EQ(*megatron->calibration.gemm_16bit_efficiency_factor, 0.95);
  EXPECT_EQ(megatron->uncertainty.at("gemm_16bit_efficiency_factor"), 0.01);
  EXPECT_EQ(megatron->range.max_nodes, 8);
  EXPECT_EQ(format_calibration_file(*read_back), read(file));
}

TEST_F(CalibrationFileTest, StrictReaderNamesFileAndLine) {
  const std::string head = "pipette_calibration: 1\nentries:\n";
  const std::string good = "  - {framework: megatron, gpu: H100-SXM, fitted_at: 2026-12-01T00:00:00Z, records: 3, "
                           "min_parameters: 8e9, max_parameters: 8e9, min_nodes: 1, max_nodes: 2, ";
  // Found by calibration_file_fuzz: an entry without its range wrote a file its reader refused.
  EXPECT_EQ(parse_calibration_file(head + "  - {framework: megatron, gpu: H100-SXM, fitted_at: 2026-12-01T00:00:00Z, "
                                          "records: 3, max_parameters: 8e9, min_nodes: 1, max_nodes: 2, "
                                          "activation_memory_factor: 1}\n",
                                   "c.yaml")
                .error()
                .message,
            "c.yaml:3: calibration entry: has no 'min_parameters'; re-run pipette calibrate");
  EXPECT_EQ(parse_calibration_file(head + good.substr(0, good.find("min_nodes")) + "min_nodes: 4, max_nodes: 2, activation_memory_factor: 1}\n", "c.yaml")
                .error()
                .message,
            "c.yaml:3: calibration entry: its range has a minimum above its maximum; re-run pipette calibrate");
  EXPECT_EQ(parse_calibration_file(head + good + "speedup: 2}\n", "c.yaml").error().message.substr(0, 53),
            "c.yaml:3: calibration entry: 'speedup' is not a known");
  EXPECT_EQ(parse_calibration_file(head + good + "activation_memory_factor: 7}\n", "c.yaml").error().message,
            "c.yaml:3: calibration entry: 'activation_memory_factor' = 7 lies outside its physical bounds [0.5, 2]");
  EXPECT_EQ(parse_calibration_file(head + good + "activation_memory_factor: 1.1}\n" + good + "activation_memory_factor: 1}\n",
                                   "c.yaml")
                .error()
                .message,
            "c.yaml:4: a second entry for megatron on H100-SXM; keep one");
  // Names the writer quotes must come back as they were: no quotes, backslashes or control characters.
  EXPECT_EQ(parse_calibration_file(head + "  - {framework: 'a\"b', gpu: H100-SXM, fitted_at: 2026-12-01T00:00:00Z, records: 3, "
                                          "min_parameters: 8e9, max_parameters: 8e9, min_nodes: 1, max_nodes: 2, "
                                          "activation_memory_factor: 1}\n",
                                   "c.yaml")
                .error()
                .message,
            "c.yaml:3: calibration entry: 'framework' must be 1-64 letters, digits, spaces or ._+- (got 'a\"b')");
  EXPECT_EQ(parse_calibration_file("pipette_calibration: 2\n", "c.yaml").error().message,
            "c.yaml:1: calibration format version must be 1 (this Pipette reads only that)");
  EXPECT_NE(parse_calibration_file("links: {}\n", "c.yaml").error().message.find("not a Pipette calibration file"),
            std::string::npos);
}

TEST_F(CalibrationFileTest, NeverOverwritesADamagedFile) {
  const std::string file = path("calibration.yaml");
  std::ofstream(file) << "pipette_calibration: 1\nentries:\n  - {framework: megatron, gpu: [\n";
  const std::string before = read(file);
  const auto result = update_calibration_file(file, entry("megatron", "H100-SXM", 1000, 0.9));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("not overwriting it"), std::string::npos) << result.error().message;
  EXPECT_EQ(read(file), before);
}

// The site file names the calibration; the planner applies its entry for the job's GPU and
// framework, notes it, and leaves it out when asked for the built-in constants.
TEST_F(CalibrationFileTest, ThePlannerAppliesTheSitesCalibration) {
  ASSERT_TRUE(update_calibration_file(path("calibration.yaml"), entry("megatron-core", "H100-SXM", 1000, 0.8)).ok());
  std::ofstream(dir_ / "site.yaml") << "gpu: H100-SXM\ncalibration:\n  file: calibration.yaml\n";
  auto site = load_site_config((dir_ / "site.yaml").string());
  ASSERT_TRUE(site.ok()) << site.error().message;
  EXPECT_EQ(site->calibration_file, path("calibration.yaml"));
  JobRequest request;
  request.model = "llama3-8b";
  request.global_batch = 128;
  request.sequence_length = 4096;
  request.node_names = {"a", "b"};
  request.gpus_per_node = 8;
  request.inspection = NodeInspection{};
  auto calibrated_job = prepare_job(request, *site);
  ASSERT_TRUE(calibrated_job.ok()) << calibrated_job.error().message;
  ASSERT_TRUE(calibrated_job->calibration);
  EXPECT_DOUBLE_EQ(calibrated_job->options.efficiency.gemm_fraction_16bit, 0.8 * fitted_compute_efficiency().gemm_fraction_16bit);
  EXPECT_DOUBLE_EQ(calibrated_job->options.overheads.allocator_fragmentation_fraction, 0.12);
  EXPECT_NE(calibrated_job->notes.back().find("calibrated on 12 megatron-core run(s) on H100-SXM"), std::string::npos);
  request.uncalibrated = true;
  auto raw = prepare_job(request, *site);
  ASSERT_TRUE(raw.ok());
  EXPECT_FALSE(raw->calibration);
  EXPECT_DOUBLE_EQ(raw->options.efficiency.gemm_fraction_16bit, fitted_compute_efficiency().gemm_fraction_16bit);
  // A job for another framework (--pipette-framework) has no entry: built-in constants and a note.
  request.uncalibrated = false;
  request.framework = "torchtitan";
  auto other = prepare_job(request, *site);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->calibration);
  EXPECT_NE(other->notes.back().find("no entry for torchtitan on H100-SXM"), std::string::npos);
  // A damaged file fails planning rather than being ignored.
  std::ofstream(path("calibration.yaml")) << "pipette_calibration: 1\nentries: [\n";
  request.framework.clear();
  EXPECT_FALSE(prepare_job(request, *site).ok());
}

}  // namespace
}  // namespace pipette
