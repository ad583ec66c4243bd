// How much memory this process can use: what the kernel reports as available, capped by the cgroup's limit
// when the process runs in a container (Kubernetes sets the limit from the pod's resources).
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

// Bytes the process can still use without the kernel swapping or evicting pages it needs; 0 when unknown.
uint64_t available_memory_bytes();

// The cgroup part alone, read from `self_cgroup` (/proc/self/cgroup) and the hierarchy mounted at
// `cgroup_root` (/sys/fs/cgroup): the tightest limit less the anonymous memory charged, over the group and its
// ancestors; 0 when no level sets a limit. Both cgroup v2 (memory.max, memory.stat "anon") and v1 (the memory
// controller's memory.limit_in_bytes, memory.stat "total_rss") are read. Exposed for tests.
uint64_t cgroup_available_bytes(const std::string& self_cgroup, const std::string& cgroup_root);

}  // namespace tessera
