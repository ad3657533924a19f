#include <gtest/gtest.h>

#include "pipette/topology/job_planner.hpp"

namespace pipette {
namespace {

TEST(FixedKnobs, ParsesEveryKnob) {
  auto knobs = parse_fixed_knobs("tp=8,pp=4,dp=2,cp=4,mbs=1,vpp=2,recompute=selective,sp=on,distopt=off");
  ASSERT_TRUE(knobs.ok()) << knobs.error().message;
  EXPECT_EQ(knobs->tp, 8);
  EXPECT_EQ(knobs->pp, 4);
  EXPECT_EQ(knobs->dp, 2);
  EXPECT_EQ(knobs->cp, 4);
  EXPECT_EQ(knobs->micro_batch, 1);
  EXPECT_EQ(knobs->virtual_stages, 2);
  EXPECT_EQ(knobs->recompute, RecomputeMode::selective);
  EXPECT_EQ(knobs->sequence_parallel, true);
  EXPECT_EQ(knobs->distributed_optimizer, false);
  EXPECT_EQ(format_fixed_knobs(*knobs), "tp=8,pp=4,dp=2,cp=4,mbs=1,vpp=2,recompute=selective,sp=on,distopt=off");
}

TEST(FixedKnobs, EmptyFixesNothingAndSpacesAreIgnored) {
  auto none = parse_fixed_knobs("  ");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->tp);
  EXPECT_EQ(format_fixed_knobs(*none), "");
  auto spaced = parse_fixed_knobs(" tp = 4 , recompute=full ");
  ASSERT_TRUE(spaced.ok()) << spaced.error().message;
  EXPECT_EQ(format_fixed_knobs(*spaced), "tp=4,recompute=full");
}

TEST(FixedKnobs, FsdpIsAnOnOffKnob) {
  auto fsdp = parse_fixed_knobs("dp=8,fsdp=on,distopt=off");
  ASSERT_TRUE(fsdp.ok()) << fsdp.error().message;
  EXPECT_EQ(fsdp->fully_sharded, true);
  EXPECT_EQ(format_fixed_knobs(*fsdp), "dp=8,distopt=off,fsdp=on");
  EXPECT_EQ(parse_fixed_knobs("fsdp=off")->fully_sharded, false);
  const auto bad = parse_fixed_knobs("fsdp=2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("fsdp must be on or off"), std::string::npos) << bad.error().message;
  const auto unknown = parse_fixed_knobs("zero=3");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("distopt, fsdp"), std::string::npos) << unknown.error().message;
}

TEST(FixedKnobs, BlockRecomputeIsFullRecomputeOfNLayersPerChunk) {
  auto block = parse_fixed_knobs("tp=1,recompute=block:5");
  ASSERT_TRUE(block.ok()) << block.error().message;
  EXPECT_EQ(block->recompute, RecomputeMode::full);
  EXPECT_EQ(block->recomputed_layers_per_chunk, 5);
  EXPECT_EQ(format_fixed_knobs(*block), "tp=1,recompute=block:5");
  // recompute=full recomputes every layer: no count.
  auto full = parse_fixed_knobs("recompute=full");
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->recomputed_layers_per_chunk);
  EXPECT_EQ(format_fixed_knobs(*full), "recompute=full");
  // The same parser reads a plan record's and a run table's recompute value.
  const auto knob = parse_recompute_knob("block:12");
  ASSERT_TRUE(knob.ok());
  EXPECT_EQ(knob->mode, RecomputeMode::full);
  EXPECT_EQ(knob->recomputed_layers_per_chunk, 12);
  EXPECT_EQ(parse_recompute_knob("selective")->recomputed_layers_per_chunk, 0);
}

TEST(FixedKnobs, ErrorsNameTheBadItem) {
  const std::pair<const char*, const char*> cases[] = {
      {"tp=x", "\"tp=x\": tp needs a positive integer"},
      {"tp=0", "\"tp=0\": tp needs a positive integer"},
      {"cp=0", "\"cp=0\": cp needs a positive integer"},
      {"tp=8,pp=-1", "\"pp=-1\""},
      {"tp=8,tp=4", "\"tp=4\": tp is given twice"},
      {"tp=8,,pp=2", "empty item"},
      {"tp=8,", "empty item"},
      {"tensor=8", "unknown knob \"tensor\""},
      {"tp", "expected key=value"},
      {"recompute=some", "recompute must be none, selective, full or block:N"},
      {"recompute=block:0", "\"recompute=block:0\": recompute=block:N needs N, the layers recomputed per model chunk, to be a positive integer"},
      {"recompute=block:", "recompute=block:N needs N"},
      {"recompute=block:-2", "recompute=block:N needs N"},
      {"recompute=block:5x", "recompute=block:N needs N"},
      {"recompute=block", "recompute must be none, selective, full or block:N"},
      {"recompute=full:5", "recompute must be none, selective, full or block:N"},
      {"sp=yes", "sp must be on or off"},
      {"mbs=1.5", "\"mbs=1.5\": mbs needs a positive integer"},
      {"tp=99999999999", "tp needs a positive integer"},
  };
  for (const auto& [text, expected] : cases) {
    auto knobs = parse_fixed_knobs(text);
    ASSERT_FALSE(knobs.ok()) << text;
    EXPECT_NE(knobs.error().message.find(expected), std::string::npos) << knobs.error().message;
    EXPECT_EQ(knobs.error().message.rfind("--pipette-fix: ", 0), 0u);
  }
}

}  // namespace
}  // namespace pipette
