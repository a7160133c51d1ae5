/* demo-chain.c: `clbound demo --workload chain`: a bounded elementwise chain whose
 * row count changes every call, built once and run with sizes read on the device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/args.h"
#include "bench/timing.h"
#include "clbound/clbound.h"
#include "commands.h"

static double now_s(void) { return 1e-3 * clb_tool_now_ms(); }

#define CHECK(call)                                                                  \
  do {                                                                               \
    clb_status st_ = (call);                                                         \
    if (st_ != CLB_OK) {                                                             \
      fprintf(stderr, "clbound demo: %s: %s\n", clb_status_str(st_), clb_context_errmsg(ctx)); \
      rc = 1;                                                                        \
      goto done;                                                                     \
    }                                                                                \
  } while (0)

/* x [<=4096, 16] changes its row count every call; the chain
 * y = relu(x * w + b); r = sum(y, dim 1); m = mean(r) runs on the device with the
 * actual row count read from shape records: one build per kernel, then none. */
int clb_cmd_demo_chain(int argc, char **argv) {
  int iterations = 12, json = 0;
  static const char *const cmd = "clbound demo --workload chain";
  if (clb_arg_help(argc, argv)) {
    printf("usage: clbound demo --workload chain [--iterations 1..1000000] [--json] [--quiet]\n");
    return 0;
  }
  for (int i = 0; i < argc; i++) {
    const char *v;
    if (strcmp(argv[i], "--iterations") == 0) {
      if (!(v = clb_arg_value(cmd, argc, argv, &i)) || clb_arg_int(cmd, "--iterations", v, 1, 1000000, &iterations))
        return 2;
    } else if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--quiet") == 0) continue; /* its lines are its progress */
    else {
      fprintf(stderr, "clbound demo --workload chain: unknown option %s\n"
                      "usage: clbound demo --workload chain [--iterations 1..1000000] [--json] [--quiet]\n", argv[i]);
      return 2;
    }
  }
  enum { BOUND = 4096, COLS = 16 };
  int rc = 0;
  clb_context_t ctx = NULL;
  clb_tensor_t x = NULL, w = NULL, b = NULL, xw = NULL, y = NULL, r = NULL, m = NULL;
  float *host = malloc(sizeof(float) * BOUND * COLS);
  if (!host) return 1;
  clb_status st = clb_context_new(NULL, &ctx);
  if (st != CLB_OK) {
    fprintf(stderr, "clbound demo: %s: %s\n", clb_status_str(st), clb_last_errmsg());
    free(host);
    return 1;
  }
  const int64_t xb[2] = {BOUND, COLS}, wb[1] = {COLS};
  const uint8_t dyn[2] = {1, 0};
  CHECK(clb_tensor_new(ctx, CLB_DTYPE_F32, 2, xb, dyn, &x));
  CHECK(clb_tensor_new(ctx, CLB_DTYPE_F32, 1, wb, NULL, &w));
  CHECK(clb_tensor_new(ctx, CLB_DTYPE_F32, 1, wb, NULL, &b));
  float wv[COLS], bv[COLS];
  for (int j = 0; j < COLS; j++) {
    wv[j] = 0.5f + 0.1f * (float)j;
    bv[j] = -0.25f * (float)(j % 3);
  }
  CHECK(clb_tensor_write(ctx, w, wb, wv, sizeof wv));
  CHECK(clb_tensor_write(ctx, b, wb, bv, sizeof bv));
  if (!json) {
    clb_device_info di;
    di.struct_size = sizeof di;
    clb_device_info_get(0, &di);
    printf("clbound demo: x is [<=%d, %d] f32; each call runs relu(x*w + b) -> sum over dim 1 -> mean\n", BOUND, COLS);
    printf("on %s; actual sizes stay on the device between ops.\n\n", clb_context_errmsg(ctx)[0] ? "" : di.name);
    printf("%6s %8s %14s %10s %12s %12s %10s\n", "call", "rows", "mean", "reference", "new builds", "host syncs", "ms");
  }
  uint64_t builds_after_first = 0, syncs_during = 0;
  for (int it = 0; it < iterations; it++) {
    int64_t rows = 1 + (int64_t)((it * 2654435761u) % BOUND);
    if (it == iterations - 1) rows = BOUND;
    for (int64_t i = 0; i < rows * COLS; i++) host[i] = (float)((i * 7919) % 17) / 8.0f - 1.0f;
    clb_counters c0;
    c0.struct_size = sizeof c0;
    clb_context_counters(ctx, &c0);
    double t0 = now_s();
    int64_t xd[2] = {rows, COLS};
    CHECK(clb_tensor_write(ctx, x, xd, host, sizeof(float) * (size_t)(rows * COLS)));
    CHECK(clb_mul(ctx, x, w, &xw));
    CHECK(clb_add(ctx, xw, b, &y));
    CHECK(clb_unary(ctx, CLB_UNARY_RELU, y, &y));
    CHECK(clb_reduce_dim(ctx, CLB_REDUCE_SUM, y, 1, 0, &r));
    CHECK(clb_reduce_all(ctx, CLB_REDUCE_MEAN, r, &m));
    clb_counters c1;
    c1.struct_size = sizeof c1;
    clb_context_counters(ctx, &c1);
    float mean = 0;
    CHECK(clb_tensor_read(ctx, m, NULL, &mean, sizeof mean, NULL));
    double ms = 1e3 * (now_s() - t0);
    double ref = 0;
    for (int64_t i = 0; i < rows; i++) {
      double s = 0;
      for (int j = 0; j < COLS; j++) {
        double v = (double)host[i * COLS + j] * wv[j] + bv[j];
        s += v > 0 ? v : 0;
      }
      ref += s;
    }
    ref /= (double)rows;
    uint64_t nb = c1.program_builds - c0.program_builds;
    if (it > 0) builds_after_first += nb;
    syncs_during += c1.host_syncs - c0.host_syncs;
    if (!json)
      printf("%6d %8lld %14.6f %10.6f %12llu %12llu %10.2f\n", it, (long long)rows, mean, ref,
             (unsigned long long)nb, (unsigned long long)(c1.host_syncs - c0.host_syncs), ms);
    double err = mean - ref;
    if (err < 0) err = -err;
    if (err > 1e-3 + 5e-3 * (ref < 0 ? -ref : ref)) {
      fprintf(stderr, "clbound demo: call %d: mean %.6f differs from the reference %.6f\n", it, mean, ref);
      rc = 1;
    }
  }
  clb_counters c;
  c.struct_size = sizeof c;
  clb_context_counters(ctx, &c);
  if (json)
    printf("{\"workload\":\"bounded-chain\",\"iterations\":%d,\"program_builds\":%llu,"
           "\"program_builds_after_first\":%llu,\"cache_hits\":%llu,\"kernel_launches\":%llu,"
           "\"host_syncs_between_ops\":%llu,\"host_syncs\":%llu,\"peak_device_bytes\":%llu}\n",
           iterations, (unsigned long long)c.program_builds, (unsigned long long)builds_after_first,
           (unsigned long long)c.program_cache_hits_memory, (unsigned long long)c.kernel_launches,
           (unsigned long long)syncs_during, (unsigned long long)c.host_syncs,
           (unsigned long long)c.peak_device_bytes);
  else
    printf("\n%d calls with %d different row counts: %llu program builds in all, %llu after the first call;\n"
           "%llu host syncs between ops (0 expected); %llu kernel launches; peak device memory %.1f MiB.\n",
           iterations, iterations, (unsigned long long)c.program_builds, (unsigned long long)builds_after_first,
           (unsigned long long)syncs_during, (unsigned long long)c.kernel_launches,
           (double)c.peak_device_bytes / (1024.0 * 1024.0));
  if (builds_after_first != 0) {
    fprintf(stderr, "clbound demo: a size change built a program\n");
    rc = 1;
  }
done:
  clb_context_free(ctx);
  free(host);
  return rc;
}
