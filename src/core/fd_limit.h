// The process's open-file limit: servers and load generators with thousands of connections need a descriptor
// each, more than the usual soft limit of 1024.
#pragma once

#include <cstdint>

namespace tessera {

// Raises the soft RLIMIT_NOFILE to the hard one. Returns the limit now in force (1024 when it cannot be read;
// 2^20 for "unlimited").
uint64_t raise_fd_limit();

}  // namespace tessera
