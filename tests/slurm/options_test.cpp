#include "options.hpp"

#include <gtest/gtest.h>

#include <map>

namespace pipette::spank {
namespace {

TEST(ParseOptionValue, BarePipetteMeansAuto) {
  EXPECT_EQ(parse_option_value(OptionId::mode, std::nullopt, "--pipette").canonical, "auto");
  // Slurm passes a bare option to remote callbacks as "" and forwards it as "(null)".
  EXPECT_EQ(parse_option_value(OptionId::mode, "", "--pipette").canonical, "auto");
  EXPECT_EQ(parse_option_value(OptionId::mode, "(null)", "--pipette").canonical, "auto");
  EXPECT_EQ(parse_option_value(OptionId::mode, "plan", "--pipette").canonical, "plan");
  EXPECT_EQ(parse_option_value(OptionId::mode, "off", "--pipette").canonical, "off");
}

TEST(ParseOptionValue, RejectsUnknownModeNamingTheSource) {
  const Parsed parsed = parse_option_value(OptionId::mode, "fast", "PIPETTE");
  EXPECT_EQ(parsed.error, "PIPETTE: invalid value 'fast' (expected auto, plan or off)");
}

TEST(ParseOptionValue, NumbersArePositiveDecimalsWithoutJunk) {
  EXPECT_EQ(parse_option_value(OptionId::global_batch, "512", "--pipette-batch").canonical, "512");
  for (const char* bad : {"0", "-4", "12k", "1e3", " 512", "+512", "99999999999999999999"}) {
    EXPECT_FALSE(parse_option_value(OptionId::global_batch, bad, "--pipette-batch").error.empty()) << bad;
  }
  EXPECT_FALSE(parse_option_value(OptionId::sequence_length, "4294967296", "--pipette-seq").error.empty());
  EXPECT_EQ(parse_option_value(OptionId::sequence_length, "4096", "--pipette-seq").canonical, "4096");
}

TEST(ParseOptionValue, ModelAndFixNeedAValue) {
  EXPECT_FALSE(parse_option_value(OptionId::model, "", "--pipette-model").error.empty());
  EXPECT_FALSE(parse_option_value(OptionId::model, "(null)", "--pipette-model").error.empty());
  EXPECT_FALSE(parse_option_value(OptionId::fix, "", "--pipette-fix").error.empty());
  EXPECT_EQ(parse_option_value(OptionId::model, "llama3-70b", "--pipette-model").canonical, "llama3-70b");
}

TEST(ParseOptionValue, FixedKnobsAreCheckedByThePlannersParserAndNameTheSource) {
  EXPECT_EQ(parse_option_value(OptionId::fix, "tp=8, mbs=1", "--pipette-fix").canonical, "tp=8, mbs=1");
  const Parsed parsed = parse_option_value(OptionId::fix, "tp=x", "PIPETTE_FIX");
  EXPECT_EQ(parsed.error.rfind("PIPETTE_FIX: \"tp=x\": ", 0), 0u) << parsed.error;
  EXPECT_FALSE(parse_option_value(OptionId::fix, "colour=blue", "--pipette-fix").error.empty());
  // recompute=block:N, refused at submission when N is not a positive count.
  EXPECT_EQ(parse_option_value(OptionId::fix, "recompute=block:5", "--pipette-fix").canonical, "recompute=block:5");
  const Parsed block = parse_option_value(OptionId::fix, "recompute=block:0", "--pipette-fix");
  EXPECT_EQ(block.error.rfind("--pipette-fix: \"recompute=block:0\": recompute=block:N needs N", 0), 0u) << block.error;
}

// --pipette-engine / PIPETTE_ENGINE and --pipette-precision / PIPETTE_PRECISION: checked by the
// planner's parser at submission, the error naming where the value came from.
TEST(ParseOptionValue, EngineAndPrecisionAreCheckedAtSubmissionAndNameTheSource) {
  EXPECT_EQ(parse_option_value(OptionId::engine, "dp-overlap=off,tp-comm-overlap=on", "--pipette-engine").canonical,
            "dp-overlap=off,tp-comm-overlap=on");
  EXPECT_EQ(parse_option_value(OptionId::engine, "tp-overlap=maybe", "PIPETTE_ENGINE").error,
            "PIPETTE_ENGINE: \"tp-overlap=maybe\": tp-overlap must be on or off (got \"maybe\")");
  EXPECT_NE(parse_option_value(OptionId::engine, "overlap=on", "--pipette-engine").error.find("--pipette-engine: \"overlap=on\": unknown key"),
            std::string::npos);
  EXPECT_FALSE(parse_option_value(OptionId::engine, "", "--pipette-engine").error.empty());
  for (const char* precision : {"fp32", "fp16", "bf16", "fp8"})
    EXPECT_EQ(parse_option_value(OptionId::precision, precision, "--pipette-precision").canonical, precision);
  EXPECT_EQ(parse_option_value(OptionId::precision, "fp4", "PIPETTE_PRECISION").error,
            "PIPETTE_PRECISION: invalid value 'fp4' (expected fp32, fp16, bf16 or fp8)");
  OptionValues cli, env;
  env[OptionId::engine] = "dp-overlap=off";
  env[OptionId::precision] = "fp16";
  cli[OptionId::precision] = "bf16";
  const Settings settings = merge(cli, env, {});
  EXPECT_EQ(settings.engine, "dp-overlap=off");
  EXPECT_EQ(settings.precision, "bf16");
  EXPECT_EQ(find_conflict(cli, env),
            "--pipette-precision=bf16 conflicts with PIPETTE_PRECISION=fp16 in the environment; unset PIPETTE_PRECISION "
            "or make them agree");
  EXPECT_EQ(info(OptionId::engine).env_var, std::string("PIPETTE_ENGINE"));
}

TEST(ParseOptionValue, StrictIsAFlagOrABooleanVariable) {
  EXPECT_EQ(parse_option_value(OptionId::strict, std::nullopt, "--pipette-strict").canonical, "1");
  EXPECT_EQ(parse_option_value(OptionId::strict, "yes", "PIPETTE_STRICT").canonical, "1");
  EXPECT_EQ(parse_option_value(OptionId::strict, "0", "PIPETTE_STRICT").canonical, "0");
  EXPECT_FALSE(parse_option_value(OptionId::strict, "maybe", "PIPETTE_STRICT").error.empty());
}

TEST(OptionRecorder, SameValueTwiceIsFineADifferentOneIsAConflict) {
  OptionRecorder recorder;
  EXPECT_EQ(recorder.record(OptionId::mode, "plan", "--pipette"), "");
  EXPECT_EQ(recorder.record(OptionId::mode, "plan", "--pipette"), "");
  EXPECT_EQ(recorder.record(OptionId::mode, "auto", "--pipette"),
            "--pipette given twice with different values ('plan' and 'auto')");
  EXPECT_EQ(*recorder.values()[OptionId::mode], "plan");
}

TEST(OptionRecorder, InvalidValueIsNotRecorded) {
  OptionRecorder recorder;
  EXPECT_NE(recorder.record(OptionId::global_batch, "lots", "--pipette-batch"), "");
  EXPECT_FALSE(recorder.values()[OptionId::global_batch].has_value());
}

TEST(ReadEnvironment, ParsesEveryVariableAndTreatsEmptyAsUnset) {
  const std::map<std::string, std::string> env = {
      {"PIPETTE", "plan"}, {"PIPETTE_MODEL", "gpt3-175b"}, {"PIPETTE_BATCH", "1536"}, {"PIPETTE_SEQ", ""}};
  std::string error;
  const OptionValues values = read_environment(
      [&](const char* name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(*values[OptionId::mode], "plan");
  EXPECT_EQ(*values[OptionId::model], "gpt3-175b");
  EXPECT_EQ(*values[OptionId::global_batch], "1536");
  EXPECT_FALSE(values[OptionId::sequence_length].has_value());
}

TEST(ReadEnvironment, ReportsTheFirstInvalidVariable) {
  std::string error;
  read_environment(
      [](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "PIPETTE_SEQ") return "long";
        return std::nullopt;
      },
      error);
  EXPECT_EQ(error, "PIPETTE_SEQ: invalid value 'long' (expected a positive number of tokens, at most 16777216)");
}

TEST(FindConflict, OnlyDifferentValuesSetInBothPlacesConflict) {
  OptionValues cli, env;
  cli[OptionId::model] = "llama2-7b";
  env[OptionId::model] = "llama2-7b";
  env[OptionId::global_batch] = "64";
  EXPECT_EQ(find_conflict(cli, env), "");
  env[OptionId::model] = "llama2-70b";
  EXPECT_EQ(find_conflict(cli, env),
            "--pipette-model=llama2-7b conflicts with PIPETTE_MODEL=llama2-70b in the environment; unset "
            "PIPETTE_MODEL or make them agree");
}

TEST(Merge, CommandLineOverEnvironmentOverSite) {
  OptionValues cli, env;
  SiteDefaults site;
  site.mode = "plan";
  site.strict = true;
  Settings settings = merge(cli, env, site);
  EXPECT_EQ(settings.mode, Mode::plan);
  EXPECT_EQ(settings.model, "");
  EXPECT_TRUE(settings.strict);

  env[OptionId::mode] = "auto";
  env[OptionId::model] = "env-model";
  env[OptionId::strict] = "0";
  env[OptionId::global_batch] = "256";
  settings = merge(cli, env, site);
  EXPECT_EQ(settings.mode, Mode::auto_remap);
  EXPECT_EQ(settings.model, "env-model");
  EXPECT_FALSE(settings.strict);
  EXPECT_EQ(settings.global_batch, 256);

  cli[OptionId::mode] = "off";
  cli[OptionId::model] = "cli-model";
  settings = merge(cli, env, site);
  EXPECT_EQ(settings.mode, Mode::off);
  EXPECT_EQ(settings.model, "cli-model");
}

TEST(Merge, NothingSetMeansOff) {
  const Settings settings = merge({}, {}, {});
  EXPECT_EQ(settings.mode, Mode::off);
  EXPECT_FALSE(settings.strict);
  EXPECT_FALSE(settings.global_batch.has_value());
}

}  // namespace
}  // namespace pipette::spank
