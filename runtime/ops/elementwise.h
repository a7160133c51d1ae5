/* elementwise.h: runtime/ops, the broadcasting rule of binary elementwise ops,
 * shared with the fused kernels of runtime/graph/fuse.c. */
#ifndef CLB_OPS_ELEMENTWISE_H
#define CLB_OPS_ELEMENTWISE_H

#include <stdint.h>

/* Broadcasts operands of ranks ra and rb, bounds ba / bb and dynamic flags ya /
 * yb (right-aligned): a dim where one side is a static 1 (or missing) takes the
 * other's; else both bounds must agree, and the dim is dynamic only when both
 * are (a static side fixes the size; the dynamic side is checked on the device).
 * Writes the result's bounds and flags, and bit d of *bma / *bmb when a / b
 * broadcasts at result dim d. Returns the result's rank, or -1 (with *bad the
 * dim) when the bounds do not broadcast. */
int clb__broadcast_bounds(int ra, const int64_t *ba, const uint8_t *ya, int rb, const int64_t *bb, const uint8_t *yb,
                          int64_t *ob, uint8_t *oy, unsigned *bma, unsigned *bmb, int *bad);

#endif /* CLB_OPS_ELEMENTWISE_H */
