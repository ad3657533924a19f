// What `pipette calibrate` reads: run tables, the frameworks' logs and the plugin's plan records,
// each file of the user's. Every reader is tried on the input. Beyond not crashing and one-line
// errors: whatever a reader accepts resolves against a site, or says in one line why not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipette/topology/plan_record.hpp"
#include "pipette/topology/run_records.hpp"
#include "property.hpp"

namespace {

using pipette::RunDescription;

void resolve(RunDescription run, std::string_view input) {
  // A model is a preset or a file: only presets here, so that no input names a file to read.
  static const std::vector<std::string> presets = {"llama3-8b", "qwen3-30b-a3b", "bloom-176b", "llama2-7b"};
  bool known = false;
  for (const std::string& preset : presets) known = known || run.model == preset;
  if (!known) run.model = "llama3-8b";
  // A synthetic cluster of that many nodes is what resolve_run builds; the planner's own bound
  // (2 GiB of link matrices) allows thousands, more than a fuzz iteration should build.
  if (run.nodes && *run.nodes > 64) return;
  static const pipette::SiteConfig site = [] {
    pipette::SiteConfig config;
    config.gpu = "H100-SXM";
    return config;
  }();
  const auto record = pipette::resolve_run(run, site, {});
  if (!record) pipette::fuzz::require_one_line(record.error().message, input);
}

template <typename Reader>
void read(Reader reader, std::string_view text) {
  const auto run = reader(text, "fuzz.log");
  if (!run) {
    pipette::fuzz::require_one_line(run.error().message, text);
    return;
  }
  resolve(*run, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto table = pipette::parse_run_table(text, "fuzz.csv");
  if (!table) {
    pipette::fuzz::require_one_line(table.error().message, text);
  } else {
    for (const RunDescription& run : *table) resolve(run, text);
  }
  read(pipette::parse_megatron_log, text);
  read(pipette::parse_torchtitan_log, text);
  read(pipette::parse_nanotron_log, text);
  read(pipette::parse_deepspeed_log, text);
  read(pipette::parse_plan_record, text);
  return 0;
}
