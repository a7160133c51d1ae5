/* arena.c: the symbol context's arena: expression nodes and strings live until
 * the context is freed (clb_shapes_free releases the chunks). */
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

#define CHUNK_SIZE (64 * 1024) /* arena chunk: a few hundred nodes */

void *clb__arena_alloc(struct clb_shapes *sh, size_t size) {
  size_t align = sizeof(max_align_t);
  size = (size + align - 1) / align * align;
  clb__chunk *c = sh->chunk;
  if (!c || c->size - c->used < size) {
    size_t cap = size > CHUNK_SIZE ? size : CHUNK_SIZE;
    clb__chunk *n = malloc(sizeof *n + cap);
    if (!n) return NULL;
    n->prev = c;
    n->used = 0;
    n->size = cap;
    sh->chunk = c = n;
  }
  void *p = (char *)c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

char *clb__arena_strdup(struct clb_shapes *sh, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = clb__arena_alloc(sh, n);
  if (d) memcpy(d, s, n);
  return d;
}
