// The serving benchmark's HTTP side: streaming requests to an OpenAI-compatible server, on one thread (Asio),
// each bounded by a timeout, timed with the steady clock. It parses SSE with the server's own parser, which is
// why the bench layer sits on the server (src/CMakeLists.txt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/serve_bench.h"

namespace tessera {

struct ClientOptions {
  HttpUrl url;
  RequestOptions request;
  std::string api_key;     // sent as "Authorization: Bearer ..." when set
  double timeout_s = 600;  // per request, connection to the last byte
};

// How requests are released: `concurrency` > 0 keeps that many in flight (a new one starts when one ends);
// otherwise they arrive at `arrivals` (seconds from the start, ascending), at most `max_concurrency` in flight
// when > 0 (an arrival waits for a free slot; its latency counts from when it is sent).
struct LoadPlan {
  int concurrency = 0;
  std::vector<double> arrivals;
  int max_concurrency = 0;
};

struct ServeBenchRun {
  std::vector<RequestResult> results;  // in prompt order
  double duration_s = 0;               // from the start to the end of the last request
};

// Opens (and closes) one TCP connection to the server; fails with tessera::Error "cannot connect to ..." when
// the host does not resolve or no connection opens within `timeout_s`.
void check_server_reachable(const HttpUrl& url, double timeout_s);

// Sends one streaming request per prompt; never throws for a failed request (its result says how it failed).
ServeBenchRun run_requests(const std::vector<BenchPrompt>& prompts, const ClientOptions& options,
                           const LoadPlan& plan);

}  // namespace tessera
