// A mutation fuzz run over request bodies: whatever the bytes, parsing ends in a request or an ApiException
// (a 4xx), never a crash or another exception. Deterministic seed, a few thousand cases: fast.
#include <gtest/gtest.h>

#include <random>

#include "server/errors.h"
#include "server/openai_json.h"
#include "server/sse.h"

namespace tessera::server {
namespace {

const char* kSeeds[] = {
    R"({"model":"m","prompt":"Once upon a time","max_tokens":8,"temperature":0,"stop":["\n"],"stream":true,)"
    R"("stream_options":{"include_usage":true},"logprobs":2,"seed":1,"n":2,"top_p":0.9,"top_k":4})",
    R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],)"
    R"("max_tokens":4,"logprobs":true,"top_logprobs":2,"priority":1,"timeout_ms":100,"user":"u"})",
    R"({"prompt":[1,2,3],"min_p":0.1,"presence_penalty":1,"frequency_penalty":-1})",
    R"({"prompt":["a","b"],"echo":true,"max_tokens":0,"logprobs":1,"logit_bias":{"5":-100,"17":2.5},)"
    R"("stop_token_ids":[2,9],"min_tokens":0,"messages":[{"role":"user","content":"x"}]})",
    R"({"prompt":[[1,2],[3]],"logit_bias":{"0":100},"min_tokens":2,"max_tokens":4})",
};

const char* kTokens[] = {"null", "true", "-1", "1e308", "\"\"", "[]", "{}", "0.5", "\"\\ud800\"", "\xff", "9999999999999999999999"};

void parse_any(const std::string& body) {
  try {
    const nlohmann::json j = parse_body(body);
    try {
      parse_completion_request(j);
    } catch (const ApiException& e) {
      EXPECT_LT(http_status(e.error().code), 500);
    }
    try {
      parse_chat_request(j);
    } catch (const ApiException& e) {
      EXPECT_LT(http_status(e.error().code), 500);
    }
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().code, ErrorCode::InvalidJson);
  }
}

TEST(ServerFuzz, RequestBodiesNeverCrashTheParser) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 10000; ++iter) {
    std::string body = kSeeds[size_t(iter) % std::size(kSeeds)];
    const int n_mut = 1 + int(rng() % 4);
    for (int m = 0; m < n_mut && !body.empty(); ++m) {
      const size_t pos = rng() % body.size();
      switch (rng() % 5) {
        case 0: body[pos] = char(rng() % 256); break;                     // flip a byte
        case 1: body.erase(pos, 1 + rng() % 8); break;                    // delete a run
        case 2: body.insert(pos, kTokens[rng() % std::size(kTokens)]); break;  // splice a JSON token
        case 3: body.insert(pos, body.substr(rng() % body.size(), rng() % 16)); break;  // duplicate
        case 4: {  // replace a value after a colon
          const size_t colon = body.find(':', pos);
          if (colon != std::string::npos) {
            const size_t end = body.find_first_of(",}", colon);
            body.replace(colon + 1, (end == std::string::npos ? body.size() : end) - colon - 1,
                         kTokens[rng() % std::size(kTokens)]);
          }
          break;
        }
      }
    }
    ASSERT_NO_FATAL_FAILURE(parse_any(body)) << body;
  }
}

TEST(ServerFuzz, SseParserTakesAnyBytes) {
  std::mt19937 rng(99);
  SseParser p;
  std::string data;
  for (int i = 0; i < 20000; ++i) {
    const char c = "data: x\n\r{}"[rng() % 11];
    p.feed(std::string_view(&c, 1));
    while (p.next(data)) {
    }
  }
}

}  // namespace
}  // namespace tessera::server
