/* hash.c: FNV-1a, the hash of the program cache keys, the disk cache's checksums
 * and the graph's plan keys. */
#include "runtime/core/core.h"

uint64_t clb__fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
