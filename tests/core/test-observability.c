/* test-observability.c: the metrics JSON and file, the event log lines, and
 * where first launches are timed by event callbacks. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <unistd.h>

#include "cl-test.h"

/* clSetEventCallback, interposed: this executable exports it (ENABLE_EXPORTS),
 * so libclbound's calls land here first; counted, then passed on. */
static unsigned long event_callbacks;

CL_API_ENTRY cl_int CL_API_CALL clSetEventCallback(cl_event ev, cl_int type,
                                                   void(CL_CALLBACK *fn)(cl_event, cl_int, void *), void *user) {
  typedef cl_int(CL_API_CALL * set_fn)(cl_event, cl_int, void(CL_CALLBACK *)(cl_event, cl_int, void *), void *);
  static set_fn real;
  event_callbacks++;
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clSetEventCallback");
  return real ? real(ev, type, fn, user) : CL_INVALID_OPERATION;
}

static char lines[16384];

static void capture(void *user, const char *category, const char *line) {
  (void)user;
  size_t used = strlen(lines);
  snprintf(lines + used, sizeof lines - used, "[%s] %s\n", category, line);
}

/* The value of a top-level integer key in a flat JSON object. */
static long long json_int(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? atoll(p + strlen(pat)) : -1;
}

/* The file's text (at most cap - 1 bytes); its length. */
static size_t read_file(const char *path, char *buf, size_t cap) {
  buf[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return n;
}

int main(void) {
  clb_context_options o;
  clb_context_options_init(&o);
  o.cache_dir = "off";
  clb_context_t ctx = clb_test_context(&o);
  clb_context_set_log(ctx, CLB_LOG_ALL, capture, NULL);
  int64_t b[1] = {64};
  clb_tensor_t x = NULL, s = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, b, NULL, &x));
  CL_OK(ctx, clb_fill(ctx, x, 2));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, x, &s));
  CL_OK(ctx, clb_reduce_all(ctx, CLB_REDUCE_SUM, x, &s));
  float got = 0;
  CL_OK(ctx, clb_tensor_read(ctx, s, NULL, &got, sizeof got, NULL));
  EXPECT_NEAR(got, 128);

  /* The log: each build with its reason, each sync with the call that forced it. */
  EXPECT_TRUE(strstr(lines, "[builds] elementwise.cl [-D EW_FILL") != NULL);
  EXPECT_TRUE(strstr(lines, "for fill: built from source") != NULL);
  EXPECT_TRUE(strstr(lines, "[syncs] host sync #1: clb_tensor_read") != NULL);

  /* The JSON holds the documented keys, equal to the counters. */
  char json[4096];
  size_t len = 0;
  CL_OK(ctx, clb_context_metrics_json(ctx, json, sizeof json, &len));
  EXPECT_EQ_I(len, strlen(json));
  const char *keys[] = {"program_builds", "program_cache_hits_memory", "program_cache_hits_disk", "kernel_launches",
                        "host_syncs", "bytes_to_device", "bytes_to_host", "plans_compiled", "peak_device_bytes"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) EXPECT_TRUE(json_int(json, keys[i]) >= 0);
  EXPECT_TRUE(strstr(json, "\"recompiles\":[]") != NULL);
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  EXPECT_EQ_I(json_int(json, "program_builds"), (long long)c.program_builds);
  EXPECT_EQ_I(json_int(json, "program_builds"), 2);
  EXPECT_EQ_I(json_int(json, "kernel_launches"), 5); /* fill, 2 x (part + final) */
  EXPECT_EQ_I(json_int(json, "host_syncs"), 1);
  EXPECT_EQ_I(json_int(json, "program_cache_hits_memory"), 3);
  EXPECT_EQ_I(json_int(json, "bytes_to_host"), (long long)c.bytes_to_host);
  /* first launches: fill, part and final once each (the second sum launches
   * the same kernels at the same local sizes); their time is what the read's
   * sync waited for, on PoCL each kernel's compile for its size */
  EXPECT_EQ_I(json_int(json, "first_launches"), 3);
  EXPECT_EQ_I((long long)c.first_launches, 3);
  EXPECT_TRUE(json_int(json, "first_launch_ms") >= 0);
  char tiny[8];
  EXPECT_STATUS(ctx, clb_context_metrics_json(ctx, tiny, sizeof tiny, &len), CLB_ERR_BUFFER_SMALL, "bytes needed");
  EXPECT_EQ_I(strlen(tiny), 7);

  /* CLBOUND_METRICS_FILE is written when the context is freed. */
  char path[] = "/tmp/clbound-metrics-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE_TRUE(fd >= 0);
  close(fd);
  setenv("CLBOUND_METRICS_FILE", path, 1);
  clb_context_free(ctx);
  char file[4096];
  EXPECT_TRUE(read_file(path, file, sizeof file) > 0);
  EXPECT_EQ_I(json_int(file, "host_syncs"), 1);
  EXPECT_EQ_I(json_int(file, "program_builds"), 2);
  EXPECT_EQ_I(json_int(file, "contexts"), 1);
  EXPECT_TRUE(strstr(file, "\"scope\":\"process\"") != NULL);

  /* The file describes every context of the process, not the last one freed:
   * one that syncs twice, then an idle one freed last (as `clbound demo` did,
   * whose file said 0 builds and 0 launches). Counts are summed. */
  CLB_TEST_CASE("metrics file over three contexts, the last one idle");
  clb_context_t busy = clb_test_context(&o), idle = clb_test_context(&o);
  CL_OK(busy, clb_context_sync(busy));
  CL_OK(busy, clb_context_sync(busy));
  clb_context_free(busy);
  clb_context_free(idle);
  unsetenv("CLBOUND_METRICS_FILE");
  EXPECT_TRUE(read_file(path, file, sizeof file) > 0);
  unlink(path);
  EXPECT_EQ_I(json_int(file, "contexts"), 3);
  EXPECT_EQ_I(json_int(file, "host_syncs"), 3);
  EXPECT_EQ_I(json_int(file, "program_builds"), 2);
  EXPECT_TRUE(json_int(file, "kernel_launches") > 0);

  /* First launches are counted everywhere and timed by event callbacks only
   * where CLBOUND_FIRST_LAUNCH_TIMING allows: by default on CPU devices (the
   * callbacks hung processes in NVIDIA's driver). Untimed, no callback is set
   * and the time stays 0 after the sync that would have made it whole. */
  CLB_TEST_CASE("CLBOUND_FIRST_LAUNCH_TIMING");
  clb_device_info di;
  di.struct_size = sizeof di;
  REQUIRE_TRUE(clb_device_info_get(0, &di) == CLB_OK);
  for (int mode = 0; mode < 3; mode++) { /* unset (auto), off, on */
    static const char *const val[] = {NULL, "off", "on"};
    if (val[mode]) setenv("CLBOUND_FIRST_LAUNCH_TIMING", val[mode], 1);
    else unsetenv("CLBOUND_FIRST_LAUNCH_TIMING");
    clb_context_t t = clb_test_context(&o);
    unsigned long cb0 = event_callbacks;
    clb_tensor_t y = NULL, r = NULL;
    CL_OK(t, clb_tensor_new(t, CLB_DTYPE_F32, 1, b, NULL, &y));
    CL_OK(t, clb_fill(t, y, 1));
    CL_OK(t, clb_reduce_all(t, CLB_REDUCE_SUM, y, &r));
    CL_OK(t, clb_context_sync(t));
    clb_counters tc;
    tc.struct_size = sizeof tc;
    clb_context_counters(t, &tc);
    CL_OK(t, clb_context_metrics_json(t, json, sizeof json, &len));
    EXPECT_EQ_I((long long)tc.first_launches, 3);
    /* untimed, the figure is 0; timed, it may round to 0 ms too (PoCL's
     * compiles of these kernels are cached by now), so only >= 0 is sure */
    int timed = mode == 2 || (mode == 0 && di.is_cpu);
    EXPECT_EQ_I((long long)(event_callbacks - cb0), timed ? 6 : 0); /* CL_SUBMITTED and CL_COMPLETE each */
    if (!timed) EXPECT_EQ_I(json_int(json, "first_launch_ms"), 0);
    else EXPECT_TRUE(json_int(json, "first_launch_ms") >= 0);
    clb_tensor_free(y);
    clb_tensor_free(r);
    clb_context_free(t);
  }
  unsetenv("CLBOUND_FIRST_LAUNCH_TIMING");

  /* An unknown CLBOUND_LOG category is named once, with the known ones, however
   * many contexts read the variable. */
  CLB_TEST_CASE("CLBOUND_LOG=bogus warns once");
  char errpath[] = "/tmp/clbound-stderr-XXXXXX";
  int efd = mkstemp(errpath);
  REQUIRE_TRUE(efd >= 0);
  fflush(stderr);
  int saved = dup(2);
  REQUIRE_TRUE(saved >= 0 && dup2(efd, 2) == 2);
  setenv("CLBOUND_LOG", "bogus,syncs", 1);
  for (int i = 0; i < 2; i++) clb_context_free(clb_test_context(&o));
  unsetenv("CLBOUND_LOG");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(efd);
  char err[4096];
  read_file(errpath, err, sizeof err);
  unlink(errpath);
  /* the one parser of CLBOUND_* variables (runtime/core/env.c) names the value
   * and the known categories */
  const char *want = "clbound: warning: CLBOUND_LOG=\"bogus,syncs\": names other than comma-separated names among "
                     "recompiles, syncs, builds, cache, gemm, record, device, or all are ignored\n";
  const char *at = strstr(err, want);
  EXPECT_TRUE(at != NULL);
  EXPECT_TRUE(at && strstr(at + strlen(want), "CLBOUND_LOG") == NULL); /* once */

  /* CLBOUND_LOG names the categories a new context logs. */
  setenv("CLBOUND_LOG", "syncs", 1);
  ctx = clb_test_context(&o);
  unsetenv("CLBOUND_LOG");
  lines[0] = 0;
  clb_context_set_log(ctx, CLB_LOG_SYNCS, capture, NULL);
  CL_OK(ctx, clb_context_sync(ctx));
  EXPECT_TRUE(strstr(lines, "[syncs] host sync #1: clb_context_sync") != NULL);
  clb_context_free(ctx);
  return clb_test_finish("core/observability");
}
