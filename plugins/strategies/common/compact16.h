/* compact16.h — 16-bit gradients for the wire (--compact_gradient_transfer): fp32 packed
 * to bf16 or fp16 and back, and the pairwise sum a reduction applies at every hop.
 *
 * Rounding is to nearest, ties to even; the result does not depend on flush-to-zero or
 * denormals-are-zero (the cpu device sets them on the threads it computes on, and a new
 * thread inherits them). NaN stays NaN; a value beyond the format's largest rounds to
 * infinity, as a hardware conversion does. fp16 keeps its subnormals. */
#ifndef CNNB_STRATEGY_COMPACT16_H
#define CNNB_STRATEGY_COMPACT16_H

#include <stdint.h>
#include <string.h>

/* Which 16-bit format: the cnnb_precision values, so a strategy passes its precision. */
enum { COMPACT16_BF16 = 2 /* CNNB_PRECISION_BF16 */, COMPACT16_FP16 = 3 /* CNNB_PRECISION_FP16 */ };

static inline uint32_t compact16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float compact16_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint16_t compact16_bf16_from_f32(float f) {
  uint32_t u = compact16_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float compact16_bf16_to_f32(uint16_t h) { return compact16_float((uint32_t)h << 16); }

/* fp16 without branches, so the array loops vectorise: every case is computed and the
 * right one selected. Values below fp16's smallest normal (2^-14) are counted in steps of
 * 2^-24 by a float product, exact, rounded to even by adding and removing 1.5 * 2^23:
 * that relies on the rounding mode being to nearest (the default; nothing in cnnbench
 * changes it), not on flush-to-zero (an fp32 subnormal read as 0 rounds to 0 anyway). */
static inline uint16_t compact16_fp16_from_f32(float f) {
  uint32_t u = compact16_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  uint32_t r = a - 0x38000000u; /* exponent bias 127 -> 15 */
  uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  uint32_t subnormal = compact16_bits(compact16_float(a) * 0x1p24f + 0x1.8p23f) - 0x4b400000u;
  uint32_t v = a >= 0x38800000u ? normal : subnormal;       /* 2^-14 and up: normal */
  v = a >= 0x477ff000u ? 0x7c00u : v;                       /* 65520 and up (and inf): inf */
  v = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : v; /* NaN stays NaN */
  return (uint16_t)(sign | v);
}

static inline float compact16_fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = h & 0x7c00u, m = h & 0x3ffu;
  uint32_t v = e ? ((uint32_t)(h & 0x7fffu) << 13) + 0x38000000u /* normal */
                 : compact16_bits((float)m * 0x1p-24f);          /* subnormal or 0: exact */
  v = e == 0x7c00u ? 0x7f800000u | (m << 13) : v;                /* inf, NaN */
  return compact16_float(sign | v);
}

/* dst[i] = src[i] rounded to the format, for i < n. */
void compact16_pack(uint32_t format, const float *src, uint16_t *dst, int64_t n);
/* dst[i] = src[i] as fp32 (exact). */
void compact16_unpack(uint32_t format, const uint16_t *src, float *dst, int64_t n);
/* inout[i] = in[i] + inout[i], added in fp32 and rounded back: one hop of a reduction. */
void compact16_add(uint32_t format, const uint16_t *in, uint16_t *inout, int64_t n);

#endif
