// CHECK macros for invariants: a failed CHECK is a bug in Tessera, so it prints file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TESSERA_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// DCHECKs cost nothing in Release; the sanitizer build turns them on.
#if defined(TESSERA_DCHECKS)
#define TESSERA_DCHECK(cond) TESSERA_CHECK(cond)
#else
#define TESSERA_DCHECK(cond) \
  do {                       \
  } while (0)
#endif
