// The tokenizer side of a Hugging Face model folder: tokenizer.json, tokenizer_config.json (special tokens,
// chat template), generation_config.json (stop tokens).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace tessera {

struct HfTokenizer {
  Vocab vocab;                       // vocab.chat_template: the Jinja source, empty when the folder has none
  std::string chat_template_source;  // the file it came from, for messages
  std::vector<std::string> notes;    // what was found, one line each (tessera info)
};

// `path` is a folder or the path of its tokenizer.json. Reads tokenizer.json (vocab_from_tokenizer_json);
// the chat template from tokenizer_config.json's "chat_template" (a string, or a list of {name, template} of
// which "default" is taken) or else from chat_template.jinja; the stop ids from generation_config.json's
// eos_token_id (an id or a list) or else config.json's: the first becomes vocab.eos when tokenizer_config.json
// named none, the others vocab.eog_ids. Throws tessera::Error naming the file and field at fault.
HfTokenizer load_hf_tokenizer(const std::string& path);

}  // namespace tessera
