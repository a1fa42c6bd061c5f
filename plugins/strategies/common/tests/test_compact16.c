/* test_compact16.c — the 16-bit conversions of --compact_gradient_transfer
 * (plugins/strategies/common/compact16.h): bf16 and fp16 round to nearest even, keep NaN
 * a NaN and overflow to infinity, checked against a reference written with double
 * arithmetic over a stride of every fp32 bit pattern and at the edges; every 16-bit value
 * survives the round trip; the vectorised array loops give the scalar conversions' bits,
 * also with flush-to-zero and denormals-are-zero set, as on the cpu device's threads. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "compact16.h"

/* The nearest value with `bits` significant bits whose spacing is at least 2^min_lead
 * times 2^(1 - bits) (the format's subnormals), ties to even: by scaling with a power of
 * two (exact) and nearbyint (round to nearest even). */
static double round_to_format(double x, int bits, int min_lead) {
  if (x == 0) return 0;
  int e;
  frexp(x, &e);
  int lead = e - 1 < min_lead ? min_lead : e - 1;
  double q = ldexp(1.0, lead - (bits - 1));
  return nearbyint(x / q) * q;
}

static uint16_t ref_fp16(float f) {
  uint32_t u = compact16_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (isnan(f)) return sign | 0x7e00u | (uint16_t)((u >> 13) & 0x3ffu);
  double y = round_to_format(fabs((double)f), 11, -14);
  if (y >= 65536.0) return sign | 0x7c00u;
  if (y < 0x1p-14) return sign | (uint16_t)(y * 0x1p24);
  int e;
  frexp(y, &e);
  uint32_t mantissa = (uint32_t)(ldexp(y, 1 - e) * 1024.0) - 1024u;
  return sign | (uint16_t)((uint32_t)(e - 1 + 15) << 10 | mantissa);
}

static uint16_t ref_bf16(float f) {
  uint32_t u = compact16_bits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
  double y = round_to_format(fabs((double)f), 8, -126);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (y >= 0x1p128) return sign | 0x7f80u;
  uint32_t v = compact16_bits((float)y); /* exact: 8 significant bits */
  ck_assert_uint_eq(v & 0xffffu, 0);
  return sign | (uint16_t)(v >> 16);
}

START_TEST(fp16_edges) {
  static const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},
      {65519.99f, 0x7bff},
      {65520.0f, 0x7c00},
      {1e9f, 0x7c00},
      {INFINITY, 0x7c00},
      {-INFINITY, 0xfc00},
      {0x1p-14f, 0x0400},
      {0x1p-24f, 0x0001},
      {0x1p-25f, 0x0000},
      {0x1.000002p-25f, 0x0001},
      {0x1.8p-24f, 0x0002},
      {0x1.4p-24f, 0x0001},
      {1.0f + 0x1p-11f, 0x3c00},
      {1.0f + 0x1.8p-10f, 0x3c02},
      {0x1p-140f, 0x0000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    ck_assert_msg(compact16_fp16_from_f32(cases[i].in) == cases[i].out,
                  "fp16(%a) = %04x, want %04x", (double)cases[i].in,
                  compact16_fp16_from_f32(cases[i].in), cases[i].out);
  uint16_t nan = compact16_fp16_from_f32(NAN);
  ck_assert((nan & 0x7c00u) == 0x7c00u && (nan & 0x3ffu));
}
END_TEST

START_TEST(bf16_edges) {
  ck_assert_uint_eq(compact16_bf16_from_f32(1.0f), 0x3f80);
  ck_assert_uint_eq(compact16_bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);   /* tie: to even */
  ck_assert_uint_eq(compact16_bf16_from_f32(1.0f + 0x1.8p-7f), 0x3f82); /* tie: to even */
  ck_assert_uint_eq(compact16_bf16_from_f32(3.4e38f), 0x7f80);          /* rounds past max */
  ck_assert_uint_eq(compact16_bf16_from_f32(-INFINITY), 0xff80);
  uint16_t nan = compact16_bf16_from_f32(NAN);
  ck_assert((nan & 0x7f80u) == 0x7f80u && (nan & 0x7fu));
}
END_TEST

/* Every 4099th fp32 bit pattern (over a million, every exponent and sign) against the
 * reference. */
START_TEST(against_reference) {
  long checked = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099, checked++) {
    float f = compact16_float((uint32_t)u);
    ck_assert_msg(compact16_fp16_from_f32(f) == ref_fp16(f), "fp16(%08x) = %04x, want %04x",
                  (unsigned)u, compact16_fp16_from_f32(f), ref_fp16(f));
    ck_assert_msg(compact16_bf16_from_f32(f) == ref_bf16(f), "bf16(%08x) = %04x, want %04x",
                  (unsigned)u, compact16_bf16_from_f32(f), ref_bf16(f));
  }
  ck_assert_int_gt(checked, 1000000);
}
END_TEST

START_TEST(round_trip) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f16 = compact16_fp16_to_f32((uint16_t)h), b16 = compact16_bf16_to_f32((uint16_t)h);
    if (isnan(f16)) ck_assert(isnan(f16) && (compact16_fp16_from_f32(f16) & 0x7c00u) == 0x7c00u);
    else
      ck_assert_msg(compact16_fp16_from_f32(f16) == h, "fp16 %04x -> %a -> %04x", h, (double)f16,
                    compact16_fp16_from_f32(f16));
    if (!isnan(b16)) ck_assert_uint_eq(compact16_bf16_from_f32(b16), h);
  }
}
END_TEST

/* The array loops (vectorised) against the scalar conversions, on lengths that leave
 * a tail, in the current floating-point mode. */
static void check_arrays(uint32_t format) {
  enum { N = 4099 };
  float *src = malloc(N * sizeof *src), *back = malloc(N * sizeof *back);
  uint16_t *packed = malloc(N * sizeof *packed), *sum = malloc(N * sizeof *sum);
  for (int i = 0; i < N; i++) /* normals, subnormals of both formats, 0, inf, NaN */
    src[i] = i % 97 == 0   ? INFINITY
             : i % 89 == 0 ? NAN
                           : ldexpf((float)(i % 13) - 6.0f, i % 180 - 150);
  compact16_pack(format, src, packed, N);
  compact16_unpack(format, packed, back, N);
  for (int i = 0; i < N; i++) sum[i] = packed[N - 1 - i];
  compact16_add(format, packed, sum, N);
  for (int i = 0; i < N; i++) {
    bool fp16 = format == COMPACT16_FP16;
    uint16_t want = fp16 ? compact16_fp16_from_f32(src[i]) : compact16_bf16_from_f32(src[i]);
    ck_assert_msg(packed[i] == want, "pack[%d] of %a: %04x, want %04x", i, (double)src[i],
                  packed[i], want);
    float w = fp16 ? compact16_fp16_to_f32(want) : compact16_bf16_to_f32(want);
    ck_assert(compact16_bits(back[i]) == compact16_bits(w));
    float a = fp16 ? compact16_fp16_to_f32(packed[i]) : compact16_bf16_to_f32(packed[i]);
    float b = fp16 ? compact16_fp16_to_f32(packed[N - 1 - i])
                   : compact16_bf16_to_f32(packed[N - 1 - i]);
    uint16_t s = fp16 ? compact16_fp16_from_f32(a + b) : compact16_bf16_from_f32(a + b);
    ck_assert_msg(sum[i] == s || (isnan(a + b) && (sum[i] & 0x7fffu) > (fp16 ? 0x7c00u : 0x7f80u)),
                  "add[%d]: %04x, want %04x", i, sum[i], s);
  }
  free(src);
  free(back);
  free(packed);
  free(sum);
}

START_TEST(arrays) {
  check_arrays(COMPACT16_BF16);
  check_arrays(COMPACT16_FP16);
}
END_TEST

/* The same bits with flush-to-zero and denormals-are-zero on. */
START_TEST(arrays_flush_to_zero) {
#if defined(__SSE__)
  enum { N = 4099 };
  float *src = malloc(N * sizeof *src);
  uint16_t *plain = malloc(N * sizeof *plain), *flushed = malloc(N * sizeof *flushed);
  for (int i = 0; i < N; i++) src[i] = ldexpf(1.0f + (float)(i % 7) / 8.0f, i % 180 - 150);
  unsigned saved = _mm_getcsr();
  for (uint32_t format = COMPACT16_BF16; format <= COMPACT16_FP16; format++) {
    compact16_pack(format, src, plain, N);
    _mm_setcsr(saved | 0x8040); /* FTZ | DAZ */
    compact16_pack(format, src, flushed, N);
    _mm_setcsr(saved);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(plain[i], flushed[i]);
  }
  free(src);
  free(plain);
  free(flushed);
#endif
}
END_TEST

int main(void) {
  Suite *s = suite_create("compact16");
  TCase *tc = tcase_create("conversions");
  tcase_add_test(tc, fp16_edges);
  tcase_add_test(tc, bf16_edges);
  tcase_add_test(tc, against_reference);
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, arrays);
  tcase_add_test(tc, arrays_flush_to_zero);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
