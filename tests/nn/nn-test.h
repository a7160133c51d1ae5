/* nn-test.h: helpers of the MLP op tests: random values, garbage-filled slack,
 * comparisons of device results with double references and finite differences. */
#ifndef CLB_NN_TEST_H
#define CLB_NN_TEST_H

#include "cl-test.h"
#include "clbound/nn.h"

/* A uniform value in [lo, hi]. */
static inline double nn_rnd(double lo, double hi) {
  return lo + (hi - lo) * (double)(clb_test_next() % 100001) / 100000.0;
}

/* Fills t's whole buffer with 0x7F bytes (about 3.4e38 as f32, 1.4e306 as f64):
 * slack that leaks into a result shows. */
static inline void nn_garbage_fill(clb_context_t ctx, clb_tensor_t t) {
  cl_mem mem = clb_tensor_data_mem(t);
  size_t size = 0;
  clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
  cl_uchar pat = 0x7F;
  REQUIRE_TRUE(clEnqueueFillBuffer(clb_context_cl_queue(ctx), mem, &pat, 1, 0, size, 0, NULL, NULL) == CL_SUCCESS);
}

/* A new tensor with its buffer garbage-filled, then written at `dims`. */
static inline clb_tensor_t nn_tensor(clb_context_t ctx, clb_dtype dt, int rank, const int64_t *bounds,
                                     const uint8_t *dyn, const int64_t *dims, const double *vals) {
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, dt, rank, bounds, dyn, &t));
  nn_garbage_fill(ctx, t);
  if (dims) clb_test_write(ctx, t, dims, vals);
  return t;
}

/* Reads t and compares its n values (and dims when want_dims) with want. */
static inline void nn_expect(clb_context_t ctx, clb_tensor_t t, const int64_t *want_dims, const double *want, int64_t n,
                             const char *what) {
  int rank = clb_tensor_rank(t);
  int64_t dims[CLB_MAX_RANK];
  int64_t cap = clb_tensor_bound_numel(t);
  double *got = malloc(sizeof(double) * (size_t)(cap + 1));
  REQUIRE_TRUE(got != NULL);
  int64_t gn = clb_test_read(ctx, t, dims, got, cap);
  clb_test_checks++;
  if (gn != n) CLB_FAIL_AT("%s: %lld elements, want %lld", what, (long long)gn, (long long)n);
  for (int d = 0; want_dims && d < rank; d++)
    if (dims[d] != want_dims[d]) {
      CLB_FAIL_AT("%s: dim %d is %lld, want %lld", what, d, (long long)dims[d], (long long)want_dims[d]);
      break;
    }
  for (int64_t i = 0; i < n && i < gn; i++) {
    double d = fabs(got[i] - want[i]);
    clb_test_checks++;
    if (!(d <= 1e-3 || d <= 5e-3 * fabs(want[i])) && !(isnan(got[i]) && isnan(want[i]))) {
      CLB_FAIL_AT("%s [%lld]: got %.9g want %.9g", what, (long long)i, got[i], want[i]);
      break;
    }
  }
  free(got);
}

/* Checks an analytic gradient (double) against central differences of a scalar
 * function of the double reference: f(v + h) - f(v - h) over 2h, per element. */
typedef double (*nn_scalar_fn)(void *user, double *v);
static inline void nn_expect_fd(nn_scalar_fn f, void *user, double *v, int64_t n, const double *grad, const char *what) {
  const double h = 1e-6;
  for (int64_t i = 0; i < n; i++) {
    double keep = v[i];
    v[i] = keep + h;
    double fp = f(user, v);
    v[i] = keep - h;
    double fm = f(user, v);
    v[i] = keep;
    double fd = (fp - fm) / (2 * h), d = fabs(fd - grad[i]);
    clb_test_checks++;
    if (!(d <= 1e-5 || d <= 1e-4 * fabs(grad[i]))) {
      CLB_FAIL_AT("%s [%lld]: analytic %.12g, central difference %.12g", what, (long long)i, grad[i], fd);
      return;
    }
  }
}

#endif /* CLB_NN_TEST_H */
