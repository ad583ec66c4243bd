// Names the calling thread as `top -H`, `perf` and debuggers show it ("engine", "compute-1", "request-0"), so an
// operator can tell the server's threads apart. Linux keeps 15 bytes of a name; longer ones are cut there.
#pragma once

#include <string_view>

namespace tessera {

void name_this_thread(std::string_view name);

}  // namespace tessera
