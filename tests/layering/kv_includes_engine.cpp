// Compiled as if it were in src/kv/ (with the kv layer's include roots): a lower layer including a higher one,
// which the build must refuse. tests/CMakeLists.txt expects this file NOT to compile.
#include "engine/engine.h"
