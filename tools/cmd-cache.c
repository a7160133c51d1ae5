/* cmd-cache.c: `clbound cache info|clear [DIR]`: the persistent program cache. */
#include <stdio.h>
#include <string.h>

#include "clbound/clbound.h"
#include "commands.h"

int clb_cmd_cache(int argc, char **argv) {
  if (argc < 1 || (strcmp(argv[0], "info") != 0 && strcmp(argv[0], "clear") != 0)) {
    fprintf(stderr, "usage: clbound cache info|clear [DIR]\n");
    return 2;
  }
  char def[1024];
  const char *dir = argc > 1 ? argv[1] : NULL;
  if (!dir) {
    clb_cache_default_dir(def, sizeof def);
    if (!def[0]) {
      printf("the persistent program cache is off (CLBOUND_CACHE_DIR=off, or no HOME)\n");
      return 0;
    }
    dir = def;
  }
  uint64_t n = 0, bytes = 0;
  clb_status st = clb_cache_info(dir, &n, &bytes);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound cache: %s\n", clb_last_errmsg());
    return 1;
  }
  if (strcmp(argv[0], "info") == 0) {
    printf("cache folder  %s\nentries       %llu\nbytes         %llu (%.1f MiB)\n", dir, (unsigned long long)n,
           (unsigned long long)bytes, (double)bytes / (1024.0 * 1024.0));
    return 0;
  }
  st = clb_cache_clear(dir);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound cache clear: %s\n", clb_last_errmsg());
    return 1;
  }
  printf("removed %llu entries (%.1f MiB) from %s\n", (unsigned long long)n, (double)bytes / (1024.0 * 1024.0), dir);
  return 0;
}
