// The server's one error enum: every way a request can fail, mapped in one place to an HTTP status and an
// OpenAI-style error body ({"error": {"message", "type", "param", "code"}}), which is also what a stream sends
// as its last event when it fails after the headers went out. Engine errors are mapped to it here too.
#pragma once

#include <nlohmann/json.hpp>

#include <exception>
#include <string>
#include <utility>

namespace tessera {
class Error;
class InvalidRequest;
}

namespace tessera::server {

enum class ErrorCode {
  InvalidJson,             // 400: the body is not JSON (or not UTF-8)
  InvalidRequest,          // 400: a field is missing, of the wrong type or out of range
  ContextLengthExceeded,   // 400: prompt (+ max_tokens) longer than the context
  TemplateError,           // 400: the chat template rejects the conversation
  Unauthorized,            // 401: missing or wrong API key
  PermissionDenied,        // 403: the key may not ask for this (priority), or the Host/Origin is not allowed
  NotFound,                // 404: no such route
  ModelNotFound,           // 404: `model` names a model this server does not serve
  MethodNotAllowed,        // 405
  PayloadTooLarge,         // 413: body over --max-body-bytes
  RateLimited,             // 429: the key's token bucket is empty (Retry-After)
  QueueFull,               // 429: the waiting queue is at --max-queue (Retry-After)
  Internal,                // 500: the request failed inside the engine
  Unavailable,             // 503: draining, overloaded, or no engine passes its health check
  Timeout,                 // 504: the deadline passed before anything was sent
};

struct ApiError {
  ApiError() = default;
  ApiError(ErrorCode code, std::string message, std::string param = {}, double retry_after_s = 0.0)
      : code(code), message(std::move(message)), param(std::move(param)), retry_after_s(retry_after_s) {}

  ErrorCode code = ErrorCode::Internal;
  std::string message;
  std::string param;           // the offending request field, empty when none
  double retry_after_s = 0.0;  // > 0: sent as Retry-After (rounded up to whole seconds)
};

// Thrown by request parsing and validation; caught once at the route edge.
class ApiException : public std::exception {
 public:
  explicit ApiException(ApiError error) : error_(std::move(error)) {}
  ApiException(ErrorCode code, std::string message, std::string param = {})
      : error_(code, std::move(message), std::move(param)) {}
  const ApiError& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  ApiError error_;
};

// The engine's refusal of a request (check_request) as the API's error. `prompt_param` names the field that
// held the prompt ("prompt" or "messages"); `max_tokens_given`: a context overflow is blamed on max_tokens.
ApiError api_error(const InvalidRequest& refusal, const std::string& prompt_param, bool max_tokens_given);

// The exception being handled, as a client should see it: an ApiException's own error, anything else a 500
// that names it. Call only inside a catch block.
ApiError current_api_error();

int http_status(ErrorCode code);
const char* error_type(ErrorCode code);  // OpenAI "type": "invalid_request_error", "rate_limit_error", ...
const char* error_code(ErrorCode code);  // OpenAI "code": "context_length_exceeded", "invalid_api_key", ...
nlohmann::json error_body(const ApiError& error);
// Whole seconds for a Retry-After header (at least 1).
int retry_after_seconds(const ApiError& error);

// The engine's errors as API errors, in this one place (TGI's From<InferError>). An engine that refuses a
// request because it is stopping (EngineUnavailable) is a 503 to retry. Any other refusal is the request's
// fault, a 400, except when the fallback refuses a choice the primary had taken (`fallback_retry`): the
// server's 500. A generation that fails inside the engine (a Finished event with FinishReason::Error) is a 500.
ApiError engine_refusal(const Error& error, bool fallback_retry = false);
ApiError engine_failure(const std::string& message);

}  // namespace tessera::server
