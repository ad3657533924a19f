#include "commands.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>

#include "arguments.hpp"
#include "calibration_commands.hpp"
#include "command_table.hpp"
#include "pipette/core/performance.hpp"
#include "pipette/core/simulator.hpp"
#include "pipette/core/units.hpp"
#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/nccl_tests_import.hpp"
#include "pipette/topology/version.hpp"
#include "planning.hpp"
#include "reports.hpp"
#include "schedule_render.hpp"
#include "text_table.hpp"

namespace pipette::cli {

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return kExitFailure;
}

void print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

Result<bool> write_file(const std::string& path, const std::string& content, const std::string& prefix) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{prefix + "cannot write " + path + " (does its directory exist and is it writable?)"};
  out << content;
  out.close();
  if (!out) return Error{prefix + "writing " + path + " failed (disk full?)"};
  return true;
}

int plan_command(const Arguments& arguments) {
  auto outcome = plan_from_arguments(arguments, "plan");
  if (!outcome) return fail(outcome.error().message);
  print(arguments.flag("json") ? plan_json(*outcome) : plan_report(*outcome));
  return outcome->does_not_fit.empty() ? 0 : kExitFailure;
}

int explain_command(const Arguments& arguments) {
  auto outcome = plan_from_arguments(arguments, "explain");
  if (!outcome) return fail(outcome.error().message);
  print(explain_report(*outcome));
  return outcome->does_not_fit.empty() ? 0 : kExitFailure;
}

int simulate_command(const Arguments& arguments) {
  const std::string prefix = "pipette simulate: ";
  const auto replica_option = arguments.positive_integer("replica");
  // --replica counts from 0, so accept "0" before the positive-integer check.
  std::optional<int> replica;
  if (arguments.value("replica") == "0") {
    replica = 0;
  } else if (!replica_option) {
    return fail(replica_option.error().message);
  } else {
    replica = *replica_option;
  }
  auto outcome = plan_from_arguments(arguments, "simulate");
  if (!outcome) return fail(outcome.error().message);
  if (!outcome->does_not_fit.empty()) return fail(prefix + "the configuration does not fit: " + outcome->does_not_fit);
  const Plan& plan = outcome->plans.front();
  const ParallelConfig& config = plan.config;
  // The simulation runs one pipeline per lane: dp replicas, times cp with context parallelism.
  if (replica && *replica >= config.dp_cp()) {
    return fail(prefix + "--replica " + std::to_string(*replica) + " but the plan has dp x cp = " +
                std::to_string(config.dp_cp()) + " pipelines (replicas 0.." + std::to_string(config.dp_cp() - 1) + ")");
  }
  const WorkProfile work = profile_work(outcome->model, outcome->training, outcome->cluster.gpu, config);
  const CommunicationTimes communication = communication_times(outcome->cluster, config, work, plan.placement);
  const TimeBreakdown closed_form = critical_path(config, work, communication, outcome->training);
  const SimulationResult simulation = simulate_schedule(config, work, communication, outcome->training);
  const SimulationSummary summary = summarize(simulation, closed_form.iteration_seconds, config.pp);

  const std::string title = outcome->model.name + ": " + plan_label(config) + ", " +
                            std::to_string(plan.num_microbatches) + " micro-batches, simulated " +
                            human_seconds(simulation.iteration_seconds);
  std::string written;
  if (const auto path = arguments.value("svg")) {
    const int drawn = replica.value_or(slowest_replica(simulation));
    auto ok = write_file(*path, render_gantt_svg(simulation, config.pp, drawn, title), prefix);
    if (!ok) return fail(ok.error().message);
    written += "  wrote " + *path + " (Gantt chart of DP replica " + std::to_string(drawn) + ")\n";
  }
  if (const auto path = arguments.value("trace")) {
    auto ok = write_file(*path, render_chrome_trace(simulation, config.pp, config.dp_cp(), title), prefix);
    if (!ok) return fail(ok.error().message);
    written += "  wrote " + *path + " (Chrome trace; open in https://ui.perfetto.dev)\n";
  }
  if (arguments.flag("json")) {
    print(simulate_json(*outcome, summary));
  } else {
    print(simulate_report(*outcome, summary) + written);
  }
  return 0;
}

std::string age_text(std::int64_t measured_at, std::int64_t now) {
  const double days = static_cast<double>(now - measured_at) / 86400.0;
  return days < 1 ? strprintf("%.1f h", days * 24) : strprintf("%.0f d", days);
}

int check_config_command(const Arguments& arguments) {
  const std::string path = arguments.operands().front();
  auto site = load_site_config(path);
  if (!site) return fail("pipette check-config: " + site.error().message);
  std::string out = "ok: " + path + "\n";
  TextTable table({{"setting", TextTable::Align::left}, {"value", TextTable::Align::left}});
  table.add_row({"default mode", to_string(site->default_mode)});
  table.add_row({"failure policy", to_string(site->failure_policy)});
  table.add_row({"GPU model", site->gpu.empty() ? "detected by hwloc" : site->gpu});
  table.add_row({"require measurements", site->require_measurements ? "yes" : "no"});
  table.add_row({"memory safety margin", human_gibibytes(site->search.memory_safety_margin_bytes)});
  table.add_row({"plans kept (top_k)", std::to_string(site->search.top_k)});
  table.add_row({"prior per rail", strprintf("%.1f GB/s x %.0f%% attained", site->priors.nic_bandwidth_bytes_per_second / units::gigabyte,
                                             100 * site->priors.attained_fraction)});
  table.add_row({"rails", site->priors.rails == 0 ? "counted by hwloc" : std::to_string(site->priors.rails)});
  table.add_row({"default model", site->defaults.model.empty() ? "(none: jobs must name one)" : site->defaults.model});
  const std::string& cache_path = site->link_cache;
  table.add_row({"link cache", cache_path.empty() ? "(none: every link is a prior)" : cache_path});
  out += table.render("  ");
  std::error_code missing;
  if (!cache_path.empty() && !std::filesystem::exists(cache_path, missing) && !site->require_measurements) {
    // Before the first pipette-probe run there is no cache; planning then uses the priors.
    out += "  link cache: " + cache_path + " does not exist yet; every link is a prior until pipette-probe writes it\n";
  } else if (!cache_path.empty()) {
    auto cache = read_link_cache(cache_path);
    if (!cache) return fail("pipette check-config: " + cache.error().message);
    out += "  link cache: " + std::to_string(cache->nodes.size()) + " nodes, " + std::to_string(cache->pairs.size()) +
           " node pairs, " + std::to_string(cache->collectives.size()) + " collective node counts, readable\n";
  }
  print(out);
  return 0;
}

int links_show_command(const Arguments& arguments) {
  const std::string prefix = "pipette links show: ";
  auto selection = select_site(arguments, "links show");
  if (!selection) return fail(selection.error().message);
  if (selection->link_cache.empty()) return fail(prefix + "no link cache: give --links CACHE or a --site that names one");
  auto cache = read_link_cache(selection->link_cache);
  if (!cache) return fail(prefix + cache.error().message);
  std::vector<PairMeasurement> pairs = cache->pairs;
  std::vector<NodeMeasurement> nodes = cache->nodes;
  if (const auto hostlist = arguments.value("nodes")) {
    auto names = expand_hostlist(*hostlist);
    if (!names) return fail(prefix + "--nodes '" + *hostlist + "': " + names.error().message);
    const auto wanted = [&](const std::string& node) { return std::find(names->begin(), names->end(), node) != names->end(); };
    std::erase_if(pairs, [&](const PairMeasurement& pair) { return !wanted(pair.node_a) || !wanted(pair.node_b); });
    std::erase_if(nodes, [&](const NodeMeasurement& node) { return !wanted(node.name); });
  }
  std::vector<double> bandwidths;
  for (const auto& pair : pairs) bandwidths.push_back(pair.bandwidth_bytes_per_second);
  std::sort(bandwidths.begin(), bandwidths.end());
  const double median = bandwidths.empty() ? 0 : bandwidths[bandwidths.size() / 2];
  const std::int64_t now = std::time(nullptr);

  std::string out = "link cache " + selection->link_cache + ": " + std::to_string(cache->nodes.size()) + " nodes, " +
                    std::to_string(cache->pairs.size()) + " node pairs";
  out += strprintf("; median pair bandwidth %.1f GB/s\n", median / units::gigabyte);
  TextTable table({{"node a", TextTable::Align::left},
                   {"node b", TextTable::Align::left},
                   {"GB/s"},
                   {"latency µs"},
                   {"age"},
                   {"NCCL", TextTable::Align::left},
                   {"", TextTable::Align::left}});
  // Slow pairs are what an admin looks for: a link under 3/4 of the median is flagged.
  for (const auto& pair : pairs) {
    const double fraction = median > 0 ? pair.bandwidth_bytes_per_second / median : 1;
    table.add_row({pair.node_a, pair.node_b, strprintf("%.1f", pair.bandwidth_bytes_per_second / units::gigabyte),
                   strprintf("%.2f", pair.latency_seconds / units::microsecond), age_text(pair.measured_at_unix_seconds, now),
                   pair.nccl_version, fraction < 0.75 ? strprintf("SLOW (%.0f%% of median)", 100 * fraction) : ""});
  }
  out += table.render("  ");
  if (!nodes.empty()) {
    out += "intra-node (GPU pairs):\n";
    TextTable intra({{"node", TextTable::Align::left}, {"GPUs"}, {"min GB/s"}, {"median GB/s"}, {"age"}});
    for (const auto& node : nodes) {
      std::vector<double> values;
      for (int a = 0; a < node.gpus; ++a) {
        for (int b = 0; b < node.gpus; ++b) {
          if (a != b) values.push_back(node.bandwidth_bytes_per_second[static_cast<size_t>(a * node.gpus + b)]);
        }
      }
      std::sort(values.begin(), values.end());
      intra.add_row({node.name, std::to_string(node.gpus),
                     values.empty() ? "-" : strprintf("%.1f", values.front() / units::gigabyte),
                     values.empty() ? "-" : strprintf("%.1f", values[values.size() / 2] / units::gigabyte),
                     age_text(node.measured_at_unix_seconds, now)});
    }
    out += intra.render("  ");
  }
  if (!cache->collectives.empty()) {
    // pipette-probe --collectives' curve; planning uses the all-reduce column relative to 2 nodes.
    out += "collectives (bus bandwidth over the first N nodes, pipette-probe --collectives):\n";
    TextTable curve({{"nodes"}, {"all-reduce GB/s"}, {"all-gather GB/s"}, {"size MiB"}, {"age"}, {"NCCL", TextTable::Align::left}});
    for (const auto& entry : cache->collectives)
      curve.add_row({std::to_string(entry.nodes), strprintf("%.1f", entry.all_reduce_bus_bytes_per_second / units::gigabyte),
                     strprintf("%.1f", entry.all_gather_bus_bytes_per_second / units::gigabyte),
                     strprintf("%.0f", entry.message_bytes / units::mebibyte), age_text(entry.measured_at_unix_seconds, now),
                     entry.nccl_version});
    out += curve.render("  ");
  }
  print(out);
  return 0;
}

int links_import_command(const Arguments& arguments) {
  const std::string prefix = "pipette links import: ";
  std::string cache_path;
  if (const auto links = arguments.value("links")) {
    cache_path = *links;
  } else if (const auto site_path = arguments.value("site")) {
    auto site = load_site_config(*site_path);
    if (!site) return fail(prefix + site.error().message);
    cache_path = site->link_cache;
    if (cache_path.empty()) return fail(prefix + *site_path + " names no link cache (links.cache); give --links CACHE");
  } else {
    return fail(prefix + "say which cache to write: --links CACHE or --site FILE");
  }
  NcclTestsImportOptions options;
  if (const auto hostlist = arguments.value("nodes")) {
    auto names = expand_hostlist(*hostlist);
    if (!names) return fail(prefix + "--nodes '" + *hostlist + "': " + names.error().message);
    options.node_names = std::move(*names);
  }
  std::optional<std::int64_t> measured_at;
  if (const auto text = arguments.value("measured-at")) {
    auto parsed = parse_utc_timestamp(*text);
    if (!parsed) return fail(prefix + "--measured-at: " + parsed.error().message);
    measured_at = *parsed;
  }

  LinkCache incoming;
  std::string out;
  for (const std::string& path : arguments.operands()) {
    auto runs = read_nccl_tests_output(path);
    if (!runs) return fail(prefix + runs.error().message);
    struct stat status {};
    const std::int64_t modified = ::stat(path.c_str(), &status) == 0 ? status.st_mtime : std::time(nullptr);
    options.measured_at_unix_seconds = measured_at.value_or(modified);
    for (const NcclTestsRun& run : *runs) {
      auto entries = link_cache_from_nccl_tests(run, options);
      if (!entries) return fail(prefix + path + ":" + std::to_string(run.first_line) + ": " + entries.error().message);
      for (const auto& pair : entries->pairs) {
        out += strprintf("  pair %s %s: %.1f GB/s, %.2f µs (%s, %s)\n", pair.node_a.c_str(), pair.node_b.c_str(),
                         pair.bandwidth_bytes_per_second / units::gigabyte, pair.latency_seconds / units::microsecond,
                         run.collective.empty() ? "nccl-tests" : run.collective.c_str(), path.c_str());
      }
      for (const auto& node : entries->nodes) {
        out += "  node " + node.name + ": " + std::to_string(node.gpus) + " GPUs (" +
               (run.collective.empty() ? "nccl-tests" : run.collective) + ", " + path + ")\n";
      }
      incoming = merge_link_caches(std::move(incoming), *entries);
    }
  }
  auto merged = update_link_cache(cache_path, incoming);
  if (!merged) return fail(prefix + merged.error().message);
  print("imported " + std::to_string(incoming.pairs.size()) + " node pairs and " + std::to_string(incoming.nodes.size()) +
        " nodes into " + cache_path + " (it now holds " + std::to_string(merged->pairs.size()) + " pairs, " +
        std::to_string(merged->nodes.size()) + " nodes):\n" + out);
  return 0;
}

using Handler = std::function<int(const Arguments&)>;

const std::vector<std::pair<std::string, Handler>>& handlers() {
  static const std::vector<std::pair<std::string, Handler>> table = {
      {"plan", plan_command},
      {"explain", explain_command},
      {"simulate", simulate_command},
      {"check-config", check_config_command},
      {"links show", links_show_command},
      {"links import", links_import_command},
      {"calibrate", calibrate_command},
  };
  return table;
}

}  // namespace

int run(const std::vector<std::string>& words) {
  if (words.empty()) {
    std::fputs(program_help().c_str(), stderr);
    return kExitUsage;
  }
  if (words.front() == "--version" || words.front() == "version") {
    std::printf("pipette %s\n", version());
    return 0;
  }
  if (words.front() == "--help" || words.front() == "-h" || words.front() == "help") {
    if (words.size() > 1) {
      std::string name = words[1];
      if (name == "links" && words.size() > 2) name += " " + words[2];
      if (const CommandSpec* command = find_command(name)) {
        print(command_help(*command));
        return 0;
      }
    }
    print(program_help());
    return 0;
  }
  std::string name = words.front();
  size_t consumed = 1;
  if (name == "links") {
    if (words.size() < 2 || words[1].rfind("--", 0) == 0) {
      if (words.size() >= 2 && words[1] == "--help") {
        print(command_help(*find_command("links show")) + "\n" + command_help(*find_command("links import")));
        return 0;
      }
      return std::fprintf(stderr, "pipette links: say 'show' or 'import' (see pipette links --help)\n"), kExitUsage;
    }
    name += " " + words[1];
    consumed = 2;
  }
  const CommandSpec* command = find_command(name);
  if (!command) {
    std::fprintf(stderr, "pipette: unknown command '%s' (see pipette --help)\n", name.c_str());
    return kExitUsage;
  }
  const std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(consumed), words.end());
  auto arguments = Arguments::parse(*command, rest);
  if (!arguments) {
    std::fprintf(stderr, "%s\n", arguments.error().message.c_str());
    return kExitUsage;
  }
  if (arguments->flag("help")) {
    print(command_help(*command));
    return 0;
  }
  const auto& table = handlers();
  const auto handler = std::find_if(table.begin(), table.end(), [&](const auto& entry) { return entry.first == name; });
  return handler->second(*arguments);
}

}  // namespace pipette::cli
