#include "step_plan.hpp"

#include <cstdio>
#include <ctime>

#include "pipette/core/units.hpp"
#include "pipette/topology/job_planner.hpp"
#include "layout_record.hpp"
#include "step_environment.hpp"

namespace pipette::spank {

namespace {

constexpr std::int64_t seconds_per_day = 86400;

std::string summary_of(const Plan& plan, const std::string& hash) {
  const ParallelConfig& config = plan.config;
  char text[256];
  std::snprintf(text, sizeof text, "tp=%d pp=%d dp=%d mbs=%d vpp=%d recompute=%s sp=%d distopt=%d%s, %.1f ms/iteration, %.1f GiB, plan %s",
                config.tp, config.pp, config.dp, config.micro_batch, config.virtual_stages,
                recompute_knob(config).c_str(), config.sequence_parallel ? 1 : 0, config.distributed_optimizer ? 1 : 0,
                config.fully_sharded ? " fsdp=1" : "",
                plan.time.iteration_seconds / units::millisecond, plan.peak_memory_bytes / units::gibibyte,
                hash.c_str());
  return text;
}

}  // namespace

SiteDefaults site_defaults(const SiteConfig& site) {
  SiteDefaults defaults;
  switch (site.default_mode) {
    case PipetteMode::automatic: defaults.mode = "auto"; break;
    case PipetteMode::plan: defaults.mode = "plan"; break;
    case PipetteMode::off: defaults.mode = "off"; break;
  }
  defaults.strict = site.failure_policy == FailurePolicy::fail_job;
  return defaults;
}

StepPlanResult plan_step(const StepRequest& request, const SiteConfig& site) {
  StepPlanResult result;
  JobRequest job;
  job.model = request.settings.model;
  job.global_batch = request.settings.global_batch.value_or(0);
  job.sequence_length = request.settings.sequence_length.value_or(0);
  job.fixed = request.settings.fix;
  job.framework = request.settings.framework;
  job.engine = request.settings.engine;
  job.precision = request.settings.precision;
  job.fixed_layers_per_stage = request.fixed_layers_per_stage;
  job.node_names = request.layout.node_names;
  job.gpus_per_node = request.layout.gpus_per_node;
  job.reference_time_unix_seconds = request.reference_time_unix_seconds > 0
                                        ? request.reference_time_unix_seconds
                                        : std::time(nullptr) / seconds_per_day * seconds_per_day;
  job.top_k = 1;

  const Result<JobPlan> planned = plan_job(job, site);
  if (!planned) {
    result.error = planned.error().message;
    return result;
  }
  if (planned->search.plans.empty()) {
    result.error = "the search returned no plan";
    return result;
  }
  const Plan& plan = planned->search.plans.front();
  StepLayout layout = request.layout;
  layout.gpus_per_node = planned->cluster.gpus_per_node;

  const RankTableResult table = make_rank_table(plan, layout, request.job_id, request.step_id);
  if (!table.error.empty()) {
    result.error = table.error;
    return result;
  }
  const std::string hash = plan_hash(plan);
  result.plan.step_environment = step_environment(planned->model, planned->training, plan, layout, hash);
  if (layout.tasks_per_node > 0) {
    result.plan.task_environment.reserve(static_cast<std::size_t>(layout.tasks_per_node));
    for (int local = 0; local < layout.tasks_per_node; ++local) {
      result.plan.task_environment.push_back(task_environment(table.table, layout, request.node_index, local));
    }
  }
  result.plan.summary = summary_of(plan, hash);
  result.plan.notes = planned->notes;
  result.plan.framework = to_string(planned->training.target.framework);
  // The stack's own defaults stay out: a stack refuses a switch it does not have, even at its default.
  // Every setting is one the engine resolved, so each reads back.
  EngineOverrides chosen;
  for (const EngineSetting& setting : planned->engine) {
    if (setting.source != EngineSource::stack) set_engine_override(chosen, setting.key, setting.value);
  }
  result.plan.engine = format_engine_overrides(chosen);
  result.plan.layout_record = format_layout_record(layout_of(planned->model, plan, hash, describe_request(request.settings)));
  return result;
}

}  // namespace pipette::spank
