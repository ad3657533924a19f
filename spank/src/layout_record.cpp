#include "layout_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

#include "pipette/topology/job_planner.hpp"

namespace pipette::spank {

namespace {

constexpr std::string_view kHeader = "pipette_layout: 2";
constexpr std::string_view kVersion1Header = "pipette_layout: 1";  // no request line
constexpr std::size_t kMaxRecordBytes = 64 * 1024;  // a 1024-stage split is under 5 KiB
constexpr int kMaxGpus = 1 << 20;

bool parse_in_range(std::string_view text, int minimum, int maximum, int& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size() && value >= minimum && value <= maximum;
}

template <typename T>
void keep_user_choice(std::optional<T>& recorded, const std::optional<T>& user) {
  if (user) recorded = user;
}

std::string system_error(const std::string& path, const char* what) {
  return "layout record " + path + ": cannot " + what + " (" + std::strerror(errno) + ")";
}

}  // namespace

std::string describe_request(const Settings& settings) {
  const auto or_default = [](const std::string& value) { return value.empty() ? std::string("default") : value; };
  const auto number_or_default = [](const auto& value) {
    return value ? std::to_string(*value) : std::string("default");
  };
  return "model=" + or_default(settings.model) + " batch=" + number_or_default(settings.global_batch) +
         " seq=" + number_or_default(settings.sequence_length) + " framework=" + or_default(settings.framework);
}

RecordedLayout layout_of(const ModelSpec& model, const Plan& plan, const std::string& plan_hash, const std::string& request) {
  const ParallelConfig& config = plan.config;
  FixedKnobs knobs;
  knobs.tp = config.tp;
  knobs.pp = config.pp;
  knobs.dp = config.dp;
  knobs.micro_batch = config.micro_batch;
  knobs.virtual_stages = config.virtual_stages;
  knobs.recompute = config.recompute;
  if (config.recompute == RecomputeMode::full && config.recomputed_layers_per_chunk > 0)
    knobs.recomputed_layers_per_chunk = config.recomputed_layers_per_chunk;
  knobs.sequence_parallel = config.sequence_parallel;
  knobs.distributed_optimizer = config.distributed_optimizer;
  // FSDP is recorded where the plan has it; off is what a restart's search chooses anyway unless
  // the user fixed it off, which keep_user_choice keeps (default_fully_sharded).
  if (config.fully_sharded) knobs.fully_sharded = true;
  // A dense model has no expert knobs to fix; an MoE plan keeps its expert groups, ep = etp = 1
  // included (a fresh search on the restart's nodes could choose others).
  if (model.is_moe()) {
    knobs.ep = config.ep;
    knobs.etp = config.etp;
  }
  // With tp, pp and dp fixed on the same GPUs, cp = 1 is implied; a long-context plan names its cp
  // (its checkpoint and data loader are cut for it).
  if (config.cp > 1) knobs.cp = config.cp;
  return {format_fixed_knobs(knobs), config.layers_per_stage, config.world_size(), plan_hash, request};
}

std::string format_layout_record(const RecordedLayout& layout) {
  return std::string(kHeader) + "\nfix: " + layout.fix + "\nsplit: " + format_layer_split(layout.layers_per_stage) +
         "\ngpus: " + std::to_string(layout.gpus) +
         "\nplan: " + layout.plan_hash + "\nrequest: " + layout.request + "\n";
}

Result<RecordedLayout> parse_layout_record(std::string_view text, const std::string& path) {
  const auto bad = [&path](const std::string& problem) {
    return Error{"layout record " + path + " is corrupt (" + problem + "); delete it to plan the job afresh"};
  };
  if (text.size() > kMaxRecordBytes) return bad("larger than 64 KiB");
  std::map<std::string, std::string, std::less<>> fields;
  bool header = false;
  bool version1 = false;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    if (end == std::string_view::npos) return bad("its last line is incomplete");
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (!header) {
      version1 = line == kVersion1Header;
      if (line != kHeader && !version1) return bad("it does not start with '" + std::string(kHeader) + "'");
      header = true;
      continue;
    }
    const std::size_t colon = line.find(": ");
    if (colon == std::string_view::npos) return bad("a line is not 'key: value'");
    if (!fields.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 2))).second)
      return bad("a key is given twice");
  }
  if (!header) return bad("it is empty");
  // A record written before the request was kept (version 1) is taken for this job's, as it was.
  std::vector<const char*> keys = {"fix", "split", "gpus", "plan"};
  if (!version1) keys.push_back("request");
  for (const char* key : keys) {
    if (!fields.count(key)) return bad(std::string("no '") + key + "' line");
  }
  if (fields.size() != keys.size()) return bad(version1 ? "it has keys other than fix, split, gpus and plan"
                                                         : "it has keys other than fix, split, gpus, plan and request");
  RecordedLayout layout;
  layout.fix = fields["fix"];
  const Result<FixedKnobs> knobs = parse_fixed_knobs(layout.fix);
  if (!knobs) return bad(knobs.error().message);
  if (!knobs->pp) return bad("the fixed knobs name no pp");
  // A stage may hold no layer (pp > layers, planned from Megatron's layout flag).
  Result<std::vector<int>> split = parse_layer_split(fields["split"]);
  if (!split) return bad(split.error().message);
  layout.layers_per_stage = std::move(split).value();
  if (static_cast<int>(layout.layers_per_stage.size()) != *knobs->pp) return bad("the split does not have pp stages");
  if (std::all_of(layout.layers_per_stage.begin(), layout.layers_per_stage.end(), [](int layers) { return layers == 0; })) {
    return bad("the split has no layer");
  }
  if (!parse_in_range(fields["gpus"], 1, kMaxGpus, layout.gpus)) return bad("gpus is not a positive count");
  layout.plan_hash = fields["plan"];
  if (!version1) {
    layout.request = fields["request"];
    if (layout.request.empty()) return bad("the request is empty");
  }
  return layout;
}

std::string layout_record_path(const std::string& directory, std::uint32_t job_id) {
  return directory + "/.pipette-layout-" + std::to_string(job_id);
}

Result<RestartKnobs> restart_knobs(const RecordedLayout& recorded, const std::string& user_fix) {
  Result<FixedKnobs> knobs = parse_fixed_knobs(recorded.fix);
  if (!knobs) return knobs.error();
  const Result<FixedKnobs> user = parse_fixed_knobs(user_fix);
  if (!user) return user.error();
  RestartKnobs restart;
  FixedKnobs& merged = *knobs;
  const bool same_pp = !user->pp || user->pp == merged.pp;
  keep_user_choice(merged.tp, user->tp);
  keep_user_choice(merged.pp, user->pp);
  keep_user_choice(merged.dp, user->dp);
  keep_user_choice(merged.cp, user->cp);
  keep_user_choice(merged.ep, user->ep);
  keep_user_choice(merged.etp, user->etp);
  keep_user_choice(merged.micro_batch, user->micro_batch);
  keep_user_choice(merged.virtual_stages, user->virtual_stages);
  // recompute=block:N is one choice: the user's recompute replaces the recorded count with its own.
  if (user->recompute) merged.recomputed_layers_per_chunk = user->recomputed_layers_per_chunk;
  keep_user_choice(merged.recompute, user->recompute);
  keep_user_choice(merged.sequence_parallel, user->sequence_parallel);
  keep_user_choice(merged.distributed_optimizer, user->distributed_optimizer);
  keep_user_choice(merged.fully_sharded, user->fully_sharded);
  restart.fix = format_fixed_knobs(merged);
  if (same_pp) restart.layers_per_stage = recorded.layers_per_stage;
  return restart;
}

ReadLayout read_layout_record(const std::string& path) {
  ReadLayout read;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno != ENOENT) read.error = system_error(path, "be opened");
    return read;
  }
  struct stat status {};
  std::string text;
  if (fstat(fd, &status) != 0) {
    read.error = system_error(path, "be examined");
  } else if (!S_ISREG(status.st_mode)) {
    read.error = "layout record " + path + " is not a regular file; remove it";
  } else if (status.st_uid != geteuid() && status.st_uid != 0) {
    read.error = "layout record " + path + " is owned by uid " + std::to_string(status.st_uid) +
                 ", not by the job's user; remove it";
  } else if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    read.error = "layout record " + path + " is writable by others than its owner; remove it";
  } else {
    char buffer[4096];
    ssize_t got = 0;
    while ((got = ::read(fd, buffer, sizeof buffer)) > 0 && text.size() <= kMaxRecordBytes) {
      text.append(buffer, static_cast<std::size_t>(got));
    }
    if (got < 0) read.error = system_error(path, "be read");
  }
  close(fd);
  if (!read.error.empty()) return read;
  Result<RecordedLayout> layout = parse_layout_record(text, path);
  if (!layout) {
    read.error = layout.error().message;
    return read;
  }
  read.found = true;
  read.layout = std::move(layout.value());
  return read;
}

std::string write_layout_record(const std::string& path, const RecordedLayout& layout, ExistingRecord existing) {
  const std::string temporary = path + ".tmp" + std::to_string(getpid());
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return system_error(temporary, "be created");
  const std::string text = format_layout_record(layout);
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = close(fd) == 0;
  if (!written || !closed) {
    const std::string error = system_error(temporary, "be written");
    unlink(temporary.c_str());
    return error;
  }
  if (existing == ExistingRecord::replace) {
    if (rename(temporary.c_str(), path.c_str()) == 0) return {};
    const std::string error = system_error(path, "be replaced");
    unlink(temporary.c_str());
    return error;
  }
  // link() fails if a record exists: the first writer wins.
  const bool placed = link(temporary.c_str(), path.c_str()) == 0 || errno == EEXIST;
  const std::string error = placed ? std::string() : system_error(path, "be written");
  unlink(temporary.c_str());
  return error;
}

}  // namespace pipette::spank
