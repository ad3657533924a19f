#include "bounded_planning.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "pipette/core/units.hpp"

namespace pipette::spank {

namespace {

// --- the child's result on the pipe: length-prefixed strings --------------------------------

void put(std::string& out, std::string_view text) {
  const std::uint64_t size = text.size();
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out.append(text);
}

void put_count(std::string& out, std::size_t count) { put(out, std::to_string(count)); }

void put_list(std::string& out, const EnvironmentList& list) {
  put_count(out, list.size());
  for (const auto& [name, value] : list) {
    put(out, name);
    put(out, value);
  }
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool get(std::string& text) {
    std::uint64_t size = 0;
    if (bytes_.size() < sizeof size) return false;
    std::memcpy(&size, bytes_.data(), sizeof size);
    bytes_.remove_prefix(sizeof size);
    if (size > bytes_.size()) return false;
    text.assign(bytes_.substr(0, size));
    bytes_.remove_prefix(size);
    return true;
  }

  // A count no larger than what the remaining bytes can hold (each entry is at least one prefix).
  bool get_count(std::size_t& count) {
    std::string text;
    if (!get(text) || text.empty() || text.size() > 19) return false;
    std::uint64_t value = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (value > bytes_.size() / sizeof(std::uint64_t)) return false;
    count = value;
    return true;
  }

  bool get_list(EnvironmentList& list) {
    std::size_t count = 0;
    if (!get_count(count)) return false;
    list.resize(count);
    for (auto& [name, value] : list) {
      if (!get(name) || !get(value)) return false;
    }
    return true;
  }

  bool done() const { return bytes_.empty(); }

 private:
  std::string_view bytes_;
};

// --- the child ------------------------------------------------------------------------------

bool memory_exhausted = false;

std::uint64_t mapped_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (!statm) return 0;
  unsigned long long pages = 0;
  const int read = std::fscanf(statm, "%llu", &pages);
  std::fclose(statm);
  return read == 1 ? pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
}

std::string mib(double bytes) { return std::to_string(std::llround(bytes / units::mebibyte)) + " MiB"; }

[[noreturn]] void run_child(int fd, const StepRequest& request, const SiteConfig& site) {
  // Dies with the parent, whatever happens to it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0) {
    const double wanted = static_cast<double>(mapped_bytes()) + site.planning.memory_limit_bytes;
    if (limit.rlim_max == RLIM_INFINITY || wanted < static_cast<double>(limit.rlim_max)) {
      limit.rlim_cur = static_cast<rlim_t>(wanted);
      setrlimit(RLIMIT_AS, &limit);
    }
  }
  std::set_new_handler([] {
    memory_exhausted = true;
    throw std::bad_alloc();
  });
  StepPlanResult result;
  try {
    result = plan_step(request, site);
  } catch (const std::bad_alloc&) {
    memory_exhausted = true;
  } catch (const std::exception& error) {
    result = {};
    result.error = std::string("planning failed: ") + error.what();
  }
  if (memory_exhausted) {
    result = {};
    result.error = "planning needed more than " + mib(site.planning.memory_limit_bytes) +
                   " of memory (the site's planning.memory_limit_mib)";
  }
  std::string bytes;
  try {
    bytes = encode(result);
  } catch (...) {
    _exit(2);
  }
  write_all(fd, bytes);
  _exit(0);
}

// --- the parent -----------------------------------------------------------------------------

// Reaps the child, waiting at most `grace` (a child stuck in uninterruptible I/O, e.g. on a hung
// file system, cannot die at once; it is then left to slurmstepd, which reaps its children).
void reap(pid_t child, std::chrono::milliseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  while (waitpid(child, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < until) usleep(10'000);
}

}  // namespace

std::string encode(const StepPlanResult& result) {
  std::string out;
  put(out, result.error);
  put(out, result.plan.summary);
  put(out, result.plan.layout_record);
  put(out, result.plan.framework);
  put(out, result.plan.engine);
  put_list(out, result.plan.step_environment);
  put_count(out, result.plan.task_environment.size());
  for (const EnvironmentList& task : result.plan.task_environment) put_list(out, task);
  put_count(out, result.plan.notes.size());
  for (const std::string& note : result.plan.notes) put(out, note);
  return out;
}

bool decode(std::string_view bytes, StepPlanResult& result) {
  Reader reader(bytes);
  std::size_t tasks = 0;
  if (!reader.get(result.error) || !reader.get(result.plan.summary) ||
      !reader.get(result.plan.layout_record) || !reader.get(result.plan.framework) || !reader.get(result.plan.engine) ||
      !reader.get_list(result.plan.step_environment) ||
      !reader.get_count(tasks)) {
    return false;
  }
  result.plan.task_environment.resize(tasks);
  for (EnvironmentList& task : result.plan.task_environment) {
    if (!reader.get_list(task)) return false;
  }
  std::size_t notes = 0;
  if (!reader.get_count(notes)) return false;
  result.plan.notes.resize(notes);
  for (std::string& note : result.plan.notes) {
    if (!reader.get(note)) return false;
  }
  return reader.done();
}

StepPlanResult plan_step_within_budget(const StepRequest& request, const SiteConfig& site) {
  StepPlanResult result;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("cannot plan in a child process: pipe: ") + std::strerror(errno);
    return result;
  }
  const pid_t child = fork();
  if (child < 0) {
    result.error = std::string("cannot plan in a child process: fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (child == 0) {
    close(fds[0]);
    run_child(fds[1], request, site);
  }
  close(fds[1]);

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(site.planning.time_limit_seconds);
  std::string bytes;
  bool finished = false;
  bool timed_out = false;
  char buffer[65536];
  while (!finished) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{fds[0], POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1'000'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    const ssize_t got = read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      finished = got == 0;
      break;
    }
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
  close(fds[0]);

  if (timed_out) {
    kill(child, SIGKILL);
    reap(child, std::chrono::seconds(2));
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", site.planning.time_limit_seconds);
    result.error = std::string("planning took longer than ") + limit +
                   " s (the site's planning.time_limit_seconds); a smaller model, batch or node count plans faster";
    return result;
  }
  int status = 0;
  pid_t reaped = 0;
  do {
    reaped = waitpid(child, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (reaped == child && WIFSIGNALED(status)) {
    result.error = "planning stopped by signal " + std::to_string(WTERMSIG(status));
    return result;
  }
  if (!finished || !decode(bytes, result)) {
    result = {};
    result.error = "planning ended without a result";
  }
  return result;
}

}  // namespace pipette::spank
