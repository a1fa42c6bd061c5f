/* tolerance.h — how close a device must come to the reference, per precision, in one
 * table (tolerance.c says why each value) that every device suite reads: the op tests
 * against tests/support/ref_ops.c, the gradient checks, the executor and overfit tests,
 * the optimizer update. A new device passes the same numbers; a value is changed here,
 * for every device at once, with the reason next to it. */
#ifndef CNNB_TEST_TOLERANCE_H
#define CNNB_TEST_TOLERANCE_H

#include <stdint.h>

typedef struct test_tolerance {
  uint32_t precision; /* cnnb_precision */
  const char *name;   /* "fp32", as --precision spells it */
  /* Op tests, device against ref_ops.c, per element:
   *   |device - reference| <= tol * (|reference| + max |reference| of the tensor),
   * i.e. relative to the element and, for elements near zero, to the tensor's scale. */
  double forward;  /* activations, loss, running statistics */
  double backward; /* backward-data and backward-weights */
  /* Gradient checks (finite differences of the device's own loss) on whole graphs:
   *   |analytic - numeric| <= gradcheck_abs + gradcheck_rel * |numeric|, probe step
   * gradcheck_eps. All 0: not run at this precision (tolerance.c says why). */
  double gradcheck_abs, gradcheck_rel;
  float gradcheck_eps;
  /* One device against itself (executor suite: two wirings of one graph; fused vs plain
   * ReLU; forward-only vs training forward): losses and logits within same_abs,
   * gradients within same_abs + same_rel * |value|. 0: not run at this precision. */
  double same_abs, same_rel;
  /* Results one rounding from exact (dropout's x / keep_prob against x * (1 / keep_prob)),
   * relative. */
  double one_rounding;
  /* The optimizer update against cnnb_update_reference, on the fp32 master weights and
   * optimizer state every precision keeps. */
  double update;
} test_tolerance;

/* The row for `precision` (cnnb_precision); NULL for a value that is not one. */
const test_tolerance *test_tolerance_of(uint32_t precision);
/* "fp32", "bf16", "fp16"; "precision <n>" spelled into a static buffer otherwise. */
const char *test_precision_name(uint32_t precision);

#endif
