// Runs the real `pipette` binary and checks what it prints. JSON output is parsed with yaml-cpp
// (JSON is YAML 1.2 flow style); SVG output is checked with xmllint from libxml2-utils.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "command_table.hpp"

namespace {

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// `explain`'s text and, from `plan --json`, plan 1's memory per stage, for the same arguments.
struct ExplainedMemory {
  std::string text;
  YAML::Node stages;
};

class PipetteCli : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("pipette_cli_test_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // `arguments` is shell syntax; the binary's stdout and stderr are captured separately.
  Outcome pipette(const std::string& arguments) const {
    const auto out = directory_ / "stdout";
    const auto err = directory_ / "stderr";
    const std::string command = std::string("'") + PIPETTE_BINARY + "' " + arguments + " >'" + out.string() + "' 2>'" +
                                err.string() + "'";
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_file(out), read_file(err)};
  }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  ExplainedMemory explained_memory(const std::string& arguments) const;

  std::filesystem::path directory_;
};

int count_lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

int count_of(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// One-line error: a single line on stderr, nothing on stdout.
void expect_one_line_error(const Outcome& run, int status, const std::string& mentions) {
  EXPECT_EQ(run.status, status) << run.err;
  EXPECT_EQ(count_lines(run.err), 1) << run.err;
  EXPECT_NE(run.err.find(mentions), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

constexpr const char* kSmallInterleaved = "--fix tp=8,pp=4,dp=2,mbs=1,vpp=2,recompute=selective,sp=on,distopt=on";

// Every planning command takes the same model; the cluster is the bundled example.
std::string planning(const std::string& command) { return command + " --model llama3-70b"; }

TEST_F(PipetteCli, VersionPrintsTheRelease) {
  const Outcome run = pipette("--version");
  EXPECT_EQ(run.status, 0);
  EXPECT_TRUE(std::regex_match(run.out, std::regex("pipette [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << run.out;
}

TEST_F(PipetteCli, HelpListsEveryCommandAndEveryCommandHasHelpWithItsOptions) {
  const Outcome top = pipette("--help");
  EXPECT_EQ(top.status, 0);
  for (const auto& command : pipette::cli::commands()) {
    EXPECT_NE(top.out.find(std::string(command.name)), std::string::npos) << command.name;
    const Outcome help = pipette(std::string(command.name) + " --help");
    EXPECT_EQ(help.status, 0) << command.name;
    EXPECT_NE(help.out.find("usage: pipette " + std::string(command.name)), std::string::npos) << help.out;
    for (const auto* option : command.options) {
      EXPECT_NE(help.out.find("--" + std::string(option->name)), std::string::npos) << command.name << " --" << option->name;
    }
  }
}

TEST_F(PipetteCli, UsageErrorsAreOneLineWithExitStatusTwo) {
  expect_one_line_error(pipette("frobnicate"), 2, "unknown command 'frobnicate'");
  expect_one_line_error(pipette("plan --model llama3-70b --colour"), 2, "unknown option --colour");
  expect_one_line_error(pipette("plan --model"), 2, "--model needs a value");
  expect_one_line_error(pipette("check-config"), 2, "missing FILE");
  EXPECT_EQ(pipette("").status, 2);
}

TEST_F(PipetteCli, BadInputsAreOneLineErrorsWithExitStatusOne) {
  expect_one_line_error(pipette("plan"), 1, "--model");
  expect_one_line_error(pipette("plan --model no-such-model"), 1, "no-such-model");
  expect_one_line_error(pipette("plan --model llama3-70b --num-nodes zero"), 1, "--num-nodes must be a positive integer");
  expect_one_line_error(pipette("plan --model llama3-70b --num-nodes 64"), 1, "--num-nodes 64");
  expect_one_line_error(pipette("plan --model llama3-70b --nodes 'gpu[01-'"), 1, "--nodes");
  expect_one_line_error(pipette("plan --model llama3-70b --fix tp=banana"), 1, "tp");
  expect_one_line_error(pipette("plan --model llama3-70b --site /nonexistent/site.yaml"), 1, "/nonexistent/site.yaml");
  expect_one_line_error(pipette("plan --model llama3-70b --links /nonexistent/links.yaml"), 1, "/nonexistent/links.yaml");
}

TEST_F(PipetteCli, PlanOnTheBundledExampleShowsATableAndThePlacement) {
  const Outcome run = pipette(planning("plan") + " --top 3");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("16 nodes x 8"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bundled example cluster"), std::string::npos);
  EXPECT_NE(run.out.find("peak memory / GPU"), std::string::npos);
  // Three plan rows: "  1 ", "  2 ", "  3 " starting a line, right-aligned under '#'.
  for (const char* row : {"\n  1  ", "\n  2  ", "\n  3  "}) EXPECT_NE(run.out.find(row), std::string::npos) << row;
  EXPECT_EQ(run.out.find("\n  4  "), std::string::npos);
  EXPECT_NE(run.out.find("placement of plan 1"), std::string::npos);
  EXPECT_NE(run.out.find("plan hash "), std::string::npos);
}

// The Ultra-Scale Playbook's DP layout as bench_cluster wrote it (ZeRO-1, tp_mode REDUCE_SCATTER at
// tp 1) is priced, not refused: nanotron's releases run ZeRO-1 beside dp > 1, and sequence
// parallelism over one rank is none (bench/RESULTS.md, "Real layouts priced, not refused").
TEST_F(PipetteCli, BenchClusterLayoutsArePricedNotRefused) {
  const std::string layout = "plan --model '" PIPETTE_SOURCE_DIR
                             "/tests/data/models/bench-cluster-llama-1b.yaml' --num-nodes 2 --global-batch 32 --seq 4096 "
                             "--framework nanotron --fix tp=1,pp=1,dp=16,mbs=2,vpp=1,recompute=none,distopt=on,sp=";
  const Outcome zero_one = pipette(layout + "off");
  ASSERT_EQ(zero_one.status, 0) << zero_one.err;
  EXPECT_NE(zero_one.out.find("the configuration you fixed"), std::string::npos) << zero_one.out;
  const Outcome with_sp = pipette(layout + "on");
  ASSERT_EQ(with_sp.status, 0) << with_sp.err;
  EXPECT_EQ(with_sp.out, zero_one.out);
}

YAML::Node parse_json(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& error) {
    ADD_FAILURE() << "not JSON: " << error.what() << "\n" << text.substr(0, 400);
    return {};
  }
}

TEST_F(PipetteCli, LoginNodePricesNvswitchTensorParallelismByItsMessages) {
  // Issue 14's example: it reported 1.29 s of TP communication (SXM links split over 7 peers). The
  // message-size estimate: 32 micro-batches × 65 all-reduces (4 per layer of a 16-layer stage, plus
  // the embedding's) of the 4096 × 4096 × 2 B activation, a 2-GPU ring putting 1× of it on the wire,
  // at the NVSwitch pair's 360 GB/s: 32 × 65 × 33.6 MB / 360 GB/s = 0.194 s. What the plan prices is
  // exposed + hidden (the backward all-reduces run beside the wgrad GEMMs).
  const Outcome run = pipette("plan --model llama3-8b --nodes 'n[1-2]' --global-batch 128 --seq 4096 --json --fix "
                              "tp=2,pp=2,dp=4,mbs=1,vpp=1,recompute=none,sp=off,distopt=on");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node time = parse_json(run.out)["plans"][0]["time"];
  const double estimate = 32 * 65 * (4096.0 * 4096 * 2) / 360e9;
  const double priced = time["tp_communication_seconds"].as<double>() + time["tp_hidden_seconds"].as<double>();
  EXPECT_NEAR(priced, estimate, 0.2 * estimate);
  EXPECT_GT(time["tp_hidden_seconds"].as<double>(), 0);
  EXPECT_LT(time["tp_communication_seconds"].as<double>(), priced);
}

// A tied word embedding over pipeline ranks: the first and the last stage sum its gradients after
// the DP reduction (Megatron-core finalize_model_grads.py _allreduce_word_embedding_grads). On the
// bundled example's two nodes, stage 0 on one and stage 1 on the other, the 8 ranks of each send
// their 50257/2 × 4096 fp32 shard at once, one rail each (about 45 GB/s): 9 ms, its own line in
// explain. An untied model has none.
TEST_F(PipetteCli, TiedEmbeddingGradientsAreSummedAcrossPipelineRanks) {
  const std::string layout = " --num-nodes 2 --global-batch 128 --seq 2048 --top 1 --fix tp=2,pp=2,dp=4,mbs=1,vpp=1,recompute=none,sp=off,distopt=on";
  const Outcome tied = pipette("explain --model gpt3-5b" + layout);
  ASSERT_EQ(tied.status, 0) << tied.err;
  EXPECT_NE(tied.out.find("\n  tied embedding gradient all-reduce "), std::string::npos) << tied.out;
  const Outcome tied_json = pipette("plan --json --model gpt3-5b" + layout);
  ASSERT_EQ(tied_json.status, 0) << tied_json.err;
  const double estimate = 50257.0 / 2 * 4096 * 4 / 45e9;
  EXPECT_NEAR(parse_json(tied_json.out)["plans"][0]["time"]["tied_embedding_seconds"].as<double>(), estimate, 0.25 * estimate);
  const Outcome untied = pipette("explain --model llama3-8b" + layout);
  ASSERT_EQ(untied.status, 0) << untied.err;
  EXPECT_EQ(untied.out.find("tied embedding gradient all-reduce"), std::string::npos) << untied.out;
  const Outcome untied_json = pipette("plan --json --model llama3-8b" + layout);
  ASSERT_EQ(untied_json.status, 0) << untied_json.err;
  EXPECT_EQ(parse_json(untied_json.out)["plans"][0]["time"]["tied_embedding_seconds"].as<double>(), 0.0);
}

// What planning assumed or changed reaches the user: a `note:` line under the header, and `notes`
// in the JSON. Heads 896 wide (BigScience's 16-head prototype, chronicles-prequel.md l.724) are
// ones no Transformer Engine fused kernel takes, so Megatron-core runs, and Pipette prices,
// unfused attention, and says so.
TEST_F(PipetteCli, PlanningNotesAreShownWithThePlan) {
  std::ofstream(path("wide-heads.yaml")) << "name: wide-heads\nnum_layers: 8\nhidden_size: 14336\nnum_attention_heads: 16\n"
                                            "ffn_hidden_size: 57344\nvocab_size: 250880\n";
  const std::string arguments = "plan --model '" + path("wide-heads.yaml") + "' --num-nodes 2 --global-batch 64 --seq 2048 --top 1";
  const Outcome run = pipette(arguments);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("bf16, unfused attention"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nnote: Transformer Engine has no flash-attn 2 or cuDNN fused attention kernel for heads 896 wide"),
            std::string::npos)
      << run.out;
  // The bundled example names its GPU in the site file rather than have hwloc find it.
  EXPECT_NE(run.out.find("\nnote: GPU H100-SXM from the site file's `gpu`\n"), std::string::npos) << run.out;
  const Outcome json_run = pipette(arguments + " --json");
  ASSERT_EQ(json_run.status, 0) << json_run.err;
  const YAML::Node notes = parse_json(json_run.out)["notes"];
  ASSERT_TRUE(notes.IsSequence());
  int unfused = 0;
  for (const auto& note : notes) unfused += note.as<std::string>().find("runs its unfused attention") != std::string::npos;
  EXPECT_EQ(unfused, 1);
}

TEST_F(PipetteCli, PlanJsonFollowsSchemaVersionOne) {
  const Outcome run = pipette("plan --model llama3-70b --top 4 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node json = parse_json(run.out);
  ASSERT_TRUE(json.IsMap());
  EXPECT_EQ(json["schema"].as<std::string>(), "pipette.plan");
  EXPECT_EQ(json["schema_version"].as<int>(), 1);
  EXPECT_FALSE(json["pipette_version"].as<std::string>().empty());
  EXPECT_EQ(json["model"]["name"].as<std::string>(), "llama3-70b");
  EXPECT_GT(json["model"]["parameters"].as<double>(), 69e9);
  EXPECT_EQ(json["cluster"]["nodes"].size(), 16u);
  EXPECT_EQ(json["cluster"]["gpus_per_node"].as<int>(), 8);
  EXPECT_GT(json["cluster"]["gpu_memory_bytes"].as<double>(), 0);
  EXPECT_EQ(json["cluster"]["node_pairs_measured"].as<int>() + json["cluster"]["node_pairs_assumed"].as<int>(), 120);
  EXPECT_FALSE(json["every_knob_fixed"].as<bool>());
  EXPECT_TRUE(json["does_not_fit"].IsNull());
  ASSERT_TRUE(json["plans"].IsSequence());
  ASSERT_GE(json["plans"].size(), 1u);
  EXPECT_LE(json["plans"].size(), 4u);
  EXPECT_TRUE(json["rejections"].IsSequence());
  double previous_time = 0;
  for (const auto& plan : json["plans"]) {
    const int tp = plan["tp"].as<int>(), pp = plan["pp"].as<int>(), dp = plan["dp"].as<int>(), cp = plan["cp"].as<int>();
    EXPECT_EQ(tp * cp * pp * dp, 128);  // Megatron: world = tp x cp x pp x dp
    EXPECT_EQ(plan["plan_hash"].as<std::string>().size(), 16u);
    EXPECT_GE(plan["virtual_stages"].as<int>(), 1);
    EXPECT_GE(plan["micro_batch"].as<int>(), 1);
    EXPECT_EQ(plan["num_microbatches"].as<long>() * plan["micro_batch"].as<long>() * dp,
              json["training"]["global_batch_sequences"].as<long>());
    EXPECT_TRUE(std::set<std::string>({"none", "selective", "full"}).count(plan["recompute"].as<std::string>()));
    plan["sequence_parallel"].as<bool>();
    plan["distributed_optimizer"].as<bool>();
    int layers = 0;
    for (const auto& stage_layers : plan["layers_per_stage"]) layers += stage_layers.as<int>();
    EXPECT_EQ(layers, json["model"]["layers"].as<int>());
    const double iteration = plan["iteration_seconds"].as<double>();
    EXPECT_GE(iteration, previous_time);  // best first
    previous_time = iteration;
    EXPECT_DOUBLE_EQ(plan["time"]["iteration_seconds"].as<double>(), iteration);
    for (const char* key : {"compute_seconds", "recompute_seconds", "pipeline_bubble_seconds", "tp_communication_seconds",
                            "pp_communication_seconds", "dp_communication_seconds", "tied_embedding_seconds", "optimizer_seconds",
                            "embedding_imbalance_seconds", "tp_hidden_seconds", "cp_communication_seconds"}) {
      EXPECT_GE(plan["time"][key].as<double>(), 0) << key;
    }
    EXPECT_GT(plan["tokens_per_second"].as<double>(), 0);
    const double mfu = plan["model_flops_utilization"].as<double>();
    EXPECT_GT(mfu, 0.05);
    EXPECT_LT(mfu, 1.0);
    EXPECT_LE(plan["peak_memory_bytes"].as<double>(), plan["gpu_memory_bytes"].as<double>());
    ASSERT_EQ(plan["memory_per_stage"].size(), static_cast<size_t>(pp));
    double peak = 0;
    for (const auto& stage : plan["memory_per_stage"]) peak = std::max(peak, stage["total_bytes"].as<double>());
    EXPECT_NEAR(peak, plan["peak_memory_bytes"].as<double>(), 1.0);
    // Every rank on a distinct GPU of the job.
    ASSERT_EQ(plan["placement"]["ranks"].size(), 128u);
    std::set<std::pair<std::string, int>> gpus;
    for (const auto& rank : plan["placement"]["ranks"]) {
      gpus.emplace(rank["node"].as<std::string>(), rank["local_gpu"].as<int>());
    }
    EXPECT_EQ(gpus.size(), 128u);
    EXPECT_EQ(plan["placement"]["node_order"].size(), 16u);
    EXPECT_GT(plan["placement"]["default_order_iteration_seconds"].as<double>(), 0);
    EXPECT_TRUE(plan["links_assumed"].IsSequence());
  }
}

// Issue 18 on the bundled example (NVSwitch nodes, 8 rails): every plan keeps at least 95% of
// its inter-node DP and pipeline neighbours on the same local GPU index, unless permuting GPUs
// inside nodes predicted a gain (what explain then shows); the JSON carries the search's effort.
TEST_F(PipetteCli, PlansOnTheExampleKeepNeighboursOnOneRailAndReportTheSearchEffort) {
  for (const char* shape : {"--model llama3-70b --num-nodes 16 --global-batch 1024 --seq 8192",
                            "--model llama2-7b --num-nodes 4 --global-batch 256 --seq 4096",
                            "--model llama2-13b --num-nodes 8 --global-batch 512 --seq 4096"}) {
    const Outcome run = pipette(std::string("plan --top 5 --json ") + shape);
    ASSERT_EQ(run.status, 0) << run.err;
    const YAML::Node json = parse_json(run.out);
    for (const YAML::Node& plan : json["plans"]) {
      const YAML::Node placement = plan["placement"];
      const double neighbours = placement["inter_node_neighbours"].as<double>();
      const double misaligned = placement["neighbours_on_different_local_gpus"].as<double>();
      const YAML::Node search = placement["search"];
      const bool gain_shown = search["local_gpu_moves"].as<bool>() &&
                              search["identity_local_order_iteration_seconds"].as<double>() > plan["iteration_seconds"].as<double>();
      EXPECT_TRUE(misaligned <= 0.05 * neighbours || gain_shown) << shape << ": " << misaligned << " of " << neighbours;
      EXPECT_LE(search["moves_evaluated"].as<long long>(), search["move_budget"].as<long long>() + 64) << shape;
    }
  }
  const Outcome explain = pipette("explain --model llama3-70b --num-nodes 16 --global-batch 1024 --seq 8192");
  ASSERT_EQ(explain.status, 0) << explain.err;
  EXPECT_NE(explain.out.find("rails: 0 of "), std::string::npos) << explain.out;
}

TEST_F(PipetteCli, EveryKnobFixedEvaluatesExactlyThatConfiguration) {
  const Outcome run = pipette(planning("plan") + " --json --fix tp=8,pp=4,dp=4,mbs=1,vpp=1,recompute=selective,sp=on,distopt=on");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node json = parse_json(run.out);
  EXPECT_TRUE(json["every_knob_fixed"].as<bool>());
  ASSERT_EQ(json["plans"].size(), 1u);
  const auto plan = json["plans"][0];
  EXPECT_EQ(plan["tp"].as<int>(), 8);
  EXPECT_EQ(plan["pp"].as<int>(), 4);
  EXPECT_EQ(plan["dp"].as<int>(), 4);
  EXPECT_EQ(plan["micro_batch"].as<int>(), 1);
  EXPECT_EQ(plan["virtual_stages"].as<int>(), 1);
  EXPECT_EQ(plan["recompute"].as<std::string>(), "selective");
  EXPECT_TRUE(plan["sequence_parallel"].as<bool>());
  EXPECT_TRUE(plan["distributed_optimizer"].as<bool>());
  const Outcome text = pipette(planning("plan") + " --fix tp=8,pp=4,dp=4,mbs=1,vpp=1,recompute=selective,sp=on,distopt=on");
  EXPECT_NE(text.out.find("the configuration you fixed"), std::string::npos) << text.out;
}

// A relative --site path: the site file's relative paths (links.cache) are taken from its
// directory once, not joined to it twice ("example-cluster/example-cluster/links.yaml").
TEST_F(PipetteCli, ARelativeSitePathFindsTheCacheBesideIt) {
  const std::string site =
      std::filesystem::relative(PIPETTE_SOURCE_DIR "/etc/example-cluster/site.yaml", std::filesystem::current_path())
          .string();
  ASSERT_TRUE(std::filesystem::path(site).is_relative());
  const std::string cache = (std::filesystem::path(site).parent_path() / "links.yaml").lexically_normal().string();
  const Outcome plan = pipette("plan --model llama3-8b --num-nodes 2 --top 1 --site '" + site + "'");
  ASSERT_EQ(plan.status, 0) << plan.err;
  EXPECT_NE(plan.out.find("node pairs measured 1, assumed 0"), std::string::npos) << plan.out;
  const Outcome check = pipette("check-config '" + site + "'");
  ASSERT_EQ(check.status, 0) << check.err;
  EXPECT_NE(check.out.find("link cache            " + cache + "\n"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("readable"), std::string::npos) << check.out;
  const Outcome show = pipette("links show --site '" + site + "'");
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_NE(show.out.find("link cache " + cache + ": 16 nodes"), std::string::npos) << show.out;
}

// cp, ep and etp are knobs of the fixed configuration too: evaluated as given, never dropped.
// A model with experts is evaluated exactly only with ep and etp fixed; without them the search
// picks its expert layout around the other knobs.
TEST_F(PipetteCli, EveryKnobFixedKeepsContextAndExpertParallelism) {
  const std::string dense = "plan --model llama3-8b --num-nodes 2 --global-batch 128 --seq 32768 --json --fix "
                            "tp=2,cp=2,pp=1,dp=4,mbs=1,vpp=1,recompute=full,sp=on,distopt=on";
  const Outcome context = pipette(dense);
  ASSERT_EQ(context.status, 0) << context.err;
  const YAML::Node context_json = parse_json(context.out);
  EXPECT_TRUE(context_json["every_knob_fixed"].as<bool>());
  ASSERT_EQ(context_json["plans"].size(), 1u);
  EXPECT_EQ(context_json["plans"][0]["cp"].as<int>(), 2);
  EXPECT_EQ(context_json["plans"][0]["dp"].as<int>(), 4);

  const std::string moe = "plan --model qwen3-30b-a3b --num-nodes 2 --global-batch 1024 --seq 4096 --precision fp8 --json "
                          "--fix tp=1,pp=1,dp=16,mbs=1,vpp=1,recompute=none,sp=off,distopt=on";
  const Outcome experts = pipette(moe + ",ep=16,etp=1");
  ASSERT_EQ(experts.status, 0) << experts.err;
  const YAML::Node experts_json = parse_json(experts.out);
  EXPECT_TRUE(experts_json["every_knob_fixed"].as<bool>());
  ASSERT_EQ(experts_json["plans"].size(), 1u);
  const YAML::Node sharded = experts_json["plans"][0];
  EXPECT_EQ(sharded["ep"].as<int>(), 16);
  EXPECT_EQ(sharded["etp"].as<int>(), 1);
  // 30.5 B parameters, 8 of 128 experts per GPU: the weights are a fraction of the unsharded 57 GiB.
  EXPECT_LT(sharded["memory_per_stage"][0]["weights_bytes"].as<double>(), 20.0 * (1ull << 30));
  // ep=1 holds every expert on every GPU: a fixed configuration that does not fit, said as such.
  const Outcome unsharded = pipette(moe + ",ep=1,etp=1");
  EXPECT_EQ(unsharded.status, 1);
  EXPECT_TRUE(parse_json(unsharded.out)["every_knob_fixed"].as<bool>());
  EXPECT_NE(parse_json(unsharded.out)["does_not_fit"].as<std::string>().find("GiB"), std::string::npos);
  // An expert layout the framework cannot build is an error, not a configuration that does not fit.
  expect_one_line_error(pipette(moe + ",ep=5,etp=1"), 1,
                        "megatron-core cannot build it: ep=5 does not divide the 128 experts");
  // Without ep and etp the search chooses them.
  const Outcome searched = pipette(moe);
  ASSERT_EQ(searched.status, 0) << searched.err;
  const YAML::Node searched_json = parse_json(searched.out);
  EXPECT_FALSE(searched_json["every_knob_fixed"].as<bool>());
  ASSERT_GE(searched_json["plans"].size(), 1u);
  EXPECT_GT(searched_json["plans"][0]["ep"].as<int>(), 1);
}

// torchtitan's FSDP (fsdp=on, its own default where Pipette prices it): planned, printed,
// exported, and refused in one line where it is not priced.
TEST_F(PipetteCli, TorchtitanPlansAreFullyShardedAndSaySo) {
  const std::string job = "plan --model llama3-8b --num-nodes 1 --global-batch 64 --seq 8192 --framework torchtitan";
  const Outcome run = pipette(job + " --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node plan = parse_json(run.out)["plans"][0];
  EXPECT_TRUE(plan["fully_sharded"].as<bool>());
  EXPECT_EQ(plan["environment"]["PIPETTE_FULLY_SHARDED"].as<std::string>(), "1");
  EXPECT_NE(plan["environment"]["PIPETTE_TORCHTITAN_ARGS"].as<std::string>().find(
                "--parallelism.data_parallel_replicate_degree 1 --parallelism.data_parallel_shard_degree " +
                std::to_string(plan["dp"].as<int>())),
            std::string::npos);
  const Outcome text = pipette(job + " --top 1");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find(" fsdp "), std::string::npos) << text.out;
  const Outcome replicated = pipette(job + " --fix fsdp=off --json");
  ASSERT_EQ(replicated.status, 0) << replicated.err;
  EXPECT_FALSE(parse_json(replicated.out)["plans"][0]["fully_sharded"].as<bool>());
  // Every knob fixed but fsdp: evaluated as the search would choose it, sharded.
  const Outcome fixed = pipette(job + " --fix tp=1,pp=1,dp=8,mbs=1,vpp=1,recompute=full,sp=off,distopt=off --json");
  ASSERT_EQ(fixed.status, 0) << fixed.err;
  EXPECT_TRUE(parse_json(fixed.out)["plans"][0]["fully_sharded"].as<bool>());
  expect_one_line_error(pipette("plan --model llama3-8b --num-nodes 1 --global-batch 64 --seq 8192 --framework "
                                "megatron-core --fix tp=1,pp=1,dp=8,mbs=1,vpp=1,recompute=full,sp=off,distopt=on,fsdp=on"),
                        1, "Pipette prices fully sharded data parallelism as torchtitan's FSDP2 only");
}

// recompute=block:N (Megatron's --recompute-method block): planned, printed and exported as such,
// refused with one line where the stack cannot express it.
TEST_F(PipetteCli, BlockRecomputeIsPrintedExportedAndRefusedByNanotron) {
  const std::string fixed = planning("plan") + " --fix tp=8,pp=4,dp=4,mbs=1,vpp=1,sp=on,distopt=on,recompute=";
  const Outcome run = pipette(fixed + "block:5 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node plan = parse_json(run.out)["plans"][0];
  EXPECT_EQ(plan["recompute"].as<std::string>(), "block:5");
  EXPECT_EQ(plan["environment"]["PIPETTE_RECOMPUTE"].as<std::string>(), "block:5");
  EXPECT_NE(plan["environment"]["PIPETTE_MEGATRON_ARGS"].as<std::string>().find(
                " --recompute-granularity full --recompute-method block --recompute-num-layers 5"),
            std::string::npos)
      << plan["environment"]["PIPETTE_MEGATRON_ARGS"].as<std::string>();
  // Between no recompute and recomputing all 20 layers of each stage, in memory and in time.
  const YAML::Node full = parse_json(pipette(fixed + "full --json").out)["plans"][0];
  const YAML::Node none = parse_json(pipette(fixed + "none --json").out)["plans"][0];
  EXPECT_NE(plan["plan_hash"].as<std::string>(), full["plan_hash"].as<std::string>());
  EXPECT_LT(plan["peak_memory_bytes"].as<double>(), none["peak_memory_bytes"].as<double>());
  EXPECT_GT(plan["peak_memory_bytes"].as<double>(), full["peak_memory_bytes"].as<double>());
  EXPECT_GT(plan["time"]["recompute_seconds"].as<double>(), 0);
  EXPECT_LT(plan["time"]["recompute_seconds"].as<double>(), full["time"]["recompute_seconds"].as<double>());
  const Outcome text = pipette(fixed + "block:5");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("block:5"), std::string::npos) << text.out;
  const Outcome nemo = pipette(fixed + "block:5 --json --framework nemo");
  ASSERT_EQ(nemo.status, 0) << nemo.err;
  EXPECT_NE(parse_json(nemo.out)["plans"][0]["environment"]["PIPETTE_NEMO_OVERRIDES"].as<std::string>().find(
                "model.recompute_granularity=full model.recompute_method=block model.recompute_num_layers=5"),
            std::string::npos);
  // nanotron's recompute_layer is all or nothing: a one-line refusal naming it and the fix.
  const Outcome nanotron = pipette("plan --model '" PIPETTE_SOURCE_DIR
                                   "/tests/data/models/bench-cluster-llama-1b.yaml' --num-nodes 2 --global-batch 32 "
                                   "--seq 4096 --framework nanotron --fix tp=1,pp=1,dp=16,mbs=2,vpp=1,sp=off,distopt=on,"
                                   "recompute=block:4");
  expect_one_line_error(nanotron, 1, "nanotron's recompute_layer checkpoints every decoder layer or none");
  EXPECT_NE(nanotron.err.find("plan with recompute=full"), std::string::npos) << nanotron.err;
  expect_one_line_error(pipette(fixed + "block:0"), 1,
                        "recompute=block:N needs N, the layers recomputed per model chunk, to be a positive integer");
}

TEST_F(PipetteCli, AFixedConfigurationThatDoesNotFitSaysSo) {
  // 70B on tp=1 pp=1: ~1 TiB of model state per GPU.
  const Outcome run = pipette(planning("plan") + " --fix tp=1,pp=1,dp=128,mbs=1,vpp=1,recompute=full,sp=off,distopt=off");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find("DOES NOT FIT: tp=1 pp=1 dp=128"), std::string::npos) << run.out << run.err;
  EXPECT_NE(run.out.find("memory per GPU by pipeline stage"), std::string::npos) << run.out;
  const Outcome json = pipette(planning("plan") + " --json --fix tp=1,pp=1,dp=128,mbs=1,vpp=1,recompute=full,sp=off,distopt=off");
  EXPECT_EQ(json.status, 1);
  const YAML::Node parsed = parse_json(json.out);
  EXPECT_NE(parsed["does_not_fit"].as<std::string>().find("GiB"), std::string::npos);
  EXPECT_EQ(parsed["plans"].size(), 0u);
  // A configuration that cannot exist on this job is an error, not "does not fit".
  expect_one_line_error(pipette(planning("plan") + " --fix tp=8,pp=4,dp=8,mbs=1,vpp=1,recompute=full,sp=off,distopt=off"),
                        1, "GPUs");
}

TEST_F(PipetteCli, ExplainBreaksDownTimeMemoryLinksAndRunnersUp) {
  const Outcome run = pipette(planning("explain") + " --top 3");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* section : {"where the time goes", "pipeline bubble", "DP communication", "optimizer step",
                              "memory per GPU by pipeline stage", "activations", "links (node pairs of this job",
                              "measured", "why the runners-up lost", "  2. ", "  3. "}) {
    EXPECT_NE(run.out.find(section), std::string::npos) << section << "\n" << run.out;
  }
}

ExplainedMemory PipetteCli::explained_memory(const std::string& arguments) const {
  const Outcome explain = pipette(planning("explain") + arguments + " --top 1");
  EXPECT_EQ(explain.status, 0) << explain.err;
  const Outcome json = pipette(planning("plan") + arguments + " --json");
  EXPECT_EQ(json.status, 0) << json.err;
  return {explain.out, json.status == 0 ? parse_json(json.out)["plans"][0]["memory_per_stage"] : YAML::Node()};
}

// Without the distributed optimizer and with 16-bit gradients, Megatron-core's step makes an fp32
// copy of every gradient (optimizer.py @d98e8a64 l.1097, 4 bytes per parameter): under full
// recompute that outweighs the activations, and explain says which peak is the total.
TEST_F(PipetteCli, ExplainSaysWhenTheOptimizerStepsPeakBinds) {
  const std::string fixed = " --fix tp=8,pp=8,dp=2,mbs=1,vpp=1,recompute=full,sp=on,distopt=off";
  const ExplainedMemory sixteen_bit = explained_memory(fixed + " --engine fp32-grads=off");
  EXPECT_NE(sixteen_bit.text.find("stage 3: the optimizer step's peak binds"), std::string::npos) << sixteen_bit.text;
  ASSERT_TRUE(sixteen_bit.stages.IsSequence());
  for (const auto& stage : sixteen_bit.stages) {
    EXPECT_GT(stage["step_gradients_bytes"].as<double>(), 0);
    EXPECT_EQ(stage["total_bytes"].as<double>(), stage["step_peak_bytes"].as<double>());
  }
  // fp32 gradients: the optimizer takes the buffer as it is, and the backward's peak binds.
  const ExplainedMemory fp32 = explained_memory(fixed);
  EXPECT_EQ(fp32.text.find("the optimizer step's peak binds"), std::string::npos) << fp32.text;
}

// nanotron adds every 16-bit gradient into its fp32 buffer only after the whole backward
// (optim/gradient_accumulator.py @2411b022 l.206-226). Under full recompute the backward's end is
// every rank's peak, and explain and the JSON say so; Megatron-core's GEMMs accumulate into the
// buffer, and no backward's end binds.
TEST_F(PipetteCli, ExplainSaysWhenABackwardsEndBinds) {
  const std::string fixed =
      " --num-nodes 8 --global-batch 64 --seq 4096 --fix tp=8,pp=4,dp=2,mbs=1,vpp=1,recompute=full,sp=on,distopt=off";
  const ExplainedMemory nanotron = explained_memory(fixed + " --framework nanotron");
  EXPECT_NE(nanotron.text.find("stage 0: a backward's end binds"), std::string::npos) << nanotron.text;
  ASSERT_TRUE(nanotron.stages.IsSequence());
  for (const auto& stage : nanotron.stages) {
    EXPECT_GT(stage["backward_end_bytes"].as<double>(), 0);
    EXPECT_GE(stage["activations_bytes"].as<double>(), stage["backward_end_bytes"].as<double>());
  }
  const ExplainedMemory megatron = explained_memory(fixed + " --framework megatron-core");
  EXPECT_EQ(megatron.text.find("a backward's end binds"), std::string::npos) << megatron.text;
  for (const auto& stage : megatron.stages) EXPECT_EQ(stage["backward_end_bytes"].as<double>(), 0);
}

// Issue 17's done-when: at 128K tokens llama3-70b on 32 nodes gets context parallelism instead of
// full recompute, and explain shows what each other cp would cost.
TEST_F(PipetteCli, LongContextPlanHasContextParallelismThatExplainJustifies) {
  const std::string request = " --model llama3-70b --nodes 'n[001-032]' --global-batch 256 --seq 131072";
  const Outcome json = pipette("plan" + request + " --top 1 --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const YAML::Node plan = parse_json(json.out)["plans"][0];
  const int cp = plan["cp"].as<int>();
  EXPECT_GT(cp, 1);
  EXPECT_NE(plan["recompute"].as<std::string>(), "full");
  EXPECT_EQ(plan["environment"]["PIPETTE_CP"].as<std::string>(), std::to_string(cp));
  EXPECT_NE(plan["environment"]["PIPETTE_MEGATRON_ARGS"].as<std::string>().find("--context-parallel-size " + std::to_string(cp)),
            std::string::npos);
  const Outcome explain = pipette("explain" + request);
  ASSERT_EQ(explain.status, 0) << explain.err;
  const std::string& out = explain.out;
  const size_t section = out.find("the best plan at each context-parallel size");
  ASSERT_NE(section, std::string::npos) << out;
  // The cp = 1 row: the search's best without context parallelism, full recompute and slower.
  const size_t row = out.find("\n      1  ", section);
  ASSERT_NE(row, std::string::npos) << out;
  const std::string cp1 = out.substr(row + 1, out.find('\n', row + 1) - row - 1);
  EXPECT_NE(cp1.find("recompute=full"), std::string::npos) << cp1;
  EXPECT_NE(cp1.find("% vs plan 1"), std::string::npos) << cp1;
  EXPECT_EQ(cp1.find("+0.0%"), std::string::npos) << cp1;
  EXPECT_NE(out.find("plan 1's cp"), std::string::npos) << out;
}

// The context-parallel table compares only the cp sizes the job's own fixed tp, pp and dp leave
// GPUs for: with tp 4 and pp 8 fixed on 64 GPUs, cp 1 and 2; with dp fixed too, cp 1 alone.
TEST_F(PipetteCli, ExplainComparesOnlyTheContextParallelSizesTheFixedKnobsAllow) {
  const auto cp_rows = [&](const std::string& fix) {
    const Outcome explain = pipette(planning("explain") + " --num-nodes 8 --top 1 --fix " + fix);
    EXPECT_EQ(explain.status, 0) << explain.err;
    const size_t section = explain.out.find("the best plan at each context-parallel size");
    EXPECT_NE(section, std::string::npos) << explain.out;
    std::vector<int> sizes;
    std::istringstream lines(explain.out.substr(section));
    std::string line;
    std::getline(lines, line);  // the title
    std::getline(lines, line);  // the header
    while (std::getline(lines, line) && !line.empty()) {
      EXPECT_EQ(line.find("leave no layout"), std::string::npos) << line;
      sizes.push_back(std::stoi(line));
    }
    return sizes;
  };
  EXPECT_EQ(cp_rows("tp=4,pp=8"), (std::vector<int>{1, 2}));
  EXPECT_EQ(cp_rows("tp=4,pp=8,dp=2,mbs=1,vpp=1,recompute=full,sp=on,distopt=on"), (std::vector<int>{1}));
}

TEST_F(PipetteCli, SimulateWritesAWellFormedSvgWithOneRowPerStageAndAChromeTrace) {
  const std::string svg = path("schedule.svg");
  const std::string trace = path("trace.json");
  // A small plan keeps the files small: 8 micro-batches through 4 stages of 2 chunks, 2 replicas.
  const Outcome run = pipette(planning("simulate") + " --num-nodes 8 --global-batch 16 " + kSmallInterleaved +
                              " --json --svg '" + svg + "' --trace '" + trace + "'");
  ASSERT_EQ(run.status, 0) << run.err;
  const YAML::Node json = parse_json(run.out);
  EXPECT_EQ(json["schema"].as<std::string>(), "pipette.simulation");
  const int pp = json["plans"][0]["pp"].as<int>();
  EXPECT_EQ(pp, 4);
  const double simulated = json["simulated_iteration_seconds"].as<double>();
  const double closed_form = json["closed_form_iteration_seconds"].as<double>();
  EXPECT_NEAR(closed_form / simulated, 1.0, 0.03);

  const std::string check = "xmllint --noout '" + svg + "'";
  EXPECT_EQ(std::system(check.c_str()), 0) << "xmllint rejected " << svg;
  const std::string drawing = read_file(svg);
  EXPECT_EQ(count_of(drawing, "<g class=\"stage\""), pp);
  for (int stage = 0; stage < pp; ++stage) {
    EXPECT_NE(drawing.find("data-stage=\"" + std::to_string(stage) + "\""), std::string::npos);
  }
  for (const char* kind : {"class=\"forward\"", "class=\"backward\"", "class=\"idle\"", "class=\"send-activation\""}) {
    EXPECT_NE(drawing.find(kind), std::string::npos) << kind;
  }

  const YAML::Node events = parse_json(read_file(trace));
  ASSERT_TRUE(events["traceEvents"].IsSequence());
  int complete = 0;
  for (const auto& event : events["traceEvents"]) {
    if (event["ph"].as<std::string>() != "X") continue;
    ++complete;
    EXPECT_GE(event["dur"].as<double>(), 0);
    EXPECT_LE(event["ts"].as<double>() + event["dur"].as<double>(), simulated * 1e6 * (1 + 1e-6));
  }
  // Every forward and backward of every chunk, micro-batch, stage and replica is in the trace.
  EXPECT_GT(complete, 2 * 8 * 2 * pp * 2);
}

TEST_F(PipetteCli, SimulateTextShowsBothTimes) {
  const Outcome run = pipette(planning("simulate") + " --top 1");
  EXPECT_EQ(run.status, 2);  // simulate has no --top
  const Outcome text = pipette(planning("simulate") + "");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("simulated (discrete-event, exact schedule)"), std::string::npos);
  EXPECT_NE(text.out.find("closed-form prediction"), std::string::npos);
  expect_one_line_error(pipette(planning("simulate") + " --replica 999 --svg '" + path("x.svg") + "'"), 1,
                        "--replica 999");
}

TEST_F(PipetteCli, CheckConfigAcceptsTheExampleAndRejectsAnUnknownKeyWithItsLine) {
  const Outcome good = pipette("check-config '" PIPETTE_SOURCE_DIR "/etc/example-cluster/site.yaml'");
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_NE(good.out.find("ok: "), std::string::npos);
  const std::string bad = path("bad.yaml");
  std::ofstream(bad) << "# a site file\ngpu: H100-SXM\nno_such_key: 3\n";
  const Outcome run = pipette("check-config '" + bad + "'");
  expect_one_line_error(run, 1, "no_such_key");
  EXPECT_NE(run.err.find(":3"), std::string::npos) << run.err;
}

TEST_F(PipetteCli, CheckConfigAcceptsACacheNotMeasuredYetUnlessMeasurementsAreRequired) {
  const std::string site = path("site.yaml");
  std::ofstream(site) << "links:\n  cache: not-yet.yaml\n";
  const Outcome fresh = pipette("check-config '" + site + "'");
  EXPECT_EQ(fresh.status, 0) << fresh.err;
  EXPECT_NE(fresh.out.find("does not exist yet"), std::string::npos) << fresh.out;
  std::ofstream(site) << "links:\n  cache: not-yet.yaml\n  require_measurements: true\n";
  expect_one_line_error(pipette("check-config '" + site + "'"), 1, "not-yet.yaml");
  std::ofstream(path("not-yet.yaml")) << "pipette_link_cache: 1\npairs:\n  a b: {bandwidth_gb_per_s: -3}\n";
  std::ofstream(site) << "links:\n  cache: not-yet.yaml\n";
  expect_one_line_error(pipette("check-config '" + site + "'"), 1, "not-yet.yaml");
}

TEST_F(PipetteCli, LinksShowListsEveryPairAndFlagsTheDegradedOnes) {
  const Outcome run = pipette("links show");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("118 node pairs"), std::string::npos) << run.out;
  EXPECT_EQ(count_of(run.out, "SLOW"), 2) << run.out;
  EXPECT_NE(run.out.find("gpu04   gpu12"), std::string::npos);
  const Outcome some = pipette("links show --nodes 'gpu[01-03]'");
  ASSERT_EQ(some.status, 0) << some.err;
  EXPECT_EQ(count_of(some.out, "\n  gpu0"), 3 + 3);  // 3 pairs, then those 3 nodes' intra-node rows
}

TEST_F(PipetteCli, LinksImportMergesNcclTestsOutputIntoACache) {
  const std::string cache = path("links.yaml");
  const std::string data = PIPETTE_SOURCE_DIR "/tests/data/nccl-tests/";
  const Outcome run = pipette("links import --links '" + cache + "' --measured-at 2026-11-30T12:00:00Z '" + data +
                              "all_reduce_perf_2nodes_8xH100.txt' '" + data + "all_reduce_perf_1node_8xH200.txt'");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("imported 1 node pairs and 1 nodes"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("pair gpu001 gpu002"), std::string::npos) << run.out;
  const Outcome shown = pipette("links show --links '" + cache + "'");
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("gpu001  gpu002"), std::string::npos) << shown.out;
  // The cache is YAML with the measurement time given.
  const YAML::Node written = YAML::LoadFile(cache);
  EXPECT_EQ(written["pipette_link_cache"].as<int>(), 1);
  EXPECT_NE(read_file(cache).find("2026-11-30T12:00:00Z"), std::string::npos);
  // A second import of the same pair keeps one entry.
  ASSERT_EQ(pipette("links import --links '" + cache + "' '" + data + "all_reduce_perf_2nodes_8xH100.txt'").status, 0);
  EXPECT_EQ(count_of(read_file(cache), "gpu001 gpu002:"), 1);

  expect_one_line_error(pipette("links import '" + data + "all_reduce_perf_2nodes_8xH100.txt'"), 1, "--links CACHE");
  expect_one_line_error(pipette("links import --links '" + cache + "' '" PIPETTE_SOURCE_DIR "/README.md'"), 1,
                        "README.md");
  expect_one_line_error(pipette("links frobnicate"), 2, "unknown command 'links frobnicate'");
}

TEST_F(PipetteCli, TheExampleLinkCacheIsExactlyWhatItsGeneratorPrints) {
  const std::string generated = path("links.yaml");
  const std::string command = "python3 '" PIPETTE_SOURCE_DIR "/etc/example-cluster/generate_link_cache.py' > '" +
                              generated + "'";
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(read_file(generated), read_file(PIPETTE_SOURCE_DIR "/etc/example-cluster/links.yaml"));
}

// `explain` says where the fall of a many-node collective comes from: the site's prior, or the
// curve pipette-probe --collectives put in the link cache (issue 14).
TEST_F(PipetteCli, ExplainSaysWhetherCollectiveScalingIsMeasuredOrThePrior) {
  const std::string site = path("site.yaml");
  std::ofstream(site) << "gpu: A100-40GB\npriors:\n  nic_gbit_per_s: 200\n  rails: 4\n";
  const std::string request = " --site '" + site + "' --model llama3-8b --nodes 'jwb[01-08]' --gpus-per-node 4 "
                              "--global-batch 256 --seq 2048";
  const Outcome prior = pipette("explain" + request);
  ASSERT_EQ(prior.status, 0) << prior.err;
  EXPECT_NE(prior.out.find("collectives over the job's 8 nodes, and its pipeline hops: x1.000 of the slowest pair's bandwidth, from the prior for "
                           "the site's priors.network (exponent 0.000)"),
            std::string::npos)
      << prior.out;
  const std::string cache = " --links '" PIPETTE_SOURCE_DIR "/tests/data/link-cache/falling-collectives.yaml'";
  const Outcome shown = pipette("links show" + cache);
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("collectives (bus bandwidth over the first N nodes"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("      8             99.6             69.0       256"), std::string::npos) << shown.out;
  const Outcome measured = pipette("explain" + request + cache);
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_NE(measured.out.find("collectives over the job's 8 nodes, and its pipeline hops: x0.275 of the slowest pair's bandwidth, from the measured "
                              "curve (pipette-probe --collectives at 2, 4, 8 nodes; beyond 8, exponent "),
            std::string::npos)
      << measured.out;
}

// An AWS p5 as its public specification gives it (32 EFA NICs of 100 Gb/s, 3200 Gb/s a node)
// plans as the same node described as 8 NICs of 400 Gb/s: NCCL drives four NICs from each H100
// (src/graph/topo.cc @5067397c l.2039-2075), and `explain` says so. Counting one NIC a GPU priced
// this DP-heavy layout's reduction at a quarter of its bandwidth.
TEST_F(PipetteCli, ThirtyTwoNicsOfAQuarterTheRatePlanAsEightOfTheWholeRate) {
  const std::string request = " --model '" PIPETTE_SOURCE_DIR "/tests/data/models/bench-cluster-llama-1b.yaml' --num-nodes 16 "
                              "--global-batch 1024 --seq 4096 --framework nanotron --fix tp=1,pp=1,dp=128,mbs=1,vpp=1,"
                              "recompute=none,sp=off,distopt=off";
  const auto iteration_line = [](const std::string& out) {
    const size_t at = out.find("\n  iteration ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at + 1) - at);
  };
  std::string iterations[2];
  const std::pair<int, int> nics[] = {{8, 400}, {32, 100}};
  for (int i = 0; i < 2; ++i) {
    const std::string site = path("site" + std::to_string(i) + ".yaml");
    std::ofstream(site) << "gpu: H100-SXM\npriors:\n  nic_gbit_per_s: " << nics[i].second << "\n  rails: " << nics[i].first
                        << "\n  network: efa\n";
    const Outcome explained = pipette("explain --site '" + site + "'" + request);
    ASSERT_EQ(explained.status, 0) << explained.err;
    iterations[i] = iteration_line(explained.out);
    ASSERT_FALSE(iterations[i].empty()) << explained.out;
    EXPECT_EQ(explained.out.find("each GPU sends on 4 NICs (32 NICs over 8 GPUs), as NCCL spreads a GPU's channels") !=
                  std::string::npos,
              nics[i].first == 32)
        << explained.out;
  }
  EXPECT_EQ(iterations[1], iterations[0]);
}

// `explain` says how the stack cuts each stage's overlapped DP reduction (StackProfile::gradient_buckets):
// nanotron's DDP buckets of 25 MB of 16-bit gradients cut bench_cluster's llama-1B, 1,109,690,368
// parameters, into 85 collectives, and the last, its tied embedding's 50272 x 2048 (9.3%), follows
// the backward. Megatron-core buckets only the first stage's first chunk: a later stage is one
// collective a chunk. Under nanotron's ZeRO-1 nothing overlaps.
TEST_F(PipetteCli, ExplainSaysHowTheGradientReductionIsBucketed) {
  const std::string request =
      " --model '" PIPETTE_SOURCE_DIR "/tests/data/models/bench-cluster-llama-1b.yaml' --num-nodes 2 --global-batch 64 --seq 4096";
  const Outcome nanotron = pipette("explain" + request + " --framework nanotron --fix tp=1,pp=1,dp=16,mbs=1,vpp=1,"
                                   "recompute=none,sp=off,distopt=off");
  ASSERT_EQ(nanotron.status, 0) << nanotron.err;
  EXPECT_NE(nanotron.out.find("  DP gradient reduction, overlapped with the last backward:\n    stage 0: 85 collectives "
                              "(nanotron's buckets), the last 9.3% of it after the backward\n"),
            std::string::npos)
      << nanotron.out;
  const Outcome megatron = pipette("explain" + request + " --fix tp=1,pp=2,dp=8,mbs=1,vpp=2,recompute=full,sp=off,distopt=on");
  ASSERT_EQ(megatron.status, 0) << megatron.err;
  EXPECT_NE(megatron.out.find("collectives: chunk 0 in megatron-core's buckets, the last "), std::string::npos) << megatron.out;
  EXPECT_NE(megatron.out.find("of it after the backward; chunk 1 in one, after its own backward\n"), std::string::npos)
      << megatron.out;
  EXPECT_NE(megatron.out.find("    stage 1: one collective per model chunk (2), each after its chunk's backward\n"),
            std::string::npos)
      << megatron.out;
  const Outcome zero_one = pipette("explain" + request + " --framework nanotron --fix tp=1,pp=1,dp=16,mbs=1,vpp=1,"
                                   "recompute=none,sp=off,distopt=on");
  ASSERT_EQ(zero_one.status, 0) << zero_one.err;
  EXPECT_NE(zero_one.out.find("  DP gradient reduction: after each stage's backward, not overlapped\n"), std::string::npos)
      << zero_one.out;
}

// `explain` names the GPU pair each group inside a node talks over and, where no one measured it,
// the prior it came from: on a JUWELS-like login-node site (4 A100s, every pair wired) a tp 4 plan
// over 8 nodes prices its TP ring at 3 x the 80 GB/s pair (4 links x 25 GB/s nominal x 0.8 attained,
// NCCL's channels over every link: communication.cpp). Before, a plan with node pairs of its own
// printed only "NVLink / intra-node matrix" and never said where the 80 GB/s came from.
TEST_F(PipetteCli, ExplainNamesTheGpuPairsInsideNodesAndWhereTheirFiguresCameFrom) {
  const std::string site = path("site.yaml");
  std::ofstream(site) << "gpu: A100-40GB\npriors:\n  rails: 4\n";
  const Outcome run = pipette("explain --site '" + site + "' --model llama2-13b --num-nodes 8 --gpus-per-node 4 "
                              "--global-batch 256 --seq 4096 --top 1 --fix tp=4,pp=2,dp=4");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* row : {"TP group of stage 0  node001: GPUs 0 - 1  80.0 GB/s, 3.0 µs, ASSUMED; its ring runs over 3 links "
                          "at once: 240.0 GB/s",
                          "TP group of stage 1  node005: GPUs 0 - 1",
                          "pipeline hop 0 -> 1  node001 - node005    80.0 GB/s, 10.0 µs, ASSUMED",
                          "assumed: GPU pairs inside 8 of 8 nodes: A100-40GB is an SXM module",
                          "every pair has NVLinks of its own"}) {
    EXPECT_NE(run.out.find(row), std::string::npos) << row << "\n" << run.out;
  }
  EXPECT_EQ(run.out.find("NVLink / intra-node matrix"), std::string::npos) << run.out;
  // The plan's JSON carries the same line: the links it uses that nobody measured.
  const Outcome json = pipette("plan --site '" + site + "' --model llama2-13b --num-nodes 8 --gpus-per-node 4 "
                               "--global-batch 256 --seq 4096 --top 1 --json --fix tp=4,pp=2,dp=4");
  ASSERT_EQ(json.status, 0) << json.err;
  const YAML::Node assumed = parse_json(json.out)["plans"][0]["links_assumed"];
  ASSERT_TRUE(assumed.IsSequence());
  EXPECT_NE(assumed[assumed.size() - 1].as<std::string>().find("GPU pairs inside 8 of 8 nodes"), std::string::npos);
  // The bundled example measured its nodes inside: no such line, and the rows say "measured".
  const Outcome measured = pipette("explain --model llama3-70b --num-nodes 4 --global-batch 64 --seq 4096 --top 1");
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_NE(measured.out.find("TP group of stage 0  gpu"), std::string::npos) << measured.out;
  EXPECT_EQ(measured.out.find("GPU pairs inside"), std::string::npos) << measured.out;
}

// `pipette calibrate` on the sample Megatron-LM log and table (tests/data/run-records/), then
// `explain` with the calibration the site file names beside the built-in constants.
TEST_F(PipetteCli, CalibrateWritesTheSiteCalibrationAndExplainShowsBoth) {
  const std::string site = path("site.yaml");
  std::ofstream(site) << "gpu: H100-SXM\npriors:\n  nic_gbit_per_s: 400\n  rails: 8\ncalibration:\n  file: calibration.yaml\n";
  const std::string data = PIPETTE_SOURCE_DIR "/tests/data/run-records/";
  const std::string records = "'" + data + "megatron_llama3_8b_2nodes.log' '" + data + "runs.csv'";
  const Outcome dry = pipette("calibrate --site '" + site + "' --model llama3-8b --num-nodes 2 --dry-run " + records);
  ASSERT_EQ(dry.status, 0) << dry.err;
  EXPECT_FALSE(std::filesystem::exists(path("calibration.yaml")));
  EXPECT_NE(dry.out.find("calibration of megatron-core on H100-SXM from 4 record(s)"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("activation_memory_factor"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("leave-one-out"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("megatron_llama3_8b_2nodes.log:2  max reserved"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("warning: " + data + "runs.csv:3: out of memory with no memory report"), std::string::npos) << dry.out;

  const Outcome wrote = pipette("calibrate --site '" + site + "' --model llama3-8b --num-nodes 2 " + records);
  ASSERT_EQ(wrote.status, 0) << wrote.err;
  EXPECT_NE(read_file(path("calibration.yaml")).find("pipette_calibration: 1"), std::string::npos);

  // mbs=1 at 2,048 tokens fits under both constant sets; a plan the search fills to capacity under
  // the calibration may not fit under the built-in ones, and explain then says so instead.
  const Outcome explained =
      pipette("explain --site '" + site + "' --model llama3-8b --num-nodes 2 --global-batch 128 --seq 2048 --fix mbs=1");
  ASSERT_EQ(explained.status, 0) << explained.err;
  EXPECT_NE(explained.out.find("calibration: megatron-core on H100-SXM, 4 record(s)"), std::string::npos) << explained.out;
  EXPECT_NE(explained.out.find("built-in  calibrated  change"), std::string::npos) << explained.out;
  EXPECT_NE(explained.out.find("inside the calibrated range"), std::string::npos) << explained.out;
  const Outcome far = pipette("explain --site '" + site + "' --model llama3-8b --num-nodes 16 --global-batch 256 --seq 4096");
  ASSERT_EQ(far.status, 0) << far.err;
  EXPECT_NE(far.out.find("outside the calibrated range (extrapolated): 16 nodes (calibrated on 1-8)"), std::string::npos)
      << far.out;

  // A record whose layout does not match its model is one line naming it; nothing is written.
  const std::string before = read_file(path("calibration.yaml"));
  expect_one_line_error(pipette("calibrate --site '" + site + "' --model llama3-70b --num-nodes 2 '" + data +
                                "megatron_llama3_8b_2nodes.log'"),
                        1, "megatron_llama3_8b_2nodes.log:2: the log's num_layers is 32 but model llama3-70b has 80");
  EXPECT_EQ(read_file(path("calibration.yaml")), before);
  expect_one_line_error(pipette("calibrate --site '" + site + "'"), 1, "no run records");
}

// An MoE run without its expert groups is refused in one line, not priced as ep=1: a table gives
// them in its ep and etp columns, a log's --layout; --engine gives the switches a log does not state.
TEST_F(PipetteCli, CalibrateAnMoeRunWithItsExpertGroups) {
  const std::string site = path("site.yaml");
  std::ofstream(site) << "gpu: H100-SXM\npriors:\n  nic_gbit_per_s: 400\n  rails: 8\n";
  const std::string header = "model,nodes,gpu,framework,precision,tp,pp,dp,vpp,mbs,global_batch,seq,distopt,iteration_seconds,status";
  const std::string row = "qwen3-30b-a3b,2,H100-SXM,nemo,fp8,1,1,16,1,1,1024,4096,on,";
  std::ofstream(path("moe.csv")) << header << "\n" << row << "29.7,ok\n" << row << "29.9,ok\n";
  expect_one_line_error(pipette("calibrate --site '" + site + "' --dry-run '" + path("moe.csv") + "'"), 1,
                        "moe.csv:2: qwen3-30b-a3b has experts but the record does not say its expert groups");
  std::ofstream(path("moe-ep.csv")) << header << ",ep,etp\n" << row << "29.7,ok,16,1\n" << row << "29.9,ok,16,1\n";
  const Outcome table = pipette("calibrate --site '" + site + "' --dry-run '" + path("moe-ep.csv") + "'");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("calibration of nemo on H100-SXM from 2 record(s)"), std::string::npos) << table.out;

  // A Megatron log whose arguments do not name the experts (the sample's, at Qwen3-30B-A3B's size).
  std::string log = read_file(PIPETTE_SOURCE_DIR "/tests/data/run-records/megatron_llama3_8b_2nodes.log");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"num_layers ...................................... 32",
                                                                     "num_layers ...................................... 48"},
                                 {"hidden_size ..................................... 4096", "hidden_size ..................................... 2048"}}) {
    ASSERT_NE(log.find(from), std::string::npos) << from;
    log.replace(log.find(from), from.size(), to);
  }
  std::ofstream(path("moe.log")) << log;
  const std::string calibrate_log = "calibrate --site '" + site + "' --dry-run --model qwen3-30b-a3b --num-nodes 2 ";
  expect_one_line_error(pipette(calibrate_log + "'" + path("moe.log") + "'"), 1,
                        "moe.log:2: qwen3-30b-a3b has experts but the record does not say its expert groups");
  const Outcome logged = pipette(calibrate_log + "--layout ep=4,etp=2 --engine dp-overlap=off '" + path("moe.log") + "' '" +
                                 path("moe.log") + "'");
  ASSERT_EQ(logged.status, 0) << logged.err;
  EXPECT_NE(logged.out.find("calibration of megatron-core on H100-SXM from 2 record(s)"), std::string::npos) << logged.out;
  expect_one_line_error(pipette(calibrate_log + "--layout ep=4,etp=2 --engine dp-overlap=maybe '" + path("moe.log") + "'"), 1,
                        "pipette calibrate: engine: \"dp-overlap=maybe\": dp-overlap must be on or off");
  // A switch misspelt is refused before any record is read, a table's too (the flags describe logs).
  expect_one_line_error(pipette("calibrate --site '" + site + "' --dry-run --engine precision=fp7 '" + path("moe-ep.csv") + "'"), 1,
                        "pipette calibrate: engine: \"precision=fp7\": precision must be");
}

}  // namespace

// `--json` carries every variable the plugin would export for the plan (core's plan_variables,
// which the plugin's step environment is), for the framework asked for.
// --engine and --precision over the site's defaults.engine: plan --json and explain say each
// switch and where it came from, and the export follows it.
TEST_F(PipetteCli, EngineSwitchesShowTheirSourceAndReachTheExport) {
  const Outcome plan = pipette("plan --model llama3-70b --top 1 --json --engine dp-overlap=off,tp-comm-overlap=on --precision bf16");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const YAML::Node json = parse_json(plan.out);
  const YAML::Node engine = json["training"]["engine"];
  EXPECT_EQ(engine["dp-overlap"]["value"].as<std::string>(), "off");
  EXPECT_EQ(engine["dp-overlap"]["source"].as<std::string>(), "job");
  EXPECT_EQ(engine["tp-comm-overlap"]["source"].as<std::string>(), "job");
  EXPECT_EQ(engine["precision"]["source"].as<std::string>(), "job");
  EXPECT_EQ(engine["attention"]["source"].as<std::string>(), "stack default");
  EXPECT_EQ(engine["tp-recompute-allgather"]["value"].as<std::string>(), "on");
  const YAML::Node chosen = json["plans"][0];
  const std::string args = chosen["environment"]["PIPETTE_MEGATRON_ARGS"].as<std::string>();
  EXPECT_EQ(args.find("--overlap-grad-reduce"), std::string::npos) << args;
  EXPECT_EQ(args.find("--tp-comm-overlap") != std::string::npos, chosen["tp"].as<int>() > 1) << args;
  // Megatron-LM's loss is unfused unless told; Megatron-Bridge's fused unless told.
  EXPECT_EQ(engine["ce-fusion"]["value"].as<std::string>(), "off");
  EXPECT_EQ(args.find("--cross-entropy-loss-fusion"), std::string::npos) << args;
  const Outcome fused = pipette("plan --model llama3-70b --top 1 --json --engine ce-fusion=on");
  ASSERT_EQ(fused.status, 0) << fused.err;
  const YAML::Node fused_json = parse_json(fused.out);
  EXPECT_NE(fused_json["plans"][0]["environment"]["PIPETTE_MEGATRON_ARGS"].as<std::string>().find(" --cross-entropy-loss-fusion"),
            std::string::npos);
  // The fused loss moves less: priced faster than the default's plan.
  const Outcome unfused = pipette("plan --model llama3-70b --top 1 --json");
  ASSERT_EQ(unfused.status, 0) << unfused.err;
  EXPECT_LT(fused_json["plans"][0]["iteration_seconds"].as<double>(),
            parse_json(unfused.out)["plans"][0]["iteration_seconds"].as<double>());
  const Outcome nemo = pipette("plan --model llama3-70b --top 1 --json --framework nemo --engine ce-fusion=off");
  ASSERT_EQ(nemo.status, 0) << nemo.err;
  EXPECT_NE(parse_json(nemo.out)["plans"][0]["environment"]["PIPETTE_NEMO_OVERRIDES"].as<std::string>().find(
                "model.cross_entropy_loss_fusion=false"),
            std::string::npos);

  const Outcome explain = pipette(planning("explain") + " --top 1 --framework nanotron --engine tp-recompute-allgather=on");
  ASSERT_EQ(explain.status, 0) << explain.err;
  EXPECT_NE(explain.out.find("tp-recompute-allgather  on     job"), std::string::npos) << explain.out;
  EXPECT_NE(explain.out.find("tp-overlap              off    stack default"), std::string::npos) << explain.out;
  // nanotron's ZeRO-1 reduces after the backward whatever dp-overlap says (ShardedOptimizerCollectives).
  EXPECT_NE(explain.out.find("gradient reduction overlapped without ZeRO-1 (with it, after the backward)"), std::string::npos)
      << explain.out;

  expect_one_line_error(pipette(planning("plan") + " --engine tp-recompute-allgather=off"), 1,
                        "engine tp-recompute-allgather=off (job) cannot run on megatron-core");
  expect_one_line_error(pipette(planning("plan") + " --engine dp-overlap=maybe"), 1,
                        "engine: \"dp-overlap=maybe\": dp-overlap must be on or off");
  expect_one_line_error(pipette(planning("simulate") + " --precision fp9"), 1, "precision must be fp32, fp16, bf16 or fp8");
}

// The bundled example's GPU pairs are measured (a ring's rate), so its H100 nodes run all-reduces
// with NVLink SHARP at 2 x 0.85 x 15/16 of that (NCCL @5067397c src/graph/tuning.cc l.138-144,
// 307-318) unless the job turns NCCL_NVLS_ENABLE off: TP without sequence parallelism all-reduces,
// with it all-gathers and reduce-scatters, which keep the ring.
TEST_F(PipetteCli, NvlinkSharpSpeedsUpTheAllReducesOfAMeasuredNode) {
  const auto tp_seconds = [&](const std::string& sp, const std::string& engine) {
    const Outcome plan = pipette(
        "plan --json --top 1 --model llama3-8b --num-nodes 1 --global-batch 32 --seq 4096 --fix "
        "tp=8,pp=1,dp=1,mbs=1,vpp=1,recompute=none,distopt=off,sp=" + sp + engine);
    EXPECT_EQ(plan.status, 0) << plan.err;
    return parse_json(plan.out)["plans"][0]["time"]["tp_communication_seconds"].as<double>();
  };
  const double on = tp_seconds("off", ""), off = tp_seconds("off", " --engine nvls=off");
  // The bandwidth term shrinks 1.59 times, the latency term does not (1.41 times in all here).
  EXPECT_GT(off / on, 1.3);
  EXPECT_LT(off / on, 2 * 0.85 * 15 / 16);
  EXPECT_DOUBLE_EQ(tp_seconds("on", ""), tp_seconds("on", " --engine nvls=off"));
  const Outcome explain = pipette("explain --top 1 --model llama3-8b --num-nodes 1 --global-batch 32 --seq 4096 --framework nemo");
  ASSERT_EQ(explain.status, 0) << explain.err;
  EXPECT_NE(explain.out.find("nvls                    off    stack default"), std::string::npos) << explain.out;
}

// nanotron's own default engine, afab, asked for by the engine's pp-schedule: the plan holds every
// micro-batch (the loss rank each one's softmax too), the export asks nanotron for it, and any other
// stack refuses it in one line.
TEST_F(PipetteCli, NanotronAfabIsPricedAndExported) {
  const std::string layout =
      "plan --json --top 1 --model llama3-8b --num-nodes 2 --global-batch 64 --seq 4096 --framework nanotron "
      "--fix tp=2,pp=2,dp=4,mbs=1,vpp=1,recompute=full,sp=on,distopt=off";
  const Outcome one_f_one_b = pipette(layout);
  const Outcome afab = pipette(layout + " --engine pp-schedule=afab");
  ASSERT_EQ(one_f_one_b.status, 0) << one_f_one_b.err;
  ASSERT_EQ(afab.status, 0) << afab.err;
  const YAML::Node before = parse_json(one_f_one_b.out), after = parse_json(afab.out);
  EXPECT_EQ(before["training"]["engine"]["pp-schedule"]["value"].as<std::string>(), "1f1b");
  EXPECT_EQ(after["training"]["engine"]["pp-schedule"]["value"].as<std::string>(), "afab");
  EXPECT_EQ(after["training"]["engine"]["pp-schedule"]["source"].as<std::string>(), "job");
  // 16 micro-batches per replica. Stage 0 (nanotron's partition: 18 layers) holds 16 instead of 2,
  // each its layers' inputs under full recompute (4096 tokens x h 4096, 16-bit, split by sequence
  // parallelism over tp 2); the loss stage keeps 15 more fp32 softmaxes of the 128256/2 vocabulary
  // shard and final-norm inputs and outputs.
  const YAML::Node stages_before = before["plans"][0]["memory_per_stage"], stages_after = after["plans"][0]["memory_per_stage"];
  const double layer_input = 4096.0 * 4096 * 2 / 2;
  EXPECT_NEAR(stages_after[0]["activations_bytes"].as<double>() - stages_before[0]["activations_bytes"].as<double>(),
              14 * 18 * layer_input, 1e-6 * 14 * 18 * layer_input);
  const double kept_at_loss = 4096.0 * 128256 / 2 * 4 + 2 * layer_input;
  EXPECT_NEAR(stages_after[1]["logits_and_loss_bytes"].as<double>() - stages_before[1]["logits_and_loss_bytes"].as<double>(),
              15 * kept_at_loss, 1e-6 * 15 * kept_at_loss);
  const std::string overrides = after["plans"][0]["environment"]["PIPETTE_NANOTRON_OVERRIDES"].as<std::string>();
  EXPECT_NE(overrides.find("parallelism.pp_engine=afab"), std::string::npos) << overrides;
  EXPECT_NE(before["plans"][0]["environment"]["PIPETTE_NANOTRON_OVERRIDES"].as<std::string>().find("pp_engine=1f1b"),
            std::string::npos);
  const Outcome shown = pipette("explain --top 1 --model llama3-8b --num-nodes 2 --global-batch 64 --seq 4096 "
                                "--framework nanotron --engine pp-schedule=afab");
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("all forward then all backward (nanotron afab: every micro-batch held)"), std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("pp-schedule             afab   job"), std::string::npos) << shown.out;
  expect_one_line_error(pipette(planning("plan") + " --engine pp-schedule=afab"), 1,
                        "engine pp-schedule=afab (job) cannot run on megatron-core: afab (all forward, then all backward) "
                        "is nanotron's parallelism.pp_engine");
}

// explain says how a stack other than the reference one was priced: its code, mechanism by
// mechanism, and what is assumed; the reference stacks (the fitted constants) print no such block.
TEST_F(PipetteCli, ExplainSaysHowEachOtherStackWasPriced) {
  for (const char* framework : {"torchtitan", "megatron-deepspeed", "nanotron", "deepspeed"}) {
    const Outcome explain =
        pipette("explain --model llama3-8b --num-nodes 1 --global-batch 64 --seq 4096 --top 1 --framework " +
                std::string(framework));
    ASSERT_EQ(explain.status, 0) << framework << ": " << explain.err;
    EXPECT_NE(explain.out.find(std::string("stack: ") + framework + " (priced by mechanism"), std::string::npos)
        << explain.out;
    EXPECT_NE(explain.out.find("  assumption: "), std::string::npos) << explain.out;
  }
  const Outcome torchtitan =
      pipette("explain --model llama3-8b --num-nodes 1 --global-batch 64 --seq 4096 --top 1 --framework torchtitan");
  EXPECT_NE(torchtitan.out.find("models/common/feed_forward.py l.53-54"), std::string::npos) << torchtitan.out;
  EXPECT_NE(torchtitan.out.find("tp-overlap              off    stack default"), std::string::npos) << torchtitan.out;
  for (const char* framework : {"megatron-core", "nemo"}) {
    const Outcome explain =
        pipette("explain --model llama3-8b --num-nodes 1 --global-batch 64 --seq 4096 --top 1 --framework " +
                std::string(framework));
    ASSERT_EQ(explain.status, 0) << framework << ": " << explain.err;
    EXPECT_EQ(explain.out.find("stack: "), std::string::npos) << explain.out;
  }
}

TEST_F(PipetteCli, PlanJsonCarriesThePluginsEnvironmentForTheFramework) {
  const Outcome megatron = pipette("plan --model llama3-70b --top 1 --json");
  ASSERT_EQ(megatron.status, 0) << megatron.err;
  const YAML::Node json = parse_json(megatron.out);
  EXPECT_EQ(json["training"]["framework"].as<std::string>(), "megatron-core");
  const YAML::Node plan = json["plans"][0];
  const YAML::Node environment = plan["environment"];
  EXPECT_EQ(environment["PIPETTE_STATUS"].as<std::string>(), "ok");
  EXPECT_EQ(environment["PIPETTE_TP"].as<int>(), plan["tp"].as<int>());
  EXPECT_EQ(environment["PIPETTE_PLAN_HASH"].as<std::string>(), plan["plan_hash"].as<std::string>());
  const std::string args = environment["PIPETTE_MEGATRON_ARGS"].as<std::string>();
  EXPECT_NE(args.find("--tensor-model-parallel-size " + std::to_string(plan["tp"].as<int>())), std::string::npos) << args;
  EXPECT_NE(args.find("--overlap-grad-reduce"), std::string::npos) << args;
  if (plan["tp"].as<int>() > 1) {
    EXPECT_EQ(environment["CUDA_DEVICE_MAX_CONNECTIONS"].as<std::string>(), "1");
  }
  EXPECT_FALSE(environment["PIPETTE_TORCHTITAN_ARGS"]);
  int ranks = 0;
  std::stringstream order(environment["PIPETTE_RANK_ORDER"].as<std::string>());
  for (std::string rank; std::getline(order, rank, ',');) ++ranks;
  EXPECT_EQ(ranks, 128);

  const Outcome titan = pipette("plan --model llama3-70b --top 1 --framework torchtitan --json");
  ASSERT_EQ(titan.status, 0) << titan.err;
  const YAML::Node titan_plan = parse_json(titan.out)["plans"][0];
  EXPECT_FALSE(titan_plan["distributed_optimizer"].as<bool>());
  EXPECT_NE(titan_plan["environment"]["PIPETTE_TORCHTITAN_ARGS"].as<std::string>().find("--parallelism.tensor_parallel_degree"),
            std::string::npos);
  EXPECT_FALSE(titan_plan["environment"]["PIPETTE_MEGATRON_ARGS"]);

  const Outcome unknown = pipette("plan --model llama3-70b --framework colossalai");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("unknown framework 'colossalai'"), std::string::npos) << unknown.err;
}
