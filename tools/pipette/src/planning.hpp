#pragma once
#include <string>

#include "arguments.hpp"
#include "pipette/core/result.hpp"
#include "pipette/topology/site_config.hpp"
#include "reports.hpp"

namespace pipette::cli {

// The bundled example cluster's directory (site.yaml + links.yaml): the source tree's
// etc/example-cluster for builds run in place, else the installed share/pipette/example-cluster.
// "" when neither exists.
std::string example_cluster_dir();

// The site file and link cache a command works on: --site / --links when given, else the bundled
// example cluster's. `source` says which, for headers.
struct SiteSelection {
  SiteConfig site;
  std::string link_cache;  // "" when the site names none
  std::string source;
};
Result<SiteSelection> select_site(const Arguments& arguments, const std::string& command);

// Runs the shared planning facade (plan_job) on the command line's request.
Result<PlanningOutcome> plan_from_arguments(const Arguments& arguments, const std::string& command);

}  // namespace pipette::cli
