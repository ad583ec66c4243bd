// How much memory this process can use: what the kernel reports as available, capped by the cgroup's limit
// when the process runs in a container (Kubernetes sets memory.max from the pod's limit).
#pragma once

#include <cstdint>

namespace tessera {

// Bytes the process can still use without the kernel swapping or evicting pages it needs; 0 when unknown.
uint64_t available_memory_bytes();

}  // namespace tessera
