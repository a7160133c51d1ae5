/* test-dlpack.c: DLPack import and export (versioned and legacy, host and
 * device), and the capability query checked against what the ops really do. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl-test.h"

static int deleted; /* deleter calls of the producer-side tensors below */

/* A producer's tensor: a DLManagedTensorVersioned over caller memory. */
typedef struct producer {
  struct DLManagedTensorVersioned v;
  DLManagedTensor l;
  int64_t shape[8], strides[8];
} producer;

static void count_deleter(struct DLManagedTensorVersioned *self) { deleted += self->manager_ctx == self; }
static void count_deleter_legacy(DLManagedTensor *self) { deleted += self->manager_ctx == self; }

static void produce(producer *p, void *data, DLDataType dt, int ndim, const int64_t *shape, const int64_t *strides,
                    uint64_t byte_offset) {
  memset(p, 0, sizeof *p);
  for (int d = 0; d < ndim; d++) {
    p->shape[d] = shape[d];
    if (strides) p->strides[d] = strides[d];
  }
  DLTensor *t = &p->v.dl_tensor;
  t->data = data;
  t->device.device_type = kDLCPU;
  t->ndim = ndim;
  t->dtype = dt;
  t->shape = p->shape;
  t->strides = strides ? p->strides : NULL;
  t->byte_offset = byte_offset;
  p->v.version.major = DLPACK_MAJOR_VERSION;
  p->v.version.minor = DLPACK_MINOR_VERSION;
  p->v.manager_ctx = &p->v;
  p->v.deleter = count_deleter;
  p->l.dl_tensor = *t;
  p->l.manager_ctx = &p->l;
  p->l.deleter = count_deleter_legacy;
}

static DLDataType dl(uint8_t code, uint8_t bits) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = 1;
  return t;
}

/* Reads t at its actual sizes into a fresh buffer (caller frees). */
static void *read_all(clb_context_t ctx, clb_tensor_t t, int64_t *dims, size_t *bytes) {
  size_t cap = (size_t)clb_tensor_bound_numel(t) * clb_dtype_size(clb_tensor_dtype(t)) + 1;
  void *buf = malloc(cap);
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, buf, cap, bytes));
  return buf;
}

static void test_dtypes(void) {
  for (int d = 0; d < CLB_DTYPE_COUNT; d++) {
    DLDataType t;
    clb_dtype back = CLB_DTYPE_COUNT;
    EXPECT_EQ_I(clb_dlpack_dtype((clb_dtype)d, &t), CLB_OK);
    EXPECT_EQ_I(t.lanes, 1);
    EXPECT_EQ_I(t.bits, 8 * (int)clb_dtype_size((clb_dtype)d));
    EXPECT_EQ_I(clb_dtype_from_dlpack(t, &back), CLB_OK);
    EXPECT_EQ_I(back, d);
  }
  DLDataType b;
  clb_dlpack_dtype(CLB_DTYPE_BOOL, &b);
  EXPECT_EQ_I(b.code, kDLBool);
  clb_dtype out;
  EXPECT_EQ_I(clb_dtype_from_dlpack(dl(kDLFloat, 16), &out), CLB_ERR_DTYPE);
  EXPECT_TRUE(strstr(clb_last_errmsg(), "code 2, bits 16") != NULL);
  DLDataType v2 = dl(kDLFloat, 32);
  v2.lanes = 2;
  EXPECT_EQ_I(clb_dtype_from_dlpack(v2, &out), CLB_ERR_DTYPE);
  EXPECT_EQ_I(clb_dlpack_dtype(CLB_DTYPE_COUNT, &b), CLB_ERR_DTYPE);
}

/* Host export of every dtype at actual sizes below the bounds, versioned and
 * legacy; rank 0 and empty tensors too. */
static void test_host_export(clb_context_t ctx, int fp64) {
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !fp64) continue;
    int64_t bounds[2] = {8, 3}, dims[2] = {5, 3};
    uint8_t dyn[2] = {1, 0};
    clb_tensor_t t = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, bounds, dyn, &t));
    double vals[15];
    for (int i = 0; i < 15; i++) vals[i] = dt == CLB_DTYPE_BOOL ? (i % 3 == 0) : (double)(i * 7 % 11) - 3 * (dt != CLB_DTYPE_U8);
    clb_test_write(ctx, t, dims, vals);
    size_t es = clb_dtype_size((clb_dtype)dt);
    unsigned char want[15 * 8];
    clb_test_to_dtype((clb_dtype)dt, vals, want, 15);
    uint64_t s0 = clb_test_counter_syncs(ctx);
    struct DLManagedTensorVersioned *v = NULL;
    CL_OK(ctx, clb_tensor_to_dlpack(ctx, t, &v));
    EXPECT_TRUE(clb_test_counter_syncs(ctx) - s0 >= 1);
    EXPECT_EQ_I(v->version.major, DLPACK_MAJOR_VERSION);
    EXPECT_EQ_I(v->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    EXPECT_EQ_I(v->dl_tensor.device.device_type, kDLCPU);
    EXPECT_EQ_I(v->dl_tensor.ndim, 2);
    EXPECT_EQ_I(v->dl_tensor.shape[0], 5);
    EXPECT_EQ_I(v->dl_tensor.shape[1], 3);
    REQUIRE_TRUE(v->dl_tensor.strides != NULL);
    EXPECT_EQ_I(v->dl_tensor.strides[0], 3);
    EXPECT_EQ_I(v->dl_tensor.strides[1], 1);
    EXPECT_EQ_I(v->dl_tensor.byte_offset, 0);
    EXPECT_EQ_I((uintptr_t)v->dl_tensor.data % 256, 0);
    clb_dtype back;
    EXPECT_EQ_I(clb_dtype_from_dlpack(v->dl_tensor.dtype, &back), CLB_OK);
    EXPECT_EQ_I(back, dt);
    EXPECT_TRUE(memcmp(v->dl_tensor.data, want, 15 * es) == 0);
    DLManagedTensor *l = NULL;
    CL_OK(ctx, clb_tensor_to_dlpack_legacy(ctx, t, &l));
    EXPECT_EQ_I(l->dl_tensor.shape[0], 5);
    EXPECT_EQ_I(l->dl_tensor.strides[0], 3);
    EXPECT_TRUE(memcmp(l->dl_tensor.data, want, 15 * es) == 0);
    /* the exports own their memory: they outlive the tensor */
    clb_tensor_free(t);
    EXPECT_TRUE(memcmp(v->dl_tensor.data, want, 15 * es) == 0);
    v->deleter(v);
    l->deleter(l);
  }
  /* rank 0: shape and strides are still pointers */
  clb_tensor_t s = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 0, NULL, NULL, &s));
  double sv = -42;
  clb_test_write(ctx, s, NULL, &sv);
  struct DLManagedTensorVersioned *v = NULL;
  CL_OK(ctx, clb_tensor_to_dlpack(ctx, s, &v));
  EXPECT_EQ_I(v->dl_tensor.ndim, 0);
  EXPECT_TRUE(v->dl_tensor.shape != NULL && v->dl_tensor.strides != NULL);
  EXPECT_EQ_I(*(int64_t *)v->dl_tensor.data, -42);
  v->deleter(v);
  clb_tensor_free(s);
  /* empty: data is NULL, shape says 0 */
  int64_t eb = 6, ed = 0;
  uint8_t dyn = 1;
  clb_tensor_t e = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 1, &eb, &dyn, &e));
  CL_OK(ctx, clb_tensor_write(ctx, e, &ed, NULL, 0));
  CL_OK(ctx, clb_tensor_to_dlpack(ctx, e, &v));
  EXPECT_EQ_I(v->dl_tensor.shape[0], 0);
  EXPECT_TRUE(v->dl_tensor.data == NULL);
  v->deleter(v);
  clb_tensor_free(e);
  EXPECT_STATUS(ctx, clb_tensor_to_dlpack(ctx, NULL, &v), CLB_ERR_NULL, "clb_tensor_to_dlpack");
  EXPECT_TRUE(v == NULL);
}

/* Host import: dense, strided (a transpose, a negative stride, a broadcast
 * stride of 0, a byte offset), bools normalized, with bounds; errors; ownership. */
/* t holds the transpose of the [4, 3] array a (read at [3, 4]); t is freed. */
static void expect_transpose(clb_context_t ctx, clb_tensor_t t, const float *a) {
  int64_t dims[2];
  size_t bytes;
  float *r = read_all(ctx, t, dims, &bytes);
  int bad = dims[0] != 3 || dims[1] != 4;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) bad += r[i * 4 + j] != a[j * 3 + i];
  EXPECT_EQ_I(bad, 0);
  free(r);
  clb_tensor_free(t);
}

static void test_host_import(clb_context_t ctx) {
  float a[12];
  for (int i = 0; i < 12; i++) a[i] = (float)i + 0.5f;
  producer p;
  int64_t shape[2] = {3, 4};
  clb_tensor_t t = NULL;
  int64_t dims[2];
  size_t bytes;

  /* dense, into bounds [<=10, 4] */
  deleted = 0;
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  int64_t bounds[2] = {10, 4};
  uint8_t dyn[2] = {1, 0};
  CL_OK(ctx, clb_tensor_from_dlpack(ctx, &p.v, bounds, dyn, &t));
  EXPECT_EQ_I(deleted, 1);
  int64_t got_bounds[2];
  clb_tensor_bounds(t, got_bounds);
  EXPECT_EQ_I(got_bounds[0], 10);
  EXPECT_TRUE(clb_tensor_is_dynamic(t, 0) && !clb_tensor_is_dynamic(t, 1));
  float *r = read_all(ctx, t, dims, &bytes);
  EXPECT_EQ_I(dims[0], 3);
  EXPECT_EQ_I(bytes, sizeof a);
  EXPECT_TRUE(memcmp(r, a, sizeof a) == 0);
  free(r);
  clb_tensor_free(t);

  /* the transpose of a [4, 3] array: shape [3, 4], strides [1, 3] */
  int64_t tstr[2] = {1, 3};
  produce(&p, a, dl(kDLFloat, 32), 2, shape, tstr, 0);
  CL_OK(ctx, clb_tensor_from_dlpack_legacy(ctx, &p.l, NULL, NULL, &t));
  EXPECT_EQ_I(deleted, 2);
  expect_transpose(ctx, t, a);

  /* rows reversed (stride -4 from the last row, through byte_offset), and a
   * broadcast dim (stride 0) */
  int64_t rs[2] = {-4, 1};
  produce(&p, a, dl(kDLFloat, 32), 2, shape, rs, 8 * sizeof(float));
  CL_OK(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t));
  r = read_all(ctx, t, dims, &bytes);
  int bad = 0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) bad += r[i * 4 + j] != a[(2 - i) * 4 + j];
  EXPECT_EQ_I(bad, 0);
  free(r);
  clb_tensor_free(t);
  int64_t bs[2] = {0, 1};
  produce(&p, a, dl(kDLFloat, 32), 2, shape, bs, 0);
  CL_OK(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t));
  r = read_all(ctx, t, dims, &bytes);
  bad = 0;
  for (int i = 0; i < 12; i++) bad += r[i] != a[i % 4];
  EXPECT_EQ_I(bad, 0);
  free(r);
  clb_tensor_free(t);

  /* bool bytes other than 0 and 1 come in as true */
  unsigned char bv[5] = {0, 1, 2, 255, 0};
  int64_t bshape = 5;
  produce(&p, bv, dl(kDLBool, 8), 1, &bshape, NULL, 0);
  CL_OK(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t));
  EXPECT_EQ_I(clb_tensor_dtype(t), CLB_DTYPE_BOOL);
  unsigned char *br = read_all(ctx, t, dims, &bytes);
  EXPECT_TRUE(br[0] == 0 && br[1] == 1 && br[2] == 1 && br[3] == 1 && br[4] == 0);
  free(br);
  clb_tensor_free(t);

  /* errors: every one consumes src (the deleter runs) and creates nothing */
  deleted = 0;
  t = NULL;
  int64_t small[2] = {2, 4};
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, small, NULL, &t), CLB_ERR_OUT_OF_BOUNDS,
                "f32 tensor [3, 4]: dim 0: 3 > bound 2");
  produce(&p, a, dl(kDLFloat, 16), 2, shape, NULL, 0);
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t), CLB_ERR_DTYPE, "code 2, bits 16");
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  p.v.version.major = DLPACK_MAJOR_VERSION + 1;
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t), CLB_ERR_UNSUPPORTED, "DLPack version");
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  p.v.dl_tensor.device.device_type = kDLOpenCL;
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t), CLB_ERR_UNSUPPORTED, "host memory");
  produce(&p, NULL, dl(kDLFloat, 32), 2, shape, NULL, 0);
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t), CLB_ERR_NULL, "data is NULL");
  int64_t nine = 9;
  produce(&p, a, dl(kDLFloat, 32), 9, shape, NULL, 0);
  p.v.dl_tensor.ndim = 9;
  p.v.dl_tensor.shape = &nine;
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, &p.v, NULL, NULL, &t), CLB_ERR_RANK, "ndim 9");
  EXPECT_EQ_I(deleted, 6);
  EXPECT_TRUE(t == NULL);
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack(ctx, NULL, NULL, NULL, &t), CLB_ERR_NULL, "src is NULL");
}

/* Export then import gives the same tensor back, for every dtype. */
static void test_round_trip(clb_context_t ctx, int fp64) {
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !fp64) continue;
    int64_t b[3] = {4, 5, 6}, d[3] = {2, 5, 3};
    uint8_t dyn[3] = {1, 0, 1};
    clb_tensor_t t = NULL, u = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 3, b, dyn, &t));
    double v[30];
    for (int i = 0; i < 30; i++) v[i] = dt == CLB_DTYPE_BOOL ? (i % 4 == 1) : (double)(i % 13);
    clb_test_write(ctx, t, d, v);
    struct DLManagedTensorVersioned *m = NULL;
    CL_OK(ctx, clb_tensor_to_dlpack(ctx, t, &m));
    CL_OK(ctx, clb_tensor_from_dlpack(ctx, m, b, dyn, &u));
    int64_t d1[3], d2[3];
    size_t n1, n2;
    void *r1 = read_all(ctx, t, d1, &n1), *r2 = read_all(ctx, u, d2, &n2);
    EXPECT_EQ_I(n1, n2);
    EXPECT_TRUE(memcmp(d1, d2, sizeof d1) == 0);
    EXPECT_TRUE(memcmp(r1, r2, n1) == 0);
    free(r1);
    free(r2);
    clb_tensor_free(t);
    clb_tensor_free(u);
  }
}

/* Device export: the cl_mem itself, at the actual sizes; the buffer stays out
 * of the pool until the deleter runs, even after the tensor is freed. */
static void test_device_export(void) {
  clb_context_t ctx = clb_test_context(NULL);
  int64_t b = 1000, d = 10; /* 4000 bytes: no other buffer in the pool has that size */
  uint8_t dyn = 1;
  clb_tensor_t t = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &t));
  double v[10];
  for (int i = 0; i < 10; i++) v[i] = 100 + i;
  clb_test_write(ctx, t, &d, v);
  struct DLManagedTensorVersioned *m = NULL;
  CL_OK(ctx, clb_tensor_to_dlpack_device(ctx, t, &m));
  EXPECT_EQ_I(m->dl_tensor.device.device_type, kDLOpenCL);
  EXPECT_EQ_I(m->dl_tensor.shape[0], 10);
  EXPECT_EQ_I(m->dl_tensor.strides[0], 1);
  EXPECT_EQ_I(m->flags, 0);
  cl_mem mem = (cl_mem)m->dl_tensor.data;
  EXPECT_TRUE(mem == clb_tensor_data_mem(t));
  int32_t host[10];
  cl_command_queue q = clb_context_cl_queue(ctx);
  EXPECT_EQ_I(clEnqueueReadBuffer(q, mem, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL), CL_SUCCESS);
  for (int i = 0; i < 10; i++) EXPECT_EQ_I(host[i], 100 + i);
  /* free the tensor; a new tensor of the same size must not get the buffer */
  clb_tensor_free(t);
  clb_tensor_t u = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &u));
  EXPECT_TRUE(clb_tensor_data_mem(u) != mem);
  static double z[1000];
  clb_test_write(ctx, u, &b, z);
  EXPECT_EQ_I(clEnqueueReadBuffer(q, mem, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL), CL_SUCCESS);
  for (int i = 0; i < 10; i++) EXPECT_EQ_I(host[i], 100 + i);
  m->deleter(m);
  /* after the deleter, the buffer is back in the pool: the next tensor of that
   * size reuses it */
  clb_tensor_t w = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &w));
  EXPECT_TRUE(clb_tensor_data_mem(w) == mem);
  /* an export whose context is freed first: its deleter still works */
  CL_OK(ctx, clb_tensor_to_dlpack_device(ctx, w, &m));
  struct DLManagedTensorVersioned *m2 = NULL;
  CL_OK(ctx, clb_tensor_to_dlpack_device(ctx, u, &m2));
  m2->deleter(m2); /* one export released while another is outstanding */
  clb_context_free(ctx);
  m->deleter(m);
}

/* clb_tensor_from_dlpack_borrowed: the device copies from the producer's memory
 * when the write runs; the deleter runs once that write is done (at the next
 * sync, or the context's free), or at once where nothing is borrowed. */
static void test_borrowed_import(void) {
  clb_context_t ctx = clb_test_context(NULL);
  float a[12], b[12];
  for (int i = 0; i < 12; i++) {
    a[i] = (float)i + 0.25f;
    b[i] = -(float)i;
  }
  producer p, q;
  int64_t shape[2] = {3, 4}, bounds[2] = {10, 4}, dims[2];
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t t = NULL, u = NULL;
  size_t bytes;
  clb_counters c0, c1;
  c0.struct_size = c1.struct_size = sizeof c0;

  /* dense: borrowed until the next sync; two writes held at once */
  deleted = 0;
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  produce(&q, b, dl(kDLFloat, 32), 2, shape, NULL, 0);
  CL_OK(ctx, clb_context_counters(ctx, &c0));
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, bounds, dyn, &t));
  EXPECT_EQ_I(deleted, 0); /* nothing has reaped the write yet */
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &q.v, NULL, NULL, &u));
  EXPECT_TRUE(deleted <= 1); /* the second import may have found the first write done */
  CL_OK(ctx, clb_context_counters(ctx, &c1));
  EXPECT_EQ_I(c1.host_syncs, c0.host_syncs); /* no wait in the imports */
  EXPECT_TRUE(c1.bytes_to_device - c0.bytes_to_device >= 2 * sizeof a);
  CL_OK(ctx, clb_context_sync(ctx));
  EXPECT_EQ_I(deleted, 2);
  float *r = read_all(ctx, t, dims, &bytes);
  EXPECT_EQ_I(dims[0], 3);
  EXPECT_EQ_I(bytes, sizeof a);
  EXPECT_TRUE(memcmp(r, a, sizeof a) == 0);
  free(r);
  EXPECT_TRUE(clb_tensor_is_dynamic(t, 0) && !clb_tensor_is_dynamic(u, 0));
  r = read_all(ctx, u, dims, &bytes);
  EXPECT_TRUE(bytes == sizeof b && memcmp(r, b, sizeof b) == 0);
  free(r);
  clb_tensor_free(t);
  clb_tensor_free(u);

  /* strided, bool and empty sources are copied or have nothing to write: the
   * deleter runs before the call returns */
  int64_t tstr[2] = {1, 3};
  deleted = 0;
  produce(&p, a, dl(kDLFloat, 32), 2, shape, tstr, 0);
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, NULL, NULL, &t));
  EXPECT_EQ_I(deleted, 1);
  expect_transpose(ctx, t, a);
  uint8_t flags[3] = {0, 7, 1};
  int64_t three = 3;
  produce(&p, flags, dl(kDLBool, 8), 1, &three, NULL, 0);
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, NULL, NULL, &t));
  EXPECT_EQ_I(deleted, 2);
  uint8_t fb[3];
  CL_OK(ctx, clb_tensor_read(ctx, t, dims, fb, sizeof fb, NULL));
  EXPECT_TRUE(fb[0] == 0 && fb[1] == 1 && fb[2] == 1);
  clb_tensor_free(t);
  int64_t empty[2] = {0, 4};
  produce(&p, NULL, dl(kDLFloat, 32), 2, empty, NULL, 0);
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, bounds, dyn, &t));
  EXPECT_EQ_I(deleted, 3);
  CL_OK(ctx, clb_tensor_sizes(ctx, t, dims));
  EXPECT_EQ_I(dims[0], 0);
  clb_tensor_free(t);

  /* bad input: the deleter still runs, once, and nothing is made */
  int64_t small[2] = {2, 4};
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  t = NULL;
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, small, dyn, &t), CLB_ERR_OUT_OF_BOUNDS, "> bound 2");
  EXPECT_EQ_I(deleted, 4);
  EXPECT_TRUE(t == NULL);
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  p.v.version.major = DLPACK_MAJOR_VERSION + 1;
  EXPECT_STATUS(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, NULL, NULL, &t), CLB_ERR_UNSUPPORTED,
                "clb_tensor_from_dlpack_borrowed: DLPack version");
  EXPECT_EQ_I(deleted, 5);
  EXPECT_TRUE(clb_tensor_from_dlpack_borrowed(NULL, NULL, NULL, NULL, &t) == CLB_ERR_NULL);

  /* a write still borrowed when the context is freed: the free runs its deleter */
  produce(&p, a, dl(kDLFloat, 32), 2, shape, NULL, 0);
  CL_OK(ctx, clb_tensor_from_dlpack_borrowed(ctx, &p.v, bounds, dyn, &t));
  EXPECT_EQ_I(deleted, 5);
  clb_context_free(ctx);
  EXPECT_EQ_I(deleted, 6);
}

/* clb_tensors_to_dlpack_host: where the device's buffers are host memory, n
 * tensors exported over their own buffers with one sync; the buffers stay out of
 * the pool until the deleters run, past the tensors and the context. */
static void test_host_shared_export(void) {
  clb_context_t ctx = clb_test_context(NULL);
  int64_t b = 1000, d = 10; /* 4000 bytes: no other buffer in the pool has that size */
  uint8_t dyn = 1;
  clb_tensor_t ts[3] = {NULL, NULL, NULL};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &ts[0]));
  double v[10];
  for (int i = 0; i < 10; i++) v[i] = 100 + i;
  clb_test_write(ctx, ts[0], &d, v);
  int64_t m23[2] = {2, 3};
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, m23, NULL, &ts[1]));
  double w[6] = {0.5, -1, 2, 3, 4, 5};
  clb_test_write(ctx, ts[1], m23, w);
  int64_t e_b = 7, zero = 0;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F64, 1, &e_b, &dyn, &ts[2]));
  clb_test_write(ctx, ts[2], &zero, NULL);
  struct DLManagedTensorVersioned *outs[3];
  clb_device_info di;
  di.struct_size = sizeof di;
  clb_device_info_get(0, &di);
  clb_counters c0, c1;
  c0.struct_size = c1.struct_size = sizeof c0;
  CL_OK(ctx, clb_context_counters(ctx, &c0));
  clb_status st = clb_tensors_to_dlpack_host(ctx, 3, ts, outs);
  if (st == CLB_ERR_UNSUPPORTED) { /* a GPU (or host pointers turned off): refused, with the way out */
    EXPECT_TRUE(!di.is_cpu || getenv("CLBOUND_HOST_PTRS") != NULL);
    EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "clb_tensors_read") != NULL);
    EXPECT_TRUE(outs[0] == NULL && outs[2] == NULL);
    for (int i = 0; i < 3; i++) clb_tensor_free(ts[i]);
    clb_context_free(ctx);
    return;
  }
  REQUIRE_TRUE(st == CLB_OK);
  CL_OK(ctx, clb_context_counters(ctx, &c1));
  EXPECT_EQ_I(c1.host_syncs - c0.host_syncs, 1);
  EXPECT_EQ_I(outs[0]->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ_I(outs[0]->flags, 0); /* not a copy */
  EXPECT_EQ_I(outs[0]->dl_tensor.ndim, 1);
  EXPECT_EQ_I(outs[0]->dl_tensor.shape[0], 10);
  EXPECT_EQ_I(outs[0]->dl_tensor.strides[0], 1);
  const int32_t *xi = outs[0]->dl_tensor.data;
  for (int i = 0; i < 10; i++) EXPECT_EQ_I(xi[i], 100 + i);
  EXPECT_EQ_I(outs[1]->dl_tensor.shape[0], 2);
  EXPECT_EQ_I(outs[1]->dl_tensor.shape[1], 3);
  EXPECT_EQ_I(outs[1]->dl_tensor.strides[0], 3);
  const float *xf = outs[1]->dl_tensor.data;
  for (int i = 0; i < 6; i++) EXPECT_TRUE(xf[i] == (float)w[i]);
  EXPECT_EQ_I(outs[2]->dl_tensor.shape[0], 0);
  EXPECT_TRUE(outs[2]->dl_tensor.data == NULL);
  /* the same memory as the tensor: an op writing it shows through the export */
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, ts[1], &ts[1]));
  CL_OK(ctx, clb_context_sync(ctx));
  for (int i = 0; i < 6; i++) EXPECT_TRUE(xf[i] == -(float)w[i]);
  /* freed, the tensor's buffer stays the export's: a new tensor of its size gets another */
  cl_mem mem = clb_tensor_data_mem(ts[0]);
  clb_tensor_free(ts[0]);
  clb_tensor_t u = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &u));
  EXPECT_TRUE(clb_tensor_data_mem(u) != mem);
  static double z[1000];
  clb_test_write(ctx, u, &b, z);
  CL_OK(ctx, clb_context_sync(ctx));
  for (int i = 0; i < 10; i++) EXPECT_EQ_I(xi[i], 100 + i);
  outs[0]->deleter(outs[0]);
  outs[2]->deleter(outs[2]);
  /* after the deleter the buffer is back in the pool */
  clb_tensor_t r = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I32, 1, &b, &dyn, &r));
  EXPECT_TRUE(clb_tensor_data_mem(r) == mem);
  /* bad input exports nothing */
  struct DLManagedTensorVersioned *one[2] = {NULL, NULL};
  clb_tensor_t with_null[2] = {r, NULL};
  EXPECT_STATUS(ctx, clb_tensors_to_dlpack_host(ctx, 2, with_null, one), CLB_ERR_NULL, "ts[1]");
  EXPECT_TRUE(one[0] == NULL && one[1] == NULL);
  EXPECT_STATUS(ctx, clb_tensors_to_dlpack_host(ctx, -1, with_null, one), CLB_ERR_INVALID_ARG, "n is -1");
  EXPECT_STATUS(ctx, clb_tensors_to_dlpack_host(ctx, 1, with_null, NULL), CLB_ERR_NULL, "outs");
  EXPECT_EQ_I(clb_tensors_to_dlpack_host(ctx, 0, NULL, NULL), CLB_OK);
  /* an export outlives its context: its memory stays valid until its deleter */
  clb_tensor_free(ts[1]);
  clb_context_free(ctx);
  for (int i = 0; i < 6; i++) EXPECT_TRUE(xf[i] == -(float)w[i]);
  outs[1]->deleter(outs[1]);
}

/* clb_tensors_to_dlpack_host_unsynced: static tensors exported with no host
 * sync while the ops writing them are queued; the data is theirs after the
 * caller's sync. A dynamic dim is refused (its size needs the sync). */
static void test_host_unsynced_export(void) {
  clb_context_t ctx = clb_test_context(NULL);
  int64_t m[2] = {300, 70}; /* several work-groups of work behind the export */
  clb_tensor_t a = NULL, b = NULL, c = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, m, NULL, &a));
  static double v[300 * 70];
  for (int i = 0; i < 300 * 70; i++) v[i] = (double)(i % 977) - 400.5;
  clb_test_write(ctx, a, m, v);
  CL_OK(ctx, clb_context_sync(ctx));
  clb_counters c0, c1;
  c0.struct_size = c1.struct_size = sizeof c0;
  CL_OK(ctx, clb_context_counters(ctx, &c0));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_NEG, a, &b));
  CL_OK(ctx, clb_unary(ctx, CLB_UNARY_RELU, b, &c));
  clb_tensor_t ts[2] = {b, c};
  struct DLManagedTensorVersioned *outs[2] = {NULL, NULL};
  clb_status st = clb_tensors_to_dlpack_host_unsynced(ctx, 2, ts, outs);
  if (st == CLB_ERR_UNSUPPORTED) { /* a GPU: refused as the synced export is */
    EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "clb_tensors_read") != NULL);
    EXPECT_TRUE(outs[0] == NULL && outs[1] == NULL);
  } else {
    REQUIRE_TRUE(st == CLB_OK);
    CL_OK(ctx, clb_context_counters(ctx, &c1));
    EXPECT_EQ_I(c1.host_syncs - c0.host_syncs, 0);
    for (int i = 0; i < 2; i++) {
      EXPECT_EQ_I(outs[i]->dl_tensor.ndim, 2);
      EXPECT_EQ_I(outs[i]->dl_tensor.shape[0], 300);
      EXPECT_EQ_I(outs[i]->dl_tensor.shape[1], 70);
      EXPECT_EQ_I(outs[i]->dl_tensor.strides[0], 70);
      EXPECT_EQ_I(outs[i]->dl_tensor.device.device_type, kDLCPU);
      EXPECT_EQ_I(outs[i]->flags, 0);
    }
    CL_OK(ctx, clb_context_sync(ctx));
    const float *nb = outs[0]->dl_tensor.data, *rc = outs[1]->dl_tensor.data;
    for (int i = 0; i < 300 * 70; i++) {
      float want = -(float)v[i];
      EXPECT_TRUE(nb[i] == want);
      EXPECT_TRUE(rc[i] == (want > 0 ? want : 0));
    }
    /* the exports hold the buffers: freeing the tensors leaves the data */
    clb_tensor_free(b);
    clb_tensor_free(c);
    b = c = NULL;
    EXPECT_TRUE(nb[0] == 400.5f && rc[1] == 399.5f);
    outs[0]->deleter(outs[0]);
    outs[1]->deleter(outs[1]);
  }
  /* a dynamic dim: refused with the way out, nothing exported */
  int64_t bd[2] = {300, 70};
  uint8_t dyn[2] = {1, 0};
  clb_tensor_t d = NULL;
  CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_F32, 2, bd, dyn, &d));
  clb_test_write(ctx, d, m, v);
  clb_tensor_t two[2] = {a, d};
  struct DLManagedTensorVersioned *none[2] = {NULL, NULL};
  EXPECT_STATUS(ctx, clb_tensors_to_dlpack_host_unsynced(ctx, 2, two, none), CLB_ERR_SHAPE,
                "ts[1] [<=300, 70] f32 has a dynamic dim 0");
  EXPECT_TRUE(strstr(clb_context_errmsg(ctx), "clb_tensors_to_dlpack_host") != NULL);
  EXPECT_TRUE(none[0] == NULL && none[1] == NULL);
  EXPECT_STATUS(ctx, clb_tensors_to_dlpack_host_unsynced(ctx, 1, two, NULL), CLB_ERR_NULL, "outs");
  EXPECT_EQ_I(clb_tensors_to_dlpack_host_unsynced(ctx, 0, NULL, NULL), CLB_OK);
  clb_tensor_free(b);
  clb_tensor_free(c);
  clb_tensor_free(d);
  clb_tensor_free(a);
  clb_context_free(ctx);
}

/* The capability query agrees with the ops, for every dtype. */
static void test_capabilities(clb_context_t ctx, int fp64) {
  size_t n = 0;
  const char *const *names = clb_op_names(&n);
  EXPECT_TRUE(n >= 30 && names[n] == NULL);
  EXPECT_STATUS(ctx, clb_op_supported(ctx, "frobnicate", CLB_DTYPE_F32), CLB_ERR_INVALID_ARG, "unknown op \"frobnicate\"");
  EXPECT_STATUS(ctx, clb_op_supported(ctx, "div", CLB_DTYPE_I32), CLB_ERR_DTYPE, "div takes f32 or f64, not i32");
  if (!fp64) EXPECT_STATUS(ctx, clb_op_supported(ctx, "add", CLB_DTYPE_F64), CLB_ERR_UNSUPPORTED, "cl_khr_fp64");
  static const char *const binary[CLB_BINARY_COUNT] = {"add", "sub", "mul", "div", "remainder", "maximum", "minimum",
                                                          "pow", "floor_divide"};
  static const char *const unary[CLB_UNARY_COUNT] = {"neg", "relu", "sigmoid", "tanh",  "exp",   "log",  "copy",
                                                      "erf", "abs",  "sqrt",    "rsqrt", "log1p", "expm1",
                                                      "floor", "ceil", "round", "trunc", "sin", "cos", "log2",
                                                      "log10", "exp2"};
  static const char *const reduce[CLB_REDUCE_COUNT] = {"sum", "mean", "max"};
  int64_t b2[2] = {3, 4};
  for (int dt = 0; dt < CLB_DTYPE_COUNT; dt++) {
    if (dt == CLB_DTYPE_F64 && !fp64) continue;
    clb_tensor_t a = NULL, c = NULL, m = NULL, ix = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_I64, 2, b2, NULL, &ix));
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, b2, NULL, &a));
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 2, b2, NULL, &c));
    CL_OK(ctx, clb_tensor_new(ctx, CLB_DTYPE_BOOL, 2, b2, NULL, &m));
    double ones[12];
    for (int i = 0; i < 12; i++) ones[i] = 1;
    clb_test_write(ctx, a, b2, ones);
    clb_test_write(ctx, c, b2, ones);
    clb_test_write(ctx, m, b2, ones);
    clb_test_write(ctx, ix, b2, ones);
#define AGREE(name, call)                                                                          \
  do {                                                                                             \
    clb_tensor_t o_ = NULL;                                                                        \
    clb_status q_ = clb_op_supported(ctx, name, (clb_dtype)dt);                                    \
    clb_status r_ = (call);                                                                        \
    clb_test_checks++;                                                                             \
    if ((q_ == CLB_OK) != (r_ == CLB_OK))                                                          \
      CLB_FAIL_AT("%s on %s: the query says %s, the op says %s (%s)", name, clb_dtype_name((clb_dtype)dt), \
                  clb_status_name(q_), clb_status_name(r_), clb_context_errmsg(ctx));              \
    clb_tensor_free(o_);                                                                           \
  } while (0)
    for (int op = 0; op < CLB_BINARY_COUNT; op++) AGREE(binary[op], clb_binary(ctx, (clb_binary_op)op, a, c, &o_));
    for (int op = 0; op < CLB_UNARY_COUNT; op++) AGREE(unary[op], clb_unary(ctx, (clb_unary_op)op, a, &o_));
    for (int op = 0; op < CLB_REDUCE_COUNT; op++) AGREE(reduce[op], clb_reduce_all(ctx, (clb_reduce_op)op, a, &o_));
    AGREE("cast", clb_cast(ctx, a, CLB_DTYPE_F32, &o_));
    AGREE("nonzero", clb_nonzero(ctx, a, &o_));
    AGREE("masked_select", clb_masked_select(ctx, a, m, &o_));
    AGREE("masked_scatter", clb_masked_scatter(ctx, a, m, c, &o_));
    AGREE("matmul", clb_matmul(ctx, a, 0, c, 1, &o_));
    AGREE("softmax", clb_softmax(ctx, a, 0, &o_));
    AGREE("log_softmax", clb_softmax(ctx, a, 1, &o_));
    AGREE("loss", clb_loss(ctx, CLB_LOSS_MSE, a, c, &o_, NULL));
    AGREE("slice", clb_slice(ctx, a, 1, -3, INT64_MAX, 2, &o_));
    AGREE("index", clb_index(ctx, a, 0, -1, &o_));
    AGREE("transpose", clb_transpose(ctx, a, 0, 1, &o_));
    AGREE("permute", clb_permute(ctx, a, 2, (const int[]){1, 0}, &o_));
    AGREE("where", clb_where(ctx, m, a, c, &o_));
    AGREE("index_put", clb_basic_index_put(ctx, a, 0, NULL, c));
    AGREE("rand_uniform", clb_rand_uniform(ctx, m, (clb_dtype)dt, 1, &o_)); /* the dtype made, of any like */
    AGREE("gather", clb_gather(ctx, a, 1, ix, &o_));
    AGREE("cat", clb_cat(ctx, a, c, 0, &o_));
    AGREE("cumsum", clb_cumsum(ctx, a, 1, &o_));
    int64_t b3[3] = {2, 3, 4};
    clb_tensor_t a3 = NULL, c3 = NULL;
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 3, b3, NULL, &a3));
    CL_OK(ctx, clb_tensor_new(ctx, (clb_dtype)dt, 3, b3, NULL, &c3));
    AGREE("bmm", clb_bmm(ctx, a3, 0, c3, 1, &o_));
    AGREE("reshape_bounded", clb_reshape_bounded(ctx, a3, 2, (const int64_t[]){6, 4}, NULL, (const int64_t[]){6, 4}, &o_));
    clb_tensor_free(a3);
    clb_tensor_free(c3);
#undef AGREE
    CL_OK(ctx, clb_context_sync(ctx));
    clb_tensor_free(a);
    clb_tensor_free(c);
    clb_tensor_free(m);
    clb_tensor_free(ix);
  }
}

int main(void) {
  clb_context_t ctx = clb_test_context(NULL);
  /* the device's own word on f64, not the query's */
  cl_device_fp_config fp = 0;
  clGetDeviceInfo(clb_context_cl_device(ctx), CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp, &fp, NULL);
  int fp64 = fp != 0;
  test_dtypes();
  test_host_export(ctx, fp64);
  test_host_import(ctx);
  test_round_trip(ctx, fp64);
  test_capabilities(ctx, fp64);
  CL_OK(ctx, clb_context_sync(ctx));
  clb_context_free(ctx);
  test_device_export();
  test_borrowed_import();
  test_host_shared_export();
  test_host_unsynced_export();
  return clb_test_finish("interop/dlpack");
}
