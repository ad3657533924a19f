#include "plugin_config.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace pipette::spank {

ParsedPluginConfig parse_plugin_args(int argc, const char* const* argv) {
  ParsedPluginConfig parsed;
  constexpr std::string_view config_key = "config=";
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i] ? argv[i] : "";
    if (arg.starts_with(config_key) && arg.size() > config_key.size()) {
      parsed.config.site_file = std::string(arg.substr(config_key.size()));
      if (parsed.config.site_file.front() != '/') {
        parsed.error = "plugstack.conf: config=" + parsed.config.site_file + " must be an absolute path";
        return parsed;
      }
    } else {
      parsed.error = "plugstack.conf: unknown argument '" + std::string(arg) +
                     "' (the only argument is config=/path/to/pipette.yaml)";
      return parsed;
    }
  }
  return parsed;
}

std::string check_site_file_trust(const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) != 0) {
    return "site file " + path + ": " + std::strerror(errno) + " (fix config= in plugstack.conf)";
  }
  if (!S_ISREG(status.st_mode)) return "site file " + path + ": not a regular file";
  if (status.st_uid != 0) {
    return "site file " + path + ": owned by uid " + std::to_string(status.st_uid) +
           ", refused (must be owned by root: chown root " + path + ")";
  }
  if (status.st_mode & S_IWOTH) {
    return "site file " + path + ": world-writable, refused (chmod o-w " + path + ")";
  }
  return {};
}

}  // namespace pipette::spank
