// getrlimit/setrlimit for RLIMIT_NOFILE.
#include "core/fd_limit.h"

#include <sys/resource.h>

namespace tessera {

uint64_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur == RLIM_INFINITY ? (uint64_t(1) << 20) : uint64_t(rl.rlim_cur);
}

}  // namespace tessera
