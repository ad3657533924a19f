// Issue 17: the MoE presets count what their model cards publish, and bad MoE keys get one line.
#include <gtest/gtest.h>

#include "pipette/topology/model_file.hpp"

namespace pipette {
namespace {

const std::vector<std::string> source_presets = {std::string(PIPETTE_SOURCE_DIR) + "/etc/models"};

ModelSpec preset(const char* name) {
  const Result<ModelSpec> model = load_model(name, source_presets);
  EXPECT_TRUE(model.ok()) << name << ": " << (model ? "" : model.error().message);
  return model ? *model : ModelSpec{};
}

// Published totals and active counts (model cards, cited in each preset file), to the digit they
// are published with; the exact counts are ours, computed from config.json.
TEST(MoePresets, TotalAndActiveParametersAreThePublishedOnes) {
  struct Case {
    const char* name;
    double total_billions;
    double active_billions;  // < 0: not published
    double tolerance_billions;
  };
  const Case cases[] = {
      {"mixtral-8x7b", 46.7, 12.9, 0.05},     // arXiv 2401.04088: 46.7B, 12.9B active
      {"mixtral-8x22b", 141, 39, 0.5},        // mistral.ai: 141B, 39B active
      {"qwen3-30b-a3b", 30.5, 3.3, 0.06},     // model card: 30.5B, 3.3B activated (3.35, rounded down there)
      {"qwen3-235b-a22b", 235, 22, 0.5},      // model card: 235B, 22B activated
  };
  for (const Case& c : cases) {
    const ModelSpec model = preset(c.name);
    EXPECT_NEAR(total_parameters(model) / 1e9, c.total_billions, c.tolerance_billions) << c.name;
    EXPECT_NEAR(active_parameters(model) / 1e9, c.active_billions, c.tolerance_billions) << c.name;
    EXPECT_LT(active_parameters(model), total_parameters(model)) << c.name;
  }
  // Exact, from config.json by hand (per layer: attention, q/k norms, experts, router, norms).
  EXPECT_EQ(total_parameters(preset("mixtral-8x7b")), 46'702'792'704);
  EXPECT_EQ(total_parameters(preset("qwen3-30b-a3b")), 30'532'122'624);
  EXPECT_EQ(active_parameters(preset("qwen3-30b-a3b")), 3'353'032'704);
  EXPECT_EQ(total_parameters(preset("qwen3-235b-a22b")), 235'093'634'560);
  // GPT-OSS-120B (arXiv 2508.10925 Table 1): 116.83B total, 5.13B active without the input
  // embedding; biases on attention, experts and router, one sink per head.
  const ModelSpec oss = preset("gpt-oss-120b");
  EXPECT_EQ(total_parameters(oss), 116'829'156'672);
  EXPECT_NEAR((active_parameters(oss) - embedding_parameters(oss)) / 1e9, 5.13, 0.005);
}

// DeepSeek-V3 (arXiv 2412.19437: 671B total, 37B activated per token, without the MTP module).
// By hand from config_671B.json: MLA 187,107,328 per layer (h·1536 + 1536·128·192 + h·576 +
// 512·128·256 + 128·128·h + the two latent norms 1536 + 512), 3 dense layers, 58 MoE layers of 256
// routed + 1 shared expert of 3·h·2048, router h·256, two untied 129280 x h tables.
TEST(MoePresets, DeepSeekV3CountsThePublishedParameters) {
  const ModelSpec model = preset("deepseek-v3");
  ASSERT_TRUE(model.is_mla());
  EXPECT_EQ(attention_weight_elements(model).replicated, 7168LL * (1536 + 512 + 64));
  EXPECT_EQ(total_parameters(model), 671'026'404'352);
  EXPECT_EQ(active_parameters(model), 37'552'282'624);
  EXPECT_NEAR(total_parameters(model) / 1e9, 671, 0.5);
  EXPECT_NEAR(active_parameters(model) / 1e9, 37, 0.6);
  EXPECT_EQ(parameters_of_layer(model, 0) - parameters_of_layer(model, 3),
            3LL * 7168 * 18432 - (7168LL * 256 + 257LL * 3 * 7168 * 2048));
}

TEST(MoePresets, BadMlaKeysNameTheFieldAndFix) {
  const std::string base = "num_layers: 4\nhidden_size: 256\nnum_attention_heads: 4\nvocab_size: 1000\n";
  const auto error_of = [&](const std::string& extra) {
    const Result<ModelSpec> model = parse_model_file(base + extra, "m.yaml");
    return model ? std::string() : model.error().message;
  };
  const std::string mla = "kv_lora_rank: 64\nqk_head_dim: 32\nqk_pos_emb_head_dim: 16\nv_head_dim: 32\n";
  EXPECT_EQ(error_of(mla), "");
  EXPECT_EQ(error_of(mla + "q_lora_rank: 96\n"), "");
  EXPECT_EQ(error_of("kv_lora_rank: 64\nqk_head_dim: 32\nv_head_dim: 32\n"),
            "m.yaml: missing key 'qk_pos_emb_head_dim'; multi-latent attention (kv_lora_rank) needs it (a positive integer)");
  EXPECT_EQ(error_of("q_lora_rank: 96\n"),
            "m.yaml: q_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim are multi-latent attention's: they "
            "need kv_lora_rank > 0");
  EXPECT_EQ(error_of("kv_lora_rank: 0\n"), "m.yaml:5: key 'kv_lora_rank' must be an integer from 1 to 131072 (got 0)");
  EXPECT_EQ(error_of(mla + "q_lora_rank: -1\n"),
            "m.yaml:9: key 'q_lora_rank' must be an integer from 0 to 131072 (got -1)");
  EXPECT_EQ(error_of(mla + "num_kv_heads: 2\n"),
            "m.yaml: num_kv_heads must equal num_attention_heads with multi-latent attention (every head has its own K "
            "and V)");
  EXPECT_EQ(error_of(mla + "kv_channels: 64\n"),
            "m.yaml: kv_channels does not apply with multi-latent attention (qk_head_dim, v_head_dim set the head widths)");
  EXPECT_EQ(error_of(mla + "learned_position_embeddings: 512\n"),
            "m.yaml: learned_position_embeddings must be 0 with multi-latent attention (it applies RoPE to "
            "qk_pos_emb_head_dim)");
}

TEST(MoePresets, BadMoeKeysNameTheFileLineAndFix) {
  const std::string base =
      "num_layers: 4\nhidden_size: 256\nnum_attention_heads: 4\nvocab_size: 1000\nffn_kind: swiglu\n"
      "ffn_hidden_size: 512\n";
  const auto error_of = [&](const std::string& extra) {
    const Result<ModelSpec> model = parse_model_file(base + extra, "m.yaml");
    return model ? std::string() : model.error().message;
  };
  EXPECT_EQ(error_of("num_experts: 8\nmoe_ffn_hidden_size: 128\n"),
            "m.yaml: missing key 'router_topk'; a model with num_experts needs it (a positive integer)");
  EXPECT_EQ(error_of("num_experts: 8\nrouter_topk: 9\nmoe_ffn_hidden_size: 128\n"),
            "m.yaml: router_topk must be from 1 to num_experts (8)");
  EXPECT_EQ(error_of("num_experts: 0\n"), "m.yaml:7: key 'num_experts' must be an integer from 1 to 4096 (got 0)");
  EXPECT_EQ(error_of("router_topk: 2\n"),
            "m.yaml: router_topk, moe_ffn_hidden_size, shared_expert_ffn_hidden_size and first_dense_layers need "
            "num_experts > 0");
  EXPECT_EQ(error_of("num_experts: 8\nrouter_topk: 2\nmoe_ffn_hidden_size: 128\nfirst_dense_layers: 4\n"),
            "m.yaml: first_dense_layers must be from 0 to num_layers - 1 (3)");
  EXPECT_EQ(error_of("num_experts: 8\nrouter_topk: 2\nmoe_ffn_hidden_size: 128\nrouter_load_balancing: loss\n"),
            "m.yaml:10: key 'router_load_balancing' must be aux_loss or seq_aux_loss or global_aux_loss or sinkhorn or "
            "none (got 'loss')");
  EXPECT_EQ(error_of("num_experts: 8\nrouter_topk: 2\nmoe_ffn_hidden_size: 128\n"), "");
}

// A leading dense layer counts the dense MLP, the rest the router and experts.
TEST(MoePresets, DenseLeadingLayersCountTheDenseMlp) {
  const std::string text =
      "num_layers: 4\nhidden_size: 256\nnum_attention_heads: 4\nvocab_size: 1000\nffn_kind: swiglu\n"
      "ffn_hidden_size: 512\nlinear_bias: false\nnorm_kind: rmsnorm\nnum_experts: 8\nrouter_topk: 2\n"
      "moe_ffn_hidden_size: 128\nshared_expert_ffn_hidden_size: 64\nfirst_dense_layers: 1\n";
  const ModelSpec model = *parse_model_file(text, "m.yaml");
  const std::int64_t attention_and_norms = 4 * 256 * 256 + 2 * 256;
  EXPECT_EQ(parameters_of_layer(model, 0), attention_and_norms + 3 * 256 * 512);
  EXPECT_EQ(parameters_of_layer(model, 1), attention_and_norms + 256 * 8 + 3 * 256 * 64 + 8 * 3 * 256 * 128);
  EXPECT_EQ(total_parameters(model), parameters_of_layer(model, 0) + 3 * parameters_of_layer(model, 1) +
                                         2 * 1000 * 256 + 256);
  EXPECT_EQ(total_parameters(model) - active_parameters(model), 3 * 6 * 3 * 256 * 128);
}

}  // namespace
}  // namespace pipette
