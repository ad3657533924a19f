#include "pipette/topology/model_file.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace pipette {

namespace {

namespace fs = std::filesystem;

std::string location(const std::string& path, const YAML::Node& node) {
  return path + ":" + std::to_string(node.Mark().line + 1);
}

Error key_error(const std::string& path, const YAML::Node& node, const std::string& key, const std::string& problem) {
  return Error{location(path, node) + ": key '" + key + "' " + problem};
}

// One key's parser: reads the scalar into the model or returns the error text after "key 'x' ".
using KeyParser = std::function<std::string(const YAML::Node&, ModelSpec&)>;

// An integer from `minimum` to `maximum`.
KeyParser integer_in(int ModelSpec::*field, int minimum, int maximum) {
  const std::string expected = "must be an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  return [field, minimum, maximum, expected](const YAML::Node& value, ModelSpec& model) -> std::string {
    long long number = 0;
    try {
      number = value.as<long long>();
    } catch (const YAML::Exception&) {
      return expected + " (got '" + quoted_input(value.Scalar()) + "')";
    }
    if (number < minimum || number > maximum) return expected + " (got " + quoted_input(value.Scalar()) + ")";
    model.*field = static_cast<int>(number);
    return {};
  };
}

// What a model may be. A user's file decides how long planning takes on every node of the job
// (the search enumerates layer splits and interleavings, and memory and time grow with every
// size), so each size is bounded a margin above the largest models trained, not by what an int
// holds. The limits:
//  - layers ≤ 1024: 126 in Llama 3.1 405B, 128 in Megatron-LM's 1T configuration; DeepNet
//    (Wang et al. 2022) trained 1,000-layer Transformers, the deepest on record;
//  - hidden size ≤ 131072: 25600 in Megatron 1T, 20480 in MT-NLG 530B, 16384 in Llama 3.1 405B (5×);
//  - attention heads ≤ 2048 (and KV heads, which divide them): 160 in Megatron 1T, 128 in
//    Llama 3.1 405B (12×);
//  - MLP width ≤ 1048576: 102400 in Megatron 1T, 53248 in Llama 3.1 405B (10×);
//  - vocabulary ≤ 4194304: 262144 in Gemma 3, 256000 in PaLM (16×);
//  - learned positions ≤ 16777216, the longest sequence Pipette accepts (2^24 tokens: --pipette-seq, defaults.sequence_length).
constexpr int kMaxLayers = 1024;
constexpr int kMaxHiddenSize = 1 << 17;
constexpr int kMaxAttentionHeads = 2048;
constexpr int kMaxFfnHiddenSize = 1 << 20;
constexpr int kMaxVocabulary = 1 << 22;
constexpr int kMaxLearnedPositions = 1 << 24;
//  - head width (kv_channels) ≤ 4096: 256 in Gemma, 128 in Qwen3 and Llama (16×);
//  - routed experts ≤ 4096: 256 in DeepSeek-V3, 128 in Qwen3-235B-A22B and GPT-OSS (16×); their
//    width and the shared experts' are MLP widths (≤ kMaxFfnHiddenSize); top-k ≤ the experts
//    (validate()); dense leading layers < the layers (validate()).
constexpr int kMaxHeadWidth = 4096;
constexpr int kMaxExperts = 4096;
//  - multi-latent attention's latents (q_lora_rank, kv_lora_rank) are projections of the hidden
//    state, bounded like it (1536 and 512 in DeepSeek-V3); its head parts (qk_head_dim,
//    qk_pos_emb_head_dim, v_head_dim: 128, 64, 128 there) are head widths (≤ kMaxHeadWidth).

KeyParser boolean(bool ModelSpec::*field) {
  return [field](const YAML::Node& value, ModelSpec& model) -> std::string {
    try {
      model.*field = value.as<bool>();
    } catch (const YAML::Exception&) {
      return "must be true or false (got '" + value.Scalar() + "')";
    }
    return {};
  };
}

template <typename Enum>
KeyParser choice(Enum ModelSpec::*field, std::vector<std::pair<std::string, Enum>> choices) {
  return [field, choices](const YAML::Node& value, ModelSpec& model) -> std::string {
    std::string allowed;
    for (const auto& [text, option] : choices) {
      if (value.Scalar() == text) {
        model.*field = option;
        return {};
      }
      allowed += (allowed.empty() ? "" : " or ") + text;
    }
    return "must be " + allowed + " (got '" + value.Scalar() + "')";
  };
}

const std::map<std::string, KeyParser>& key_parsers() {
  static const std::map<std::string, KeyParser> parsers = {
      {"name",
       [](const YAML::Node& value, ModelSpec& model) -> std::string {
         if (value.Scalar().empty()) return "must be a non-empty name";
         model.name = value.Scalar();
         return {};
       }},
      {"num_layers", integer_in(&ModelSpec::num_layers, 1, kMaxLayers)},
      {"hidden_size", integer_in(&ModelSpec::hidden_size, 1, kMaxHiddenSize)},
      {"num_attention_heads", integer_in(&ModelSpec::num_attention_heads, 1, kMaxAttentionHeads)},
      {"num_kv_heads", integer_in(&ModelSpec::num_kv_heads, 1, kMaxAttentionHeads)},
      {"ffn_hidden_size", integer_in(&ModelSpec::ffn_hidden_size, 1, kMaxFfnHiddenSize)},
      {"ffn_kind", choice(&ModelSpec::ffn_kind, {{"gelu", FfnKind::gelu}, {"swiglu", FfnKind::swiglu}})},
      {"norm_kind", choice(&ModelSpec::norm_kind, {{"layernorm", NormKind::layernorm}, {"rmsnorm", NormKind::rmsnorm}})},
      {"vocab_size", integer_in(&ModelSpec::vocab_size, 1, kMaxVocabulary)},
      {"tied_embeddings", boolean(&ModelSpec::tied_embeddings)},
      {"linear_bias", boolean(&ModelSpec::linear_bias)},
      {"learned_position_embeddings", integer_in(&ModelSpec::learned_position_embeddings, 0, kMaxLearnedPositions)},
      {"dropout", boolean(&ModelSpec::dropout)},
      {"alibi", boolean(&ModelSpec::alibi)},
      {"embedding_norm", boolean(&ModelSpec::embedding_norm)},
      {"kv_channels", integer_in(&ModelSpec::kv_channels, 1, kMaxHeadWidth)},
      {"qk_layernorm", boolean(&ModelSpec::qk_layernorm)},
      {"attention_sink", boolean(&ModelSpec::attention_sink)},
      {"num_experts", integer_in(&ModelSpec::num_experts, 1, kMaxExperts)},
      {"router_topk", integer_in(&ModelSpec::router_topk, 1, kMaxExperts)},
      {"moe_ffn_hidden_size", integer_in(&ModelSpec::moe_ffn_hidden_size, 1, kMaxFfnHiddenSize)},
      {"shared_expert_ffn_hidden_size", integer_in(&ModelSpec::shared_expert_ffn_hidden_size, 0, kMaxFfnHiddenSize)},
      {"first_dense_layers", integer_in(&ModelSpec::first_dense_layers, 0, kMaxLayers)},
      {"q_lora_rank", integer_in(&ModelSpec::q_lora_rank, 0, kMaxHiddenSize)},
      {"kv_lora_rank", integer_in(&ModelSpec::kv_lora_rank, 1, kMaxHiddenSize)},
      {"qk_head_dim", integer_in(&ModelSpec::qk_head_dim, 1, kMaxHeadWidth)},
      {"qk_pos_emb_head_dim", integer_in(&ModelSpec::qk_pos_emb_head_dim, 1, kMaxHeadWidth)},
      {"v_head_dim", integer_in(&ModelSpec::v_head_dim, 1, kMaxHeadWidth)},
      {"router_load_balancing",
       choice(&ModelSpec::router_load_balancing, {{"aux_loss", RouterLoadBalancing::aux_loss},
                                                  {"seq_aux_loss", RouterLoadBalancing::seq_aux_loss},
                                                  {"global_aux_loss", RouterLoadBalancing::global_aux_loss},
                                                  {"sinkhorn", RouterLoadBalancing::sinkhorn},
                                                  {"none", RouterLoadBalancing::none}})},
  };
  return parsers;
}

std::string allowed_keys() {
  std::string keys;
  for (const auto& [key, parser] : key_parsers()) keys += (keys.empty() ? "" : ", ") + key;
  return keys;
}

bool looks_like_path(std::string_view text) {
  const auto ends_with = [&](std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
  };
  return text.find('/') != std::string_view::npos || ends_with(".yaml") || ends_with(".yml");
}

}  // namespace

Result<ModelSpec> parse_model_file(std::string_view text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& error) {
    return Error{path + ":" + std::to_string(error.mark.line + 1) + ": not valid YAML (" + error.msg + ")"};
  }
  if (!root.IsMap()) return Error{path + ":1: a model file is a mapping of keys (" + allowed_keys() + ")"};

  ModelSpec model;
  model.name = fs::path(path).stem().string();
  bool has_kv_heads = false;
  bool has_ffn = false;
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const auto parser = key_parsers().find(key);
    if (parser == key_parsers().end()) {
      return key_error(path, entry.first, key, "is not a model-file key; allowed keys are " + allowed_keys());
    }
    if (!entry.second.IsScalar()) return key_error(path, entry.second, key, "must be a single value, not a list or map");
    const std::string problem = parser->second(entry.second, model);
    if (!problem.empty()) return key_error(path, entry.second, key, problem);
    seen.insert(key);
    has_kv_heads = has_kv_heads || key == "num_kv_heads";
    has_ffn = has_ffn || key == "ffn_hidden_size";
  }
  for (const char* required : {"num_layers", "hidden_size", "num_attention_heads", "vocab_size"}) {
    if (!seen.count(required)) return Error{path + ": missing key '" + required + "'; add it (a positive integer)"};
  }
  if (!has_kv_heads) model.num_kv_heads = model.num_attention_heads;
  if (!has_ffn) {
    if (model.ffn_kind == FfnKind::swiglu) {
      return Error{path + ": missing key 'ffn_hidden_size'; swiglu models have no default MLP width, add it"};
    }
    model.ffn_hidden_size = 4 * model.hidden_size;
  }
  if (model.is_moe()) {
    for (const char* required : {"router_topk", "moe_ffn_hidden_size"}) {
      if (!seen.count(required)) {
        return Error{path + ": missing key '" + required + "'; a model with num_experts needs it (a positive integer)"};
      }
    }
  }
  if (model.is_mla()) {
    for (const char* required : {"qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"}) {
      if (!seen.count(required)) {
        return Error{path + ": missing key '" + required +
                     "'; multi-latent attention (kv_lora_rank) needs it (a positive integer)"};
      }
    }
  }
  const std::string problem = validate(model);
  if (!problem.empty()) return Error{path + ": " + problem};
  return model;
}

Result<ModelSpec> load_model_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  if (file) contents << file.rdbuf();
  if (!file || file.bad()) return Error{quoted_input(path) + ": cannot read the model file; check the path and its permissions"};
  return parse_model_file(contents.str(), path);
}

std::vector<std::string> available_presets(const std::vector<std::string>& preset_dirs) {
  std::set<std::string> names;
  for (const std::string& dir : preset_dirs) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      if (entry.path().extension() == ".yaml") names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

Result<ModelSpec> load_model(std::string_view preset_or_path, const std::vector<std::string>& preset_dirs) {
  const std::string text(preset_or_path);
  std::error_code error;
  if (looks_like_path(text) || fs::is_regular_file(text, error)) return load_model_file(text);
  for (const std::string& dir : preset_dirs) {
    const fs::path candidate = fs::path(dir) / (text + ".yaml");
    if (fs::is_regular_file(candidate, error)) return load_model_file(candidate.string());
  }
  std::string names;
  for (const std::string& name : available_presets(preset_dirs)) names += (names.empty() ? "" : ", ") + name;
  return Error{"unknown model preset '" + quoted_input(text) + "'; available presets: " + (names.empty() ? "(none found)" : names) +
               "; or give the path of a model file"};
}

std::vector<std::string> default_model_dirs() {
  return {std::string(PIPETTE_SOURCE_ETC_DIR) + "/models", std::string(PIPETTE_INSTALLED_DATA_DIR) + "/models"};
}

}  // namespace pipette
