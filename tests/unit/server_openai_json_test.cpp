// OpenAI request parsing/validation and response shapes.
#include <gtest/gtest.h>

#include "server/errors.h"
#include "server/openai_json.h"

namespace tessera::server {
namespace {

using nlohmann::json;

ApiError completion_error(const json& body) {
  try {
    parse_completion_request(body);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return {};
}

ApiError chat_error(const json& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return {};
}

TEST(ServerOpenAiJson, ParsesCompletionParameters) {
  const json body = {{"model", "m"},          {"prompt", "Hi"},       {"max_tokens", 7},     {"temperature", 0.5},
                     {"top_p", 0.9},          {"top_k", 40},          {"min_p", 0.1},        {"seed", 42},
                     {"stop", {"a", "b"}},    {"n", 2},               {"presence_penalty", 0.5},
                     {"frequency_penalty", -0.5}, {"logprobs", 3},    {"user", "u"},         {"priority", 5},
                     {"timeout_ms", 1000},    {"stream", true},       {"stream_options", {{"include_usage", true}}}};
  const ApiRequest r = parse_completion_request(body);
  EXPECT_EQ(r.endpoint, Endpoint::Completions);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompts, std::vector<std::string>{"Hi"});
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.user, "u");
  EXPECT_EQ(r.priority, 5);
  EXPECT_EQ(r.timeout_ms, 1000);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.deterministic());
}

TEST(ServerOpenAiJson, NullMeansNotGiven) {
  const ApiRequest r = parse_completion_request({{"prompt", "x"}, {"max_tokens", nullptr}, {"stop", nullptr}});
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_TRUE(r.sampling.stop.empty());
}

TEST(ServerOpenAiJson, StopAsStringAndTokenPrompt) {
  ApiRequest r = parse_completion_request({{"prompt", {1, 2, 3}}, {"stop", "END"}, {"max_tokens", 4.0}});
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_ids, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.sampling.max_tokens, 4);
  r = parse_completion_request({{"prompt", {"single"}}});
  EXPECT_EQ(r.prompts, std::vector<std::string>{"single"});
  // Batches: several prompts of one form.
  r = parse_completion_request({{"prompt", {"a", "", "c"}}});
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"a", "", "c"}));
  r = parse_completion_request({{"prompt", {{1, 2}, {3}}}});
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_ids, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
}

TEST(ServerOpenAiJson, RejectsBadValuesNamingTheParameter) {
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", -1}}).param, "max_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", 1e12}}).param, "max_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", 2.5}}).param, "max_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"max_tokens", "10"}}).param, "max_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"temperature", -0.1}}).param, "temperature");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"temperature", "hot"}}).param, "temperature");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"top_p", 1.5}}).param, "top_p");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"top_p", 0}}).param, "top_p");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"n", 0}}).param, "n");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop", 5}}).param, "stop");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop", {"a", 1}}}).param, "stop");
  const ApiError long_stop = completion_error({{"prompt", "x"}, {"stop", {"a", std::string(257, 's')}}});
  EXPECT_EQ(long_stop.param, "stop");
  EXPECT_NE(long_stop.message.find("at most 256 bytes"), std::string::npos) << long_stop.message;
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stream", "yes"}}).param, "stream");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}).param,
            "stream_options");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"logprobs", 99}}).param, "logprobs");
  EXPECT_EQ(completion_error({{"prompt", 5}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", json::array({"a", json::array({1})})}}).param, "prompt") << "mixed";
  EXPECT_EQ(completion_error({{"prompt", json::array({json::array({1}), json::array()})}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", json::array()}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", json::array({"a", 5})}}).param, "prompt");
  EXPECT_EQ(completion_error({{"prompt", json(std::vector<std::string>(65, "a"))}}).param, "prompt");
  EXPECT_EQ(completion_error(json::object()).param, "prompt");
  EXPECT_EQ(completion_error(json::array()).code, ErrorCode::InvalidRequest);
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"model", 3}}).param, "model");
}

TEST(ServerOpenAiJson, TokenControls) {
  // OpenAI's logit_bias (ids as strings), vLLM's stop_token_ids and min_tokens, on both endpoints.
  const json controls = {{"logit_bias", {{"50", -100}, {"7", 2.5}, {"0", 100}}},
                         {"stop_token_ids", {3, 9}},
                         {"min_tokens", 4}};
  json completion = controls, chat = controls;
  completion["prompt"] = "x";
  chat["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  for (const ApiRequest& r : {parse_completion_request(completion), parse_chat_request(chat)}) {
    EXPECT_EQ(r.sampling.logit_bias, (std::vector<LogitBias>{{0, 100.0f}, {7, 2.5f}, {50, -100.0f}}));
    EXPECT_EQ(r.sampling.stop_token_ids, (std::vector<int32_t>{3, 9}));
    EXPECT_EQ(r.sampling.min_tokens, 4);
  }
  const ApiRequest none = parse_completion_request({{"prompt", "x"}, {"logit_bias", nullptr}, {"min_tokens", nullptr}});
  EXPECT_TRUE(none.sampling.logit_bias.empty());
  EXPECT_EQ(none.sampling.min_tokens, 0);

  auto bias_error = [](const json& bias) { return completion_error({{"prompt", "x"}, {"logit_bias", bias}}); };
  for (const json& bad : {json({{"-1", 1}}), json({{"-0", 1}}), json({{"+1", 1}}), json({{"01", 1}}), json({{"1.0", 1}}), json({{"x", 1}}),
                          json({{"", 1}}), json({{"99999999999", 1}}), json({{" 1", 1}}), json({{"1", 100.5}}),
                          json({{"1", "5"}}), json({{"1", nullptr}}), json::array({1, 2}), json("1")}) {
    const ApiError e = bias_error(bad);
    EXPECT_EQ(e.param, "logit_bias") << bad.dump();
    EXPECT_EQ(e.code, ErrorCode::InvalidRequest) << bad.dump();
  }
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop_token_ids", 3}}).param, "stop_token_ids");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop_token_ids", {-1}}}).param, "stop_token_ids");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop_token_ids", {"3"}}}).param, "stop_token_ids");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"stop_token_ids", json(std::vector<int>(kMaxStopTokenIds + 1, 1))}})
                .param,
            "stop_token_ids");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"min_tokens", -1}}).param, "min_tokens");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"min_tokens", 1.5}}).param, "min_tokens");
}

TEST(ServerOpenAiJson, ParsesChat) {
  const json body = {{"messages",
                      {{{"role", "system"}, {"content", "be brief"}},
                       {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hel"}}, {{"type", "text"}, {"text", "lo"}}}}}}},
                     {"logprobs", true},
                     {"top_logprobs", 2},
                     {"max_completion_tokens", 9}};
  const ApiRequest r = parse_chat_request(body);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.sampling.max_tokens, 9);
  EXPECT_EQ(r.chat_template_kwargs, json::object());
}

TEST(ServerOpenAiJson, ChatTemplateKwargs) {
  const json user = {{{"role", "user"}, {"content", "x"}}};
  const ApiRequest r = parse_chat_request({{"messages", user}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(r.chat_template_kwargs, json({{"enable_thinking", false}}));
  EXPECT_EQ(parse_chat_request({{"messages", user}, {"chat_template_kwargs", nullptr}}).chat_template_kwargs, json::object());
  EXPECT_EQ(chat_error({{"messages", user}, {"chat_template_kwargs", "x"}}).param, "chat_template_kwargs");
  // The variables the server sets cannot be replaced.
  const ApiError e = chat_error({{"messages", user}, {"chat_template_kwargs", {{"add_generation_prompt", false}}}});
  EXPECT_EQ(e.param, "chat_template_kwargs");
  EXPECT_EQ(e.message, "'chat_template_kwargs' may not set 'add_generation_prompt' (the server sets it)");
}

TEST(ServerOpenAiJson, RejectsBadChat) {
  EXPECT_EQ(chat_error({{"messages", json::array()}}).param, "messages");
  EXPECT_EQ(chat_error({{"messages", "hi"}}).param, "messages");
  EXPECT_EQ(chat_error({{"messages", {{{"content", "x"}}}}}).param, "messages");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}).param, "messages");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}}).param,
            "top_logprobs");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"logprobs", 1}}).param, "logprobs");
}

TEST(ServerOpenAiJson, MalformedAndInvalidUtf8BodiesAreInvalidJson) {
  for (const std::string& body : {std::string("{"), std::string("{\"prompt\": }"), std::string("nul"),
                                 std::string("{\"prompt\": \"\xff\xfe\"}"), std::string("")}) {
    try {
      parse_body(body);
      ADD_FAILURE() << "parsed: " << body;
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().code, ErrorCode::InvalidJson);
      EXPECT_EQ(http_status(e.error().code), 400);
    }
  }
}

// Copying, dumping and rendering JSON recurse per level: a body nested past kMaxJsonNesting is refused before any
// of that (half a million levels fit in 1 MB), here and in a tool call's arguments string.
TEST(ServerOpenAiJson, DeeplyNestedBodiesAreRefused) {
  const auto nested = [](size_t depth, const std::string& leaf) {
    return std::string(depth, '[') + leaf + std::string(depth, ']');
  };
  const std::string prefix = R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"a": )";
  EXPECT_NO_THROW(parse_body(prefix + nested(kMaxJsonNesting - 2, "\"[{\"") + "}}"));  // brackets in strings
  for (size_t depth : {kMaxJsonNesting - 1, size_t(400000)}) {
    try {
      parse_body(prefix + nested(depth, "1") + "}}");
      ADD_FAILURE() << "parsed a body nested " << depth + 2 << " levels";
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().code, ErrorCode::InvalidJson);
      EXPECT_EQ(e.error().message, "the JSON body nests arrays and objects deeper than 256 levels");
    }
  }
  const auto with_arguments = [](const std::string& arguments) {
    return json{{"messages",
                 {{{"role", "assistant"},
                   {"content", ""},
                   {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                    {"function", {{"name", "f"}, {"arguments", arguments}}}}}}},
                  {{"role", "user"}, {"content", "x"}}}}};
  };
  EXPECT_NO_THROW(parse_chat_request(with_arguments(nested(kMaxJsonNesting, "1"))));
  const ApiError e = chat_error(with_arguments(nested(100000, "1")));
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "'messages' tool call arguments nest arrays and objects deeper than 256 levels");
}

// ordered_json (schemas, tools, tool-call arguments keep their key order) finds each key by a linear search: a
// 1 MiB object of 105,000 keys held a parse worker for 20 s. Wider objects than kMaxJsonObjectMembers are a 400
// before any ordered parse; commas and braces inside strings do not count.
TEST(ServerOpenAiJson, WideObjectsAreRefused) {
  const auto object = [](size_t members) {
    std::string o = "{";
    for (size_t i = 0; i < members; ++i) o += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": \",{}\"";
    return o + "}";
  };
  const std::string prefix = R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", )"
                             R"("function": {"name": "f", "parameters": )";
  EXPECT_NO_THROW(parse_body(prefix + object(kMaxJsonObjectMembers) + "}}]}"));
  std::string long_array = R"({"a": [1)";
  for (int i = 0; i < 5000; ++i) long_array += ",1";
  EXPECT_NO_THROW(parse_body(long_array + "]}"));  // arrays are not objects
  try {
    parse_body(prefix + object(kMaxJsonObjectMembers + 1) + "}}]}");
    ADD_FAILURE() << "parsed an object of " << kMaxJsonObjectMembers + 1 << " members";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().code, ErrorCode::InvalidJson);
    EXPECT_EQ(e.error().message, "the JSON body has an object of more than 512 members");
  }
  const json body = {{"messages",
                      {{{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                         {"function", {{"name", "f"}, {"arguments", object(100000)}}}}}}},
                       {{"role", "user"}, {"content", "x"}}}}};
  const ApiError e = chat_error(body);
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "'messages' tool call arguments have an object of more than 512 members");
}

TEST(ServerOpenAiJson, ResponseShapes) {
  ResponseHeader h{Endpoint::Completions, "cmpl-1", 123, "m"};
  ChoiceResult c;
  c.text = "hello";
  c.finish_reason = FinishReason::Length;
  c.n_generated = 2;
  c.tokens = {{"hel", -0.5f, {{"hel", -0.5f}, {"he", -1.0f}}}, {"lo", -0.25f, {}}};
  Usage u{3, 2, 0};
  json r = response_json(h, {c}, u, true);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "hello");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"], json({"hel", "lo"}));
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"], json({0, 3}));
  EXPECT_EQ(r["usage"]["total_tokens"], 5);

  h.endpoint = Endpoint::ChatCompletions;
  r = response_json(h, {c}, u, false);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "hello");
  EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());

  json chunk = chunk_json(h, 0, "he", true, nullptr, 0, std::nullopt, true);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "he");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
  chunk = chunk_json(h, 1, "", false, nullptr, 0, FinishReason::Stop, false);
  EXPECT_EQ(chunk["choices"][0]["index"], 1);
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(chunk.contains("usage"));
  const json uc = usage_chunk_json(h, u);
  EXPECT_TRUE(uc["choices"].empty());
  EXPECT_EQ(uc["usage"]["completion_tokens"], 2);
}

// The bound the server refuses complete responses by must hold for the worst pieces: control bytes (escaped as
// \u00XX) and invalid UTF-8 (replaced), in both endpoints, with and without logprobs.
TEST(ServerOpenAiJson, WorstCaseResponseBytesBoundTheRealResponse) {
  const std::string piece = std::string("\x01\x02\x1f\xff\xfe\"\\") + std::string(9, '\x7f');  // 16 bytes
  // With echo, a completion's choices also hold the prompt's 30 tokens (the first without a logprob).
  for (const auto& [e, echo] : {std::pair{Endpoint::Completions, false}, std::pair{Endpoint::Completions, true},
                                std::pair{Endpoint::ChatCompletions, false}}) {
    for (const int top : {0, 20}) {
      ApiRequest req;
      req.endpoint = e;
      req.n = 3;
      req.sampling.max_tokens = 50;
      req.echo = echo;
      req.logprobs = top > 0;
      req.top_logprobs = top;
      const int n_prompt = 30, n_tokens = echo ? 80 : 50;
      std::vector<ChoiceResult> choices(3);
      for (ChoiceResult& c : choices) {
        c.n_generated = 50;
        for (int i = 0; i < n_tokens; ++i) {
          c.text += piece;
          TokenInfo t{piece, -123.456789f, {}, echo && i == 0};
          // Distinct alternatives: completions' top_logprobs is an object keyed by the piece.
          for (int k = 0; k < top; ++k) t.top.push_back({piece.substr(0, 15) + char('a' + k), -1e-30f});
          c.tokens.push_back(t);
        }
      }
      ResponseHeader h{e, "chatcmpl-0123456789abcdef", 1700000000, std::string(64, 'm')};
      const size_t real = dump_json(response_json(h, choices, {5, 150, 0}, req.logprobs)).size();
      const uint64_t bound = worst_case_response_bytes(req, piece.size(), n_prompt);
      EXPECT_LE(real, bound) << "endpoint " << int(e) << " top " << top << " echo " << echo;
      EXPECT_GT(real, bound / 5) << "the bound is far too loose";
    }
  }
}

TEST(ServerOpenAiJson, CacheSaltIsAStringOfBoundedLength) {
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"cache_salt", "abc"}}).cache_salt, "abc");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"cache_salt", 5}}).param, "cache_salt");
  EXPECT_EQ(completion_error({{"prompt", "x"}, {"cache_salt", std::string(1025, 's')}}).param, "cache_salt");
}

TEST(ServerOpenAiJson, DumpReplacesInvalidUtf8) {
  const std::string s = dump_json(json{{"token", std::string("\xe4\xb8")}});
  EXPECT_NE(s.find("\xef\xbf\xbd"), std::string::npos);
}

TEST(ServerErrors, OneMappingToStatusAndBody) {
  EXPECT_EQ(http_status(ErrorCode::InvalidRequest), 400);
  EXPECT_EQ(http_status(ErrorCode::Unauthorized), 401);
  EXPECT_EQ(http_status(ErrorCode::PermissionDenied), 403);
  EXPECT_STREQ(error_code(ErrorCode::PermissionDenied), "permission_denied");
  EXPECT_EQ(http_status(ErrorCode::ModelNotFound), 404);
  EXPECT_EQ(http_status(ErrorCode::PayloadTooLarge), 413);
  EXPECT_EQ(http_status(ErrorCode::RateLimited), 429);
  EXPECT_EQ(http_status(ErrorCode::QueueFull), 429);
  EXPECT_EQ(http_status(ErrorCode::Unavailable), 503);
  EXPECT_EQ(http_status(ErrorCode::Timeout), 504);
  const json b = error_body({ErrorCode::InvalidRequest, "bad", "top_p"});
  EXPECT_EQ(b["error"]["message"], "bad");
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "top_p");
  EXPECT_TRUE(b["error"].contains("code"));
  EXPECT_TRUE(error_body({ErrorCode::Internal, "x"})["error"]["param"].is_null());
  EXPECT_EQ(retry_after_seconds({ErrorCode::RateLimited, "", "", 0.2}), 1);
  EXPECT_EQ(retry_after_seconds({ErrorCode::RateLimited, "", "", 2.1}), 3);
}

}  // namespace
}  // namespace tessera::server
