/* tolerance.c — the tolerance table of tolerance.h, and why each value is what it is.
 *
 * Op tests (forward / backward), measured as tol * (|ref| + max |ref|):
 *  - fp32 1e-4. The reference sums in double; a device sums in fp32 in its own order
 *    (blocked layouts, tiles, split reductions). The test ops sum at most a few hundred
 *    products of values in [-1, 1], whose fp32 rounding is ~1e-6 of the scale, so 1e-4
 *    leaves a hundredfold margin for reordering, while one wrong or missing term moves an
 *    element by ~1/sqrt(terms) of the scale, far beyond it. fp32 means fp32 math: a
 *    device that runs fp32 convolutions or GEMMs in TF32 (cuDNN's default on Ampere and
 *    later; 11 significant bits) must switch that off or it fails here, as it should.
 *  - bf16 4e-2. Activations, inputs and weights are rounded to 8 significant bits (one
 *    rounding is up to 2^-9 ~ 2e-3 relative) before the math, and each op's output is
 *    stored in bf16 again; sums are in fp32. A product of two rounded operands plus the
 *    stored output's rounding is ~1e-2 worst case per element; 4e-2 is about ten bf16
 *    ulps (2^-8), what the cpu device (oneDNN) has needed since bf16 landed.
 *  - fp16 1e-2. 11 significant bits: roundings 8x finer than bf16's, so a quarter of
 *    bf16's bound still leaves twice its margin in ulps (about twenty fp16 ulps, 2^-11),
 *    for fp16 kernels that round intermediate products (tensor cores). The test values
 *    stay far inside fp16's range (|x| <= a few hundred, nothing near 6e-5 matters at
 *    this scale). Sums must be accumulated in fp32 (cuDNN / cuBLAS compute type fp32): an
 *    fp16 accumulator over ~300 terms drifts by ~300 * 2^-12 ~ 7e-2 and fails here. No
 *    device ran fp16 when this was written (cpu refuses it); the first that does confirms
 *    the value or states a measured one here, for every device.
 *
 * Gradient checks: central differences (L(w + e) - L(w - e)) / 2e of the device's own
 * loss against its backward, fp32 only.
 *  - fp32: e = 1e-3, |analytic - numeric| <= 2e-3 + 5e-2 |numeric|. The truncation error
 *    is O(e^2); fp32 rounding of a loss near 2 contributes about 2.4e-7 / e = 2.4e-4.
 *    e is small on purpose: a probe moves every activation downstream, and each one
 *    pushed across a ReLU or max-pool kink puts an O(1) error in the difference quotient
 *    (at e = 5e-3 such crossings alone broke the check).
 *  - bf16, fp16: not run. The loss itself is rounded to 8 / 11 significant bits (2^-8 of
 *    a loss near 2 is 8e-3, 2^-11 is 1e-3), more than a probe of e = 1e-3 changes it, so
 *    the difference quotient would be rounding noise; at a step large enough to rise
 *    above it, kink crossings dominate. Low-precision backward is checked op by op
 *    against the reference, at the op tolerances above.
 *
 * One device against itself (executor suite), fp32: the same graph wired two ways sums a
 * tensor's gradients from several consumers in another order (and a fused ReLU is exact),
 * so losses and logits (~ln(classes)) agree within 1e-5 and gradients within
 * 1e-5 + 1e-4 |value|: fp32 rounding of a few terms, with margin. The executor and
 * overfit suites test the host's wiring, not precision, and run in fp32, which every
 * device has.
 *
 * One rounding from exact, fp32 1e-6: dropout's kept value x / keep_prob computed as
 * x * (1 / keep_prob) differs by an ulp or two (6e-8 each). Dropout is tested in fp32.
 *
 * Update, 1e-6 in every precision: master weights and optimizer state stay fp32 whatever
 * the activations are (docs/architecture.md, "One step"), and cnnb_update_reference computes the
 * same formula in fp32; a fused multiply-add or reordered term moves a result by a few ulps. */
#include "tolerance.h"

#include <stdio.h>

#include <cnnb/device.h>

static const test_tolerance table[] = {
    {.precision = CNNB_PRECISION_FP32,
     .name = "fp32",
     .forward = 1e-4,
     .backward = 1e-4,
     .gradcheck_abs = 2e-3,
     .gradcheck_rel = 5e-2,
     .gradcheck_eps = 1e-3f,
     .same_abs = 1e-5,
     .same_rel = 1e-4,
     .one_rounding = 1e-6,
     .update = 1e-6},
    {.precision = CNNB_PRECISION_BF16,
     .name = "bf16",
     .forward = 4e-2,
     .backward = 4e-2,
     .update = 1e-6},
    {.precision = CNNB_PRECISION_FP16,
     .name = "fp16",
     .forward = 1e-2,
     .backward = 1e-2,
     .update = 1e-6},
};

const test_tolerance *test_tolerance_of(uint32_t precision) {
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (table[i].precision == precision) return &table[i];
  return NULL;
}

const char *test_precision_name(uint32_t precision) {
  const test_tolerance *t = test_tolerance_of(precision);
  if (t) return t->name;
  static char other[32];
  snprintf(other, sizeof other, "precision %u", precision);
  return other;
}
