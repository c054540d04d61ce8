#include "cutline/server/backend_options.h"

#include <vector>

#include <gtest/gtest.h>

namespace cutline::server {
namespace {

Result<BackendOptions> parse(std::vector<const char*> args, std::string_view env = "",
                             std::string_view home = "/home/u") {
  args.insert(args.begin(), "cutline-backend");
  return parse_backend_options(static_cast<int>(args.size()), args.data(), env, home);
}

// Sizes and durations are the policy's grammar (tests/unit/policy/size_test.cc, duration_test.cc);
// here: that the flags read them, and what a bad value says.
TEST(BackendOptions, SizesAndDurationsInThePolicyGrammar) {
  auto o = parse({"--kv-memory", "1.5G", "--weights-memory", "4096", "--drain-timeout", "250ms"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->kv_memory_bytes, 3ll << 29);
  EXPECT_EQ(o->weights_memory_bytes, 4096);
  EXPECT_EQ(o->drain_timeout_ms, 250);
  auto bare = parse({"--drain-timeout", "3"});  // bare seconds, as before
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_EQ(bare->drain_timeout_ms, 3000);
}

TEST(BackendOptions, DefaultsServeTinyBuiltin) {
  auto o = parse({});
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o->models.size(), 1u);
  EXPECT_EQ(o->models[0].name, "tiny");
  EXPECT_TRUE(o->models[0].builtin());
  EXPECT_EQ(o->port, 8000);
  EXPECT_EQ(o->host, "127.0.0.1");
  EXPECT_EQ(o->device, DeviceChoice::kAuto);
  EXPECT_EQ(o->kv_memory_bytes, 256ll << 20);
  EXPECT_FALSE(o->weights_memory_bytes.has_value());
  EXPECT_EQ(o->cache_dir, "/home/u/.cache/cutline");
}

TEST(BackendOptions, EveryOptionParses) {
  auto o = parse({"--port",
                  "0",
                  "--host=0.0.0.0",
                  "--model",
                  "tiny=builtin",
                  "--model",
                  "llama=/m/llama.gguf",
                  "--device",
                  "cpu",
                  "--kv-memory",
                  "64MiB",
                  "--weights-memory=2GiB",
                  "--keep-resident",
                  "llama",
                  "--max-step-tokens",
                  "128",
                  "--block-size",
                  "32",
                  "--chat-template",
                  "chatml",
                  "--cache-dir",
                  "/tmp/c",
                  "--threads",
                  "3",
                  "--drain-timeout",
                  "2s",
                  "--prefill-attention",
                  "128"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->port, 0);
  EXPECT_EQ(o->host, "0.0.0.0");
  ASSERT_EQ(o->models.size(), 2u);
  EXPECT_EQ(o->models[1].name, "llama");
  EXPECT_EQ(o->models[1].path, "/m/llama.gguf");
  EXPECT_FALSE(o->models[1].builtin());
  EXPECT_EQ(o->device, DeviceChoice::kCpu);
  EXPECT_EQ(o->kv_memory_bytes, 64ll << 20);
  EXPECT_EQ(o->weights_memory_bytes, 2ll << 30);
  EXPECT_EQ(o->keep_resident, std::vector<std::string>{"llama"});
  EXPECT_EQ(o->max_step_tokens, 128);
  EXPECT_EQ(o->block_size, 32);
  EXPECT_EQ(o->chat_template, "chatml");
  EXPECT_EQ(o->cache_dir, "/tmp/c");
  EXPECT_EQ(o->threads, 3);
  EXPECT_EQ(o->drain_timeout_ms, 2000);
  EXPECT_EQ(o->attention_positions_per_token, 128);
}

TEST(BackendOptions, CacheDirFromEnvironment) {
  auto o = parse({}, "/var/cache/cl");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->cache_dir, "/var/cache/cl");
}

TEST(BackendOptions, ErrorsSayWhatIsWrong) {
  struct Case {
    std::vector<const char*> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"--model", "tiny"}, "NAME=PATH"},
      {{"--model", "=x"}, "NAME=PATH"},
      {{"--model", "a=x", "--model", "a=y"}, "twice"},
      {{"--device", "tpu"}, "cpu, cuda or auto"},
      {{"--port", "70000"}, "--port"},
      {{"--port"}, "needs a value"},
      {{"--kv-memory", "lots"}, "not a size: 'lots'"},
      {{"--kv-memory", "0"}, "--kv-memory"},
      {{"--drain-timeout", "3 days"}, "not a duration: '3 days'"},
      {{"--threads", "two"}, "--threads"},
      {{"--keep-resident", "ghost"}, "ghost"},
      {{"--frobnicate", "1"}, "unknown option '--frobnicate'"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--bogus"}, "unknown option '--bogus'"},
      {{"--block-size", "0"}, "--block-size"},
  };
  for (const auto& c : cases) {
    auto o = parse(c.args);
    ASSERT_FALSE(o.ok()) << c.expect;
    EXPECT_NE(o.error().message.find(c.expect), std::string::npos)
        << o.error().message << " should mention " << c.expect;
  }
}

TEST(BackendOptions, HelpAndVersionFlags) {
  auto v = parse({"--version"});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->version);
  auto o = parse({"--help"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  EXPECT_NE(backend_usage().find("--keep-resident"), std::string::npos);
}

}  // namespace
}  // namespace cutline::server
