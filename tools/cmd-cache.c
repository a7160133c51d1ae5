/* cmd-cache.c: `clbound cache info|clear [DIR]`: the persistent program cache;
 * `clbound cache store-pending [--detach] DIR`: the store helper (not in the
 * usage: the library starts it, docs/observability.md "Store modes"). */
#define _GNU_SOURCE /* POSIX_SPAWN_SETSID */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/workloads.h"
#include "clbound/clbound.h"
#include "commands.h"

static int usage(FILE *f) {
  fprintf(f, "usage: clbound cache info|clear [DIR]\n"
             "       clbound cache warm [--workload xla-mlp|wide-mlp|all] [--policy dynamic|automatic]\n"
             "  info: the folder, entries and bytes of the persistent program cache (DIR, else\n"
             "        CLBOUND_CACHE_DIR, else the per-user default); clear: empty it\n"
             "  warm: build and store the demo plans' programs ahead of a run\n");
  return clb_arg_usage_rc(f);
}

/* Says why the persistent cache is off, as clb_cache_default_dir decides (a
 * folder that cannot be used is the library's warning on stderr). */
static void print_off_reason(void) {
  char def[1024];
  clb_status st = clb_cache_default_dir(def, sizeof def);
  const char *env = clb_env_text("CLBOUND_CACHE_DIR");
  if (st == CLB_ERR_BUFFER_SMALL)
    printf("the persistent program cache is off: the folder's name (from %s) is longer than %zu characters\n",
           env && *env ? "CLBOUND_CACHE_DIR" : getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME") ? "XDG_CACHE_HOME" : "HOME",
           sizeof def - 1);
  else if (!def[0] && env && *env)
    printf("the persistent program cache is off (CLBOUND_CACHE_DIR=%s)\n", env);
  else if (!def[0])
    printf("the persistent program cache is off (no CLBOUND_CACHE_DIR, XDG_CACHE_HOME or HOME)\n");
  else
    printf("the persistent program cache is off: folder %s cannot be used (see the warning above)\n", def);
}

/* `clbound cache warm [--workload xla-mlp|wide-mlp|all] [--policy dynamic|automatic]`:
 * builds and stores the demo graphs' plan programs ahead of time, so the next
 * run starts with 0 builds from source. */
static int cache_warm(int argc, char **argv) {
  int wl_all = 1, off = 0;
  demo_workload wl = DEMO_XLA_MLP;
  clb_policy_kind pol = CLB_POLICY_DYNAMIC;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--workload") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "xla-mlp") == 0) wl = DEMO_XLA_MLP, wl_all = 0;
      else if (strcmp(v, "wide-mlp") == 0) wl = DEMO_WIDE_MLP, wl_all = 0;
      else if (strcmp(v, "all") != 0) goto usage;
    } else if (strcmp(argv[i], "--policy") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "dynamic") == 0) pol = CLB_POLICY_DYNAMIC;
      else if (strcmp(v, "automatic") == 0) pol = CLB_POLICY_AUTOMATIC;
      else goto usage;
    } else {
      goto usage;
    }
  }
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++) {
    if (!wl_all && w != (int)wl) continue;
    uint64_t built = 0, loaded = 0;
    char err[1024], dir[1024];
    if (demo_warm((demo_workload)w, pol, &built, &loaded, dir, sizeof dir, err, sizeof err) != 0) {
      fprintf(stderr, "clbound cache warm: %s: %s\n", demo_workload_name((demo_workload)w), err);
      return 1;
    }
    if (dir[0]) {
      printf("%-9s %-9s %llu program(s) built and stored, %llu already in the cache (%s)\n",
             demo_workload_name((demo_workload)w), demo_policy_name(pol), (unsigned long long)built,
             (unsigned long long)loaded, dir);
    } else {
      printf("%-9s %-9s %llu program(s) built, none stored: ", demo_workload_name((demo_workload)w),
             demo_policy_name(pol), (unsigned long long)built);
      print_off_reason();
      off = 1;
    }
  }
  return off ? 1 : 0;
usage:
  return usage(stderr);
}

extern char **environ;

/* `clbound cache store-pending [--detach] DIR`: writes the entries of the store
 * manifests pending in DIR. --detach (how the library starts it): starts the
 * same command again, without --detach, in a session of its own, and returns at
 * once, so the helper outlives the process that handed the programs over and
 * is not its child. */
static int store_pending(int argc, char **argv) {
  int detach = argc == 2 && strcmp(argv[0], "--detach") == 0;
  if (argc != 1 + detach) {
    fprintf(stderr, "usage: clbound cache store-pending [--detach] DIR\n");
    return 2;
  }
  const char *dir = argv[detach];
  if (detach) {
    posix_spawnattr_t at;
    if (posix_spawnattr_init(&at) != 0) return 1;
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    char *args[] = {"clbound", "cache", "store-pending", (char *)dir, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, &at, args, environ);
    posix_spawnattr_destroy(&at);
    if (rc != 0) fprintf(stderr, "clbound cache store-pending: could not start the helper: %s\n", strerror(rc));
    return rc == 0 ? 0 : 1;
  }
  unsetenv("CLBOUND_METRICS_FILE"); /* the process that handed over wrote its own */
  uint64_t n = 0;
  if (clb_cache_store_pending(dir, &n) != CLB_OK) {
    fprintf(stderr, "clbound cache store-pending: %s\n", clb_last_errmsg());
    return 1;
  }
  printf("stored %llu entries in %s\n", (unsigned long long)n, dir);
  return 0;
}

int clb_cmd_cache(int argc, char **argv) {
  if (clb_arg_help(argc, argv)) return usage(stdout);
  if (argc >= 1 && strcmp(argv[0], "store-pending") == 0) return store_pending(argc - 1, argv + 1);
  if (argc >= 1 && strcmp(argv[0], "warm") == 0) return cache_warm(argc - 1, argv + 1);
  if (argc < 1 || (strcmp(argv[0], "info") != 0 && strcmp(argv[0], "clear") != 0)) {
    return usage(stderr);
  }
  char def[1024];
  const char *dir = argc > 1 ? argv[1] : NULL;
  if (!dir) {
    clb_cache_default_dir(def, sizeof def);
    if (!def[0]) {
      print_off_reason();
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
    uint64_t limit = clb_cache_limit_bytes();
    if (limit)
      printf("limit         %llu (%.1f MiB; CLBOUND_CACHE_MAX_SIZE): past it, the least recently used entries are removed\n",
             (unsigned long long)limit, (double)limit / (1024.0 * 1024.0));
    else
      printf("limit         none (CLBOUND_CACHE_MAX_SIZE=0)\n");
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
