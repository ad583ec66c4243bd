// `tessera serve`: the OpenAI-compatible HTTP server on the batching engine, with graceful drain on
// SIGTERM/SIGINT (stop accepting, finish in-flight requests within --drain-timeout, exit 0).
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "chat/errors.h"
#include "commands.h"
#include "core/error.h"
#include "core/fd_limit.h"
#include "core/json_file.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/lifecycle.h"
#include "server/service.h"
#include "spec_flags.h"

namespace tessera {
namespace {

struct ServeOptions {
  std::string model_path;
  std::string fallback_path;
  bool ignore_memory_check = false;
  std::string served_name;
  server::HttpOptions http;
  server::ServiceOptions service;
  EngineOptions engine;
  LoadOptions load;  // primary and fallback model
  std::vector<std::string> api_keys;
  std::string api_keys_file;
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> cors_origins;
  int64_t max_connections = 0;  // 0: sized to the descriptor limit
  double health_recheck_s = 10.0;
  bool metrics_require_key = false;  // the default with keys now; accepted for old command lines
  std::string chat_template_path;
  std::string generation_config = "model";
  bool no_result_cache = false;
  double result_cache_mb = 64.0;
  double result_cache_ttl_s = 600.0;
  double drain_timeout_s = 30.0;
  SpecFlags spec;  // speculative decoding, primary model only (a draft matches one vocabulary)
};

// The default connection cap: the descriptor limit less room for the model files, the engine, a refused
// connection's answer and the listening socket (an eighth, at least 64).
size_t default_max_connections(uint64_t fd_limit) {
  const uint64_t headroom = std::max<uint64_t>(64, fd_limit / 8);
  return fd_limit > headroom + 16 ? size_t(fd_limit - headroom) : 16;
}

// Keys from --api-key, --api-keys-file and the TESSERA_API_KEYS environment variable (the keys file's format,
// entries separated by newlines or commas): the last two stay out of `ps`.
std::vector<server::ApiKey> configured_keys(const ServeOptions& o) {
  std::vector<server::ApiKey> keys;
  for (const std::string& k : o.api_keys) keys.push_back(server::ApiKey{k, {}, 0, {}, {}, {}});
  if (!o.api_keys_file.empty())
    for (auto& k : server::ApiKeys::read_file(o.api_keys_file)) keys.push_back(std::move(k));
  const char* env = std::getenv("TESSERA_API_KEYS");
  if (env)
    for (auto& k : server::ApiKeys::parse(env, "TESSERA_API_KEYS", "\n,")) keys.push_back(std::move(k));
  // Asked for keys and got none (a file of comments, an empty variable): refuse rather than serve without any.
  if (keys.empty() && (!o.api_keys_file.empty() || env))
    fail("{} holds no API key; the server would run without authentication",
         env ? "TESSERA_API_KEYS" : "the API keys file '" + o.api_keys_file + "'");
  return keys;
}

std::string default_model_name(const std::string& path) {
  if (path.empty()) return "stories260K";
  std::filesystem::path p(path);
  if (!std::filesystem::is_directory(p)) return p.stem().string();
  // A Hugging Face folder goes by its whole name: "Qwen2.5-0.5B" has no extension to strip.
  p = p.lexically_normal();
  return (p.filename().empty() ? p.parent_path() : p).filename().string();
}

int serve(ServeOptions& o) {
  const uint64_t fd_limit = raise_fd_limit();
  o.http.max_connections = o.max_connections > 0 ? size_t(o.max_connections) : default_max_connections(fd_limit);
  o.service.max_pending_parses = o.http.max_connections;  // one request per connection is handled at a time
  // Declared first so that it is destroyed last: engine threads may post to it until the engines are gone.
  boost::asio::io_context ioc(1);
  auto model = load_model_or_embedded(o.model_path, o.load, o.ignore_memory_check);
  std::shared_ptr<Model> fallback_model;
  if (!o.fallback_path.empty()) {
    // The fallback is the higher-precision replica: its float weights keep fp32 activations.
    LoadOptions exact = o.load;
    exact.bf16_products = Bf16Products::Off;
    fallback_model = load_model_or_embedded(o.fallback_path, exact, o.ignore_memory_check);
  }
  // Both models, the draft and all KV caches (the draft's own among them) share the memory: fit_kv_pools
  // counts the draft from the primary's speculative options.
  EngineOptions primary_options = o.engine, fallback_options = o.engine;
  primary_options.speculative = speculative_from_flags(o.spec, *model, o.load, o.ignore_memory_check);
  std::vector<std::pair<const Model*, EngineOptions*>> engines{{model.get(), &primary_options}};
  if (fallback_model) engines.push_back({fallback_model.get(), &fallback_options});
  fit_engine_kv_caches(engines, memory_for_check(o.ignore_memory_check));
  auto primary = std::make_shared<Engine>(model, primary_options);
  std::shared_ptr<Engine> fallback;
  if (fallback_model) fallback = std::make_shared<Engine>(fallback_model, fallback_options);

  o.service.model_name = o.served_name.empty() ? default_model_name(o.model_path) : o.served_name;
  o.service.fallback_model_name = default_model_name(o.fallback_path);
  o.service.api_keys = configured_keys(o);
  o.service.origins = server::OriginPolicy(o.http.host, o.allowed_hosts, o.cors_origins);
  o.service.health_recheck = std::chrono::milliseconds(int64_t(o.health_recheck_s * 1000));
  o.service.result_cache_bytes = o.no_result_cache ? 0 : uint64_t(o.result_cache_mb * 1024 * 1024);
  o.service.result_cache_ttl_ms = int64_t(o.result_cache_ttl_s * 1000);
  if (!o.chat_template_path.empty()) o.service.chat_template = read_text_file(o.chat_template_path);
  if (o.generation_config == "model" && !model->sampling_defaults().empty()) {
    o.service.base_sampling = with_defaults(o.service.base_sampling, model->sampling_defaults());
    std::fprintf(stderr, "tessera serve: requests start from the model's sampling defaults (%s; "
                 "--generation-config none: neutral)\n", model->sampling_defaults().describe().c_str());
  }

  // The service parses the chat template: one that does not parse stops here, with its line and column.
  std::unique_ptr<server::Service> service_owner;
  try {
    service_owner = std::make_unique<server::Service>(ioc, primary, fallback, o.service);
  } catch (const chat::SyntaxError& e) {
    fail("{} (in {}; --chat-template FILE replaces it)", e.what(),
         o.chat_template_path.empty() ? "the model's chat template" : o.chat_template_path);
  }
  server::Service& service = *service_owner;
  std::fprintf(stderr, "tessera serve: chat prompts %s\n",
               !service.has_chat_template()      ? "join the message contents (no chat template)"
               : o.chat_template_path.empty()    ? "use the model's chat template"
                                                 : ("use the chat template in " + o.chat_template_path).c_str());
  server::HttpServer http(ioc, o.http,
                          [&service](server::HttpRequest&& r, std::shared_ptr<server::Responder> w) {
                            service.handle(std::move(r), std::move(w));
                          });
  const uint16_t port = http.listen();
  std::fprintf(stderr, "tessera serve: model '%s' on http://%s:%u%s\n", o.service.model_name.c_str(),
               o.http.host.c_str(), unsigned(port), fallback ? " (with a fallback model)" : "");
  std::fprintf(stderr, "tessera serve: %zu API keys%s; at most %zu connections\n", o.service.api_keys.size(),
               o.service.api_keys.empty()    ? " (no authentication)"
               : o.service.shared_prefix_cache ? ", tenants share the prefix cache"
                                               : ", caches kept apart per tenant",
               o.http.max_connections);

  std::thread warm([&service] {
    const bool ok = service.warm_up();
    std::fprintf(stderr, "tessera serve: warm-up %s\n", ok ? "done, ready" : "FAILED, not ready");
  });

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish, cancel them at the drain timeout, then stop.
  server::DrainOnSignal drain(ioc, service.lifecycle(), http,
                              std::chrono::milliseconds(int64_t(o.drain_timeout_s * 1000)));

  ioc.run();
  warm.join();
  if (service.n_in_flight() > 0) {
    // Requests the engine never finished: do not wait on them in the destructors.
    std::fprintf(stderr, "tessera serve: %lld requests did not finish\n", static_cast<long long>(service.n_in_flight()));
    std::fflush(stderr);
    std::_Exit(0);
  }
  std::fprintf(stderr, "tessera serve: stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  auto o = std::make_shared<ServeOptions>();
  o->engine.scheduling.max_seqs = 64;
  cmd->add_option("-m,--model", o->model_path, "GGUF model or Hugging Face folder (default: the embedded stories260K)");
  add_memory_check_flag(cmd, o->ignore_memory_check);
  cmd->add_option("--fallback-model", o->fallback_path,
                  "GGUF model to re-run a request on when the primary fails (e.g. a higher-precision copy); its BF16 "
                  "weights always multiply fp32 activations");
  add_bf16_products_options(cmd, o->load.bf16_products);
  add_int8_threshold_option(cmd, o->load.int8_threshold);
  cmd->add_option("--served-model-name", o->served_name, "model id for the API (default: the file name)");
  cmd->add_option("--chat-template", o->chat_template_path,
                  "Jinja chat template file to use instead of the model's (an empty file: no template)");
  cmd->add_option("--generation-config", o->generation_config,
                  "'model': a request's unset sampling fields take the model's recommended values (GGUF "
                  "general.sampling.*, Hugging Face generation_config.json); 'none': OpenAI's neutral defaults")
      ->capture_default_str()->check(CLI::IsMember({"model", "none"}));
  cmd->add_option("--host", o->http.host, "address to bind")->capture_default_str();
  cmd->add_option("--port", o->http.port, "port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", o->api_keys,
                  "accepted API key (repeatable). Keys on the command line are visible to every user in `ps`: "
                  "prefer --api-keys-file or the TESSERA_API_KEYS environment variable");
  cmd->add_option("--api-keys-file", o->api_keys_file,
                  "file of API keys, one per line, each optionally followed by name=TENANT priority_min=P rps=R "
                  "tpm=T burst=B (see src/server/auth.h); TESSERA_API_KEYS takes the same entries, separated by "
                  "newlines or commas");
  cmd->add_flag("--metrics-public", o->service.metrics_public,
                "with API keys: /metrics answers without a key too (by default it needs one)");
  cmd->add_flag("--metrics-require-key", o->metrics_require_key, "accepted for compatibility: the default with API keys");
  cmd->add_flag("--shared-prefix-cache", o->service.shared_prefix_cache,
                "tenants (API key names) share cached prompt prefixes: for a single-tenant deployment. By default "
                "each tenant's prefixes are its own, so cached_tokens reveals nothing of another's prompts");
  cmd->add_option("--allowed-hosts", o->allowed_hosts,
                  "Host header values the server answers to (repeatable or comma-separated; '*': any). Default: "
                  "the loopback names when bound to a loopback address, else any")
      ->delimiter(',');
  cmd->add_option("--cors-origins", o->cors_origins,
                  "browser origins (scheme://host[:port]) allowed to POST, with CORS headers for them (repeatable "
                  "or comma-separated; '*': any). Default: none")
      ->delimiter(',');
  cmd->add_option("--metrics-prefix", o->service.metrics_prefix,
                  "metric name prefix; 'vllm:' exports vLLM's exact names for the metrics vLLM has too (the rest "
                  "stay tessera_), for dashboards and autoscalers written for vLLM")
      ->capture_default_str()
      ->check([](const std::string& prefix) { return server::metrics_prefix_problem(prefix); });
  cmd->add_option("--rate-limit-rps", o->service.rate_limits.requests_per_second,
                  "requests per second per key (0: unlimited)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--rate-limit-burst", o->service.rate_limits.request_burst,
                  "request bucket size (default: max(1, rps))")->check(CLI::NonNegativeNumber);
  cmd->add_option("--rate-limit-tpm", o->service.rate_limits.tokens_per_minute,
                  "tokens (prompt + max_tokens) per minute per key (0: unlimited)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-queue", o->service.max_queue, "requests admitted and not yet started before 429")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body-bytes", o->http.max_body_bytes, "request body limit (413 above)")->capture_default_str();
  cmd->add_option("--max-response-bytes", o->service.max_response_bytes,
                  "a complete (non-streaming) response that could be larger is refused up front with a 400, e.g. "
                  "256MB")
      ->transform(CLI::AsSizeValue(false))->capture_default_str();
  cmd->add_option("--max-connections", o->max_connections,
                  "open connections; more get a 503 and are closed (default: the descriptor limit less an eighth)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--idle-timeout", o->http.idle_timeout_s, "seconds a connection may wait to start a request")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--header-timeout", o->http.header_timeout_s,
                  "seconds from a request's first byte to the end of its headers")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--body-timeout", o->http.body_timeout_s, "seconds to receive a request body")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--write-timeout", o->http.write_timeout_s,
                  "seconds a client may leave a response unread before it is dropped (its generation cancelled)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--parse-workers", o->service.parse_workers,
                  "threads that parse, render and tokenize requests off the io thread (default: a quarter of the "
                  "cores, 1 to 4)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--health-check-interval", o->health_recheck_s,
                  "seconds between probes of an engine marked bad (a request failed inside it and a probe failed)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--no-result-cache", o->no_result_cache, "disable the result cache");
  cmd->add_option("--result-cache-mb", o->result_cache_mb, "result cache memory cap")->capture_default_str();
  cmd->add_option("--result-cache-ttl", o->result_cache_ttl_s, "result cache entry lifetime, seconds")
      ->capture_default_str();
  cmd->add_option("--request-timeout-ms", o->service.default_timeout_ms, "default deadline (0: none)")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o->drain_timeout_s, "seconds to finish in-flight requests on SIGTERM")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->engine.threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", o->engine.n_ctx, "context length (default: the model's)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-seqs", o->engine.scheduling.max_seqs, "sequences per batch")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-batched-tokens", o->engine.scheduling.max_batched_tokens, "tokens per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kv-blocks", o->engine.kv_blocks, "KV cache blocks (0: derived)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-mem", o->engine.kv_cache_bytes, "KV cache size in bytes, e.g. 512MB (0: derived)")
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--kv-block-size", o->engine.kv_block_size, "token positions per KV block")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  add_kv_type_option(cmd, "--kv-type", o->engine.kv_type, "KV cache storage: " + kv_type_names() + " (default f16)");
  const std::map<std::string, SchedulingPolicy> modes{{"continuous", SchedulingPolicy::Continuous},
                                                      {"static", SchedulingPolicy::Static},
                                                      {"window", SchedulingPolicy::Window}};
  cmd->add_option("--batching", o->engine.scheduling.policy, "continuous (default), static or window")
      ->transform(CLI::CheckedTransformer(modes, CLI::ignore_case));
  cmd->add_option("--max-wait-ms", o->engine.scheduling.max_wait_ms, "window batching: longest wait to fill a batch")
      ->capture_default_str()->check(CLI::Range(0, 600000));
  cmd->add_option("--preferred-batch", o->engine.scheduling.batch_size, "window batching: batch size")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_flag("--no-prefix-caching{false}", o->engine.prefix_caching, "do not reuse cached prompt prefixes");
  add_spec_options(cmd, o->spec);
  cmd->callback([&action, o] { action = [o] { return serve(*o); }; });
}

}  // namespace tessera
