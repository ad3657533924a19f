// A user's model file through everything the plugin does with it at job start (plan_step: the
// model file, the planner, the rank table, every PIPETTE_* and per-task variable), on a fixed
// 4-node × 8-GPU job. Beyond not crashing: each input ends as a one-line error or a plan with
// PIPETTE_STATUS=ok, within the plugin's default planning budget (PlanningBudget: the time
// limit is checked here, the memory limit is scripts/fuzz.sh's -rss_limit_mb for this target).
// In-process rather than through plan_step_within_budget, whose child process libFuzzer's
// coverage would not see: a slow input here is one the input limits let through.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "property.hpp"
#include "step_plan.hpp"
#include "synthetic_step.hpp"  // tests/slurm

namespace spank = pipette::spank;

namespace {

const std::string& model_path() {
  static const std::string path = "/tmp/pipette-job-start-planner-fuzz-" + std::to_string(getpid()) + ".yaml";
  return path;
}

spank::StepRequest request() {
  spank::StepRequest request = spank::testing::synthetic_step(4, 8, 2);
  request.settings.model = model_path();
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::ofstream(model_path(), std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
  const pipette::SiteConfig site = spank::testing::h100_site();
  const auto start = std::chrono::steady_clock::now();
  const spank::StepPlanResult result = spank::plan_step(request(), site);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  pipette::fuzz::require(seconds <= site.planning.time_limit_seconds, "planning stays within the default time limit",
                         std::to_string(seconds) + " s");
  if (!result.error.empty()) {
    pipette::fuzz::require_one_line(result.error, text);
    return 0;
  }
  bool ok = false;
  for (const auto& [name, value] : result.plan.step_environment) ok = ok || (name == "PIPETTE_STATUS" && value == "ok");
  pipette::fuzz::require(ok, "a plan says PIPETTE_STATUS=ok");
  pipette::fuzz::require(result.plan.task_environment.size() == 8, "a plan has every local task's variables");
  return 0;
}
