/* compact16.c — the array forms of compact16.h's conversions: plain loops over the
 * inline scalar ones, which the compiler vectorises (bf16 is a shift and an add). */
#include "compact16.h"

void compact16_pack(uint32_t format, const float *src, uint16_t *dst, int64_t n) {
  if (format == COMPACT16_FP16)
    for (int64_t i = 0; i < n; i++) dst[i] = compact16_fp16_from_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = compact16_bf16_from_f32(src[i]);
}

void compact16_unpack(uint32_t format, const uint16_t *src, float *dst, int64_t n) {
  if (format == COMPACT16_FP16)
    for (int64_t i = 0; i < n; i++) dst[i] = compact16_fp16_to_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = compact16_bf16_to_f32(src[i]);
}

void compact16_add(uint32_t format, const uint16_t *in, uint16_t *inout, int64_t n) {
  if (format == COMPACT16_FP16)
    for (int64_t i = 0; i < n; i++)
      inout[i] = compact16_fp16_from_f32(compact16_fp16_to_f32(in[i]) +
                                         compact16_fp16_to_f32(inout[i]));
  else
    for (int64_t i = 0; i < n; i++)
      inout[i] = compact16_bf16_from_f32(compact16_bf16_to_f32(in[i]) +
                                         compact16_bf16_to_f32(inout[i]));
}
