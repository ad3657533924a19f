// slurmstepd, as root, before the options are processed: register the options (so that their
// callbacks run), read the plugstack arguments and vet the site file. Nothing here may fail the
// step: -1 from a remote init drains the node. Problems are recorded and reported by user_init.
#include "contexts.hpp"
#include "remote_context.hpp"
#include "spank_options.hpp"

namespace pipette::spank {

RemoteContext& remote_context() {
  static RemoteContext context;
  return context;
}

int remote_init(spank_t sp, int argc, char** argv) {
  RemoteContext& context = remote_context();
  ParsedPluginConfig parsed = parse_plugin_args(argc, argv);
  context.config = parsed.config;
  context.setup_error = parsed.error;
  // Read as root, before privileges drop: the site file may be readable by root only.
  if (context.setup_error.empty() && !context.config.site_file.empty()) {
    context.setup_error = check_site_file_trust(context.config.site_file);
    if (context.setup_error.empty()) {
      Result<SiteConfig> site = load_site_config(context.config.site_file);
      if (site) {
        context.site = std::move(site.value());
      } else {
        context.setup_error = site.error().message;
      }
    }
  }
  const std::string error = register_options(sp);
  if (!error.empty() && context.setup_error.empty()) context.setup_error = error;
  if (!context.setup_error.empty()) slurm_debug("pipette: %s", context.setup_error.c_str());
  return 0;
}

}  // namespace pipette::spank
