// Running the built `tessera` binary from a test and checking how it failed.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_paths.h"

namespace tessera::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `command` through the shell; its exit code (128 + the signal when killed, -1 when it could not start)
// and its stdout. Redirections in `command` decide where stderr goes.
struct ShellOutput {
  int exit_code = -1;
  std::string out;
};
inline ShellOutput run_shell(const std::string& command) {
  ShellOutput r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// `tessera <args>` through the shell (args may quote), with a 60 s limit and no stdin.
inline CommandResult run_tessera(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string err_path = (dir / ("tessera_cli_err_" + std::to_string(::getpid()))).string();
  ShellOutput shell = run_shell("timeout 60 " + tessera_binary() + " " + args + " 2>" + err_path + " </dev/null");
  CommandResult r;
  r.exit_code = shell.exit_code;
  r.out = std::move(shell.out);
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(err_path);
  return r;
}

// Exit code 1 and exactly one line on stderr, "error: ..." containing `needle`.
inline void expect_clean_error(const CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr was: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected one line, got: " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
}

// A value the command-line parser itself refuses (CLI11: its own exit code, the option's name, a hint to --help):
// a non-zero exit that is not a crash, and the reason on stderr.
inline void expect_usage_error(const CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr was: " << r.err;
}

}  // namespace tessera::testing
