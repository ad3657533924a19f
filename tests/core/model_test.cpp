#include "pipette/core/model.hpp"

#include <gtest/gtest.h>

#include "test_models.hpp"

namespace pipette {
namespace {

ModelSpec gpt3_175b() {
  ModelSpec model = testing::gpt_like(96, 12288, 96, 50257);
  model.name = "gpt3-175b";
  model.learned_position_embeddings = 2048;
  return model;
}

TEST(ModelParameters, Gpt3PerLayerIs12hSquaredPlus13h) {
  const std::int64_t h = 12288;
  EXPECT_EQ(parameters_per_layer(gpt3_175b()), 12 * h * h + 13 * h);
}

TEST(ModelParameters, Gpt3TotalWithinOnePercentOf175Billion) {
  EXPECT_NEAR(static_cast<double>(total_parameters(gpt3_175b())), 175e9, 0.01 * 175e9);
}

TEST(ModelParameters, GroupedQueryAttentionShrinksKeyValueProjections) {
  ModelSpec mha = gpt3_175b();
  ModelSpec gqa = mha;
  gqa.num_kv_heads = 8;
  const std::int64_t h = mha.hidden_size;
  const std::int64_t kv = gqa.kv_hidden_size();
  EXPECT_EQ(parameters_per_layer(mha) - parameters_per_layer(gqa), 2 * (h * h - h * kv) + 2 * (h - kv));
}

TEST(ModelValidation, RejectsHeadsThatDoNotDivideHidden) {
  ModelSpec model = gpt3_175b();
  model.num_attention_heads = 95;
  model.num_kv_heads = 95;
  EXPECT_EQ(validate(model), "hidden_size 12288 is not divisible by num_attention_heads 95");
}

TEST(ModelValidation, AcceptsWellFormedModel) { EXPECT_EQ(validate(gpt3_175b()), ""); }

}  // namespace
}  // namespace pipette
