/* ops-test.h: shared helpers of the data-dependent op tests: contexts in either
 * kernel style, data at a given density, and plain-C broadcast references. */
#ifndef CLB_OPS_TEST_H
#define CLB_OPS_TEST_H

#include "cl-test.h"

static const char *const ops_style_names[] = {"auto", "cpu", "gpu"};

/* Whether a test may force `style`'s kernels onto the device: the runtime runs
 * the CPU family (one work-item per chunk, vector tricks for CPUs) on CPU
 * devices, and on others only when its own choice (AUTO, with CLBOUND_GEOMETRY)
 * is that family. Forcing it onto a GPU tests what no user runs (issue 19: the
 * one GPU run so far hung there), so such a case is skipped, saying why. */
static inline int ops_style_runs(clb_kernel_style style, const char *name) {
  if (style != CLB_KERNEL_STYLE_CPU) return 1;
  clb_context_options o;
  clb_context_options_init(&o);
  clb_context_t ctx = clb_test_context(&o);
  cl_device_type type = 0;
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_TYPE, sizeof type, &type, NULL);
  clb_kernel_style chosen = clb_context_kernel_style(ctx);
  clb_context_free(ctx);
  if ((type & CL_DEVICE_TYPE_CPU) || chosen == CLB_KERNEL_STYLE_CPU) return 1;
  printf("%s: skipping the CPU kernel family: the device is not a CPU and the runtime chooses the %s family "
         "there (it never runs the CPU family on this device)\n",
         name, chosen == CLB_KERNEL_STYLE_GPU ? "GPU" : "other");
  return 0;
}

/* Launches of one select op (nonzero, masked_select, masked_scatter) on a mask
 * below the one-launch crossover: 1, or 3 under CLBOUND_SELECT_SINGLE=off. */
static inline uint64_t ops_select_launches(void) {
  const char *e = getenv("CLBOUND_SELECT_SINGLE");
  return e && strcmp(e, "off") == 0 ? 3 : 1;
}

/* A context whose kernels use `style` (CPU or GPU family). */
static inline clb_context_t ops_context(clb_kernel_style style) {
  clb_context_options o;
  clb_context_options_init(&o);
  o.kernel_style = style;
  clb_context_t ctx = clb_test_context(&o);
  REQUIRE_TRUE(clb_context_kernel_style(ctx) == style);
  return ctx;
}

static inline int ops_has_fp64(clb_context_t ctx) {
  int64_t one = 1;
  clb_tensor_t t = NULL;
  clb_status st = clb_tensor_new(ctx, CLB_DTYPE_F64, 1, &one, NULL, &t);
  clb_tensor_free(t);
  return st == CLB_OK;
}

/* Runs per_dtype(ctx, dt, dt == f32) for every dtype the device has, then
 * once(ctx), in a context of each kernel style; prints the case count after each
 * style and returns the test's exit status. */
static inline int ops_run_styles(const char *name, const long *cases, void (*per_dtype)(clb_context_t, clb_dtype, int),
                                 void (*once)(clb_context_t)) {
  for (int style = CLB_KERNEL_STYLE_CPU; style <= CLB_KERNEL_STYLE_GPU; style++) {
    if (!ops_style_runs((clb_kernel_style)style, name)) continue;
    clb_context_t ctx = ops_context((clb_kernel_style)style);
    int fp64 = ops_has_fp64(ctx);
    for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
      if (dt == CLB_DTYPE_F64 && !fp64) continue;
      /* reduced sizes: one dtype of each element size the kernels specialize on */
      if (clb_test_small() && dt != CLB_DTYPE_F32 && dt != CLB_DTYPE_I64 && dt != CLB_DTYPE_BOOL) continue;
      CLB_TEST_CASE("%s style %s: dtype %s", name, ops_style_names[style], clb_dtype_name((clb_dtype)dt));
      per_dtype(ctx, (clb_dtype)dt, dt == CLB_DTYPE_F32);
    }
    CLB_TEST_CASE("%s style %s: the other cases", name, ops_style_names[style]);
    once(ctx);
    CL_OK(ctx, clb_context_sync(ctx));
    printf("%s style: %ld cases\n", ops_style_names[style], *cases);
    clb_context_free(ctx);
  }
  return clb_test_finish(name);
}

/* The first and last of a test's four densities to run: all of them, or 0.5
 * alone with reduced sizes. */
static inline size_t ops_density_first(void) { return clb_test_small() ? 2 : 0; }
static inline size_t ops_density_end(void) { return clb_test_small() ? 3 : 4; }

/* With reduced sizes, whether a size is one of the few kept: empty, one, around
 * the CPU work-group (64) and past the GPU one (256), and 70000, past LOCAL
 * GPU work-groups of 256. */
static inline int ops_small_size(int64_t n) { return n == 0 || n == 65 || n == 129 || n == 70000; }

/* A uniform double in [0, 1). */
static inline double ops_uniform(void) { return (double)(clb_test_next() >> 11) * (1.0 / 9007199254740992.0); }

/* n values of dtype dt, nonzero with probability `density`. Floating zeros are
 * sometimes -0.0 and some nonzeros NaN, so both count as PyTorch counts them. */
static inline void ops_gen(clb_dtype dt, int64_t n, double density, double *v) {
  for (int64_t i = 0; i < n; i++) {
    int nz = density >= 1.0 || ops_uniform() < density;
    uint64_t r = clb_test_next();
    if (!nz) {
      v[i] = (dt == CLB_DTYPE_F32 || dt == CLB_DTYPE_F64) && (r & 1) ? -0.0 : 0.0;
      continue;
    }
    switch (dt) {
    case CLB_DTYPE_BOOL: v[i] = 1; break;
    case CLB_DTYPE_U8: v[i] = (double)(1 + r % 255); break;
    case CLB_DTYPE_I32:
    case CLB_DTYPE_I64: v[i] = (double)((int64_t)(r % 2001) - 1000); if (v[i] == 0) v[i] = 7; break;
    default: v[i] = (r % 97 == 0) ? NAN : (double)((int64_t)(r % 2001) - 1000) / 8.0; if (v[i] == 0) v[i] = 0.5; break;
    }
  }
}

/* Whether a value read back as a double is nonzero (NaN is). */
static inline int ops_nz(double v) { return v != 0.0 || isnan(v); }

/* Element offsets into an operand of rank r and dims `dims`, broadcast to the
 * iteration shape od[rank] (right-aligned; a size-1 dim repeats): one per
 * element of the iteration shape, into idx. */
static inline void ops_bcast_index(int rank, const int64_t *od, int r, const int64_t *dims, int64_t *idx) {
  int64_t n = clb_test_numel(rank, od);
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, off = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t c = rem % od[d];
      rem /= od[d];
      int dd = d - (rank - r);
      if (dd >= 0) {
        if (dims[dd] != 1) off += c * stride;
        stride *= dims[dd];
      }
    }
    idx[i] = off;
  }
}

/* Same values, both as the doubles written and as the doubles read back (f32
 * rounding, integer truncation), so comparisons are exact. */
static inline void ops_roundtrip(clb_dtype dt, double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
    case CLB_DTYPE_F32: v[i] = (double)(float)v[i]; break;
    case CLB_DTYPE_I32: v[i] = (double)(int32_t)v[i]; break;
    case CLB_DTYPE_I64: v[i] = (double)(int64_t)v[i]; break;
    case CLB_DTYPE_U8: v[i] = (double)(uint8_t)v[i]; break;
    case CLB_DTYPE_BOOL: v[i] = v[i] != 0.0; break;
    default: break;
    }
  }
}

/* The select ops' inputs, made and written: x [<=bound] dynamic at n, its mask m,
 * x2 [<=rows_bound, cols] (dim 0 dynamic) at rows rows with a row mask rmask
 * [<=rows_bound, 1], and a static source s [src_n]. */
typedef struct ops_sel_inputs {
  clb_tensor_t x, m, x2, rmask, s;
} ops_sel_inputs;

static inline void ops_sel_inputs_new(clb_context_t ctx, clb_dtype dt, int64_t bound, int64_t n, const double *xv,
                                      const double *mv, int64_t rows_bound, int64_t cols, int64_t rows,
                                      const double *x2v, const double *rm, int64_t src_n, const double *src,
                                      ops_sel_inputs *in) {
  int64_t b2[2] = {rows_bound, cols}, bm[2] = {rows_bound, 1}, d2[2] = {rows, cols}, dm[2] = {rows, 1};
  uint8_t y1 = 1, y2[2] = {1, 0};
  memset(in, 0, sizeof *in);
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &bound, &y1, &in->x));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 1, &bound, &y1, &in->m));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 2, b2, y2, &in->x2));
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 2, bm, y2, &in->rmask));
  CL_OK(ctx, clb_tensor_new(ctx, dt, 1, &src_n, NULL, &in->s));
  clb_test_write(ctx, in->x, &n, xv);
  clb_test_write(ctx, in->m, &n, mv);
  clb_test_write(ctx, in->x2, d2, x2v);
  clb_test_write(ctx, in->rmask, dm, rm);
  clb_test_write(ctx, in->s, &src_n, src);
}

static inline void ops_sel_inputs_free(ops_sel_inputs *in) {
  clb_tensor_t all[] = {in->x, in->m, in->x2, in->rmask, in->s};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) clb_tensor_free(all[k]);
  memset(in, 0, sizeof *in);
}

/* Exact equality of doubles read back, NaN equal to NaN and -0.0 to 0.0. */
static inline int ops_same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

#endif /* CLB_OPS_TEST_H */
