// The mapping from ErrorCode to HTTP status and OpenAI error fields.
#include "server/errors.h"

#include <cmath>
#include <exception>
#include <new>

#include "engine/engine.h"
#include "engine/request.h"

namespace tessera::server {

ApiError api_error(const InvalidRequest& refusal, const std::string& prompt_param, bool max_tokens_given) {
  if (!refusal.field().empty()) return {ErrorCode::InvalidRequest, refusal.what(), refusal.field()};
  switch (refusal.problem()) {
    case RequestProblem::ContextLength:
      return {ErrorCode::ContextLengthExceeded, refusal.what(), max_tokens_given ? "max_tokens" : prompt_param};
    case RequestProblem::EmptyPrompt: return {ErrorCode::ContextLengthExceeded, refusal.what(), prompt_param};
    case RequestProblem::InvalidToken: return {ErrorCode::InvalidRequest, refusal.what(), prompt_param};
    case RequestProblem::InvalidParameter:
    case RequestProblem::CacheTooSmall: break;
  }
  return {ErrorCode::InvalidRequest, refusal.what()};
}

ApiError current_api_error() {
  try {
    throw;
  } catch (const ApiException& e) {
    return e.error();
  } catch (const std::bad_alloc&) {
    return {ErrorCode::Internal, "out of memory"};
  } catch (const std::exception& e) {
    return {ErrorCode::Internal, e.what()};
  } catch (...) {
    return {ErrorCode::Internal, "unknown exception"};
  }
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidJson:
    case ErrorCode::InvalidRequest:
    case ErrorCode::ContextLengthExceeded:
    case ErrorCode::TemplateError: return 400;
    case ErrorCode::Unauthorized: return 401;
    case ErrorCode::PermissionDenied: return 403;
    case ErrorCode::NotFound:
    case ErrorCode::ModelNotFound: return 404;
    case ErrorCode::MethodNotAllowed: return 405;
    case ErrorCode::PayloadTooLarge: return 413;
    case ErrorCode::RateLimited:
    case ErrorCode::QueueFull: return 429;
    case ErrorCode::Internal: return 500;
    case ErrorCode::Unavailable: return 503;
    case ErrorCode::Timeout: return 504;
  }
  return 500;
}

const char* error_type(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidJson:
    case ErrorCode::InvalidRequest:
    case ErrorCode::ContextLengthExceeded:
    case ErrorCode::TemplateError:
    case ErrorCode::ModelNotFound:
    case ErrorCode::MethodNotAllowed:
    case ErrorCode::PayloadTooLarge:
    case ErrorCode::PermissionDenied: return "invalid_request_error";
    case ErrorCode::NotFound: return "not_found_error";
    case ErrorCode::Unauthorized: return "authentication_error";
    case ErrorCode::RateLimited:
    case ErrorCode::QueueFull: return "rate_limit_error";
    case ErrorCode::Internal:
    case ErrorCode::Unavailable:
    case ErrorCode::Timeout: return "server_error";
  }
  return "server_error";
}

const char* error_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidJson: return "invalid_json";
    case ErrorCode::InvalidRequest: return "invalid_value";
    case ErrorCode::ContextLengthExceeded: return "context_length_exceeded";
    case ErrorCode::TemplateError: return "invalid_chat_template";
    case ErrorCode::Unauthorized: return "invalid_api_key";
    case ErrorCode::PermissionDenied: return "permission_denied";
    case ErrorCode::NotFound: return "not_found";
    case ErrorCode::ModelNotFound: return "model_not_found";
    case ErrorCode::MethodNotAllowed: return "method_not_allowed";
    case ErrorCode::PayloadTooLarge: return "payload_too_large";
    case ErrorCode::RateLimited: return "rate_limit_exceeded";
    case ErrorCode::QueueFull: return "queue_full";
    case ErrorCode::Internal: return "internal_error";
    case ErrorCode::Unavailable: return "service_unavailable";
    case ErrorCode::Timeout: return "timeout";
  }
  return "internal_error";
}

nlohmann::json error_body(const ApiError& error) {
  nlohmann::json e = {{"message", error.message},
                      {"type", error_type(error.code)},
                      {"param", nullptr},
                      {"code", error_code(error.code)}};
  if (!error.param.empty()) e["param"] = error.param;
  return {{"error", std::move(e)}};
}

int retry_after_seconds(const ApiError& error) {
  const double s = std::ceil(error.retry_after_s);
  return s < 1.0 ? 1 : s > 86400.0 ? 86400 : int(s);
}

ApiError engine_refusal(const Error& error, bool fallback_retry) {
  if (dynamic_cast<const EngineUnavailable*>(&error)) {
    return {ErrorCode::Unavailable,
            fallback_retry ? std::string("the fallback model is stopping: ") + error.what() : error.what(), "", 1.0};
  }
  if (fallback_retry) return {ErrorCode::Internal, std::string("fallback model refused the request: ") + error.what()};
  return {ErrorCode::InvalidRequest, error.what()};
}

ApiError engine_failure(const std::string& message) { return {ErrorCode::Internal, "generation failed: " + message}; }

}  // namespace tessera::server
