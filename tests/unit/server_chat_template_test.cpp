// Chat template families: detection from the real templates in shared/chat-templates and the exact text each
// renders, plus special-token-aware encoding on the embedded model's vocabulary.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "server/chat_template.h"
#include "server/errors.h"
#include "test_paths.h"

namespace tessera::server {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(testing::shared_path("chat-templates/" + name));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<ChatMessage> kSysUser = {{"system", "Be brief."}, {"user", "Hi there"}};
const std::vector<ChatMessage> kUser = {{"user", "Hi there"}};
const std::vector<ChatMessage> kTurns = {{"user", "A"}, {"assistant", "B"}, {"user", "C"}};

std::string render(const std::string& file, const std::string& bos, const std::vector<ChatMessage>& m) {
  const std::string t = read_template(file);
  EXPECT_FALSE(t.empty()) << file;
  return ChatTemplate(detect_chat_family(t), t, bos).render(m);
}

TEST(ServerChatTemplate, DetectsFamiliesOfRealTemplates) {
  EXPECT_EQ(detect_chat_family(read_template("Qwen-Qwen2.5-7B-Instruct.jinja")), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")), ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family(read_template("meta-llama-Llama-3.2-3B-Instruct.jinja")), ChatFamily::Llama3);
  EXPECT_EQ(detect_chat_family(read_template("microsoft-Phi-3.5-mini-instruct.jinja")), ChatFamily::Phi3);
  EXPECT_EQ(detect_chat_family(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")), ChatFamily::Mistral);
  EXPECT_EQ(detect_chat_family(read_template("google-gemma-2-2b-it.jinja")), ChatFamily::Gemma);
  const auto qwen3 = nlohmann::json::parse(read_template("qwen3-tokenizer_config.json"));
  EXPECT_EQ(detect_chat_family(qwen3["chat_template"].get<std::string>()), ChatFamily::ChatML);
  EXPECT_EQ(detect_chat_family(""), ChatFamily::Fallback);
  EXPECT_EQ(detect_chat_family("{{ messages }}"), ChatFamily::Fallback);
  EXPECT_EQ(detect_chat_family("[INST] <<SYS>>\\n{{ system }}"), ChatFamily::Llama2);
}

TEST(ServerChatTemplate, ChatMLQwen) {
  EXPECT_EQ(render("Qwen-Qwen2.5-7B-Instruct.jinja", "", kSysUser),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  // Qwen2.5 adds its default system prompt.
  EXPECT_EQ(render("Qwen-Qwen2.5-7B-Instruct.jinja", "", kUser),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  const auto qwen3 = nlohmann::json::parse(read_template("qwen3-tokenizer_config.json"));
  const std::string t = qwen3["chat_template"];
  EXPECT_EQ(ChatTemplate(detect_chat_family(t), t, "").render(kUser),
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ServerChatTemplate, Llama3) {
  EXPECT_EQ(render("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", kSysUser),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::string llama3_0 =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}";
  EXPECT_EQ(ChatTemplate(detect_chat_family(llama3_0), llama3_0, "<|begin_of_text|>").render(kUser),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ServerChatTemplate, MistralPhiGemmaLlama2) {
  EXPECT_EQ(render("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", kSysUser), "<s>[INST]Be brief.\n\nHi there[/INST]");
  EXPECT_EQ(render("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", kTurns), "<s>[INST]A[/INST]B</s>[INST]C[/INST]");
  EXPECT_EQ(render("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", kSysUser),
            "<|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render("google-gemma-2-2b-it.jinja", "<bos>", kTurns),
            "<bos><start_of_turn>user\nA<end_of_turn>\n<start_of_turn>model\nB<end_of_turn>\n<start_of_turn>user\nC"
            "<end_of_turn>\n<start_of_turn>model\n");
  const std::string llama2 = "[INST] <<SYS>>\\n";
  EXPECT_EQ(ChatTemplate(ChatFamily::Llama2, llama2, "<s>").render(kSysUser),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi there [/INST]");
  EXPECT_EQ(ChatTemplate(ChatFamily::Llama2, llama2, "<s>").render(kTurns), "<s>[INST] A [/INST] B </s><s>[INST] C [/INST]");
}

TEST(ServerChatTemplate, TemplateErrorsAre400) {
  const std::vector<ChatMessage> two_users = {{"user", "a"}, {"user", "b"}};
  for (auto [family, messages] : {std::pair{ChatFamily::Gemma, kSysUser}, std::pair{ChatFamily::Gemma, two_users},
                                  std::pair{ChatFamily::Mistral, two_users}, std::pair{ChatFamily::Llama2, two_users}}) {
    try {
      ChatTemplate(family, "", "").render(messages);
      ADD_FAILURE() << chat_family_name(family);
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().code, ErrorCode::TemplateError);
      EXPECT_EQ(http_status(e.error().code), 400);
    }
  }
}

TEST(ServerChatTemplate, FallbackJoinsContents) {
  EXPECT_EQ(ChatTemplate(ChatFamily::Fallback, "", "").render(kTurns), "A\nB\nC");
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

}  // namespace
}  // namespace tessera::server
