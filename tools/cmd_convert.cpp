// `tessera convert`: llama2.c checkpoint (+ tokenizer) → GGUF.
#include <cstdio>

#include "commands.h"
#include "formats/llama2c.h"

namespace tessera {

void add_convert_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("convert", "Convert a llama2.c checkpoint to GGUF");
  auto opts = std::make_shared<std::tuple<std::string, std::string, std::string, std::string>>();
  auto& [checkpoint, tokenizer, output, name] = *opts;
  cmd->add_option("--llama2c", checkpoint, "llama2.c checkpoint (.bin)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", tokenizer, "llama2.c tokenizer (.bin), e.g. tok512.bin")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", output, "output GGUF path")->required();
  cmd->add_option("--name", name, "general.name to record")->default_val("stories260K");
  cmd->callback([&action, opts] {
    action = [opts] {
      auto& [checkpoint, tokenizer, output, name] = *opts;
      convert_llama2c_to_gguf(checkpoint, tokenizer, output, name);
      std::printf("wrote %s\n", output.c_str());
      return 0;
    };
  });
}

}  // namespace tessera
