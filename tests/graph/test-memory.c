/* test-memory.c: the memory plan of graph plans (runtime/graph/memory.c):
 * both demo workloads under every policy (and, under dynamic, every GEMM
 * strategy the device runs) give bitwise the losses of the pool path, with the
 * same host syncs and no builds after the first step, and the plan makes no
 * sub-buffer (clCreateSubBuffer is interposed and counted: the arena's tensors
 * are the arena's cl_mem at byte offsets, which the first NVIDIA run needed:
 * its driver crashed releasing arena sub-buffers); a 12-layer
 * MLP inference chain with free_intermediates has an arena within 1.05x of its
 * lower bound, made by one allocation, and the same results, kept node included,
 * as the pool path; under the dynamic policy no host write in a step's run
 * (new tensors reuse valid shape records); the memory map in clb_graph_describe; the alignment
 * (128 bytes; CTest forces 4096 bits on PoCL through CLBOUND_MEM_BASE_ALIGN_BITS);
 * the tensors' offsets (one cl_mem, distinct aligned offsets, honoured by a
 * DLPack device export and by a plain OpenCL read); an arena that does not fit
 * under the context's memory limit is CLB_ERR_OOM naming the plan and the
 * bytes, and the context and the graph go on afterwards. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"
#include "clbound/clbound.h"
#include "bench/workloads.h"
#include "test.h"

/* clCreateSubBuffer, interposed: this executable exports it (ENABLE_EXPORTS),
 * so libclbound's calls land here first; counted, then passed on. */
static unsigned long sub_buffers;

CL_API_ENTRY cl_mem CL_API_CALL clCreateSubBuffer(cl_mem buffer, cl_mem_flags flags, cl_buffer_create_type type,
                                                  const void *info, cl_int *errcode_ret) {
  typedef cl_mem(CL_API_CALL * create_fn)(cl_mem, cl_mem_flags, cl_buffer_create_type, const void *, cl_int *);
  static create_fn real;
  sub_buffers++;
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clCreateSubBuffer");
  if (!real) {
    if (errcode_ret) *errcode_ret = CL_INVALID_OPERATION;
    return NULL;
  }
  return real(buffer, flags, type, info, errcode_ret);
}

/* Both workloads under every policy, the pool path (mode 0) against the memory
 * plan (mode 1); under CLBOUND_GEMM=`gemm` when it is not NULL (the dynamic
 * policy only). */
static void workloads_under(const char *gemm) {
  static const clb_policy_kind pols[] = {CLB_POLICY_DYNAMIC, CLB_POLICY_AUTOMATIC, CLB_POLICY_BUCKETED, CLB_POLICY_STATIC};
  size_t npols = gemm ? 1 : sizeof pols / sizeof pols[0];
  if (gemm) setenv("CLBOUND_GEMM", gemm, 1);
  for (int w = 0; w < DEMO_WORKLOAD_COUNT; w++)
    for (size_t p = 0; p < npols; p++) {
      demo_config cfg = {(demo_workload)w, pols[p], w == DEMO_XLA_MLP ? 12 : 6, -1, 0, 0, 0, NULL};
      demo_result r[2];
      char err[1024];
      unsigned long subs[2];
      for (int mode = 0; mode < 2; mode++) { /* 0: the pool, 1: the memory plan */
        if (mode == 0) setenv("CLBOUND_MEMORY_PLAN", "0", 1);
        else unsetenv("CLBOUND_MEMORY_PLAN");
        unsigned long before = sub_buffers;
        int rc = demo_run(&cfg, &r[mode], err, sizeof err);
        REQUIRE_TRUE(rc == 0 || (fprintf(stderr, "%s\n", err), 0));
        subs[mode] = sub_buffers - before;
      }
      const char *wn = demo_workload_name((demo_workload)w), *pn = demo_policy_name(pols[p]);
      const char *gn = gemm ? gemm : "the device's default";
      clb_test_checks++;
      if (memcmp(r[0].losses, r[1].losses, sizeof(float) * (size_t)cfg.iterations) != 0)
        CLB_FAIL_AT("%s under %s, GEMM %s: the losses differ from the pool path's", wn, pn, gn);
      /* the memory plan makes no sub-buffer (nor does the pool path) */
      clb_test_checks++;
      if (subs[0] || subs[1])
        CLB_FAIL_AT("%s under %s, GEMM %s: %lu sub-buffers made (pool path %lu)", wn, pn, gn, subs[1], subs[0]);
      if (gemm) {
        printf("%s %-9s GEMM %s: losses equal the pool path's, no sub-buffers\n", wn, pn, gemm);
        demo_result_free(&r[0]);
        demo_result_free(&r[1]);
        continue;
      }
      EXPECT_EQ_I(r[1].host_syncs, r[0].host_syncs);
      /* built or loaded from the disk cache: the same programs, whichever run
       * came first; fewer under the memory plan when a GEMM's activation is its
       * epilogue there (the pool path keeps the pre-activation readable, so it
       * runs the activation's own kernel: runtime/graph/fuse.c) */
      if (r[1].fused_epilogues == r[0].fused_epilogues) EXPECT_EQ_I(r[1].programs_after_first, r[0].programs_after_first);
      else EXPECT_TRUE(r[1].fused_epilogues > r[0].fused_epilogues && r[1].programs_after_first <= r[0].programs_after_first);
      EXPECT_EQ_I(r[0].arena_bytes, 0);
      EXPECT_TRUE(r[1].arena_bytes > 0);
      EXPECT_TRUE(r[1].arena_bytes >= r[1].live_lower_bound_bytes);
      printf("%s %-9s: arena %llu bytes, lower bound %llu, pool %llu; peak %llu (pool path %llu); %llu arena allocations\n", wn, pn,
             (unsigned long long)r[1].arena_bytes, (unsigned long long)r[1].live_lower_bound_bytes,
             (unsigned long long)r[1].pool_peak_bytes, (unsigned long long)r[1].peak_device_bytes,
             (unsigned long long)r[0].peak_device_bytes, (unsigned long long)r[1].arena_allocations);
      if (pols[p] == CLB_POLICY_DYNAMIC) {
        EXPECT_EQ_I(r[1].host_syncs, 0);
        EXPECT_EQ_I(r[1].builds_after_first, 0);
        EXPECT_EQ_I(r[1].arena_allocations, 1); /* one plan, one arena, one cl_mem */
        /* the third step's run writes its inputs' data (xla-mlp's x and y,
         * wide-mlp's mask; their dims are static, so not their records) and
         * wide-mlp the record of the mask's static reshape, nothing else: its
         * new tensors get the shape records the second step's held, still
         * valid; the pool path writes the bounds of each new tensor whose
         * producer does not write its whole record (host BLAS's products do) */
        const uint64_t inputs = 2;
        EXPECT_EQ_I(r[1].writes_per_step, inputs);
        EXPECT_TRUE(r[0].writes_per_step >= inputs);
        clb_test_checks++;
        if ((double)r[1].arena_bytes > 1.05 * (double)r[1].live_lower_bound_bytes)
          CLB_FAIL_AT("%s: arena %llu > 1.05 x lower bound %llu", wn, (unsigned long long)r[1].arena_bytes,
                      (unsigned long long)r[1].live_lower_bound_bytes);
      }
      if (w == DEMO_WIDE_MLP) { /* MBs of activations: the plan holds less than the pool path */
        clb_test_checks++;
        if (!(r[1].peak_device_bytes < r[0].peak_device_bytes))
          CLB_FAIL_AT("wide-mlp under %s: peak %llu, pool path %llu", pn, (unsigned long long)r[1].peak_device_bytes,
                      (unsigned long long)r[0].peak_device_bytes);
      }
      demo_result_free(&r[0]);
      demo_result_free(&r[1]);
    }
  if (gemm) unsetenv("CLBOUND_GEMM");
}

/* the tensors' offsets reach clbound's GEMM kernel and CLBlast too: a test of
 * its own (graph/memory-gemm); on an NVIDIA H200 the whole ran past 90 s,
 * stopped in wide-mlp under clblast-bound, the last of these cases */
static void test_workloads_gemm(void) {
  workloads_under("kernel");
  workloads_under("clblast-bound");
}

/* ---- a 12-layer MLP inference chain ------------------------------------------------ */

enum { LAYERS = 12, WIDTH = 256, ROWS = 512 };

typedef struct chain {
  clb_context_t ctx;
  clb_graph_t g;
  clb_node x, kept, out;
} chain;

static void chain_new(chain *c, const clb_context_options *copts, int memory_plan) {
  c->ctx = clb_test_context(copts);
  clb_graph_options o;
  clb_graph_options_init(&o);
  o.policy = CLB_POLICY_DYNAMIC;
  o.free_intermediates = 1;
  o.memory_plan = memory_plan;
  o.name = "chain12";
  CL_OK(c->ctx, clb_graph_new(c->ctx, &o, &c->g));
  int64_t b[2] = {ROWS, WIDTH};
  uint8_t dyn[2] = {1, 0};
  CL_OK(c->ctx, clb_graph_input(c->g, "x", CLB_DTYPE_F32, 2, b, dyn, &c->x));
  static float w[WIDTH * WIDTH], bias[WIDTH];
  clb_node h = c->x;
  for (int l = 0; l < LAYERS; l++) {
    for (int i = 0; i < WIDTH * WIDTH; i++) w[i] = (float)(((i * 37 + l * 101) % 199) - 99) / (99.0f * 16.0f);
    for (int i = 0; i < WIDTH; i++) bias[i] = (float)((i + l) % 7 - 3) / 50.0f;
    char wn[16], bn[16];
    snprintf(wn, sizeof wn, "w%d", l);
    snprintf(bn, sizeof bn, "b%d", l);
    int64_t wd[2] = {WIDTH, WIDTH}, bd[1] = {WIDTH};
    clb_node wl, bl, z;
    CL_OK(c->ctx, clb_graph_param(c->g, wn, CLB_DTYPE_F32, 2, wd, w, sizeof w, 0, &wl));
    CL_OK(c->ctx, clb_graph_param(c->g, bn, CLB_DTYPE_F32, 1, bd, bias, sizeof bias, 0, &bl));
    CL_OK(c->ctx, clb_graph_linear(c->g, h, wl, bl, &z));
    CL_OK(c->ctx, clb_graph_unary(c->g, CLB_UNARY_TANH, z, &h));
    if (l == 5) c->kept = h;
  }
  c->out = h;
  CL_OK(c->ctx, clb_graph_keep(c->g, c->kept));
}

static void chain_free(chain *c) {
  clb_graph_free(c->g);
  clb_context_free(c->ctx);
}

static float xs[ROWS * WIDTH];

static clb_status chain_run(chain *c, int64_t rows, int seed) {
  for (int64_t i = 0; i < rows * WIDTH; i++) xs[i] = (float)((i * 7919 + seed * 31) % 200) / 100.0f - 1.0f;
  int64_t d[2] = {rows, WIDTH};
  CL_OK(c->ctx, clb_graph_feed(c->g, c->x, d, xs, sizeof(float) * (size_t)(rows * WIDTH)));
  return clb_graph_run(c->g);
}

static void chain_read(chain *c, clb_node n, float *out) {
  CL_OK(c->ctx, clb_tensor_read(c->ctx, clb_graph_tensor(c->g, n), NULL, out, sizeof(float) * ROWS * WIDTH, NULL));
}

/* The plan's tensors are regions of one arena buffer: the kept node and the
 * output share a cl_mem at distinct aligned offsets, not both 0; a plain OpenCL
 * read of that buffer at the kept node's offset gives what clb_tensor_read gave
 * (`kept`). A DLPack device export of a graph's tensor is a copy of its own
 * (docs/graph.md, "Views of a graph's tensors"): another cl_mem, at byte_offset
 * 0, holding the same values. */
static void read_at(chain *c, cl_mem mem, size_t offset, size_t n, const float *want, const char *what) {
  static float raw[ROWS * WIDTH];
  REQUIRE_TRUE(n <= ROWS * WIDTH);
  REQUIRE_TRUE(clEnqueueReadBuffer(clb_context_cl_queue(c->ctx), mem, CL_TRUE, offset, sizeof(float) * n, raw, 0, NULL,
                                   NULL) == CL_SUCCESS);
  clb_test_checks++;
  if (memcmp(raw, want, sizeof(float) * n) != 0) CLB_FAIL_AT("chain12: %s differs", what);
}

static void chain_offsets(chain *c, const float *kept, uint64_t align) {
  clb_tensor_t tk = clb_graph_tensor(c->g, c->kept), to = clb_graph_tensor(c->g, c->out);
  REQUIRE_TRUE(tk && to);
  size_t ok = clb_tensor_data_offset(tk), oo = clb_tensor_data_offset(to);
  printf("chain12: kept node at offset %zu, output at %zu of one buffer\n", ok, oo);
  EXPECT_TRUE(clb_tensor_data_mem(tk) == clb_tensor_data_mem(to));
  EXPECT_TRUE(ok != oo && (ok || oo));
  EXPECT_EQ_I(ok % align, 0);
  EXPECT_EQ_I(oo % align, 0);
  struct DLManagedTensorVersioned *dl = NULL;
  CL_OK(c->ctx, clb_tensor_to_dlpack_device(c->ctx, tk, &dl));
  size_t n = (size_t)(dl->dl_tensor.shape[0] * dl->dl_tensor.shape[1]);
  read_at(c, (cl_mem)clb_tensor_data_mem(tk), ok, n, kept, "the kept node read at its offset in the arena");
  EXPECT_TRUE(dl->dl_tensor.data != (void *)clb_tensor_data_mem(tk));
  EXPECT_EQ_I(dl->dl_tensor.byte_offset, 0);
  read_at(c, (cl_mem)dl->dl_tensor.data, (size_t)dl->dl_tensor.byte_offset, n, kept, "the device export's copy");
  dl->deleter(dl);
  /* the host export without a copy (where the device's buffers are host
   * memory) is a copy too for a graph's tensor: the graph's next run, which
   * rewrites the arena, leaves it as it was */
  struct DLManagedTensorVersioned *hx = NULL;
  clb_status st = clb_tensors_to_dlpack_host(c->ctx, 1, &tk, &hx);
  if (st == CLB_ERR_UNSUPPORTED) return; /* a device that copies (a GPU, CLBOUND_HOST_PTRS=off) */
  REQUIRE_TRUE(st == CLB_OK);
  EXPECT_EQ_I(hx->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ_I((size_t)(hx->dl_tensor.shape[0] * hx->dl_tensor.shape[1]), n);
  clb_test_checks++;
  if (memcmp(hx->dl_tensor.data, kept, sizeof(float) * n) != 0) CLB_FAIL_AT("chain12: the host export differs");
  CL_OK(c->ctx, chain_run(c, (int64_t)(n / WIDTH), 99));
  CL_OK(c->ctx, clb_context_sync(c->ctx));
  clb_test_checks++;
  if (memcmp(hx->dl_tensor.data, kept, sizeof(float) * n) != 0)
    CLB_FAIL_AT("chain12: the graph's next run changed its tensor's host export");
  hx->deleter(hx);
}

static void test_chain(void) {
  static const int64_t rows[] = {512, 100, 1, 0, 300, 512, 77};
  static float got[2][ROWS * WIDTH], kept[2][ROWS * WIDTH];
  chain c[2];
  chain_new(&c[0], NULL, 0);
  chain_new(&c[1], NULL, 1);
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
    uint64_t syncs0 = clb_test_counter_syncs(c[1].ctx);
    for (int m = 0; m < 2; m++) CL_OK(c[m].ctx, chain_run(&c[m], rows[k], (int)k));
    EXPECT_EQ_I(clb_test_counter_syncs(c[1].ctx) - syncs0, 0); /* a run waits for nothing */
    for (int m = 0; m < 2; m++) {
      memset(got[m], 0, sizeof got[m]);
      memset(kept[m], 0, sizeof kept[m]);
      chain_read(&c[m], c[m].out, got[m]);
      chain_read(&c[m], c[m].kept, kept[m]);
    }
    clb_test_checks++;
    if (memcmp(got[0], got[1], sizeof got[0]) || memcmp(kept[0], kept[1], sizeof kept[0]))
      CLB_FAIL_AT("chain, %lld rows: results differ from the pool path's", (long long)rows[k]);
    /* released intermediates read as NULL in both */
    EXPECT_TRUE(clb_graph_tensor(c[1].g, c[1].out - 1) == NULL); /* the last linear */
  }
  clb_graph_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CL_OK(c[1].ctx, clb_graph_stats_get(c[1].g, &s));
  printf("chain12: arena %llu bytes, lower bound %llu, pool %llu, %llu buffers, align %llu, %llu fallbacks\n",
         (unsigned long long)s.arena_bytes, (unsigned long long)s.live_lower_bound_bytes, (unsigned long long)s.pool_peak_bytes,
         (unsigned long long)s.arena_buffers, (unsigned long long)s.arena_align_bytes, (unsigned long long)s.arena_fallbacks);
  EXPECT_EQ_I(s.memory_plan, 1);
  EXPECT_EQ_I(s.arena_fallbacks, 0);
  /* a buffer per layer at least (two op by op; one when each tanh is its
   * linear's epilogue and the pre-activation is never made) */
  EXPECT_TRUE(s.arena_buffers >= (s.fused_epilogues == LAYERS ? LAYERS : LAYERS * 2));
  clb_test_checks++;
  if (!(s.arena_bytes >= s.live_lower_bound_bytes && (double)s.arena_bytes <= 1.05 * (double)s.live_lower_bound_bytes))
    CLB_FAIL_AT("chain12: arena %llu, lower bound %llu", (unsigned long long)s.arena_bytes,
                (unsigned long long)s.live_lower_bound_bytes);
  /* one plan, one arena, one cl_mem for it */
  clb_counters cn;
  memset(&cn, 0, sizeof cn);
  cn.struct_size = sizeof cn;
  CL_OK(c[1].ctx, clb_context_counters(c[1].ctx, &cn));
  EXPECT_EQ_I(cn.arena_allocations, 1);
  EXPECT_EQ_I(cn.arena_bytes, s.arena_bytes);
  /* the alignment: 128 bytes (offsets into one buffer: the device's sub-buffer
   * rule does not apply), 4096 bits when CTest forces it */
  const char *forced = getenv("CLBOUND_MEM_BASE_ALIGN_BITS");
  uint64_t want = 128;
  if (forced && (uint64_t)atoll(forced) / 8 > want) want = (uint64_t)atoll(forced) / 8;
  EXPECT_EQ_I(s.arena_align_bytes, want);
  chain_offsets(&c[1], kept[1], want);
  /* the memory map: a summary and one line per buffer, offsets aligned */
  static char desc[1 << 16];
  CL_OK(c[1].ctx, clb_graph_describe(c[1].g, desc, sizeof desc, NULL));
  EXPECT_TRUE(strstr(desc, "memory plan 0:") != NULL);
  size_t lines = 0;
  for (const char *p = strstr(desc, "  buf "); p; p = strstr(p + 1, "  buf ")) {
    unsigned long long off = 0, size = 0;
    int arena = -1;
    clb_test_checks++;
    if (sscanf(p, "  buf %*u: arena %d offset %llu size %llu", &arena, &off, &size) != 3 || off % want)
      CLB_FAIL_AT("memory map line: %.60s", p);
    lines++;
  }
  EXPECT_EQ_I(lines, s.arena_buffers);
  chain_free(&c[0]);
  chain_free(&c[1]);
}

/* An arena that does not fit under the memory limit: CLB_ERR_OOM naming the
 * plan and the bytes; the context works on, and so does the graph once memory is
 * free again. */
static void test_oom(void) {
  clb_context_options o;
  clb_context_options_init(&o);
  o.device_memory_limit = 8u << 20; /* 3 MiB of weights, 2.3 MiB of arena */
  /* without the program walk (runtime/graph/whole-step.c), so that the first run
   * records and the second lays out the arena: the walk would record and lay
   * out within the first run, before the user takes the memory */
  setenv("CLBOUND_PLAN_PROGRAMS", "off", 1);
  chain c;
  chain_new(&c, &o, 1);
  static float first[ROWS * WIDTH], again[ROWS * WIDTH];
  CL_OK(c.ctx, chain_run(&c, 200, 1)); /* the plan's first run records its buffers */
  chain_read(&c, c.out, first);
  clb_graph_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  CL_OK(c.ctx, clb_graph_stats_get(c.g, &s));
  REQUIRE_TRUE(s.arena_bytes > 0);
  clb_counters cn;
  memset(&cn, 0, sizeof cn);
  cn.struct_size = sizeof cn;
  CL_OK(c.ctx, clb_context_counters(c.ctx, &cn));
  /* the user takes all the memory left */
  clb_tensor_t big = NULL;
  for (int64_t n = (int64_t)((o.device_memory_limit - cn.device_bytes_held) / 4); !big && n > 0; n -= n / 16 + 1)
    if (clb_tensor_new(c.ctx, CLB_DTYPE_F32, 1, &n, NULL, &big) != CLB_OK) big = NULL; /* size classes: a bit less */
  REQUIRE_TRUE(big != NULL);
  clb_status st = chain_run(&c, 200, 1);
  EXPECT_EQ_I(st, CLB_ERR_OOM);
  const char *msg = clb_context_errmsg(c.ctx);
  char want[64];
  snprintf(want, sizeof want, "%llu bytes", (unsigned long long)s.arena_bytes);
  if (!(strstr(msg, "chain12") && strstr(msg, "plan 0") && strstr(msg, want)))
    CLB_FAIL_AT("the message names the graph, the plan and the bytes: %s", msg);
  clb_test_checks++;
  /* the context still works: an eager op on a new tensor */
  clb_tensor_free(big);
  clb_tensor_t t = NULL;
  int64_t d = 1000;
  CL_OK(c.ctx, clb_tensor_new(c.ctx, CLB_DTYPE_F32, 1, &d, NULL, &t));
  CL_OK(c.ctx, clb_fill(c.ctx, t, 2.5));
  static float buf[1000];
  CL_OK(c.ctx, clb_tensor_read(c.ctx, t, NULL, buf, sizeof buf, NULL));
  EXPECT_TRUE(buf[0] == 2.5f && buf[999] == 2.5f);
  clb_tensor_free(t);
  /* and the graph runs again in its arena, with the same result */
  CL_OK(c.ctx, chain_run(&c, 200, 1));
  chain_read(&c, c.out, again);
  clb_test_checks++;
  if (memcmp(first, again, sizeof first)) CLB_FAIL_AT("after the OOM: another result");
  memset(&cn, 0, sizeof cn);
  cn.struct_size = sizeof cn;
  CL_OK(c.ctx, clb_context_counters(c.ctx, &cn));
  EXPECT_EQ_I(cn.arena_allocations, 1);
  chain_free(&c);
  unsetenv("CLBOUND_PLAN_PROGRAMS");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "gemm") == 0) {
    test_workloads_gemm();
    return clb_test_finish("graph/memory-gemm");
  }
  test_chain();
  test_oom();
  workloads_under(NULL);
  return clb_test_finish("graph/memory");
}
