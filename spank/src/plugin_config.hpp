#pragma once
// The plugstack.conf arguments (`spank_pipette.so config=/etc/slurm/pipette.yaml`) and the trust
// check on the site file they name. Independent of Slurm so that tests and benchmarks reuse it.
#include <string>

namespace pipette::spank {

struct PluginConfig {
  std::string site_file;  // empty: no site file, built-in defaults
};

struct ParsedPluginConfig {
  PluginConfig config;
  std::string error;  // one line naming the bad argument; empty when all were understood
};

ParsedPluginConfig parse_plugin_args(int argc, const char* const* argv);

// The site file steers what runs as root on every node: it must be a regular file owned by root
// and not writable by everyone. Returns an empty string when it may be used, else why not.
std::string check_site_file_trust(const std::string& path);

}  // namespace pipette::spank
