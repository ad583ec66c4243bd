// The server's chat prompts: the real templates in shared/chat-templates rendered through ChatTemplate with a
// vocabulary's special tokens and request kwargs (the expected texts are jinja2's), template errors as 400s,
// the no-template fallback, special-token-aware encoding on the embedded model's vocabulary, and a request's tools
// and tool turns (assistant tool_calls, tool results) reaching Qwen3's and Llama 3.1's templates.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/errors.h"
#include "model/model.h"
#include "server/chat_template.h"
#include "server/errors.h"
#include "server/openai_json.h"
#include "server/structured_output.h"
#include "test_paths.h"

namespace tessera::server {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(testing::shared_path("chat-templates/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  EXPECT_FALSE(text.empty()) << name;
  if (name.ends_with(".json")) return nlohmann::json::parse(text)["chat_template"].get<std::string>();
  return text;
}

// A three-token vocabulary whose BOS and EOS pieces are the family's.
Vocab vocab_with(const std::string& bos, const std::string& eos, bool add_bos = true) {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", bos, eos};
  v.scores = {0, 0, 0};
  v.kinds = {TokenKind::Unknown, TokenKind::Control, TokenKind::Control};
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = add_bos;
  return v;
}

const std::vector<ChatMessage> kSysUser = {{"system", "Be brief."}, {"user", "Hi there"}};
const std::vector<ChatMessage> kUser = {{"user", "Hi there"}};
const std::vector<ChatMessage> kTurns = {{"user", "A"}, {"assistant", "B"}, {"user", "C"}};

std::string render(const std::string& file, const Vocab& vocab, const std::vector<ChatMessage>& m,
                   const nlohmann::json& kwargs = nlohmann::json::object()) {
  return ChatTemplate(read_template(file), vocab).render(m, kwargs);
}

TEST(ServerChatTemplate, QwenWithTheThinkingSwitch) {
  const Vocab v = vocab_with("<|endoftext|>", "<|im_end|>", false);
  EXPECT_EQ(render("Qwen-Qwen2.5-7B-Instruct.jinja", v, kSysUser),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("Qwen-Qwen2.5-7B-Instruct.jinja", v, kUser),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("qwen3-tokenizer_config.json", v, kUser), "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("qwen3-tokenizer_config.json", v, kUser, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ServerChatTemplate, LlamaUsesTheVocabularysBos) {
  const Vocab v = vocab_with("<|begin_of_text|>", "<|eot_id|>");
  EXPECT_EQ(render("meta-llama-Llama-3.1-8B-Instruct.jinja", v, kSysUser),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // Llama 3.2 dates the prompt with strftime_now: today, on the server's clock.
  auto today = [] {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
    return std::string(buf);
  };
  const std::string before = today();
  const std::string prompt = render("meta-llama-Llama-3.2-3B-Instruct.jinja", v, kUser);
  const std::string after = today();
  auto expected = [](const std::string& date) {
    return "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
           "Today Date: " + date + "\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n";
  };
  EXPECT_TRUE(prompt == expected(before) || prompt == expected(after)) << prompt;
}

TEST(ServerChatTemplate, MistralPhiGemmaLlama2) {
  const Vocab mistral = vocab_with("<s>", "</s>");
  EXPECT_EQ(render("mistralai-Mistral-Nemo-Instruct-2407.jinja", mistral, kSysUser), "<s>[INST]Be brief.\n\nHi there[/INST]");
  EXPECT_EQ(render("mistralai-Mistral-Nemo-Instruct-2407.jinja", mistral, kTurns), "<s>[INST]A[/INST]B</s>[INST]C[/INST]");
  EXPECT_EQ(render("microsoft-Phi-3.5-mini-instruct.jinja", vocab_with("<s>", "<|endoftext|>"), kSysUser),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render("google-gemma-2-2b-it.jinja", vocab_with("<bos>", "<eos>"), kTurns),
            "<bos><start_of_turn>user\nA<end_of_turn>\n<start_of_turn>model\nB<end_of_turn>\n<start_of_turn>user\nC"
            "<end_of_turn>\n<start_of_turn>model\n");
  // Llama 2's template (from its tokenizer_config.json), which no file in shared/ carries.
  const std::string llama2 =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
      "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
      "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
      "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
      "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
      "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
      "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
      "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
  EXPECT_EQ(ChatTemplate(llama2, mistral).render(kSysUser), "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi there [/INST]");
  std::vector<ChatMessage> turns = kTurns;
  turns.push_back({"assistant", " D "});
  EXPECT_EQ(ChatTemplate(llama2, mistral).render(turns), "<s>[INST] A [/INST] B </s><s>[INST] C [/INST] D </s>");
}

TEST(ServerChatTemplate, RejectedConversationsAre400WithTheTemplatesMessage) {
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  const struct {
    const char* file;
    std::vector<ChatMessage> messages;
    const char* message;
  } cases[] = {
      {"google-gemma-2-2b-it.jinja", kSysUser, "System role not supported"},
      {"google-gemma-2-2b-it.jinja", two_users, "Conversation roles must alternate user/assistant/user/assistant/..."},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", two_users,
       "After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."},
  };
  for (const auto& c : cases) {
    try {
      render(c.file, vocab_with("<s>", "</s>"), c.messages);
      ADD_FAILURE() << c.file << " accepted the conversation";
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().code, ErrorCode::TemplateError);
      EXPECT_EQ(http_status(e.error().code), 400);
      EXPECT_EQ(e.error().message, c.message);
      EXPECT_EQ(e.error().param, "messages");
    }
  }
  // Other render failures are 400s too, naming the template line.
  try {
    ChatTemplate("\n{{ messages[0].content + 1 }}", vocab_with("<s>", "</s>")).render(kUser);
    ADD_FAILURE();
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().code, ErrorCode::TemplateError);
    EXPECT_EQ(e.error().message, "chat template line 2: can only concatenate str (not \"int\") to str");
  }
}

TEST(ServerChatTemplate, ABadTemplateFailsWhenLoaded) {
  try {
    ChatTemplate("{% for m in messages %}{{ m | safe }}{% endfor %}", vocab_with("<s>", "</s>"));
    ADD_FAILURE() << "parsed";
  } catch (const chat::SyntaxError& e) {
    EXPECT_EQ(e.line(), 1);
    EXPECT_STREQ(e.what(), "chat template line 1, column 31: the filter 'safe' is not supported by the chat template "
                           "interpreter");
  }
}

TEST(ServerChatTemplate, FallbackJoinsContents) {
  EXPECT_FALSE(ChatTemplate("", vocab_with("<s>", "</s>")).has_template());
  EXPECT_EQ(ChatTemplate("", vocab_with("<s>", "</s>", false)).render(kTurns), "A\nB\nC");
  EXPECT_EQ(ChatTemplate("", vocab_with("<s>", "</s>", true)).render(kTurns), "<s>A\nB\nC");
}

TEST(ServerChatTemplate, SpecialTokensBecomeTheirIds) {
  auto model = Model::load_embedded();
  const Tokenizer& tok = model->tokenizer();
  SpecialTokenEncoder enc(tok);
  const Vocab& v = tok.vocab();
  ASSERT_GE(v.bos, 0);
  ASSERT_GE(v.eos, 0);
  // Plain text: as the tokenizer encodes it.
  EXPECT_EQ(enc.encode("Once upon a time", true), tok.encode("Once upon a time", true));
  // A BOS spelled at the start is not doubled; an EOS spelled inside becomes the EOS id.
  const std::string text = v.tokens[size_t(v.bos)] + "Hi" + v.tokens[size_t(v.eos)] + "Bye";
  const std::vector<int32_t> ids = enc.encode(text, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), v.bos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.bos), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.eos), 1);
}

// A tool round trip through parse_chat_request and ChatTemplate: the assistant's call (arguments as OpenAI sends
// them, a JSON string) and the tool's answer reach the template, and so do the tools.
TEST(ServerChatTemplate, ToolsAndToolTurnsReachTheTemplate) {
  const std::string body = R"({"messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})";
  const ApiRequest r = parse_chat_request(nlohmann::json::parse(body));
  const StructuredRequest s = parse_structured_request(body, nlohmann::json::parse(body), true);
  EXPECT_EQ(ChatTemplate(read_template("qwen3-tokenizer_config.json"), vocab_with("<|endoftext|>", "<|im_end|>", false))
                .render(r.messages, nlohmann::json::object(), s.template_tools()),
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou "
            "are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": "
            "\"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather for a city\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
            "[\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>"
            "assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|"
            "im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>"
            "assistant\n");
  const std::string llama = ChatTemplate(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja"),
                                         vocab_with("<|begin_of_text|>", "<|eot_id|>"))
                                .render(r.messages, nlohmann::json::object(), s.template_tools());
  EXPECT_NE(llama.find("Given the following functions"), std::string::npos);
  EXPECT_NE(llama.find("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"), std::string::npos)
      << llama;
  EXPECT_NE(llama.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 21}\"<|eot_id|>"),
            std::string::npos)
      << llama;
  // A tool message needs its call's id; only assistants make calls.
  EXPECT_THROW(parse_chat_request(nlohmann::json::parse(R"({"messages": [{"role": "tool", "content": "x"}]})")), ApiException);
  EXPECT_THROW(parse_chat_request(nlohmann::json::parse(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})")),
               ApiException);
}

}  // namespace
}  // namespace tessera::server
