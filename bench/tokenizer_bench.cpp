// Tokenizer encode throughput on one core: MB/s of a text file (War and Peace by default), best of N runs,
// with the word cache cold (first run) and warm (the rest).
//   tokenizer_bench [--tokenizer tokenizer.json | -m model.gguf] [--text FILE] [--runs N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "thread_cpu_time.h"

namespace {

}  // namespace

int main(int argc, char** argv) {
  std::string model = "../shared/tokenizer-vectors/ggml-vocab-gpt-2.gguf";
  std::string json;
  std::string text_path = "../shared/corpus/war-and-peace-400k.txt";
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-m")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokenizer")) json = argv[i + 1];
    else if (!std::strcmp(argv[i], "--text")) text_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--runs")) runs = std::max(1, std::atoi(argv[i + 1]));
  }
  try {
    const auto load_start = std::chrono::steady_clock::now();
    std::unique_ptr<tessera::Tokenizer> tokenizer;
    if (!json.empty()) {
      tokenizer = tessera::make_tokenizer(tessera::vocab_from_tokenizer_json(json));
    } else {
      const auto file = tessera::gguf::File::open(model);
      tokenizer = tessera::make_tokenizer(tessera::vocab_from_gguf(*file));
    }
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    std::ifstream in(text_path, std::ios::binary);
    if (!in) tessera::fail("cannot open {}", text_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();

    std::printf("tokenizer %s (%s), load %.2f s; text %s, %zu bytes\n", json.empty() ? model.c_str() : json.c_str(),
                tokenizer->vocab().pre.c_str(), load_s, text_path.c_str(), text.size());
    double best = 1e30, cold = 0;
    size_t n_tokens = 0;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = thread_cpu_seconds();
      n_tokens = tokenizer->encode(text, false).size();
      const double cpu = thread_cpu_seconds() - cpu_start;
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("  run %d: cpu %.3f s = %.2f MB/s (wall %.3f s = %.2f MB/s)%s\n", r, cpu, text.size() / cpu / 1e6,
                  wall, text.size() / wall / 1e6, r == 0 ? "  cold word cache" : "");
      if (r == 0) cold = cpu;
      if (r > 0 || runs == 1) best = std::min(best, cpu);
    }
    std::printf("%zu tokens, %.2f bytes/token; one core: %.2f MB/s cold, %.2f MB/s warm (cpu time)\n", n_tokens,
                double(text.size()) / n_tokens, text.size() / cold / 1e6, text.size() / best / 1e6);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
