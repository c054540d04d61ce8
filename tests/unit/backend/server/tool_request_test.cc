// Tool calling on the request side: the prompt a chat request with tools, tool calls and tool
// results renders to is the one the model's reference Jinja template gives (compared byte for
// byte with python3-jinja2 rendering templates written to behave as Qwen2.5's, Qwen3's and
// Hermes 2 Pro / Hermes 3's tool-use template), and what cannot be honoured is refused naming the
// field.
#include "cutline/server/tool_request.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cutline/server/completion_request.h"
#include "support/ci.h"
#include "support/unique_temp_path.h"

namespace cutline::server {
namespace {

using model::ChatTemplateKind;

std::vector<std::string> conversations() {
  std::ifstream in(CUTLINE_SERVER_TESTDATA "/tool_conversations.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

struct Rendered {
  Result<model::RenderedChat> chat = make_error(ErrorKind::kInternal, "not rendered");
  ToolCallOptions tools;
  RequestErrorDetail detail;
};

Rendered render(const std::string& body, ChatTemplateKind kind) {
  Rendered out;
  auto parsed = proto::parse_openai_request(body, proto::Endpoint::kChatCompletions);
  if (!parsed.ok()) {
    out.chat = parsed.error();
    return out;
  }
  // The BOS of a Llama-3-based model, as the reference renderer passes it.
  out.chat = render_chat_request(*parsed, kind, &out.tools, out.detail, "<|begin_of_text|>");
  return out;
}

// Runs the test's Python renderer; exit 77 when python3-jinja2 is missing.
int render_reference(const std::string& template_name, const std::string& body, std::string& out) {
  const std::string path = test::unique_temp_path("tool_request_test.json");
  std::ofstream(path, std::ios::binary) << body;
  const std::string cmd = "python3 " CUTLINE_SERVER_TESTDATA "/render_chat_template.py " +
                          std::string(CUTLINE_SERVER_TESTDATA) + "/" + template_name + " " + path;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  std::remove(path.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ToolPrompt, MatchesTheReferenceTemplatesByteForByte) {
  const std::vector<std::string> bodies = conversations();
  ASSERT_EQ(bodies.size(), 7u);
  const std::pair<ChatTemplateKind, std::string> templates[] = {
      {ChatTemplateKind::kQwen25, "qwen25_tools.jinja"},
      {ChatTemplateKind::kQwen3, "qwen3_tools.jinja"},
      {ChatTemplateKind::kHermes, "hermes_tools.jinja"}};
  for (const auto& [kind, file] : templates) {
    for (size_t i = 0; i < bodies.size(); ++i) {
      SCOPED_TRACE(file + ", conversation " + std::to_string(i + 1));
      std::string want;
      const int rc = render_reference(file, bodies[i], want);
      if (rc == 77 || rc == 127) {
        if (test::running_in_ci()) FAIL() << "python3 with jinja2 is required (deploy/setup.sh)";
        GTEST_SKIP() << "python3-jinja2 is not installed";
      }
      ASSERT_EQ(rc, 0);
      Rendered got = render(bodies[i], kind);
      ASSERT_TRUE(got.chat.ok()) << got.chat.error().message;
      EXPECT_EQ(got.chat->text(), want);
    }
  }
}

TEST(ToolPrompt, TemplateMarkersAreSpecialPiecesAndToolTextIsPlain) {
  Rendered r = render(conversations()[1], ChatTemplateKind::kQwen25);
  ASSERT_TRUE(r.chat.ok());
  for (const model::ChatPiece& p : r.chat->pieces) {
    if (p.special) {
      EXPECT_TRUE(p.text == "<|im_start|>" || p.text == "<|im_end|>") << p.text;
    }
  }
  EXPECT_TRUE(r.tools.parse);
  EXPECT_TRUE(r.tools.parallel);
  EXPECT_EQ(r.tools.forced_prefix, "");
}

TEST(ToolPrompt, HermesDescribesEachToolAsAPythonSignature) {
  Rendered r = render(conversations()[6], ChatTemplateKind::kHermes);
  ASSERT_TRUE(r.chat.ok()) << r.chat.error().message;
  const std::string text = r.chat->text();
  EXPECT_TRUE(text.starts_with("<|begin_of_text|><|im_start|>system\nYou are a function calling"));
  EXPECT_NE(text.find("book(guests: int, names: list[Union[]], prefs: dict[str, bool], when: "
                      "Union[str,int], note: Union[]) - Book a table.\n\n    Args:\n"
                      "        guests(int): how many        names(list[Union[]]): who comes"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"description\": \"ping() - Liveness.\n\n\", \"parameters\": {}}"),
            std::string::npos)
      << text;
  // The first piece is the BOS token, then the template's markers; the rest is plain text.
  ASSERT_FALSE(r.chat->pieces.empty());
  EXPECT_TRUE(r.chat->pieces[0].special);
  EXPECT_EQ(r.chat->pieces[0].text, "<|begin_of_text|>");
  EXPECT_TRUE(r.tools.parse);
  // Without tools the model's default template applies: ChatML, no tool section, no BOS.
  Rendered plain = render(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})",
                          ChatTemplateKind::kHermes);
  ASSERT_TRUE(plain.chat.ok());
  EXPECT_EQ(plain.chat->text(), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(plain.tools.parse);
}

TEST(ToolPrompt, ToolChoiceRequiredAndNamedOpenTheCall) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}])";
  Rendered required = render(R"({"model":"m",)" + tools +
                                 R"(,"tool_choice":"required","parallel_tool_calls":false,)"
                                 R"("messages":[{"role":"user","content":"go"}]})",
                             ChatTemplateKind::kQwen25);
  ASSERT_TRUE(required.chat.ok()) << required.chat.error().message;
  EXPECT_TRUE(required.chat->text().ends_with("<|im_start|>assistant\n<tool_call>\n"));
  EXPECT_EQ(required.tools.forced_prefix, "<tool_call>\n");
  EXPECT_FALSE(required.tools.parallel);
  Rendered named = render(R"({"model":"m",)" + tools +
                              R"(,"tool_choice":{"type":"function","function":{"name":"f"}},)"
                              R"("messages":[{"role":"user","content":"go"}]})",
                          ChatTemplateKind::kQwen3NoThink);
  ASSERT_TRUE(named.chat.ok()) << named.chat.error().message;
  EXPECT_TRUE(named.chat->text().ends_with(
      "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": "));
  Rendered none = render(R"({"model":"m",)" + tools +
                             R"(,"tool_choice":"none","messages":[{"role":"user","content":"x"}]})",
                         ChatTemplateKind::kChatMl);
  ASSERT_TRUE(none.chat.ok()) << "tool_choice none needs no tool syntax";
  EXPECT_FALSE(none.tools.parse);
  EXPECT_EQ(none.chat->text().find("<tools>"), std::string::npos);
}

TEST(ToolPrompt, WhatCannotBeHonouredIsRefusedNamingTheField) {
  const std::string tool = R"({"type":"function","function":{"name":"f"}})";
  const std::string user = R"("messages":[{"role":"user","content":"x"}])";
  struct Case {
    std::string body;
    ChatTemplateKind kind;
    std::string param;
    std::string message_part;
  };
  const Case cases[] = {
      {R"({"model":"tiny","tools":[)" + tool + "]," + user + "}", ChatTemplateKind::kLlama3,
       "tools", "model 'tiny' has no tool calling: its chat template (llama3)"},
      {R"({"model":"m","tools":[{"type":"retrieval"}],)" + user + "}", ChatTemplateKind::kQwen25,
       "tools[0].type", "only function tools are supported"},
      {R"({"model":"m","tools":[)" + tool + R"(],"tool_choice":"sometimes",)" + user + "}",
       ChatTemplateKind::kQwen25, "tool_choice", "got \"sometimes\""},
      {R"({"model":"m","tools":[)" + tool +
           R"(],"tool_choice":{"type":"function","function":{"name":"g"}},)" + user + "}",
       ChatTemplateKind::kQwen25, "tool_choice", "'g', which is not among the tools"},
      {R"({"model":"m","tool_choice":"required",)" + user + "}", ChatTemplateKind::kQwen25,
       "tool_choice", "needs tools"},
      {R"({"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c",)"
       R"("type":"function","function":{"name":"f","arguments":"{not json"}}]}]})",
       ChatTemplateKind::kQwen25, "messages[0].tool_calls[0].function.arguments", "not valid JSON"},
      {R"({"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"r"}]})",
       ChatTemplateKind::kGemma, "messages", "has role 'tool', but chat template gemma"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    Rendered r = render(c.body, c.kind);
    ASSERT_FALSE(r.chat.ok());
    EXPECT_EQ(r.chat.error().status(), 400);
    EXPECT_EQ(r.detail.param, c.param);
    EXPECT_NE(r.chat.error().message.find(c.message_part), std::string::npos)
        << r.chat.error().message;
  }
}

}  // namespace
}  // namespace cutline::server
