/* blas-load.c: OpenBLAS loaded at first use, with kernels that suit the CPU
 * (blas-load.h; docs/gemm.md, "Which OpenBLAS kernels").
 *
 * Why not link it: OpenBLAS built with DYNAMIC_ARCH (Debian's, most distros')
 * picks its kernels ("core") once, when it is loaded, from a table of CPU
 * family and model numbers. A CPU newer than that table, or a virtual machine
 * that reports a model OpenBLAS 0.3.21 does not know (family 6 model 207, an
 * "Intel(R) Xeon(R) Processor" with AVX-512), gets Prescott: SSE3 kernels, 3-4x
 * slower than the SkylakeX ones on the same cores (62 against 200-212 GFLOP/s
 * for 895x256x512 on two cores). OPENBLAS_CORETYPE chooses the core, but only
 * when read at load time, which for a linked library is before any of our code
 * runs. So the library is opened here: when the core it picked has no AVX
 * kernels while the CPU has AVX2 or AVX-512, it is closed and opened again with
 * OPENBLAS_CORETYPE set to the best core the CPU's features allow, for that load
 * only (the variable is removed again after). An OPENBLAS_CORETYPE set by the
 * user is left alone, and an OpenBLAS some other library of the process loaded
 * first is used as it is (it cannot be reloaded), with a sentence saying how
 * to fix it. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/ops/blas-load.h"

#ifdef CLBOUND_HAVE_OPENBLAS

/* The names tried, in order: the soname, the development link, and the
 * library folder pkg-config gave at build time (an OpenBLAS outside the
 * loader's search path). */
static const char *const lib_names[] = {"libopenblas.so.0", "libopenblas.so",
#ifdef CLBOUND_OPENBLAS_LIBDIR
                                        CLBOUND_OPENBLAS_LIBDIR "/libopenblas.so.0",
#endif
                                        NULL};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static clb_blas_lib lib;
static int loaded;
static char why[600];

/* What the CPU can run: 3 AVX-512 (F, CD, BW, DQ, VL), 2 AVX2 and FMA, 1 AVX,
 * 0 none of these (or not x86-64). */
static int cpu_rank(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  if (__builtin_cpu_supports("avx")) return 1;
#endif
  return 0;
}

static const char *const rank_words[] = {"no AVX", "AVX", "AVX2 and FMA", "AVX-512"};
/* The OpenBLAS core to ask for at each rank. */
static const char *const rank_core[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};

/* The rank of a core OpenBLAS reports: 0 for the cores without AVX kernels
 * (its fallbacks for a CPU it does not know), 1 Sandybridge, -1 for any other
 * (a core it chose knowingly: never replaced). */
static int core_rank(const char *core) {
  static const char *const old[] = {"katmai",    "coppermine", "northwood",  "prescott", "banias",
                                    "atom",      "core2",      "penryn",     "dunnington", "nehalem",
                                    "opteron",   "opteron_sse3", "barcelona", "bobcat",   "unknown", NULL};
  for (int i = 0; old[i]; i++)
    if (strcasecmp(core, old[i]) == 0) return 0;
  return strcasecmp(core, "sandybridge") == 0 ? 1 : -1;
}

static void *open_lib(int flags) {
  for (int i = 0; lib_names[i]; i++) {
    void *h = dlopen(lib_names[i], flags);
    if (h) return h;
  }
  return NULL;
}

/* Binds the functions of h; 0 (why set) when one is missing: not an OpenBLAS. */
static int bind(void *h) {
  void *s[7];
  static const char *const names[] = {"cblas_sgemm",           "cblas_dgemm",           "openblas_get_num_threads",
                                      "openblas_set_num_threads", "openblas_get_num_procs", "openblas_get_corename",
                                      "openblas_get_config"};
  for (int i = 0; i < 7; i++) {
    if (!(s[i] = dlsym(h, names[i]))) {
      snprintf(why, sizeof why, "the OpenBLAS library found has no %s (not OpenBLAS, or too old)", names[i]);
      return 0;
    }
  }
  /* POSIX: a data pointer from dlsym converts to a function pointer */
  memcpy(&lib.sgemm, &s[0], sizeof s[0]);
  memcpy(&lib.dgemm, &s[1], sizeof s[1]);
  memcpy(&lib.get_num_threads, &s[2], sizeof s[2]);
  memcpy(&lib.set_num_threads, &s[3], sizeof s[3]);
  memcpy(&lib.get_num_procs, &s[4], sizeof s[4]);
  char *(*corename)(void), *(*config)(void);
  memcpy(&corename, &s[5], sizeof s[5]);
  memcpy(&config, &s[6], sizeof s[6]);
  const char *c = corename(), *g = config();
  snprintf(lib.core, sizeof lib.core, "%s", c ? c : "unknown");
  snprintf(lib.config, sizeof lib.config, "%s", g ? g : "OpenBLAS");
  return 1;
}

/* Opens OpenBLAS again with OPENBLAS_CORETYPE=core for this load only; 1 when it
 * runs that core. h is closed first; *h is what is open after (NULL: none). */
static int reload_as(void **h, const char *core) {
  dlclose(*h);
  *h = open_lib(RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (*h) return -1; /* still loaded: something else holds it */
  setenv("OPENBLAS_CORETYPE", core, 1);
  *h = open_lib(RTLD_NOW | RTLD_LOCAL);
  unsetenv("OPENBLAS_CORETYPE");
  if (!*h || !bind(*h)) return 0;
  return strcasecmp(lib.core, core) == 0;
}

static void load(void) {
  int pre = 1;
  void *h = open_lib(RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) {
    pre = 0;
    h = open_lib(RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    const char *e = dlerror();
    snprintf(why, sizeof why, "OpenBLAS (libopenblas.so.0) cannot be loaded: %s", e ? e : "not found");
    return;
  }
  if (!bind(h)) return;
  const char *env = getenv("OPENBLAS_CORETYPE");
  int cr = cpu_rank(), kr = core_rank(lib.core);
  if (env && *env) {
    snprintf(lib.how, sizeof lib.how, "OPENBLAS_CORETYPE=%s in the environment", env);
  } else if (kr < 0 || kr >= cr) {
    snprintf(lib.how, sizeof lib.how, "OpenBLAS's own choice for this CPU (%s)", rank_words[cr]);
  } else if (pre) {
    snprintf(lib.how, sizeof lib.how,
             "OpenBLAS's own choice, though this CPU has %s: another library of the process loaded OpenBLAS before "
             "clbound, so it stays; OPENBLAS_CORETYPE=%s in the environment before the process starts gives "
             "kernels for this CPU (3-4x faster matmuls on AVX-512)",
             rank_words[cr], rank_core[cr]);
  } else {
    char was[sizeof lib.core];
    snprintf(was, sizeof was, "%s", lib.core);
    int ok = 0;
    for (int r = cr; r > kr && !ok; r--) {
      ok = reload_as(&h, rank_core[r]);
      if (ok < 0 || !h) break;
      if (ok)
        snprintf(lib.how, sizeof lib.how,
                 "clbound chose it: OpenBLAS took this CPU, which has %s, for %s (a model it does not know), so it was "
                 "loaded again with OPENBLAS_CORETYPE=%s",
                 rank_words[cr], was, rank_core[r]);
    }
    if (!h) {
      const char *e = dlerror();
      snprintf(why, sizeof why, "OpenBLAS could not be loaded again with OPENBLAS_CORETYPE: %s", e ? e : "not found");
      return;
    }
    if (ok <= 0) {
      if (ok < 0 && !bind(h)) return;
      snprintf(lib.how, sizeof lib.how,
               "OpenBLAS's own choice, though this CPU has %s: no core for it could be loaded in its place (%s); "
               "OPENBLAS_CORETYPE in the environment chooses one",
               rank_words[cr], ok < 0 ? "the library is held by another" : "this OpenBLAS has none of them");
    }
  }
  loaded = 1;
}

const clb_blas_lib *clb__blas_get(void) {
  pthread_once(&once, load);
  return loaded ? &lib : NULL;
}

const char *clb__blas_why(void) {
  pthread_once(&once, load);
  return loaded ? "" : why;
}

void clb__blas_describe(char *buf, size_t cap) {
  const clb_blas_lib *b = clb__blas_get();
  if (b) snprintf(buf, cap, "%s; core %s: %s", b->config, b->core, b->how);
  else snprintf(buf, cap, "none: %s", why);
}

#else

const char *clb__blas_why(void) { return "this clbound was built without OpenBLAS"; }

void clb__blas_describe(char *buf, size_t cap) { snprintf(buf, cap, "none: %s", clb__blas_why()); }

#endif
