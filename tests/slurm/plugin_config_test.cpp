#include "plugin_config.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace pipette::spank {
namespace {

TEST(ParsePluginArgs, AcceptsConfigPath) {
  const char* argv[] = {"config=/etc/slurm/pipette.yaml"};
  const ParsedPluginConfig parsed = parse_plugin_args(1, argv);
  EXPECT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.config.site_file, "/etc/slurm/pipette.yaml");
}

TEST(ParsePluginArgs, NoArgumentsMeansNoSiteFile) {
  const ParsedPluginConfig parsed = parse_plugin_args(0, nullptr);
  EXPECT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.config.site_file, "");
}

TEST(ParsePluginArgs, RejectsUnknownArgumentsAndRelativePaths) {
  const char* unknown[] = {"confg=/etc/slurm/pipette.yaml"};
  EXPECT_EQ(parse_plugin_args(1, unknown).error,
            "plugstack.conf: unknown argument 'confg=/etc/slurm/pipette.yaml' (the only argument is "
            "config=/path/to/pipette.yaml)");
  const char* relative[] = {"config=pipette.yaml"};
  EXPECT_EQ(parse_plugin_args(1, relative).error, "plugstack.conf: config=pipette.yaml must be an absolute path");
  const char* empty[] = {"config="};
  EXPECT_NE(parse_plugin_args(1, empty).error, "");
}

class SiteFileTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() / ("pipette-trust-" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
    path_ = (directory_ / "pipette.yaml").string();
    std::ofstream(path_) << "{}\n";
    chmod(path_.c_str(), 0644);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::filesystem::path directory_;
  std::string path_;
};

TEST_F(SiteFileTrust, MissingFileIsNamed) {
  EXPECT_EQ(check_site_file_trust(path_ + ".missing"),
            "site file " + path_ + ".missing: No such file or directory (fix config= in plugstack.conf)");
}

TEST_F(SiteFileTrust, DirectoryIsRefused) {
  EXPECT_EQ(check_site_file_trust(directory_.string()), "site file " + directory_.string() + ": not a regular file");
}

TEST_F(SiteFileTrust, WorldWritableIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "ownership checks need files owned by root";
  EXPECT_EQ(check_site_file_trust(path_), "");
  chmod(path_.c_str(), 0666);
  EXPECT_EQ(check_site_file_trust(path_),
            "site file " + path_ + ": world-writable, refused (chmod o-w " + path_ + ")");
}

TEST_F(SiteFileTrust, FileOwnedByAnotherUserIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "changing a file's owner needs root";
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(check_site_file_trust(path_), "site file " + path_ +
                                              ": owned by uid 65534, refused (must be owned by root: chown root " +
                                              path_ + ")");
}

}  // namespace
}  // namespace pipette::spank
