// slurmstepd, as the job user, once per node and step before any task forks: decide whether
// Pipette runs, gather the step's layout, plan, export the step-wide variables and precompute
// every local task's variables for task_init. A user's model file is read here, with the user's
// rights, in a child process bounded by the site's planning budget (bounded_planning.hpp).
// Never returns -1: in a batch step that drains the node and the job still "succeeds".
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "bounded_planning.hpp"
#include "contexts.hpp"
#include "kept_plan.hpp"
#include "layout_record.hpp"
#include "pipette/topology/plan_record.hpp"
#include "pipette/topology/version.hpp"
#include "remote_context.hpp"
#include "spank_options.hpp"
#include "step_environment.hpp"
#include "step_plan.hpp"

namespace pipette::spank {

namespace {

// The options in force for this step: the command line (callbacks, or the forwarded job
// variables when the callbacks did not run) over PIPETTE* variables over the site defaults. A
// command line that contradicts the environment was refused at submission; should such a step
// start anyway (the variable changed inside the batch script, or a submission path that
// bypassed the plugin), it is not planned with either value.
Settings resolve_settings(spank_t sp, const RemoteContext& context, std::string& error) {
  OptionValues command_line = command_line_options().values();
  error = remote_option_error();
  const OptionValues forwarded = forwarded_options(sp, error);
  for (const OptionInfo& option : option_table()) {
    if (!command_line[option.id]) command_line[option.id] = forwarded[option.id];
  }
  const OptionValues environment = environment_options(sp, error);
  if (error.empty()) error = find_conflict(command_line, environment);
  return merge(command_line, environment, site_defaults(context.site));
}

std::vector<std::string> expand_hostlist(const std::string& hostlist) {
  std::vector<std::string> names;
  hostlist_t list = slurm_hostlist_create(hostlist.c_str());
  if (!list) return names;
  while (char* name = slurm_hostlist_shift(list)) {
    names.emplace_back(name);
    std::free(name);
  }
  slurm_hostlist_destroy(list);
  return names;
}

// GPUs Slurm gave this node: SLURM_GPUS_ON_NODE when the job asked for GPUs as GRES, else the
// devices CUDA_VISIBLE_DEVICES lists; 0 when neither says, and the planner asks hwloc.
int gpus_on_node(spank_t sp) {
  if (auto count = read_variable(sp, "SLURM_GPUS_ON_NODE")) {
    char* end = nullptr;
    const long value = std::strtol(count->c_str(), &end, 10);
    if (end != count->c_str() && *end == '\0' && value > 0 && value < 1024) return static_cast<int>(value);
  }
  if (auto devices = read_variable(sp, "CUDA_VISIBLE_DEVICES")) {
    if (devices->empty() || *devices == "NoDevFiles") return 0;
    int count = 1;
    for (char c : *devices) count += c == ',';
    return count;
  }
  return 0;
}

template <typename T>
bool item(spank_t sp, spank_item_t which, T& value) {
  return spank_get_item(sp, which, &value) == ESPANK_SUCCESS;
}

// Fills the layout and ids from Slurm; returns an error when the step is not one Pipette plans.
std::string describe_step(spank_t sp, bool batch_step, StepRequest& request) {
  std::uint32_t node_id = 0, local_tasks = 0, total_tasks = 0;
  if (!item(sp, S_JOB_ID, request.job_id)) return "cannot read the job id";
  const char* nodelist_variable = batch_step ? "SLURM_JOB_NODELIST" : "SLURM_STEP_NODELIST";
  const std::optional<std::string> nodelist = read_variable(sp, nodelist_variable);
  if (!nodelist) return std::string(nodelist_variable) + " is not set";
  request.layout.node_names = expand_hostlist(*nodelist);
  if (request.layout.node_names.empty()) return std::string("cannot expand ") + nodelist_variable + "=" + *nodelist;
  request.layout.gpus_per_node = gpus_on_node(sp);
  if (batch_step) {
    // The batch script runs on the first node of the job.
    request.node_index = 0;
    request.layout.tasks_per_node = 0;
    return {};
  }
  if (!item(sp, S_JOB_NODEID, node_id) || !item(sp, S_JOB_LOCAL_TASK_COUNT, local_tasks) ||
      !item(sp, S_JOB_TOTAL_TASK_COUNT, total_tasks)) {
    return "cannot read the step's task layout";
  }
  const std::size_t num_nodes = request.layout.node_names.size();
  if (total_tasks != local_tasks * num_nodes) {
    return std::to_string(total_tasks) + " tasks on " + std::to_string(num_nodes) +
           " nodes: Pipette needs the same number of tasks on every node";
  }
  // Ranks are assigned assuming Slurm's block distribution; check it for this node's tasks.
  for (std::uint32_t local = 0; local < local_tasks; ++local) {
    std::uint32_t global = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, local, &global) != ESPANK_SUCCESS ||
        global != node_id * local_tasks + local) {
      return "tasks are not in block distribution (use --distribution=block)";
    }
  }
  request.node_index = static_cast<int>(node_id);
  request.layout.tasks_per_node = static_cast<int>(local_tasks);
  return {};
}

// `pipette calibrate --slurm-job` finds the plan in the user's state directory; failing to keep
// it changes nothing about the job.
void keep_plan_for_calibrate(spank_t sp, const StepRequest& request, const StepPlan& plan, const SiteConfig& site) {
  const auto xdg = read_variable(sp, "XDG_STATE_HOME");
  const passwd* account = ::getpwuid(::getuid());  // we run as the job user
  const std::string problem = keep_plan(request, plan, site, state_home(xdg ? xdg->c_str() : nullptr, account ? account->pw_dir : nullptr),
                                        read_variable(sp, "SLURM_CLUSTER_NAME").value_or(""));
  if (!problem.empty()) slurm_info("pipette: job %u: plan not kept for pipette calibrate: %s", request.job_id, problem.c_str());
}

void export_failure(spank_t sp, RemoteContext& context) {
  // slurm_error from slurmstepd reaches the step's stderr, where the user looks.
  slurm_error(context.strict ? "pipette: cannot plan the job step, failing it (--pipette-strict): %s"
                             : "pipette: cannot plan the job step, it runs unplanned: %s",
              context.error.c_str());
  // An srun inside a planned batch script inherits the batch step's plan: clear it.
  for (const char* const* name = plan_variable_names(); *name; ++name) spank_unsetenv(sp, *name);
  const std::string status = "error:" + context.error;
  spank_setenv(sp, "PIPETTE_STATUS", status.c_str(), 1);
}

// The layout recorded for this job (layout_record.hpp).
struct JobRecord {
  std::string path;       // "" when the job has no SLURM_SUBMIT_DIR
  bool applied = false;   // a record was found and fixes this step's layout
  bool foreign = false;   // the record asks for another plan (its job, or another step's request)
};

// Every step of a job whose layout is recorded plans with the recorded knobs and split (the
// user's --pipette-fix knobs winning), if it has the recorded number of GPUs: in a requeued or
// restarted job that is its first start's layout. Slurm 22.05 shows no restart count to a batch
// step's user_init (SLURM_RESTART_COUNT is set only in the task's environment, and
// S_SLURM_RESTART_COUNT is always 0), so the record's existence is what tells. Returns an
// error when a record exists but cannot be used.
std::string apply_recorded_layout(spank_t sp, StepRequest& request, JobRecord& record) {
  const std::optional<std::string> directory = read_variable(sp, "SLURM_SUBMIT_DIR");
  if (!directory || directory->empty()) return {};
  record.path = layout_record_path(*directory, request.job_id);
  const ReadLayout read = read_layout_record(record.path);
  if (!read.error.empty()) return read.error;
  if (!read.found) return {};
  const std::string asked = describe_request(request.settings);
  if (!read.layout.request.empty() && read.layout.request != asked) {
    record.foreign = true;
    if (request.node_index == 0) {
      slurm_info("pipette: job %u: the layout record %s was planned for another request (%s) than this step's (%s): "
                 "planning afresh%s",
                 request.job_id, record.path.c_str(), read.layout.request.c_str(), asked.c_str(),
                 request.step_id == SLURM_BATCH_SCRIPT ? "; it is another job's that had this id and is replaced" : "");
    }
    return {};
  }
  // A step of another size (e.g. an srun on some of the nodes) plans on its own.
  const int gpus = static_cast<int>(request.layout.node_names.size()) * request.layout.gpus_per_node;
  if (request.layout.gpus_per_node > 0 && gpus != read.layout.gpus) return {};
  const Result<RestartKnobs> knobs = restart_knobs(read.layout, request.settings.fix);
  if (!knobs) return record.path + ": " + knobs.error().message;
  request.settings.fix = knobs->fix;
  request.fixed_layers_per_stage = knobs->layers_per_stage;
  record.applied = true;
  if (request.node_index == 0) {
    const std::string step = request.step_id == SLURM_BATCH_SCRIPT ? "batch" : std::to_string(request.step_id);
    slurm_info("pipette: job %u step %s keeps the layout recorded in %s (plan %s): %s", request.job_id, step.c_str(),
               record.path.c_str(), read.layout.plan_hash.c_str(), knobs->fix.c_str());
  }
  return {};
}

// The first planned step of a job records its layout, on its first node; a record already there
// stays (link() is atomic: the first writer wins). A failure costs only a restart's stability.
void record_layout(const StepRequest& request, const JobRecord& record, const StepPlan& plan) {
  if (request.node_index != 0 || record.path.empty() || record.applied) return;
  if (record.foreign && request.step_id != SLURM_BATCH_SCRIPT) return;
  const Result<RecordedLayout> layout = parse_layout_record(plan.layout_record, record.path);
  const std::string error =
      layout ? write_layout_record(record.path, *layout, record.foreign ? ExistingRecord::replace : ExistingRecord::keep)
             : layout.error().message;
  if (!error.empty()) slurm_error("pipette: %s; if this job is requeued it is planned afresh", error.c_str());
}

}  // namespace

int remote_user_init(spank_t sp) {
  RemoteContext& context = remote_context();
  std::uint32_t step_id = 0;
  if (!item(sp, S_JOB_STEPID, step_id)) return 0;
  if (step_id == SLURM_EXTERN_CONT || step_id == SLURM_INTERACTIVE_STEP) return 0;
  const bool batch_step = step_id == SLURM_BATCH_SCRIPT;

  std::string error;
  StepRequest request;
  request.settings = resolve_settings(sp, context, error);
  request.step_id = step_id;
  if (request.settings.mode == Mode::off) return 0;

  context.active = true;
  context.strict = request.settings.strict;
  if (error.empty()) error = context.setup_error;
  if (error.empty()) error = describe_step(sp, batch_step, request);
  JobRecord record;
  if (error.empty()) error = apply_recorded_layout(sp, request, record);
  StepPlanResult result;
  const auto start = std::chrono::steady_clock::now();
  if (error.empty()) {
    result = plan_step_within_budget(request, context.site);
    error = result.error;
  }
  if (!error.empty()) {
    context.error = error;
    export_failure(sp, context);
    return 0;
  }
  record_layout(request, record, result.plan);
  for (const auto& [name, value] : result.plan.step_environment) spank_setenv(sp, name.c_str(), value.c_str(), 1);
  if (request.node_index == 0) keep_plan_for_calibrate(sp, request, result.plan, context.site);
  context.per_task = !batch_step && request.settings.mode == Mode::auto_remap;
  if (context.per_task) {
    context.task_environment = std::move(result.plan.task_environment);
    context.one_task_per_gpu = request.layout.tasks_per_node > 1;
    context.step_devices = read_variable(sp, "CUDA_VISIBLE_DEVICES").value_or("");
  }
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string step = batch_step ? "batch" : std::to_string(step_id);
  // Once per step, in the slurmd log: what the plan assumed or changed (`pipette plan` shows the same).
  if (request.node_index == 0) {
    for (const std::string& note : result.plan.notes)
      slurm_info("pipette: job %u step %s: note: %s", request.job_id, step.c_str(), note.c_str());
  }
  slurm_debug("pipette %s: job %u step %s node %d: %s (%.1f ms)", pipette::version(), request.job_id, step.c_str(),
              request.node_index, result.plan.summary.c_str(), elapsed_ms);
  return 0;
}

}  // namespace pipette::spank
