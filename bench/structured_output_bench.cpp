// Constrained decoding's cost next to a decode step, measured in one run: the time a sequence's mask takes each
// step (SequenceConstraint::apply over a logits row, then accept of the token: what the engine adds per
// constrained sequence) for a nested JSON schema, against the forward pass of a decode step at batch 1 and 16;
// plus grammar compile time for a typical tool set, the schema's compile time and the vocabulary's build time.
//
//   structured_output_bench -m model.gguf [--threads N] [--walks N] [--steps N]
//
// The mask's tokens are drawn uniformly from what the grammar allows (a model whose choices are noise, the
// worst case for the caches: it wanders into every state). "cold" is the first document (every automaton state
// and parse state met for the first time: masks are built); "warm" the documents after --walks of them (the
// caches hold what a schema's requests keep meeting). Per-step means of thread CPU time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/model_bench.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/constraint.h"
#include "grammar/compile.h"
#include "grammar/json_schema.h"
#include "grammar/mask_cache.h"
#include "model/model.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"
#include "thread_cpu_time.h"

namespace {

using namespace tessera;
using nlohmann::json;
using nlohmann::ordered_json;

// A nested schema of the kind applications send: objects in objects, an array of objects, enums, bounded
// strings, integer ranges, a date, an optional property, anyOf.
const char* kSchema = R"({
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{6}$"},
    "placed": {"type": "string", "format": "date"},
    "customer": {"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 40},
      "email": {"type": "string", "format": "email"},
      "address": {"type": "object", "properties": {
        "street": {"type": "string", "maxLength": 60}, "city": {"type": "string", "maxLength": 30},
        "country": {"enum": ["DE", "FR", "NL", "US", "GB"]}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
        "required": ["street", "city", "country"], "additionalProperties": false}},
      "required": ["name", "address"], "additionalProperties": false},
    "items": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "object", "properties": {
      "sku": {"type": "string", "maxLength": 16}, "quantity": {"type": "integer", "minimum": 1, "maximum": 1000},
      "price": {"type": "number"}, "gift": {"type": "boolean"}},
      "required": ["sku", "quantity", "price"], "additionalProperties": false}},
    "payment": {"anyOf": [
      {"type": "object", "properties": {"card": {"type": "string", "pattern": "^[0-9]{16}$"}}, "required": ["card"],
       "additionalProperties": false},
      {"type": "object", "properties": {"iban": {"type": "string", "maxLength": 34}}, "required": ["iban"],
       "additionalProperties": false},
      {"type": "null"}]},
    "notes": {"type": "string", "maxLength": 200}
  },
  "required": ["order_id", "placed", "customer", "items", "payment"],
  "additionalProperties": false
})";

// A typical tool set: an assistant with eight functions of a few parameters each.
const char* kToolsBody = R"({"tool_choice": "auto", "tools": [
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
    "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search_web", "parameters": {"type": "object", "properties": {
    "query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
    "site": {"type": "string"}, "recency": {"enum": ["day", "week", "month", "any"]}}, "required": ["query"]}}},
  {"type": "function", "function": {"name": "send_email", "parameters": {"type": "object", "properties": {
    "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1, "maxItems": 10},
    "subject": {"type": "string", "maxLength": 200}, "body": {"type": "string"},
    "priority": {"enum": ["low", "normal", "high"]}}, "required": ["to", "subject", "body"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "create_event", "parameters": {"type": "object", "properties": {
    "title": {"type": "string"}, "start": {"type": "string", "format": "date-time"},
    "end": {"type": "string", "format": "date-time"}, "attendees": {"type": "array", "items": {"type": "string"}},
    "location": {"type": "string"}}, "required": ["title", "start", "end"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_stock_price", "parameters": {"type": "object", "properties": {
    "ticker": {"type": "string", "pattern": "^[A-Z]{1,5}$"}, "exchange": {"enum": ["NYSE", "NASDAQ", "LSE"]}},
    "required": ["ticker"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object", "properties": {
    "query": {"type": "string"}, "database": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 10000}},
    "required": ["query"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "translate", "parameters": {"type": "object", "properties": {
    "text": {"type": "string"}, "source": {"type": "string", "maxLength": 5}, "target": {"type": "string", "maxLength": 5}},
    "required": ["text", "target"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "set_reminder", "parameters": {"type": "object", "properties": {
    "message": {"type": "string"}, "at": {"type": "string", "format": "date-time"},
    "repeat": {"anyOf": [{"enum": ["daily", "weekly"]}, {"type": "null"}]}}, "required": ["message", "at"],
    "additionalProperties": false}}}
]})";

struct MaskTimes {
  double cold_per_step = 0, warm_per_step = 0, warm_max = 0;
  int64_t cold_steps = 0, warm_steps = 0, documents = 0, unfinished = 0;
};

// Documents drawn through the constraint: per step, apply() over `logits` and accept() of a token drawn
// uniformly from the allowed ones.
MaskTimes measure_masks(const std::shared_ptr<const grammar::Constraint>& constraint,
                        const std::shared_ptr<const grammar::Vocabulary>& vocab, int walks, int max_steps) {
  std::mt19937 rng(7);
  std::vector<float> logits(size_t(vocab->n_vocab()));
  for (float& l : logits) l = std::uniform_real_distribution<float>(-5, 5)(rng);
  MaskTimes t;
  std::vector<int32_t> allowed;
  for (int w = 0; w <= walks; ++w) {
    SequenceConstraint c(constraint, vocab, false);
    for (int step = 0; step < max_steps; ++step) {
      const double start = thread_cpu_seconds();
      const std::span<const float> row = c.apply(logits);
      const double mask_end = thread_cpu_seconds();
      // Drawing is the model's part: not timed. Ends (when allowed) are left out so documents run long.
      allowed.clear();
      for (size_t i = 0; i < row.size(); ++i)
        if (row[i] > -1e30f) allowed.push_back(int32_t(i));
      std::erase_if(allowed, [&](int32_t id) { return std::binary_search(vocab->eog_ids().begin(), vocab->eog_ids().end(), id); });
      if (allowed.empty()) break;
      const int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      const double accept_start = thread_cpu_seconds();
      if (!c.accept(token)) fail("accept refused a token the mask allowed");
      const double spent = (mask_end - start) + (thread_cpu_seconds() - accept_start);
      if (w == 0) {
        t.cold_per_step += spent;
        ++t.cold_steps;
      } else {
        t.warm_per_step += spent;
        t.warm_max = std::max(t.warm_max, spent);
        ++t.warm_steps;
      }
      if (c.finished()) break;
      if (step + 1 == max_steps) ++t.unfinished;
    }
    ++t.documents;
  }
  t.cold_per_step /= double(std::max<int64_t>(t.cold_steps, 1));
  t.warm_per_step /= double(std::max<int64_t>(t.warm_steps, 1));
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int threads = 0, walks = 20, steps = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-m")) model_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--walks")) walks = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--steps")) steps = std::max(1, std::atoi(argv[i + 1]));
  }
  if (model_path.empty()) {
    std::fprintf(stderr,
                 "usage: structured_output_bench -m model.gguf [--threads N] [--walks N] [--steps N]\n"
                 "  e.g. tessera make-model --preset tinyllama-1.1b --type q8_0 --vocab-from tokenizer.json "
                 "-o tl-qwen3.gguf (Qwen3's tokenizer.json)\n");
    return 2;
  }
  try {
    const auto model = Model::load(model_path);
    ThreadPool pool(threads);
    std::printf("model: %s, vocabulary %d tokens (logits rows of %lld), %d threads\n", model_path.c_str(),
                model->tokenizer().n_vocab(), (long long)model->config().n_vocab, int(pool.size()));

    double t0 = thread_cpu_seconds();
    const auto vocab = make_grammar_vocabulary(model->tokenizer(), int32_t(model->config().n_vocab));
    std::printf("grammar vocabulary (trie of %zu nodes): %.1f ms, once per model\n", vocab->nodes().size(),
                (thread_cpu_seconds() - t0) * 1e3);

    // Compile times: median of 15 runs, each with an empty cache.
    auto median_ms = [](auto&& fn) {
      std::vector<double> ms;
      for (int i = 0; i < 15; ++i) {
        const double start = thread_cpu_seconds();
        fn();
        ms.push_back((thread_cpu_seconds() - start) * 1e3);
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const std::string schema_body =
        std::string(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "order", "schema": )") +
        kSchema + "}}}";
    const server::StructuredRequest schema_request =
        server::parse_structured_request(schema_body, json::parse(schema_body), true);
    const server::StructuredRequest tools_request =
        server::parse_structured_request(kToolsBody, json::parse(kToolsBody), true);
    const double schema_ms = median_ms([&] { server::StructuredOutput(server::ToolCallFormat{}).constraint(schema_request); });
    const double tools_ms = median_ms([&] { server::StructuredOutput(server::ToolCallFormat{}).constraint(tools_request); });
    server::StructuredOutput output{server::ToolCallFormat{}};
    const auto schema = output.constraint(schema_request);
    const auto tools = output.constraint(tools_request);
    std::printf("compile: nested schema %.2f ms (%d automaton states), tool set of 8 functions %.2f ms (%d states); "
                "target < 50 ms\n",
                schema_ms, schema->grammar->automaton().n_states(), tools_ms, tools->grammar->automaton().n_states());

    const MaskTimes m = measure_masks(schema, vocab, walks, 4000);
    std::printf("mask + accept per constrained sequence and step (nested schema, %lld documents, %lld unfinished):\n"
                "  cold (first document, caches empty): %.3f ms over %lld steps\n"
                "  warm: %.3f ms mean, %.3f ms worst, over %lld steps\n",
                (long long)m.documents, (long long)m.unfinished, m.cold_per_step * 1e3, (long long)m.cold_steps,
                m.warm_per_step * 1e3, m.warm_max * 1e3, (long long)m.warm_steps);

    const grammar::MaskCacheStats cs = schema->grammar->masks(*vocab)->stats();
    std::printf("  mask cache: parse states %llu hits / %llu misses, automaton states %llu hits / %llu misses, "
                "%.1f MiB\n",
                (unsigned long long)cs.state_hits, (unsigned long long)cs.state_misses,
                (unsigned long long)cs.position_hits, (unsigned long long)cs.position_misses,
                double(cs.bytes) / double(1 << 20));

    for (int64_t batch : {int64_t(1), int64_t(16)}) {
      const ThroughputMeasurement d = measure_decode(model, pool, batch, 64, steps);
      const double step_ms = d.median_step_seconds * 1e3;
      const double warm = m.warm_per_step * 1e3 * double(batch), cold = m.cold_per_step * 1e3 * double(batch);
      std::printf("batch %2lld: decode step %.1f ms (median of %d); masks of %lld constrained sequences: warm %.3f ms "
                  "= %.2f %% of the step, cold %.3f ms = %.2f %%; target <= 10 %%\n",
                  (long long)batch, step_ms, steps, (long long)batch, warm, 100.0 * warm / step_ms, cold,
                  100.0 * cold / step_ms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "structured_output_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
