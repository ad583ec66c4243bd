#include "core/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace tessera {

void name_this_thread(std::string_view name) {
  // pthread_setname_np refuses (ERANGE) rather than truncates a name over 15 bytes.
  const std::string kept(name.substr(0, std::min<size_t>(name.size(), 15)));
  pthread_setname_np(pthread_self(), kept.c_str());
}

}  // namespace tessera
