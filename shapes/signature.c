/* signature.c: the named, ranked inputs of a plan and their flat dim numbering, shared by guards and policies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes-impl.h"

clb_status clb__sig_init(clb__sig *s, size_t ninputs, const char *const *names, const int *ranks, char *err,
                         size_t errsize) {
  memset(s, 0, sizeof *s);
  if (ninputs && !ranks) {
    snprintf(err, errsize, "NULL ranks");
    return clb__shapes_fail_last(CLB_ERR_NULL, "clb_policy_decide: a NULL argument");
  }
  for (size_t i = 0; i < ninputs; i++)
    if (ranks[i] < 0 || ranks[i] > CLB_SHAPE_MAX_RANK) {
      snprintf(err, errsize, "input %zu has rank %d (0..%d)", i, ranks[i], CLB_SHAPE_MAX_RANK);
      return CLB_ERR_RANK;
    }
  s->names = calloc(ninputs + 1, sizeof *s->names);
  s->ranks = calloc(ninputs + 1, sizeof *s->ranks);
  s->offset = calloc(ninputs + 1, sizeof *s->offset);
  if (!s->names || !s->ranks || !s->offset) goto oom;
  s->ninputs = ninputs;
  for (size_t i = 0; i < ninputs; i++) {
    char tmp[32];
    const char *n = clb__input_name(names, i, tmp, sizeof tmp);
    size_t len = strlen(n) < 63 ? strlen(n) : 63;
    s->names[i] = malloc(len + 1);
    if (!s->names[i]) goto oom;
    memcpy(s->names[i], n, len);
    s->names[i][len] = 0;
    s->ranks[i] = ranks[i];
    s->offset[i] = s->ndims;
    s->ndims += (size_t)ranks[i];
  }
  return CLB_OK;
oom:
  clb__sig_free(s);
  snprintf(err, errsize, "out of host memory");
  return clb__shapes_fail_last(CLB_ERR_HOST_OOM, "clb_policy_decide: out of host memory");
}

void clb__sig_free(clb__sig *s) {
  for (size_t i = 0; s->names && i < s->ninputs; i++) free(s->names[i]);
  free(s->names);
  free(s->ranks);
  free(s->offset);
  memset(s, 0, sizeof *s);
}

int clb__sig_flat(const clb__sig *s, size_t input, int dim, size_t *flat) {
  if (input >= s->ninputs || dim < 0 || dim >= s->ranks[input]) return 1;
  *flat = s->offset[input] + (size_t)dim;
  return 0;
}

void clb__sig_words(const clb__sig *s, size_t flat, char *buf, size_t size) {
  size_t i = 0;
  while (i + 1 < s->ninputs && s->offset[i + 1] <= flat) i++;
  snprintf(buf, size, "dim %zu of %s", flat - s->offset[i], s->names[i]);
}
