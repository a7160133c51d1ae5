/* pool.c: a device buffer pool with size classes, reuse, a limit and statistics. */
#include "alloc/pool.h"

#include "alloc/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Capacities are rounded up to one of four steps per power of two (at most 25%
 * slack; clb__pool_class_bytes in planner.c, which the planner's report of what
 * the pool would hold shares), so a freed buffer serves any later request of the
 * same class. */
static size_t size_class(size_t bytes) { return clb__pool_class_bytes(bytes); }

struct clb_pool_node {
  clb_buf buf;
  struct clb_pool_node *next;
};

struct clb_pool {
  cl_context cl;
  uint64_t limit;
  uint64_t max_alloc;
  struct clb_pool_node *free_list; /* unordered; classes make exact matches cheap */
  clb_pool_stats st;
};

clb_status clb__pool_new(cl_context cl, uint64_t limit, uint64_t max_alloc, clb_pool **out) {
  *out = NULL;
  clb_pool *p = calloc(1, sizeof *p);
  if (!p) return CLB_ERR_HOST_OOM;
  p->cl = cl;
  clRetainContext(cl);
  p->limit = limit;
  p->max_alloc = max_alloc;
  *out = p;
  return CLB_OK;
}

static void release_node(clb_pool *p, struct clb_pool_node *n) {
  p->st.held_bytes -= n->buf.capacity;
  clReleaseMemObject(n->buf.mem);
  free(n);
}

void clb__pool_trim(clb_pool *p) {
  if (!p) return;
  struct clb_pool_node *n = p->free_list;
  while (n) {
    struct clb_pool_node *next = n->next;
    release_node(p, n);
    n = next;
  }
  p->free_list = NULL;
}

void clb__pool_free(clb_pool *p) {
  if (!p) return;
  clb__pool_trim(p);
  clReleaseContext(p->cl);
  free(p);
}

static int is_oom(cl_int e) {
  return e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY ||
         e == CL_INVALID_BUFFER_SIZE;
}

/* A new cl_mem of `cap` bytes for a request of `bytes`, within the limit; on an
 * allocation failure the idle buffers go back first and it is tried once more. */
static clb_status fresh(clb_pool *p, size_t bytes, size_t cap, clb_buf *out, char *err, size_t errlen) {
  if (p->limit && p->st.held_bytes + cap > p->limit) clb__pool_trim(p);
  if (p->limit && p->st.held_bytes + cap > p->limit) {
    snprintf(err, errlen, "%zu bytes requested with %llu bytes in use, over the limit of %llu bytes",
             bytes, (unsigned long long)p->st.held_bytes, (unsigned long long)p->limit);
    return CLB_ERR_OOM;
  }
  cl_int e = CL_SUCCESS;
  cl_mem m = clCreateBuffer(p->cl, CL_MEM_READ_WRITE, cap, NULL, &e);
  if (is_oom(e)) {
    clb__pool_trim(p);
    m = clCreateBuffer(p->cl, CL_MEM_READ_WRITE, cap, NULL, &e);
  }
  if (e != CL_SUCCESS || !m) {
    snprintf(err, errlen, "clCreateBuffer of %zu bytes failed (cl error %d)", cap, (int)e);
    return is_oom(e) ? CLB_ERR_OOM : CLB_ERR_CL;
  }
  out->mem = m;
  out->bytes = bytes;
  out->capacity = cap;
  p->st.fresh++;
  p->st.live_bytes += cap;
  p->st.held_bytes += cap;
  if (p->st.held_bytes > p->st.peak_bytes) p->st.peak_bytes = p->st.held_bytes;
  return CLB_OK;
}

clb_status clb__pool_get(clb_pool *p, size_t bytes, clb_buf *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t cap = size_class(bytes);
  if (cap < bytes || (p->max_alloc && cap > p->max_alloc)) {
    if (!(p->max_alloc && bytes <= p->max_alloc)) {
      snprintf(err, errlen, "%zu bytes requested, the device's largest buffer is %llu bytes",
               bytes, (unsigned long long)p->max_alloc);
      return CLB_ERR_OOM;
    }
    cap = bytes; /* close to the device maximum: no rounding */
  }
  for (struct clb_pool_node **pn = &p->free_list; *pn; pn = &(*pn)->next) {
    if ((*pn)->buf.capacity == cap) {
      struct clb_pool_node *n = *pn;
      *pn = n->next;
      *out = n->buf;
      out->bytes = bytes;
      free(n);
      p->st.live_bytes += cap;
      p->st.reused++;
      return CLB_OK;
    }
  }
  return fresh(p, bytes, cap, out, err, errlen);
}

void clb__pool_put(clb_pool *p, clb_buf *b) {
  if (!b->mem) return;
  if (b->borrowed) { /* a region of an arena or a graph's record: a reference of ours */
    if (b->held) *b->held = 0;
    clReleaseMemObject(b->mem);
    memset(b, 0, sizeof *b);
    return;
  }
  if (b->exact) {
    clb__pool_release(p, b);
    return;
  }
  p->st.live_bytes -= b->capacity;
  struct clb_pool_node *n = malloc(sizeof *n);
  if (!n) { /* cannot keep it: release it instead */
    p->st.held_bytes -= b->capacity;
    clReleaseMemObject(b->mem);
  } else {
    n->buf = *b;
    n->next = p->free_list;
    p->free_list = n;
  }
  b->mem = NULL;
  b->bytes = b->capacity = 0;
}

clb_status clb__pool_get_exact(clb_pool *p, size_t bytes, clb_buf *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (bytes == 0) bytes = 1;
  if (p->max_alloc && bytes > p->max_alloc) {
    snprintf(err, errlen, "%zu bytes requested, the device's largest buffer is %llu bytes", bytes,
             (unsigned long long)p->max_alloc);
    return CLB_ERR_OOM;
  }
  clb_status st = fresh(p, bytes, bytes, out, err, errlen);
  if (st != CLB_OK) return st;
  out->exact = 1;
  p->st.exact++;
  return CLB_OK;
}

void clb__pool_release(clb_pool *p, clb_buf *b) {
  if (!b->mem) return;
  if (!b->borrowed) {
    p->st.live_bytes -= b->capacity;
    p->st.held_bytes -= b->capacity;
  }
  clReleaseMemObject(b->mem);
  memset(b, 0, sizeof *b);
}

void clb__pool_stats(const clb_pool *p, clb_pool_stats *out) { *out = p->st; }
