/* compact16.h — 16-bit gradients for the wire (--compact_gradient_transfer): fp32 packed
 * to bf16 or fp16 and back, and the pairwise sum a reduction applies at every hop.
 *
 * Rounding is to nearest, ties to even, in integer arithmetic only, so the result does
 * not depend on the calling thread's floating-point mode (the cpu device sets
 * flush-to-zero on the threads it computes on). NaN stays NaN; a value beyond the
 * format's largest rounds to infinity, as a hardware conversion does. fp16 keeps its
 * subnormals. */
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

static inline uint16_t compact16_fp16_from_f32(float f) {
  uint32_t u = compact16_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u; /* 65520 and up (and inf) round to inf */
  if (a >= 0x38800000u) {                       /* normal in fp16: 2^-14 and up */
    uint32_t r = a - 0x38000000u;               /* exponent bias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
  }
  if (a <= 0x33000000u) return sign; /* at most 2^-25, half the smallest subnormal: 0 */
  /* Subnormal: the value is m * 2^(e - 150); in units of 2^-24 that is m >> (126 - e). */
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
  uint32_t k = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (k & 1u))) k++;
  return sign | (uint16_t)k; /* k == 0x400 is the smallest normal, encoded the same */
}

static inline float compact16_fp16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return compact16_float(sign | 0x7f800000u | (m << 13));
  if (e) return compact16_float(sign | ((e + 112) << 23) | (m << 13));
  if (!m) return compact16_float(sign);
  uint32_t shift = (uint32_t)__builtin_clz(m) - 21; /* brings the leading 1 to bit 10 */
  return compact16_float(sign | ((113 - shift) << 23) | (((m << shift) & 0x3ffu) << 13));
}

/* dst[i] = src[i] rounded to the format, for i < n. */
void compact16_pack(uint32_t format, const float *src, uint16_t *dst, int64_t n);
/* dst[i] = src[i] as fp32 (exact). */
void compact16_unpack(uint32_t format, const uint16_t *src, float *dst, int64_t n);
/* inout[i] = in[i] + inout[i], added in fp32 and rounded back: one hop of a reduction. */
void compact16_add(uint32_t format, const uint16_t *in, uint16_t *inout, int64_t n);

#endif
