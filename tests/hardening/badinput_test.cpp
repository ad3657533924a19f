// The bad-input matrix (README "Reliability"): every row is an input the plugin can meet at job
// start, the message the user must see, and what becomes of the job. Rows here run the same code
// the plugin's user_init runs (plan_job and the loaders under it) on real files; rows that need a
// real Slurm cluster are in tests/slurm/badinput_test.sh. The README's "Reliability" section
// shows this matrix.
//
// Outcome `unplanned`: plan_job returns an error, which the plugin reports and, by the failure
// policy, either runs the job unplanned with PIPETTE_STATUS=error:<message> or, under
// --pipette-strict, fails it in task_init (exit 1, no drained node). Outcome `planned`: the input
// is odd but valid and the job is planned.
#include <gtest/gtest.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "pipette/topology/hostlist.hpp"
#include "pipette/topology/job_planner.hpp"
#include "pipette/topology/link_cache.hpp"
#include "pipette/topology/model_file.hpp"
#include "pipette/topology/site_config.hpp"
#include "plugin_config.hpp"

namespace pipette {
namespace {

namespace fs = std::filesystem;
namespace spank = pipette::spank;

enum class Outcome { planned, unplanned };

// A private directory that an unprivileged user may enter (for the rows that drop privileges).
class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "pipette-badinput-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string write(const std::string& name, const std::string& text, fs::perms mode = fs::perms(0644)) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    fs::permissions(path, mode);
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

// The request every job row starts from: a real preset, 4 nodes × 8 H100, no hwloc of this
// machine (it has no GPU), no link cache.
JobRequest base_request() {
  JobRequest request;
  request.model = "llama2-7b";
  request.global_batch = 512;
  request.sequence_length = 4096;
  request.node_names = {"n1", "n2", "n3", "n4"};
  request.gpus_per_node = 8;
  request.gpu = "H100-SXM";
  request.inspection = NodeInspection{};
  request.reference_time_unix_seconds = 1'800'000'000;
  return request;
}

std::string plan_error(const JobRequest& request, const SiteConfig& site = {}) {
  const auto plan = plan_job(request, site);
  return plan ? std::string() : plan.error().message;
}

constexpr const char* kCacheHeader = "pipette_link_cache: 1\nnodes: {}\npairs:\n";
std::string cache_pair(const std::string& fields) {
  return std::string(kCacheHeader) + "  n1 n2: {measured_at: 2026-12-01T17:00:00Z, " + fields + "}\n";
}

// n000001..n<count>, written as Slurm would: one range holds at most 65536 hosts.
std::string many_nodes(int count) {
  std::string list;
  for (int lo = 1; lo <= count; lo += 65536) {
    char range[64];
    std::snprintf(range, sizeof range, "%sn[%06d-%06d]", list.empty() ? "" : ",", lo, std::min(count, lo + 65535));
    list += range;
  }
  return list;
}

struct Row {
  const char* input;                           // what is wrong, as the matrix shows it
  std::function<std::string(const Scratch&)> run;  // the error message, "" when planned
  const char* expected_message;                // a substring of it ("" when planned)
  Outcome outcome;
};

std::vector<Row> rows() {
  auto job = [](std::function<void(JobRequest&)> change) {
    return [change](const Scratch&) {
      JobRequest request = base_request();
      change(request);
      return plan_error(request);
    };
  };
  auto with_cache = [](std::string text) {
    return [text](const Scratch& scratch) {
      JobRequest request = base_request();
      request.link_cache = scratch.write("links.yaml", text);
      return plan_error(request);
    };
  };
  auto with_model = [](std::string text) {
    return [text](const Scratch& scratch) {
      JobRequest request = base_request();
      request.model = scratch.write("model.yaml", text);
      return plan_error(request);
    };
  };
  auto with_site = [](std::string text) {
    return [text](const Scratch&) {
      const auto site = parse_site_config(text, "pipette.yaml");
      return site ? plan_error(base_request(), *site) : site.error().message;
    };
  };
  const std::string llama_head = "num_layers: 32\nnum_attention_heads: 32\nvocab_size: 32000\n";
  return {
      // Sizes that do not divide.
      {"--pipette-fix=tp=3 on 8 GPUs per node", job([](JobRequest& r) { r.fixed = "tp=3"; }), "stop fixing tp", Outcome::unplanned},
      {"--pipette-fix=pp=5 for 32 layers on 32 GPUs", job([](JobRequest& r) { r.fixed = "tp=8,pp=5"; }), "stop fixing pp",
       Outcome::unplanned},
      {"global batch 6 with dp=4 fixed", job([](JobRequest& r) { r.global_batch = 6; r.fixed = "tp=8,dp=4"; }), "dp",
       Outcome::unplanned},
      {"3 GPUs per node (no tp divides them and the heads)", job([](JobRequest& r) { r.gpus_per_node = 3; r.fixed = "tp=2"; }),
       "stop fixing tp", Outcome::unplanned},
      // Zero, negative and huge values.
      {"--pipette-fix=tp=0", job([](JobRequest& r) { r.fixed = "tp=0"; }), "tp needs a positive integer", Outcome::unplanned},
      {"--pipette-fix=pp=-4", job([](JobRequest& r) { r.fixed = "pp=-4"; }), "pp needs a positive integer", Outcome::unplanned},
      {"--pipette-fix=tp=99999999999 (beyond int)", job([](JobRequest& r) { r.fixed = "tp=99999999999"; }),
       "tp needs a positive integer", Outcome::unplanned},
      {"--pipette-fix=tp=1024 (more than the job's GPUs)", job([](JobRequest& r) { r.fixed = "tp=1024"; }), "stop fixing tp",
       Outcome::unplanned},
      // Found by this matrix: divisors of the batch above 2^31 became micro-batches of 0 in the
      // search's int arithmetic, a SIGFPE that would have killed slurmstepd in user_init; the
      // plugin accepts --pipette-batch up to 2^40.
      {"global batch 2^40 sequences (the largest --pipette-batch accepts)",
       job([](JobRequest& r) { r.global_batch = std::int64_t{1} << 40; }), "is more than 16777216", Outcome::unplanned},
      {"global batch 2^62 sequences", job([](JobRequest& r) { r.global_batch = std::int64_t{1} << 62; }),
       "is more than 16777216", Outcome::unplanned},
      {"sequence length 2^30 tokens", job([](JobRequest& r) { r.sequence_length = 1 << 30; }), "sequence", Outcome::unplanned},
      {"0 GPUs per node and none found by hwloc", job([](JobRequest& r) { r.gpus_per_node = 0; }), "GPUs per node unknown",
       Outcome::unplanned},
      // Found by this matrix: the two rows below allocated their dense link matrices (hundreds of GB)
      // before any check; std::bad_alloc escaped plan_job.
      {"100000 GPUs per node", job([](JobRequest& r) { r.gpus_per_node = 100000; }),
       "4 nodes × 100000 GPUs per node need", Outcome::unplanned},
      {"model file: num_layers: 0", with_model("num_layers: 0\nhidden_size: 4096\nnum_attention_heads: 32\nvocab_size: 32000\n"),
       "key 'num_layers' must be an integer from 1 to 1024", Outcome::unplanned},
      {"model file: num_layers: 1000000000 (issue 19)",
       with_model("num_layers: 1000000000\nhidden_size: 4096\nnum_attention_heads: 32\nvocab_size: 32000\n"),
       "key 'num_layers' must be an integer from 1 to 1024 (got 1000000000)", Outcome::unplanned},
      {"model file: hidden_size: -4096", with_model(llama_head + "hidden_size: -4096\n"),
       "key 'hidden_size' must be an integer from 1 to 131072", Outcome::unplanned},
      {"model file: hidden_size: 1e12", with_model(llama_head + "hidden_size: 1000000000000\n"), "key 'hidden_size'",
       Outcome::unplanned},
      {"model file: hidden_size: .nan", with_model(llama_head + "hidden_size: .nan\n"), "key 'hidden_size'", Outcome::unplanned},
      {"model file: heads do not divide hidden_size", with_model(llama_head + "hidden_size: 4097\n"), "model.yaml",
       Outcome::unplanned},
      {"model file: not YAML", with_model("num_layers: [32\n"), "not valid YAML", Outcome::unplanned},
      {"model file: unknown key", with_model(llama_head + "hidden_size: 4096\nlayers: 32\n"), "key 'layers' is not a model-file key",
       Outcome::unplanned},
      {"site file: negative safety margin", with_site("memory:\n  safety_margin_gib: -1\n"), "pipette.yaml:2: key 'memory.safety_margin_gib'",
       Outcome::unplanned},
      {"site file: priors.nic_gbit_per_s: .inf", with_site("priors:\n  nic_gbit_per_s: .inf\n"),
       "pipette.yaml:2: key 'priors.nic_gbit_per_s'", Outcome::unplanned},
      {"site file: placement.seed: -1", with_site("placement:\n  seed: -1\n"), "pipette.yaml:2: key 'placement.seed'",
       Outcome::unplanned},
      // NaN and inf in caches.
      {"cache: bandwidth .nan", with_cache(cache_pair("bandwidth_gb_per_s: .nan, latency_us: 5")),
       "links.yaml:4: pair n1 n2: bandwidth_gb_per_s is nan", Outcome::unplanned},
      {"cache: bandwidth inf", with_cache(cache_pair("bandwidth_gb_per_s: .inf, latency_us: 5")),
       "links.yaml:4: pair n1 n2: bandwidth_gb_per_s is inf", Outcome::unplanned},
      {"cache: bandwidth 0", with_cache(cache_pair("bandwidth_gb_per_s: 0, latency_us: 5")), "bandwidth_gb_per_s is 0",
       Outcome::unplanned},
      {"cache: latency -.inf", with_cache(cache_pair("bandwidth_gb_per_s: 40, latency_us: -.inf")), "latency_us is -inf",
       Outcome::unplanned},
      {"cache: latency 1e300 µs", with_cache(cache_pair("bandwidth_gb_per_s: 40, latency_us: 1e300")), "latency_us is 1e+300",
       Outcome::unplanned},
      {"cache: NaN inside an intra-node matrix",
       with_cache("pipette_link_cache: 1\nnodes:\n  n1: {measured_at: 2026-12-01T17:00:00Z, gpus: 2, bandwidth_gb_per_s: "
                  "[[0, nan], [300, 0]], latency_us: [[0, 3], [3, 0]]}\npairs: {}\n"),
       "links.yaml:3: node n1: bandwidth_gb_per_s[0][1] is nan", Outcome::unplanned},
      {"cache: truncated mid-line", with_cache(cache_pair("bandwidth_gb_per_s: 40, lat").substr(0, 90)), "links.yaml:4",
       Outcome::unplanned},
      {"cache: one valid measured pair (control row)", with_cache(cache_pair("bandwidth_gb_per_s: 40, latency_us: 5")), "",
       Outcome::planned},
      // Duplicate hosts.
      {"node list n1,n2,n1", job([](JobRequest& r) { r.node_names = {"n1", "n2", "n1"}; }), "node n1 appears twice",
       Outcome::unplanned},
      {"cache: the same pair twice", with_cache(cache_pair("bandwidth_gb_per_s: 40, latency_us: 5") +
                                                "  n2 n1: {measured_at: 2026-12-01T17:00:00Z, bandwidth_gb_per_s: 41, latency_us: 5}\n"),
       "links.yaml:5: this node pair is listed twice (also on line 4)", Outcome::unplanned},
      // Huge node lists.
      {"100000-node hostlist", [](const Scratch&) {
         JobRequest request = base_request();
         auto hosts = expand_hostlist(many_nodes(100000));
         if (!hosts) return hosts.error().message;
         request.node_names = *hosts;
         return plan_error(request);
       },
       "100000 nodes × 8 GPUs per node need", Outcome::unplanned},
      // Very long values (environment variables reach these as they are).
      {"PIPETTE_FIX of 1 MiB", job([](JobRequest& r) { r.fixed = std::string(1 << 20, 'x'); }), "expected key=value",
       Outcome::unplanned},
      {"PIPETTE_MODEL of 1 MiB", job([](JobRequest& r) { r.model = std::string(1 << 20, 'm'); }), "unknown model preset",
       Outcome::unplanned},
      {"PIPETTE_MODEL path of 1 MiB", job([](JobRequest& r) { r.model = "/" + std::string(1 << 20, 'm') + ".yaml"; }),
       "cannot read the model file", Outcome::unplanned},
      // Unreadable inputs (as root; the unprivileged rows are below).
      {"model file is a directory", [](const Scratch& scratch) {
         JobRequest request = base_request();
         fs::create_directory(scratch.path("model.yaml"));
         request.model = scratch.path("model.yaml");
         return plan_error(request);
       },
       "model.yaml", Outcome::unplanned},
      {"link cache is a directory", [](const Scratch& scratch) {
         JobRequest request = base_request();
         fs::create_directory(scratch.path("links.yaml"));
         request.link_cache = scratch.path("links.yaml");
         return plan_error(request);
       },
       "links.yaml", Outcome::unplanned},
      {"model file missing", job([](JobRequest& r) { r.model = "/nonexistent/model.yaml"; }),
       "/nonexistent/model.yaml: cannot read the model file", Outcome::unplanned},
  };
}

TEST(BadInputMatrix, EveryRowGivesItsMessageAndOutcome) {
  const Scratch scratch;
  int checked = 0;
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.input);
    const Scratch own;  // each row starts from empty files
    std::string message;
    try {
      message = row.run(own);
    } catch (const std::exception& error) {  // plan_job promises never to throw
      ADD_FAILURE() << "threw " << error.what();
      continue;
    }
    if (row.outcome == Outcome::planned) {
      EXPECT_EQ(message, "") << "expected a plan";
    } else {
      EXPECT_NE(message, "") << "expected an error";
      EXPECT_NE(message.find(row.expected_message), std::string::npos) << "message: " << message.substr(0, 500);
      EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message.substr(0, 500);
      // Errors go to slurmd's log and the job's stderr: they quote the input, not all of it.
      EXPECT_LE(message.size(), 4096u) << message.substr(0, 300);
    }
    ++checked;
  }
  EXPECT_GE(checked, 35);
}

// A 100,000-node list expands and compresses exactly and in Slurm's form.
TEST(BadInputMatrix, HundredThousandNodeHostlistRoundTrips) {
  const auto hosts = expand_hostlist(many_nodes(100000));
  ASSERT_TRUE(hosts.ok()) << hosts.error().message;
  ASSERT_EQ(hosts->size(), 100000u);
  EXPECT_EQ(hosts->front(), "n000001");
  EXPECT_EQ(hosts->back(), "n100000");
  // Found by this matrix: compress_hostlist wrote one range of 100000 hosts, which expand_hostlist
  // (like Slurm) refuses; ranges now stop at 65536 hosts.
  EXPECT_EQ(compress_hostlist(*hosts), "n[000001-065536,065537-100000]");
  const auto again = expand_hostlist(compress_hostlist(*hosts));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, *hosts);
}

// parse_model_file is what load_model_file runs on the file's contents (the fuzzers call it).
TEST(BadInputMatrix, ModelFromTextEqualsModelFromFile) {
  const std::string path = std::string(PIPETTE_SOURCE_DIR) + "/etc/models/llama2-7b.yaml";
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto from_file = load_model_file(path);
  const auto from_text = parse_model_file(text, path);
  ASSERT_TRUE(from_file.ok() && from_text.ok());
  EXPECT_EQ(from_text->name, from_file->name);
  EXPECT_EQ(from_text->num_layers, from_file->num_layers);
  EXPECT_EQ(from_text->hidden_size, from_file->hidden_size);
}

// ---- Files read with the job user's rights (user_init runs as the user). These rows drop to
// `nobody` in a forked child, as slurmstepd does for user_init, and load through the same code.

// Runs `load` as nobody in a child; returns what it returned ("" = loaded), or why it could not run.
std::string as_nobody(const std::function<std::string()>& load) {
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) return "SKIP: no user nobody";
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "SKIP: pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(nobody->pw_gid) != 0 || ::setuid(nobody->pw_uid) != 0) ::_exit(3);
    const std::string result = load();
    const std::string framed = result.empty() ? "LOADED" : "ERROR " + result;
    if (::write(pipe_fds[1], framed.data(), framed.size()) < 0) ::_exit(4);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "SKIP: the child could not drop privileges";
  return out == "LOADED" ? "" : out.substr(6);
}

class AsUnprivilegedUser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to nobody";
  }
  // A model file only root may read, in a directory everyone may enter.
  std::string root_only_model() {
    const std::string path = scratch_.write("secret.yaml", "num_layers: 32\nhidden_size: 4096\nnum_attention_heads: 32\n"
                                                           "vocab_size: 32000\n",
                                            fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_TRUE(load_model_file(path).ok()) << "root reads it: the rows below fail only for lack of rights";
    return path;
  }
  Scratch scratch_;
};

TEST_F(AsUnprivilegedUser, CannotReadARootOnlyModelThroughASymlink) {
  const std::string target = root_only_model();
  const std::string link = scratch_.path("my-model.yaml");
  fs::create_symlink(target, link);
  const std::string message = as_nobody([&] {
    const auto model = load_model(link, {});
    return model ? std::string() : model.error().message;
  });
  if (message.rfind("SKIP:", 0) == 0) GTEST_SKIP() << message;
  EXPECT_EQ(message, link + ": cannot read the model file; check the path and its permissions");
}

TEST_F(AsUnprivilegedUser, CannotReadARootOnlyModelDirectly) {
  const std::string target = root_only_model();
  const std::string message = as_nobody([&] {
    JobRequest request = base_request();
    request.model = target;
    return plan_error(request);
  });
  if (message.rfind("SKIP:", 0) == 0) GTEST_SKIP() << message;
  EXPECT_NE(message.find(target + ": cannot read the model file"), std::string::npos) << message;
}

TEST_F(AsUnprivilegedUser, CannotReadARootOnlyLinkCacheThroughASymlink) {
  const std::string target = scratch_.write("links.yaml", cache_pair("bandwidth_gb_per_s: 40, latency_us: 5"),
                                            fs::perms::owner_read | fs::perms::owner_write);
  const std::string link = scratch_.path("my-links.yaml");
  fs::create_symlink(target, link);
  const std::string message = as_nobody([&] {
    JobRequest request = base_request();
    request.link_cache = link;
    return plan_error(request);
  });
  if (message.rfind("SKIP:", 0) == 0) GTEST_SKIP() << message;
  EXPECT_NE(message.find("link cache " + link + ": cannot open (Permission denied)"), std::string::npos) << message;
}

TEST_F(AsUnprivilegedUser, ReadsAModelItMayRead) {  // control: the rows above fail for lack of rights only
  const std::string path = scratch_.write("public.yaml", "num_layers: 32\nhidden_size: 4096\nnum_attention_heads: 32\n"
                                                         "vocab_size: 32000\n");
  const std::string message = as_nobody([&] {
    const auto model = load_model(path, {});
    return model ? std::string() : model.error().message;
  });
  if (message.rfind("SKIP:", 0) == 0) GTEST_SKIP() << message;
  EXPECT_EQ(message, "");
}

// ---- The site file steers what runs as root on every node: the plugin refuses one a user could
// have written (spank/src/plugin_config.hpp, called before the file is read).

TEST(SiteFileTrust, RefusesAFileOwnedByAnotherUserOrWritableByAll) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create root-owned files and chown them";
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  const Scratch scratch;
  const std::string trusted = scratch.write("pipette.yaml", "mode: auto\n");
  EXPECT_EQ(spank::check_site_file_trust(trusted), "") << "root-owned, 0644: the control row";

  const std::string users = scratch.write("users.yaml", "mode: auto\n");
  ASSERT_EQ(::chown(users.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  EXPECT_NE(spank::check_site_file_trust(users).find("owned by uid " + std::to_string(nobody->pw_uid) + ", refused"),
            std::string::npos);

  const std::string writable = scratch.write("writable.yaml", "mode: auto\n", fs::perms(0666));
  EXPECT_NE(spank::check_site_file_trust(writable).find("world-writable, refused"), std::string::npos);

  // A root-owned symlink does not lend its trust to the user's file it points at.
  const std::string link = scratch.path("link.yaml");
  fs::create_symlink(users, link);
  EXPECT_NE(spank::check_site_file_trust(link).find("refused"), std::string::npos);

  EXPECT_NE(spank::check_site_file_trust(scratch.path("missing.yaml")).find("No such file"), std::string::npos);
  fs::create_directory(scratch.path("dir.yaml"));
  EXPECT_NE(spank::check_site_file_trust(scratch.path("dir.yaml")).find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace pipette
