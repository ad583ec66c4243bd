// CPU time of the calling thread, for the micro-benchmarks: on a shared machine wall time also counts the time
// other processes held the core.
#pragma once

#include <time.h>

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
