// The life of one API request in flight, and the writing of responses.
#include "server/generation.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "server/errors.h"
#include "server/request_prep.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

void send_json(Responder& responder, Metrics& metrics, int status, const nlohmann::json& body, const Headers& extra) {
  metrics.count_status(status);
  responder.send(status, "application/json", dump_json(body), extra);
}

void send_error(Responder& responder, Metrics& metrics, const ApiError& error) {
  const int status = http_status(error.code);
  Headers extra;
  if (status == 429 || status == 503) extra.emplace_back("Retry-After", std::to_string(retry_after_seconds(error)));
  send_json(responder, metrics, status, error_body(error), extra);
}

void finish_stream(Responder& responder, const ResponseHeader& header, const ApiRequest& request,
                   const std::vector<ChoiceTail>& tails, const Usage& usage) {
  for (const ChoiceTail& t : tails) {
    responder.write(sse_event(dump_json(
        chunk_json(header, t.index, t.text, t.role, t.logprobs, t.text_offset, t.finish, request.include_usage))));
  }
  if (request.include_usage) responder.write(sse_event(dump_json(usage_chunk_json(header, usage))));
  responder.write(sse_done());
  responder.end_stream();
}

bool large_body(const ApiRequest& request, const std::vector<ChoiceResult>& choices) {
  if (request.logprobs || request.prompt_logprobs >= 0) return true;
  // Texts past 256 KiB take about a millisecond to escape and serialize.
  size_t text_bytes = 0;
  for (const ChoiceResult& c : choices) text_bytes += c.text.size();
  return text_bytes > (256 << 10);
}

void send_built_json(const ServingContext& ctx, std::shared_ptr<Responder> responder, bool large, BodyBuilder build,
                     Headers extra) {
  if (!large) {
    send_json(*responder, ctx.metrics, 200, build(), extra);
    return;
  }
  struct Pending {
    std::shared_ptr<Responder> responder;
    BodyBuilder build;
    Headers extra;
    std::string body;
    std::optional<ApiError> error;
  };
  auto pending = std::make_shared<Pending>(Pending{std::move(responder), std::move(build), std::move(extra), {}, {}});
  ctx.lifecycle.count_in();  // a drain waits for these bytes as for a generation's
  // The builder's copy of the job hands its reference on to the io thread, so that the connection is never
  // destroyed on the builder's thread (the HTTP server's session set is the io thread's).
  auto job = [pending, &ioc = ctx.ioc, &metrics = ctx.metrics, &lifecycle = ctx.lifecycle]() mutable {
    std::shared_ptr<Pending> p = std::move(pending);
    try {
      p->body = dump_json(p->build());
    } catch (...) {
      p->error = current_api_error();
    }
    p->build = nullptr;  // what it captured (results, logprob lists) goes with it, here
    boost::asio::post(ioc, [p = std::move(p), &metrics, &lifecycle]() {
      struct CountOut {
        Lifecycle& lifecycle;
        ~CountOut() { lifecycle.count_out(); }
      } count_out{lifecycle};  // however the send ends
      if (p->error) {
        send_error(*p->responder, metrics, *p->error);
      } else {
        metrics.count_status(200);
        p->responder->send(200, "application/json", std::move(p->body), p->extra);
      }
    });
  };
  // With the builder's queue full (or no memory to queue) the body is built here: a response whose tokens were
  // generated is not refused.
  bool queued = false;
  try {
    queued = ctx.body_builder.post(job);
  } catch (...) {
  }
  if (!queued) job();
}

void replay(const ServingContext& ctx, std::shared_ptr<Responder> responder, const ResponseHeader& header,
            const ApiRequest& request, std::shared_ptr<const CachedResult> hit) {
  Usage usage;
  usage.prompt_tokens = hit->prompt_tokens;
  for (const ChoiceResult& c : hit->choices) usage.completion_tokens += c.n_generated;
  Headers extra = {{"X-Tessera-Cache", "hit"}};
  if (!request.stream) {
    auto build = [header, hit, usage, logprobs = request.logprobs] {
      return response_json(header, hit->choices, usage, logprobs);
    };
    send_built_json(ctx, std::move(responder), large_body(request, hit->choices), std::move(build), std::move(extra));
    return;
  }
  responder->start_stream(200, "text/event-stream", extra);
  // Each choice whole, in its one and finishing chunk.
  std::vector<ChoiceTail> tails;
  for (size_t i = 0; i < hit->choices.size(); ++i) {
    const ChoiceResult& c = hit->choices[i];
    tails.push_back({int32_t(i), c.text, true, request.logprobs ? &c.tokens : nullptr, 0, c.finish_reason});
  }
  finish_stream(*responder, header, request, tails, usage);
}

Generation::Generation(const ServingContext& context, std::shared_ptr<Responder> responder, ApiRequest request,
                       std::vector<std::vector<int32_t>> prompts, ResponseHeader header, Accounting accounting,
                       std::optional<Clock::time_point> deadline)
    : ctx_(context),
      responder_(std::move(responder)),
      request_(std::move(request)),
      header_(std::move(header)),
      accounting_(std::move(accounting)),
      deadline_(deadline),
      choices_(prompts.size() * size_t(request_.n)) {
  ctx_.lifecycle.count_in();
  prompts_.resize(prompts.size());
  for (size_t p = 0; p < prompts.size(); ++p) {
    prompts_[p].tokens = std::move(prompts[p]);
    if (request_.echo) init_echo(prompts_[p], request_.prompt_is_tokens ? nullptr : &request_.prompts[p]);
  }
  for (size_t i = 0; i < choices_.size(); ++i) choices_[i].prompt = i / size_t(request_.n);
  if (request_.structured.tools_active())
    for (size_t i = 0; i < choices_.size(); ++i) choices_[i].tools = new_tool_parser(i);
}

void Generation::init_echo(PromptState& prompt, const std::string* text) const {
  const bool with_logprobs = request_.logprobs && !prompt.tokens.empty();
  // The decoded text: the echo of token ids, and with logprobs the measure of the leading space below.
  const std::string decoded = !text || with_logprobs ? ctx_.tokenizer.decode(prompt.tokens) : std::string();
  prompt.echo_text = text ? *text : decoded;
  if (!with_logprobs) return;
  // The text leaves out the space a SentencePiece tokenizer puts in front (decode drops it from the first piece
  // with text): that token's text_offset step is one byte short of its piece.
  size_t pieces = 0;
  for (size_t i = 0; i < prompt.tokens.size(); ++i) {
    const size_t n = ctx_.tokenizer.token_piece(prompt.tokens[i]).size();
    if (n > 0 && pieces == 0) prompt.echo_trimmed_token = i;
    pieces += n;
  }
  prompt.echo_trimmed_bytes = int64_t(pieces) - int64_t(decoded.size());
  TokenInfo first = echo_token(prompt, prompt.tokens[0]);
  first.no_context = true;
  prompt.echo_tokens.push_back(std::move(first));
}

std::unique_ptr<ToolCallParser> Generation::new_tool_parser(size_t index) const {
  return std::make_unique<ToolCallParser>(ctx_.tool_format, "call_" + header_.id.substr(header_.id.find('-') + 1) +
                                                                "_" + std::to_string(index));
}

Generation::~Generation() { release(); }

void Generation::release() {
  if (counted_) ctx_.lifecycle.count_out();
  counted_ = false;
  for (Choice& c : choices_) release_queue_slot(c);
}

void Generation::release_queue_slot(Choice& c) {
  if (c.holds_queue_slot) ctx_.gateway.release_queue_slots(1);
  c.holds_queue_slot = false;
}

void Generation::start(Engine& engine) {
  const bool on_fallback = &engine == ctx_.lifecycle.fallback();
  try {
    for (Choice& c : choices_) c.on_fallback = on_fallback;
    for (size_t p = 0; p < prompts_.size(); ++p) submit(p * size_t(request_.n), size_t(request_.n), engine);
    for (Choice& c : choices_) {
      c.holds_queue_slot = true;
      ctx_.gateway.take_queue_slot();
    }
  } catch (...) {
    cancel();
    done_ = true;
    release();
    // The choices already submitted hold this generation until the engine reports them cancelled, maybe as the
    // last owners, on the engine thread: the connection must not be destroyed there (the caller answers it).
    responder_.reset();
    throw;
  }
  std::weak_ptr<Generation> weak = weak_from_this();
  responder_->on_close([weak] {
    if (auto self = weak.lock()) {
      self->client_gone_ = true;
      self->cancel();
    }
  });
  if (deadline_) {
    // The engine ends expired requests itself; this timer is the backstop should a request sit where the
    // engine does not look at deadlines. A cancel after the deadline is reported as a timeout.
    deadline_timer_ = std::make_unique<boost::asio::steady_timer>(ctx_.ioc);
    deadline_timer_->expires_at(*deadline_ + std::chrono::milliseconds(200));
    deadline_timer_->async_wait([weak](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->cancel();
    });
  }
}

void Generation::submit(size_t first, size_t count, Engine& engine) {
  Request r = engine_request(request_, prompts_[choices_[first].prompt].tokens);  // one prompt's choices
  // Choices [first, first + count) of one prompt as the engine's samples 0..count-1: sample i draws with seed + i,
  // so a prompt's choice k always draws with seed + k (distinct but reproducible), whether forked together, re-run
  // alone, or sent as one prompt of a batch.
  r.n = int32_t(count);
  if (r.sampling.has_seed) r.sampling.seed += first - choices_[first].prompt * size_t(request_.n);
  r.deadline = deadline_;
  r.report_start = true;  // the queue slots are given back when the request leaves the engine's queue
  auto self = shared_from_this();
  boost::asio::io_context& ioc = ctx_.ioc;
  const uint64_t id = engine.submit(std::move(r), [self, first, &ioc](const StreamEvent& ev) {
    const size_t index = first + size_t(ev.index);
    boost::asio::post(ioc, [self, index, ev, at = Clock::now()] { self->on_event(index, ev, at); });
  });
  for (size_t i = first; i < first + count; ++i) {
    Choice& c = choices_[i];
    c.engine = &engine;
    c.id = id;
    c.running = true;
    ++n_running_;
  }
}

void Generation::cancel() {
  // Forked choices share one engine request: cancel it once.
  const Choice* last = nullptr;
  for (const Choice& c : choices_) {
    if (!c.running || (last && last->engine == c.engine && last->id == c.id)) continue;
    c.engine->cancel(c.id);
    last = &c;
  }
}

bool Generation::deadline_passed() const { return deadline_ && Clock::now() >= *deadline_; }

void Generation::on_event(size_t index, const StreamEvent& event, Clock::time_point at) {
  try {
    handle_event(index, event, at);
  } catch (const std::exception& e) {
    fail_internal(e.what());
  } catch (...) {
    fail_internal("unknown exception");
  }
}

void Generation::fail_internal(const char* what) {
  std::fprintf(stderr, "tessera serve: request %s failed inside the server: %s\n", header_.id.c_str(), what);
  if (done_) return;
  error_ = ApiError{ErrorCode::Internal, std::string("internal error: ") + what};
  cancel();
  if (n_running_ > 0) return;  // the choices' Finished events complete the response
  try {
    complete();
  } catch (...) {
    // Not even the error could be sent: drop the connection rather than leave the client waiting.
    if (responder_) responder_->abort();
    done_ = true;
    responder_.reset();
    release();
  }
}

void Generation::handle_event(size_t index, const StreamEvent& event, Clock::time_point at) {
  Choice& c = choices_[index];
  release_queue_slot(c);
  if (event.kind == StreamEvent::Kind::Started) {
    // The request left the engine's queue: so did every choice forked from it.
    for (Choice& other : choices_)
      if (other.engine == c.engine && other.id == c.id) release_queue_slot(other);
    return;
  }
  if (!c.running) return;
  if (event.kind == StreamEvent::Kind::PromptLogprobs)
    on_prompt_logprobs(prompts_[c.prompt], event);
  else if (event.kind == StreamEvent::Kind::Token)
    on_token(c, index, event, at);
  else if (event.kind == StreamEvent::Kind::Finished)
    on_finished(c, index, event);
}

void Generation::on_prompt_logprobs(PromptState& prompt, const StreamEvent& event) const {
  const Tokenizer& tok = ctx_.tokenizer;
  for (const PositionLogprobs& p : event.prompt_logprobs) {
    // Each position once, in order: a choice retried on the fallback reports the prompt again from the start
    // (several retried choices, each on its own).
    if (p.position != prompt.next_position) continue;
    ++prompt.next_position;
    if (request_.prompt_logprobs >= 0) prompt.positions.push_back(p);
    if (!request_.echo || !request_.logprobs) continue;
    TokenInfo info = echo_token(prompt, p.token);
    info.logprob = p.logprob;
    // The engine sends as many alternatives as echo or prompt_logprobs asks for: echo shows top_logprobs.
    for (size_t k = 0; k < p.top.size() && k < size_t(request_.top_logprobs); ++k)
      info.top.push_back({tok.token_piece(p.top[k].first), p.top[k].second});
    prompt.echo_tokens.push_back(std::move(info));
  }
}

nlohmann::json prompt_logprobs_json(const std::vector<PositionLogprobs>& positions, int32_t top,
                                    const Tokenizer& tokenizer) {
  nlohmann::json list = nlohmann::json::array({nullptr});  // the first token: nothing precedes it
  for (const PositionLogprobs& p : positions) {
    nlohmann::json entry = nlohmann::json::object();
    auto add = [&](int32_t id, float logprob, int32_t rank) {
      // A non-finite logprob (a -inf or NaN logit) as vLLM clamps it: clients read the field as a float.
      const double value = std::isfinite(logprob) ? double(logprob) : -9999.0;
      entry[std::to_string(id)] = {{"logprob", value}, {"rank", rank}, {"decoded_token", tokenizer.token_piece(id)}};
    };
    for (size_t k = 0; k < p.top.size() && k < size_t(top); ++k) add(p.top[k].first, p.top[k].second, int32_t(k) + 1);
    add(p.token, p.logprob, p.rank);  // last: its own rank wins where it is also an alternative (ties)
    list.push_back(std::move(entry));
  }
  return list;
}

TokenInfo Generation::echo_token(const PromptState& prompt, int32_t id) const {
  TokenInfo info;
  info.piece = ctx_.tokenizer.token_piece(id);
  if (prompt.echo_tokens.size() == prompt.echo_trimmed_token && prompt.echo_trimmed_bytes > 0)
    info.text_bytes = std::max<int64_t>(0, int64_t(info.piece.size()) - prompt.echo_trimmed_bytes);
  return info;
}

std::string Generation::take_echo(Choice& c) {
  if (!request_.echo || c.echoed) return {};
  c.echoed = true;
  const PromptState& prompt = prompts_[c.prompt];
  if (request_.logprobs) c.pending.insert(c.pending.begin(), prompt.echo_tokens.begin(), prompt.echo_tokens.end());
  return prompt.echo_text;
}

void Generation::on_token(Choice& c, size_t index, const StreamEvent& event, Clock::time_point at) {
  if (c.result.n_generated > 0) ctx_.metrics.observe_inter_token(std::chrono::duration<double>(at - c.last_token).count());
  c.last_token = at;
  ++c.result.n_generated;
  c.result.text += event.text;
  if (request_.logprobs) {
    const Tokenizer& tok = ctx_.tokenizer;
    TokenInfo info;
    info.piece = tok.token_piece(event.token);
    info.logprob = event.sampled.logprob;
    for (const TokenLogprob& alt : event.top_logprobs)
      if (std::isfinite(alt.logprob))  // a token a constraint ruled out has -inf: it was never an alternative
        info.top.push_back({tok.token_piece(alt.token), alt.logprob});
    if (request_.stream) c.pending.push_back(info);
    c.result.tokens.push_back(std::move(info));
  }
  if (c.tools) {
    on_reply_text(c, index, event.text, false);
    return;
  }
  if (request_.stream && !client_gone_ && !error_ && !done_ && (!event.text.empty() || !c.pending.empty()))
    stream_chunk(c, index, event.text, std::nullopt);
}

void Generation::on_reply_text(Choice& c, size_t index, std::string_view text, bool end) {
  std::vector<ReplyDelta> deltas;
  c.tools->feed(text, deltas);
  if (end) {
    c.tools->finish(deltas);
    c.result.has_tool_calls_parsed = true;
    c.result.content = c.tools->content();
    c.result.tool_calls = c.tools->calls();
  }
  if (!request_.stream || client_gone_ || error_ || done_) return;
  for (const ReplyDelta& d : deltas) {
    if (d.call < 0) {
      stream_chunk(c, index, d.content, std::nullopt);
    } else {
      stream_tool_delta(c, index, d);
    }
  }
}

void Generation::stream_tool_delta(Choice& c, size_t index, const ReplyDelta& delta) {
  ensure_stream_started();
  const bool role = !c.role_sent;
  c.role_sent = true;
  c.streamed = true;
  nlohmann::json chunk = chunk_json(header_, int32_t(index), {}, role, nullptr, 0, std::nullopt, request_.include_usage);
  nlohmann::json& d = chunk["choices"][0]["delta"];
  if (role) d["content"] = nullptr;
  d["tool_calls"] = tool_call_delta_json(delta);
  responder_->write(sse_event(dump_json(chunk)));
}

void Generation::on_finished(Choice& c, size_t index, const StreamEvent& event) {
  c.running = false;
  --n_running_;
  FinishReason reason = event.finish_reason;
  if (reason == FinishReason::Cancelled && deadline_passed()) reason = FinishReason::Timeout;
  if (reason == FinishReason::Error) {
    // A failure before anything of this choice reached the client is retried on the fallback replica, if that
    // passes its health check (a retry on a bad one would only ask for one more probe at its queue's front).
    Engine* fallback = ctx_.lifecycle.fallback();
    const bool retry = fallback && ctx_.lifecycle.fallback_health()->ok() && !c.on_fallback && !c.streamed &&
                       !client_gone_ && !done_;
    ctx_.lifecycle.on_engine_error(c.engine);
    if (retry) {
      ctx_.metrics.count_fallback();
      c.result = ChoiceResult{};
      c.pending.clear();
      if (c.tools) c.tools = new_tool_parser(index);
      c.on_fallback = true;
      try {
        submit(index, 1, *fallback);
        return;
      } catch (const Error& e) {
        fail(engine_refusal(e, /*fallback_retry=*/true));
      }
    } else {
      fail(engine_failure(event.error));
    }
  }
  ctx_.metrics.observe_request(event.stats, reason);
  if (reason == FinishReason::Timeout) ctx_.metrics.count_timeout();
  if (reason == FinishReason::Cancelled) ctx_.metrics.count_cancellation();
  if (index % size_t(request_.n) == 0) n_cached_prompt_tokens_ += event.stats.n_cached_prompt_tokens;  // per prompt
  c.result.text += event.text;
  c.result.finish_reason = reason;
  std::string_view last_text = event.text;
  if (c.tools && reason != FinishReason::Error) {
    on_reply_text(c, index, event.text, true);  // streams what the end of the reply completes
    last_text = {};
  }
  // A timeout with nothing generated in any choice becomes a 504 (complete() decides); otherwise the
  // choice's last chunk carries its finish reason.
  if (request_.stream && !client_gone_ && !error_ && !done_ && reason != FinishReason::Error) {
    const bool maybe_504 = reason == FinishReason::Timeout && !stream_started_;
    if (!maybe_504) stream_chunk(c, index, last_text, reason);
  }
  if (n_running_ == 0) complete();
}

void Generation::ensure_stream_started() {
  if (stream_started_) return;
  stream_started_ = true;
  responder_->start_stream(200, "text/event-stream");
}

void Generation::stream_chunk(Choice& c, size_t index, std::string_view text, std::optional<FinishReason> finish) {
  ensure_stream_started();
  std::string echoed = take_echo(c);
  if (!echoed.empty()) {
    echoed += text;
    text = echoed;
  }
  const bool role = header_.endpoint == Endpoint::ChatCompletions && !c.role_sent;
  c.role_sent = true;
  c.streamed = true;
  c.finish_sent = finish.has_value();
  const std::vector<TokenInfo>* lp = request_.logprobs ? &c.pending : nullptr;
  nlohmann::json chunk =
      chunk_json(header_, int32_t(index), text, role, lp, c.text_offset, finish, request_.include_usage);
  if (finish && c.tools) chunk["choices"][0]["finish_reason"] = finish_reason_string(*finish, !c.tools->calls().empty());
  for (const TokenInfo& t : c.pending) c.text_offset += t.bytes_in_text();
  c.pending.clear();
  responder_->write(sse_event(dump_json(chunk)));
}

void Generation::fail(const ApiError& error) {
  if (done_) return;
  error_ = error;
  cancel();
}

void Generation::complete() {
  if (done_) return;
  done_ = true;
  respond();
  // The engine may keep its callback (and so this object) a while longer; the connection and the in-flight
  // count are not held that long.
  responder_->on_close(nullptr);
  responder_.reset();
  release();
}

void Generation::respond() {
  deadline_timer_.reset();  // cancels it; the handler holds only a weak pointer
  Usage usage;
  for (const PromptState& p : prompts_) usage.prompt_tokens += int64_t(p.tokens.size());
  usage.cached_tokens = n_cached_prompt_tokens_;
  bool any_tokens = false, cacheable = !accounting_.cache_key.empty(), answered_by_fallback = false;
  for (const Choice& c : choices_) {
    answered_by_fallback = answered_by_fallback || c.on_fallback;
    usage.completion_tokens += c.result.n_generated;
    any_tokens = any_tokens || c.result.n_generated > 0;
    cacheable = cacheable && (c.result.finish_reason == FinishReason::Stop ||
                              c.result.finish_reason == FinishReason::Length);
  }
  const double used = double(usage.prompt_tokens + usage.completion_tokens);
  ctx_.gateway.refund_tokens(accounting_.limiter_key, accounting_.limits, accounting_.charged_tokens - used);
  if (client_gone_) return;
  bool timed_out = !any_tokens;
  for (const Choice& c : choices_) timed_out = timed_out && c.result.finish_reason == FinishReason::Timeout;
  if (!error_ && timed_out && !stream_started_)
    error_ = ApiError{ErrorCode::Timeout, "the request's deadline passed before any token was generated"};

  if (error_) {
    if (stream_started_) {
      responder_->write(sse_event(dump_json(error_body(*error_))));
      responder_->write(sse_done());
      responder_->end_stream();
    } else {
      send_error(*responder_, ctx_.metrics, *error_);
    }
    return;
  }
  if (request_.echo && (!request_.stream || cacheable)) {
    // The complete choices (the body, and what the cache replays) start with the prompt; a stream sends it with
    // each choice's first chunk instead.
    for (Choice& c : choices_) {
      const PromptState& prompt = prompts_[c.prompt];
      c.result.text.insert(0, prompt.echo_text);
      if (request_.logprobs)
        c.result.tokens.insert(c.result.tokens.begin(), prompt.echo_tokens.begin(), prompt.echo_tokens.end());
    }
  }
  if (cacheable && !error_) {
    CachedResult cached;
    cached.prompt_tokens = usage.prompt_tokens;
    for (const Choice& c : choices_) cached.choices.push_back(c.result);
    // What the fallback answered is cached under its own model name: it must not come back as the primary's
    // answer once the primary is healthy again.
    ctx_.gateway.cache().put(answered_by_fallback ? accounting_.fallback_cache_key : accounting_.cache_key, std::move(cached));
  }
  if (request_.stream) {
    ensure_stream_started();
    std::vector<ChoiceTail> tails;
    std::vector<std::string> echoes(choices_.size());  // a choice that ends here may not have echoed yet
    for (size_t i = 0; i < choices_.size(); ++i) {  // a choice that timed out before the stream began
      Choice& c = choices_[i];
      if (c.finish_sent) continue;
      echoes[i] = take_echo(c);
      tails.push_back({int32_t(i), echoes[i], header_.endpoint == Endpoint::ChatCompletions && !c.role_sent,
                       request_.logprobs ? &c.pending : nullptr, c.text_offset, c.result.finish_reason});
    }
    finish_stream(*responder_, header_, request_, tails, usage);
    return;
  }
  std::vector<ChoiceResult> results;
  for (Choice& c : choices_) results.push_back(std::move(c.result));
  // vLLM's places for prompt_logprobs: each completion choice carries its prompt's list; a chat response its one
  // prompt's.
  std::vector<std::vector<PositionLogprobs>> positions;
  std::vector<size_t> choice_prompt;
  if (request_.prompt_logprobs >= 0) {
    for (PromptState& p : prompts_) positions.push_back(std::move(p.positions));
    for (const Choice& c : choices_) choice_prompt.push_back(c.prompt);
  }
  const bool large = large_body(request_, results);
  send_built_json(ctx_, responder_, large,
                  [header = header_, results = std::move(results), usage, logprobs = request_.logprobs,
                   top = request_.prompt_logprobs, positions = std::move(positions),
                   choice_prompt = std::move(choice_prompt), &tokenizer = ctx_.tokenizer] {
                    nlohmann::json body = response_json(header, results, usage, logprobs);
                    if (top < 0) return body;
                    if (header.endpoint == Endpoint::Completions) {
                      std::vector<nlohmann::json> lists;  // once per prompt, copied into each of its n choices
                      for (const auto& p : positions) lists.push_back(prompt_logprobs_json(p, top, tokenizer));
                      for (size_t i = 0; i < choice_prompt.size(); ++i)
                        body["choices"][i]["prompt_logprobs"] = lists[choice_prompt[i]];
                    } else {
                      body["prompt_logprobs"] = prompt_logprobs_json(positions.front(), top, tokenizer);
                    }
                    return body;
                  });
}

}  // namespace tessera::server
