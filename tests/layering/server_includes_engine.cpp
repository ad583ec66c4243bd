// The same include as kv_includes_engine.cpp, from the server layer, which sits above the engine: this one must
// compile, so that the failure of the other is the layer check and not a broken header.
#include "engine/engine.h"
#include "tokenizer/vocab.h"
#include "tokenizer/tokenizer.h"
