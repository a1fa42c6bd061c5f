/* test_cuda_kernels_host.cpp — every launcher of the cuda device's own kernels
 * (gpu_kernels.h: the kernels_*.cu files nvcc compiles) run on the CPU, compiled as host
 * C++ (../host/kernels_host.cpp, ../host/gpu_host.h) and launched through the fake CUDA
 * runtime (../fake/), against the reference ops (tests/support/ref_ops.c) and
 * cnnb_update_reference. What a GPU would compute, without one: the same kernel code,
 * each thread's arithmetic unchanged; barriers and warp shuffles run phase by phase.
 *
 * Shapes are odd on purpose (1, 3, 7, 257 channels; N 1 and 3; odd H and W), every
 * launcher runs in fp32, fp16 and bf16 and, where it has one, in both layouts. fp16 / bf16
 * inputs are rounded first and the reference runs in fp32 on those values; its result is
 * then rounded to the type (round to nearest even, by this file's own rounding, computed
 * exactly in double: a check of CUDA's host conversions too). Tolerances, per case:
 *  - exact (equal values, NaN for NaN): conversions and layouts, concat, pad_channels,
 *    slice_channels and channel_shuffle (copies), ReLU / ReLU6 and their gradients, add,
 * accumulate, dropout, bias + ReLU, pooling forward and backward (the kernels sum in the
 * reference's order and type), the optimizer (bit for bit);
 *  - the bias gradient: fp32 sums in a fixed tree, within (m - 1) * 2^-24 * sum |dy| of
 *    the double reference (m elements per channel: the bound of any summation order),
 *    and the same bits on a second run;
 *  - softmax cross-entropy: probabilities within 32 ulps (exp in fp32 of a rounded
 *    difference, logits in [-8, 8]), the loss within 2^-16 relative (or absolute below
 *    1); the backward exactly its two fp32 operations on given probabilities, and within
 *    scale / N * 2^-18 plus one ulp of its type of ref_softmax_xent_backward;
 *  - LRN: fp32 sums and powf against double, within (2r + 4) * 2^-24 relative in the
 *    forward, (4r + 8) * 2^-24 of the magnitudes of the gradient's terms in the
 *    backward, plus one ulp of the type for fp16 / bf16.
 *  - multiply and channel_scale (ABI 1.14): fp32 exactly, fp16 / bf16 within one ulp of
 *    the type; their gate and scale gradients as the bias gradient's sums, within
 *    2 m 2^-24 sum |dy x| (plus one ulp of the type where stored in it), same bits twice;
 *  - layer norm (ABI 1.14): fp32 sums over C channels per position and over N * H * W per
 *    channel, within bounds growing with those counts (check_layer_norm lists them).
 * The index arithmetic past 2^31 elements (64-bit offsets, the pool kernels' choice of
 * int32 indices, the grid-stride loop, the bias gradient's split, concat's placement and
 * channel_shuffle's source in both their index types) is checked by calling that math alone,
 * without allocating such tensors. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpu_math.h" /* gpu_kernels.h, and host/gpu_host.h (GPU_GRID_STRIDE, probes) */

/* The SDK's C headers check their layouts with C11's _Static_assert, which is C++'s
 * static_assert. */
#define _Static_assert static_assert
#include <cnnb/optimizer.h>
extern "C" {
#include "ref_ops.h"
}
#undef _Static_assert

/* ck_assert_msg in a loop over many elements, without Check's bookkeeping of every
 * passing assertion (a message to the parent per call, in fork mode). */
#define EXPECT(cond, ...)                   \
  do {                                      \
    if (!(cond)) ck_abort_msg(__VA_ARGS__); \
  } while (0)

/* ---- reproducible data ----------------------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
/* Uniform in [lo, hi). */
static float rng_uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next() >> 40) / 16777216.0);
}
static std::vector<float> random_floats(int64_t n, float lo, float hi) {
  std::vector<float> v((size_t)n);
  for (float &x : v) x = rng_uniform(lo, hi);
  return v;
}

/* ---- the storage types, rounded independently of CUDA ------------------------------------ */

static const gpu_dtype FLOAT_TYPES[] = {GPU_F32, GPU_F16, GPU_BF16};
static const char *type_name(gpu_dtype t) {
  return t == GPU_F32 ? "f32" : t == GPU_F16 ? "f16" : t == GPU_BF16 ? "bf16" : "i32";
}

/* v rounded to nearest even in a binary format of p significant bits, minimum normal
 * exponent emin and largest finite value max (beyond it: infinity). Every step is exact
 * in double. */
static double round_binary(double v, int p, int emin, double max) {
  if (v == 0.0 || !isfinite(v)) return v;
  int e;
  frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
  const int lead = e - 1 < emin ? emin : e - 1;
  const double ulp = ldexp(1.0, lead - (p - 1));
  const double q = rint(v / ulp) * ulp; /* rint: the default rounding, to nearest even */
  return fabs(q) > max ? copysign(INFINITY, v) : q;
}
static const double HALF_MAX = 65504.0;
static const double BF16_MAX = 0x1.fep127; /* (2 - 2^-7) * 2^127 */

static uint16_t half_bits(float f) {
  if (isnan(f)) return 0x7fff;
  const uint16_t sign = signbit(f) ? 0x8000 : 0;
  const double a = fabs(round_binary(f, 11, -14, HALF_MAX));
  if (isinf(a)) return sign | 0x7c00;
  if (a < ldexp(1.0, -14)) return (uint16_t)(sign | (uint16_t)ldexp(a, 24)); /* subnormal */
  int e;
  frexp(a, &e);
  return (uint16_t)(sign | (e - 1 + 15) << 10 | ((uint16_t)ldexp(a, 10 - (e - 1)) - 1024));
}
static float half_value(uint16_t h) {
  const int e = h >> 10 & 0x1f, m = h & 0x3ff;
  const double v = e == 0    ? ldexp(m, -24)
                   : e == 31 ? (m ? NAN : INFINITY)
                             : ldexp(m + 1024, e - 25);
  return (float)(h & 0x8000 ? -v : v);
}
static uint16_t bf16_bits(float f) {
  if (isnan(f)) return 0x7fff;
  const float q = (float)round_binary(f, 8, -126, BF16_MAX); /* exact in float */
  uint32_t u;
  memcpy(&u, &q, sizeof u);
  return (uint16_t)(u >> 16);
}
static float bf16_value(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* v stored in t and loaded back. */
static float round_to(gpu_dtype t, float v) {
  return t == GPU_F16 ? half_value(half_bits(v)) : t == GPU_BF16 ? bf16_value(bf16_bits(v)) : v;
}
static std::vector<float> round_all(gpu_dtype t, std::vector<float> v) {
  for (float &x : v) x = round_to(t, x);
  return v;
}
/* The spacing of t's values at |v|. */
static double ulp_of(gpu_dtype t, double v) {
  const int p = t == GPU_F16 ? 11 : t == GPU_BF16 ? 8 : 24;
  const int emin = t == GPU_F16 ? -14 : -126;
  int e;
  frexp(fabs(v), &e);
  return ldexp(1.0, (e - 1 < emin ? emin : e - 1) - (p - 1));
}

/* ---- tensors: logical NCHW floats <-> a buffer's layout and type -------------------------- */

static int64_t count_of(gpu_dims d) { return (int64_t)d.n * d.c * d.h * d.w; }
/* Written out here rather than taken from gpu_math.h: the kernels' own index math is
 * what is under test. */
static int64_t layout_at(gpu_dims d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return d.nhwc ? ((n * d.h + h) * d.w + w) * d.c + c : ((n * d.c + c) * d.h + h) * d.w + w;
}
static int64_t nchw_at(gpu_dims d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * d.c + c) * d.h + h) * d.w + w;
}
static cnnb_shape shape_of(gpu_dims d) { return cnnb_shape{d.n, d.c, d.h, d.w}; }
static gpu_dims dims(int32_t n, int32_t c, int32_t h, int32_t w, int32_t nhwc) {
  return gpu_dims{n, c, h, w, nhwc};
}

/* Logical values in d's layout, stored as t (rounded to nearest even). */
static std::vector<uint8_t> encode(gpu_dtype t, gpu_dims d, const std::vector<float> &nchw) {
  const size_t size = gpu_dtype_size(t);
  std::vector<uint8_t> bytes((size_t)count_of(d) * size);
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const float v = nchw[(size_t)nchw_at(d, n, c, h, w)];
          uint8_t *at = &bytes[(size_t)layout_at(d, n, c, h, w) * size];
          if (t == GPU_F32) memcpy(at, &v, 4);
          else {
            const uint16_t b = t == GPU_F16 ? half_bits(v) : bf16_bits(v);
            memcpy(at, &b, 2);
          }
        }
  return bytes;
}
static std::vector<float> decode(gpu_dtype t, gpu_dims d, const std::vector<uint8_t> &bytes) {
  const size_t size = gpu_dtype_size(t);
  std::vector<float> nchw((size_t)count_of(d));
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const uint8_t *at = &bytes[(size_t)layout_at(d, n, c, h, w) * size];
          float v;
          if (t == GPU_F32) memcpy(&v, at, 4);
          else {
            uint16_t b;
            memcpy(&b, at, 2);
            v = t == GPU_F16 ? half_value(b) : bf16_value(b);
          }
          nchw[(size_t)nchw_at(d, n, c, h, w)] = v;
        }
  return nchw;
}
static gpu_dims flat(int64_t n) { return gpu_dims{1, 1, 1, (int32_t)n, 0}; }

/* ---- "device" memory (the fake's: host memory in its registry) ---------------------------- */

struct dev {
  void *p = nullptr;
  size_t bytes = 0;
  explicit dev(size_t n) : bytes(n) { ck_assert_int_eq(cudaMalloc(&p, n ? n : 1), cudaSuccess); }
  explicit dev(const std::vector<uint8_t> &host) : dev(host.size()) {
    if (bytes) ck_assert_int_eq(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice), 0);
  }
  dev(const dev &) = delete;
  dev &operator=(const dev &) = delete;
  ~dev() { cudaFree(p); }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> host(bytes);
    if (bytes) ck_assert_int_eq(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost), 0);
    return host;
  }
  template <typename T>
  T *as() const {
    return static_cast<T *>(p);
  }
};
template <typename T>
static std::vector<uint8_t> bytes_of(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
static std::vector<T> values_of(const std::vector<uint8_t> &b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!b.empty()) memcpy(v.data(), b.data(), b.size());
  return v;
}
/* A tensor uploaded in t and d's layout; and one read back as logical NCHW floats. */
static dev *put(gpu_dtype t, gpu_dims d, const std::vector<float> &nchw) {
  return new dev(encode(t, d, nchw));
}
static std::vector<float> get(gpu_dtype t, gpu_dims d, const dev &buffer) {
  return decode(t, d, buffer.get());
}

/* ---- comparisons ------------------------------------------------------------------------ */

static bool same(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/* got[i] against want[i] for every i, within tol(i) (0: equal, NaN for NaN); the first
 * difference fails the test, named by `what`. */
template <typename Tol>
static void expect_near(const char *what, const std::vector<float> &got,
                        const std::vector<float> &want, Tol tol) {
  ck_assert_msg(got.size() == want.size(), "%s: %zu values, expected %zu", what, got.size(),
                want.size());
  for (size_t i = 0; i < got.size(); i++) {
    const double t = tol(i);
    const bool ok = t == 0.0 ? same(got[i], want[i])
                             : (same(got[i], want[i]) || fabs((double)got[i] - want[i]) <= t);
    if (!ok)
      ck_abort_msg("%s: [%zu] = %.9g (%a), reference %.9g (%a), tolerance %.3g", what, i,
                   (double)got[i], (double)got[i], (double)want[i], (double)want[i], t);
  }
}
static void expect_same(const char *what, const std::vector<float> &got,
                        const std::vector<float> &want) {
  expect_near(what, got, want, [](size_t) { return 0.0; });
}

/* ---- shapes -------------------------------------------------------------------------------- */

/* Odd ones: 1, 3, 7 and 257 channels, N 1 and 3, odd H and W, a 1-pixel image. */
static const gpu_dims SHAPES[] = {{1, 1, 1, 1, 0},   {1, 3, 5, 7, 0},   {3, 7, 9, 1, 0},
                                  {3, 257, 3, 5, 0}, {1, 1, 13, 11, 0}, {3, 3, 1, 17, 0}};
#define FOR_SHAPES(d)                                                                            \
  for (const gpu_dims &shape_ : SHAPES)                                                          \
    for (int32_t nhwc_ = 0; nhwc_ < 2; nhwc_++)                                                  \
      for (gpu_dims d = dims(shape_.n, shape_.c, shape_.h, shape_.w, nhwc_), *once_ = &d; once_; \
           once_ = nullptr)
#define DIMS_FMT "[%d, %d, %d, %d] %s"
#define DIMS_ARGS(d) (d).n, (d).c, (d).h, (d).w, (d).nhwc ? "NHWC" : "NCHW"

/* Element counts for the flat kernels: tiny, odd, and past one grid of gpu_blocks
 * (8192 blocks of 256 threads) so the grid-stride loops go round more than once. */
static const int64_t COUNTS[] = {1, 3, 7, 257, 65537, 8192 * 256 + 3};

/* The library holds code for this "GPU": the host build's kernels always run. */
START_TEST(image_check) { ck_assert_int_eq(gpu_k_image_check(), cudaSuccess); }
END_TEST

/* ---- conversions ---------------------------------------------------------------------------- */

START_TEST(cast_rounds_to_nearest_even) {
  /* Every half and bf16 value, the midpoints between neighbours (ties), one float ulp
   * either side of them, random bit patterns, and the specials. */
  std::vector<float> v;
  for (int fmt = 0; fmt < 2; fmt++)
    for (uint32_t b = 0; b < 0xffff; b++) {
      const float x = fmt ? bf16_value((uint16_t)b) : half_value((uint16_t)b);
      const float next = fmt ? bf16_value((uint16_t)(b + 1)) : half_value((uint16_t)(b + 1));
      if (isnan(x)) continue;
      v.push_back(x);
      if (isnan(next) || isinf(x) || (b & 0x7fff) == 0x7fff || signbit(x) != signbit(next))
        continue;
      const float mid = (float)(((double)x + next) / 2); /* exact: one bit more */
      v.push_back(mid);
      v.push_back(nextafterf(mid, INFINITY));
      v.push_back(nextafterf(mid, -INFINITY));
    }
  for (int i = 0; i < 100000; i++) {
    const uint32_t u = (uint32_t)rng_next();
    float f;
    memcpy(&f, &u, sizeof f);
    v.push_back(f);
  }
  const float specials[] = {0.0f,    -0.0f,  INFINITY, -INFINITY,  NAN,      FLT_MAX,  -FLT_MAX,
                            FLT_MIN, 1e-45f, 65504.0f, 65519.996f, 65520.0f, 65536.0f, 0x1.fep127f};
  v.insert(v.end(), specials, specials + sizeof specials / sizeof specials[0]);
  const int64_t n = (int64_t)v.size();
  dev src(bytes_of(v));

  /* fp32 -> fp16 / bf16: the bits of nearest even; fp32 -> fp32: the same bits. */
  for (gpu_dtype t : FLOAT_TYPES) {
    dev dst((size_t)n * gpu_dtype_size(t));
    ck_assert_int_eq(gpu_k_cast(dst.p, t, src.p, GPU_F32, n, 0), cudaSuccess);
    const std::vector<uint8_t> got = dst.get();
    for (int64_t i = 0; i < n; i++) {
      if (t == GPU_F32) {
        EXPECT(memcmp(&got[(size_t)i * 4], &v[(size_t)i], 4) == 0, "f32 copy [%lld]", (long long)i);
        continue;
      }
      uint16_t b;
      memcpy(&b, &got[(size_t)i * 2], 2);
      const uint16_t want = t == GPU_F16 ? half_bits(v[(size_t)i]) : bf16_bits(v[(size_t)i]);
      const bool nan_ok = isnan(v[(size_t)i]) &&
                          isnan(t == GPU_F16 ? half_value(b) : bf16_value(b));
      EXPECT(b == want || nan_ok, "f32 -> %s of %a: 0x%04x, nearest even is 0x%04x", type_name(t),
             (double)v[(size_t)i], b, want);
    }
  }

  /* Every fp16 / bf16 bit pattern loaded as fp32 (exact), and converted to the other. */
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < 65536; b++) all[b] = (uint16_t)b;
  dev patterns(bytes_of(all));
  for (gpu_dtype from : {GPU_F16, GPU_BF16}) {
    dev wide(65536 * 4), other(65536 * 2);
    const gpu_dtype to = from == GPU_F16 ? GPU_BF16 : GPU_F16;
    ck_assert_int_eq(gpu_k_cast(wide.p, GPU_F32, patterns.p, from, 65536, 0), cudaSuccess);
    ck_assert_int_eq(gpu_k_cast(other.p, to, patterns.p, from, 65536, 0), cudaSuccess);
    const std::vector<float> f = values_of<float>(wide.get());
    const std::vector<uint16_t> o = values_of<uint16_t>(other.get());
    for (uint32_t b = 0; b < 65536; b++) {
      const float want = from == GPU_F16 ? half_value((uint16_t)b) : bf16_value((uint16_t)b);
      EXPECT(same(f[b], want) && (isnan(want) || signbit(f[b]) == signbit(want)),
             "%s 0x%04x -> f32: %a, expected %a", type_name(from), b, (double)f[b], (double)want);
      const uint16_t want_o = to == GPU_F16 ? half_bits(want) : bf16_bits(want);
      const float got_o = to == GPU_F16 ? half_value(o[b]) : bf16_value(o[b]);
      EXPECT(o[b] == want_o || (isnan(want) && isnan(got_o)),
             "%s 0x%04x -> %s: 0x%04x, expected 0x%04x", type_name(from), b, type_name(to), o[b],
             want_o);
    }
  }

  /* int32 copies as it is; int32 and a float type do not mix; nothing to do is done. */
  std::vector<int32_t> ints(257);
  for (size_t i = 0; i < ints.size(); i++) ints[i] = (int32_t)(rng_next() >> 33) - (1 << 30);
  dev isrc(bytes_of(ints)), idst(ints.size() * 4);
  ck_assert_int_eq(gpu_k_cast(idst.p, GPU_I32, isrc.p, GPU_I32, 257, 0), cudaSuccess);
  ck_assert(values_of<int32_t>(idst.get()) == ints);
  ck_assert_int_eq(gpu_k_cast(idst.p, GPU_F32, isrc.p, GPU_I32, 257, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_cast(idst.p, GPU_I32, isrc.p, GPU_F16, 257, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_cast(idst.p, GPU_F32, isrc.p, GPU_F16, 0, 0), cudaSuccess);
}
END_TEST

START_TEST(layouts_from_and_to_nchw) {
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES) FOR_SHAPES(d) {
      const std::vector<float> x = random_floats(count_of(d), -4.0f, 4.0f);
      dev src(bytes_of(x)), dst((size_t)count_of(d) * gpu_dtype_size(t)),
          back((size_t)count_of(d) * 4);
      ck_assert_int_eq(gpu_k_from_nchw_f32(dst.p, t, d, src.as<float>(), 0), cudaSuccess);
      snprintf(what, sizeof what, "from_nchw_f32 %s " DIMS_FMT, type_name(t), DIMS_ARGS(d));
      expect_same(what, get(t, d, dst), round_all(t, x));
      ck_assert_int_eq(gpu_k_to_nchw_f32(back.as<float>(), dst.p, t, d, 0), cudaSuccess);
      snprintf(what, sizeof what, "to_nchw_f32 %s " DIMS_FMT, type_name(t), DIMS_ARGS(d));
      expect_same(what, values_of<float>(back.get()), round_all(t, x));
    }
  dev any(16);
  ck_assert_int_eq(gpu_k_from_nchw_f32(any.p, GPU_F32, dims(1, -1, 1, 1, 0), any.as<float>(), 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_to_nchw_f32(any.as<float>(), any.p, GPU_F32, dims(0, 3, 5, 7, 1), 0),
                   cudaSuccess);
}
END_TEST

START_TEST(uint8_input) {
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES) FOR_SHAPES(d) {
      /* Pixels are [N, H, W, C] whatever the device's layout. */
      std::vector<uint8_t> px((size_t)count_of(d));
      for (uint8_t &p : px) p = (uint8_t)(rng_next() >> 56);
      const std::vector<float> scale = random_floats(d.c, 0.001f, 0.05f);
      const std::vector<float> offset = random_floats(d.c, -2.0f, 2.0f);
      dev src(px), sc(bytes_of(scale)), off(bytes_of(offset));
      dev dst((size_t)count_of(d) * gpu_dtype_size(t));
      ck_assert_int_eq(gpu_k_from_uint8_nhwc(dst.p, t, d, src.as<uint8_t>(), sc.as<float>(),
                                             off.as<float>(), 0),
                       cudaSuccess);
      std::vector<float> want((size_t)count_of(d));
      for (int64_t n = 0; n < d.n; n++)
        for (int64_t c = 0; c < d.c; c++)
          for (int64_t h = 0; h < d.h; h++)
            for (int64_t w = 0; w < d.w; w++) {
              const float v = (float)px[(size_t)(((n * d.h + h) * d.w + w) * d.c + c)];
              const float scaled = v * scale[(size_t)c]; /* two roundings (no contraction) */
              want[(size_t)nchw_at(d, n, c, h, w)] = round_to(t, scaled + offset[(size_t)c]);
            }
      snprintf(what, sizeof what, "from_uint8_nhwc %s " DIMS_FMT, type_name(t), DIMS_ARGS(d));
      expect_same(what, get(t, d, dst), want);
    }
}
END_TEST

START_TEST(filters_to_compute_and_back) {
  /* (K, C, C padded, R, S). */
  static const int32_t cases[][5] = {
      {1, 1, 1, 1, 1}, {3, 3, 8, 3, 3}, {7, 1, 1, 1, 7}, {3, 257, 260, 1, 3}, {1, 3, 3, 5, 5}};
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES)
    for (const auto &k : cases)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
        const gpu_dims arena = dims(k[0], k[1], k[3], k[4], 0);
        const gpu_dims compute = dims(k[0], k[2], k[3], k[4], nhwc);
        const std::vector<float> w = random_floats(count_of(arena), -1.0f, 1.0f);
        dev src(bytes_of(w)), dst((size_t)count_of(compute) * gpu_dtype_size(t));
        ck_assert_int_eq(gpu_k_filter_to_compute(dst.p, t, nhwc, src.as<float>(), k[0], k[1], k[2],
                                                 k[3], k[4], 0),
                         cudaSuccess);
        std::vector<float> want((size_t)count_of(compute), 0.0f); /* padded channels: 0 */
        for (int64_t o = 0; o < k[0]; o++)
          for (int64_t c = 0; c < k[1]; c++)
            for (int64_t r = 0; r < k[3]; r++)
              for (int64_t s = 0; s < k[4]; s++)
                want[(size_t)nchw_at(compute, o, c, r, s)] =
                    round_to(t, w[(size_t)nchw_at(arena, o, c, r, s)]);
        snprintf(what, sizeof what, "filter_to_compute %s [%d, %d->%d, %d, %d] %s", type_name(t),
                 k[0], k[1], k[2], k[3], k[4], nhwc ? "OHWI" : "OIHW");
        expect_same(what, get(t, compute, dst), want);

        /* A gradient in the compute form back to the arena's C channels. */
        const std::vector<float> g = round_all(t, random_floats(count_of(compute), -1.0f, 1.0f));
        std::unique_ptr<dev> gsrc(put(t, compute, g));
        dev garena((size_t)count_of(arena) * 4);
        ck_assert_int_eq(gpu_k_filter_grad_to_arena(garena.as<float>(), gsrc->p, t, nhwc, k[0],
                                                    k[1], k[2], k[3], k[4], 0),
                         cudaSuccess);
        std::vector<float> gwant((size_t)count_of(arena));
        for (int64_t o = 0; o < k[0]; o++)
          for (int64_t c = 0; c < k[1]; c++)
            for (int64_t r = 0; r < k[3]; r++)
              for (int64_t s = 0; s < k[4]; s++)
                gwant[(size_t)nchw_at(arena, o, c, r, s)] = g[(size_t)nchw_at(compute, o, c, r, s)];
        snprintf(what, sizeof what, "filter_grad_to_arena %s [%d, %d<-%d, %d, %d] %s", type_name(t),
                 k[0], k[1], k[2], k[3], k[4], nhwc ? "OHWI" : "OIHW");
        expect_same(what, values_of<float>(garena.get()), gwant);
      }
  dev any(16);
  ck_assert_int_eq(gpu_k_filter_to_compute(any.p, GPU_F32, 0, any.as<float>(), 1, 3, 2, 1, 1, 0),
                   cudaErrorInvalidValue);
}
END_TEST

/* The channels [0, c) of x [N, C, H, W] (logical). */
static std::vector<float> first_channels(const std::vector<float> &x, gpu_dims d, int32_t c) {
  std::vector<float> y;
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) y.push_back(x[(size_t)nchw_at(d, n, ch, h, w)]);
  return y;
}

START_TEST(pad_and_crop_spatial) {
  /* (top, bottom, left, right): none, asymmetric ones. */
  static const int32_t pads[][4] = {{0, 0, 0, 0}, {1, 2, 0, 3}, {2, 0, 1, 1}, {0, 1, 0, 1}};
  static const int32_t extra_channels[] = {0, 5};
  static const float fills[] = {0.0f, -1.5f};
  char what[200];
  for (gpu_dtype t : FLOAT_TYPES) FOR_SHAPES(xd) {
      for (const auto &p : pads)
        for (int32_t extra : extra_channels)
          for (float fill : fills) {
            const gpu_dims yd = dims(xd.n, xd.c + extra, xd.h + p[0] + p[1], xd.w + p[2] + p[3],
                                     xd.nhwc);
            const gpu_dims yd_c = dims(yd.n, xd.c, yd.h, yd.w, 0); /* x's channels only */
            const std::vector<float> x = round_all(t, random_floats(count_of(xd), -3.0f, 3.0f));
            std::unique_ptr<dev> src(put(t, xd, x));
            dev dst((size_t)count_of(yd) * gpu_dtype_size(t));
            ck_assert_int_eq(gpu_k_pad_spatial(dst.p, yd, src->p, xd, t, p[0], p[2], fill, 0),
                             cudaSuccess);
            /* The reference pads with zeros; padding an all-ones tensor tells where x lies,
             * and `fill` goes everywhere else (also in the channels beyond x's). */
            std::vector<float> ref((size_t)count_of(yd_c)), inside((size_t)count_of(yd_c));
            const std::vector<float> ones((size_t)count_of(xd), 1.0f);
            ref_pad_spatial_forward(x.data(), shape_of(xd), p[0], p[1], p[2], p[3], ref.data());
            ref_pad_spatial_forward(ones.data(), shape_of(xd), p[0], p[1], p[2], p[3],
                                    inside.data());
            std::vector<float> want((size_t)count_of(yd), fill);
            for (int64_t n = 0; n < yd.n; n++)
              for (int64_t c = 0; c < xd.c; c++)
                for (int64_t h = 0; h < yd.h; h++)
                  for (int64_t w = 0; w < yd.w; w++) {
                    const size_t at = (size_t)nchw_at(yd_c, n, c, h, w);
                    if (inside[at] != 0.0f) want[(size_t)nchw_at(yd, n, c, h, w)] = ref[at];
                  }
            snprintf(what, sizeof what,
                     "pad_spatial %s x " DIMS_FMT " pads %d,%d,%d,%d +%d ch fill %g", type_name(t),
                     DIMS_ARGS(xd), p[0], p[1], p[2], p[3], extra, (double)fill);
            expect_same(what, get(t, yd, dst), round_all(t, want));

            /* The crop back from a random tensor of y's size: the reference's pad with
             * negative amounts (a cut), on its first C channels. */
            const std::vector<float> big = round_all(t, random_floats(count_of(yd), -3.0f, 3.0f));
            std::unique_ptr<dev> bsrc(put(t, yd, big));
            dev cropped((size_t)count_of(xd) * gpu_dtype_size(t));
            ck_assert_int_eq(gpu_k_crop_spatial(cropped.p, xd, bsrc->p, yd, t, p[0], p[2], 0),
                             cudaSuccess);
            std::vector<float> cwant((size_t)count_of(xd));
            ref_pad_spatial_forward(first_channels(big, yd, xd.c).data(), shape_of(yd_c), -p[0],
                                    -p[1], -p[2], -p[3], cwant.data());
            snprintf(what, sizeof what, "crop_spatial %s to " DIMS_FMT " cut %d,%d,%d,%d -%d ch",
                     type_name(t), DIMS_ARGS(xd), p[0], p[1], p[2], p[3], extra);
            expect_same(what, get(t, xd, cropped), cwant);
          }
    }
  /* x must fit inside y at (top, left), and the crop's window inside its source. */
  dev any(4096);
  const gpu_dims small = dims(1, 3, 5, 7, 0), big = dims(1, 3, 6, 7, 0);
  ck_assert_int_eq(gpu_k_pad_spatial(any.p, big, any.p, small, GPU_F32, 2, 0, 0.0f, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_crop_spatial(any.p, small, any.p, big, GPU_F32, 0, 1, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_pad_spatial(any.p, big, any.p, dims(1, 3, 5, 7, 1), GPU_F32, 1, 0, 0.0f,
                                     0),
                   cudaErrorInvalidValue);
}
END_TEST

/* The pad_spatial op (shift_spatial): pads and cuts of either sign on each side, against
 * the reference's forward and backward. */
START_TEST(shift_spatial_matches_reference) {
  static const int32_t pads[][4] = {{0, 0, 0, 0}, {1, 0, 1, 0}, {-1, 1, 0, -1}, {2, -1, -2, 3}};
  char what[200];
  for (gpu_dtype t : FLOAT_TYPES) FOR_SHAPES(xd) {
      for (const auto &p : pads) {
        if (xd.h + p[0] + p[1] <= 0 || xd.w + p[2] + p[3] <= 0) continue;
        const gpu_dims yd = dims(xd.n, xd.c, xd.h + p[0] + p[1], xd.w + p[2] + p[3], xd.nhwc);
        const std::vector<float> x = round_all(t, random_floats(count_of(xd), -3.0f, 3.0f));
        std::unique_ptr<dev> src(put(t, xd, x));
        dev y((size_t)count_of(yd) * gpu_dtype_size(t));
        ck_assert_int_eq(gpu_k_shift_spatial(y.p, yd, src->p, xd, t, p[0], p[2], 0), cudaSuccess);
        std::vector<float> want((size_t)count_of(yd));
        ref_pad_spatial_forward(x.data(), shape_of(xd), p[0], p[1], p[2], p[3], want.data());
        snprintf(what, sizeof what, "shift_spatial %s x " DIMS_FMT " by %d,%d,%d,%d", type_name(t),
                 DIMS_ARGS(xd), p[0], p[1], p[2], p[3]);
        expect_same(what, get(t, yd, y), want);

        const std::vector<float> dy = round_all(t, random_floats(count_of(yd), -3.0f, 3.0f));
        std::unique_ptr<dev> ddy(put(t, yd, dy));
        dev dx((size_t)count_of(xd) * gpu_dtype_size(t));
        ck_assert_int_eq(gpu_k_shift_spatial(dx.p, xd, ddy->p, yd, t, -p[0], -p[2], 0),
                         cudaSuccess);
        std::vector<float> dwant((size_t)count_of(xd));
        ref_pad_spatial_backward(dy.data(), shape_of(xd), p[0], p[1], p[2], p[3], dwant.data());
        snprintf(what, sizeof what, "shift_spatial backward %s x " DIMS_FMT " by %d,%d,%d,%d",
                 type_name(t), DIMS_ARGS(xd), p[0], p[1], p[2], p[3]);
        expect_same(what, get(t, xd, dx), dwant);
      }
    }
  dev any(4096);
  ck_assert_int_eq(gpu_k_shift_spatial(any.p, dims(1, 4, 5, 7, 0), any.p, dims(1, 3, 5, 7, 0),
                                       GPU_F32, 0, 0, 0),
                   cudaErrorInvalidValue);
}
END_TEST

/* ---- concatenation along channels ------------------------------------------------------ */

/* The inputs' channel counts: 1 to 5 inputs of 1, 3, 7 and 257 channels. */
static const std::vector<int32_t> CONCAT_CHANNELS[] = {
    {1}, {3, 1}, {7, 257, 1}, {1, 3, 7, 1}, {257, 7, 3, 1, 3}};
/* N, H, W of the inputs and the output. */
static const int32_t CONCAT_NHW[][3] = {{1, 1, 1}, {3, 5, 7}, {2, 1, 17}, {3, 9, 1}};

/* One input of a concat case: logical values, its buffer, and its gradient's. */
struct concat_input {
  gpu_dims d;
  std::vector<float> x;
  std::unique_ptr<dev> buffer, grad;
};

/* Runs gpu_k_concat and gpu_k_concat_backward over `channels` inputs of shape `nhw` in
 * layout nhwc, with the gaps gaps[k] (zero channels, no input) before input k and
 * gaps[count] after the last (none when gaps is empty), against ref_concat_forward /
 * ref_concat_backward, in which a gap is an input of zeros whose gradient is dropped.
 * The backward wants no gradient for the inputs in `skip`. Exact: elements are copied. */
static void check_concat(gpu_dtype t, const int32_t nhw[3], int32_t nhwc,
                         const std::vector<int32_t> &channels, const std::vector<int32_t> &gaps,
                         const std::vector<int> &skip) {
  const int count = (int)channels.size();
  const size_t size = gpu_dtype_size(t);
  std::vector<concat_input> in((size_t)count);
  std::vector<gpu_concat_part> parts;
  /* The reference's inputs: each gap as zeros, then the input. */
  std::vector<cnnb_shape> ref_shapes;
  std::vector<std::vector<float>> ref_values;
  std::vector<int> ref_of_input;
  int32_t total = 0;
  for (int k = 0; k <= count; k++) {
    const int32_t gap = gaps.empty() ? 0 : gaps[(size_t)k];
    if (gap > 0) {
      const gpu_dims gd = dims(nhw[0], gap, nhw[1], nhw[2], nhwc);
      ref_shapes.push_back(shape_of(gd));
      ref_values.emplace_back((size_t)count_of(gd), 0.0f);
      total += gap;
    }
    if (k == count) break;
    concat_input &x = in[(size_t)k];
    x.d = dims(nhw[0], channels[(size_t)k], nhw[1], nhw[2], nhwc);
    x.x = round_all(t, random_floats(count_of(x.d), -3.0f, 3.0f));
    x.buffer.reset(put(t, x.d, x.x));
    x.grad.reset(new dev((size_t)count_of(x.d) * size));
    parts.push_back(gpu_concat_part{x.buffer->p, total, x.d.c});
    ref_of_input.push_back((int)ref_shapes.size());
    ref_shapes.push_back(shape_of(x.d));
    ref_values.push_back(x.x);
    total += x.d.c;
  }
  const gpu_dims yd = dims(nhw[0], total, nhw[1], nhw[2], nhwc);
  char what[240];
  int at = snprintf(what, sizeof what, "concat %s " DIMS_FMT " of %d inputs:", type_name(t),
                    DIMS_ARGS(yd), count);
  for (int k = 0; k < count && k < 8 && at < 200; k++)
    at += snprintf(what + at, sizeof what - (size_t)at, " %d@%d", parts[(size_t)k].channels,
                   parts[(size_t)k].start);
  if (count > 8) snprintf(what + at, sizeof what - (size_t)at, " ...");

  /* The forward: y freshly allocated (the fake fills it with NaN), so an element the
   * kernel leaves unwritten shows. */
  dev y((size_t)count_of(yd) * size);
  ck_assert_msg(gpu_k_concat(y.p, yd, parts.data(), count, t, 0) == cudaSuccess, "%s", what);
  std::vector<const float *> ref_x;
  for (const auto &v : ref_values) ref_x.push_back(v.data());
  std::vector<float> want((size_t)count_of(yd));
  ref_concat_forward(ref_x.data(), ref_shapes.data(), (int)ref_shapes.size(), want.data());
  expect_same(what, get(t, yd, y), want);

  /* The backward. */
  const std::vector<float> dy = round_all(t, random_floats(count_of(yd), -3.0f, 3.0f));
  std::unique_ptr<dev> dy_buffer(put(t, yd, dy));
  for (int k = 0; k < count; k++) {
    bool skipped = false;
    for (int s : skip) skipped |= s == k;
    parts[(size_t)k].data = skipped ? nullptr : in[(size_t)k].grad->p;
  }
  ck_assert_msg(gpu_k_concat_backward(dy_buffer->p, yd, parts.data(), count, t, 0) == cudaSuccess,
                "%s: backward", what);
  std::vector<std::vector<float>> ref_dx;
  std::vector<float *> ref_dx_ptr;
  for (const cnnb_shape &s : ref_shapes) ref_dx.emplace_back((size_t)cnnb_shape_count(s));
  for (auto &v : ref_dx) ref_dx_ptr.push_back(v.data());
  ref_concat_backward(dy.data(), ref_shapes.data(), (int)ref_shapes.size(), ref_dx_ptr.data());
  for (int k = 0; k < count; k++) {
    if (!parts[(size_t)k].data) continue;
    char grad_what[300];
    snprintf(grad_what, sizeof grad_what, "%s: backward, input %d", what, k);
    const concat_input &x = in[(size_t)k];
    expect_same(grad_what, get(t, x.d, *x.grad), ref_dx[(size_t)ref_of_input[(size_t)k]]);
  }
}

START_TEST(concat_matches_reference) {
  for (gpu_dtype t : FLOAT_TYPES)
    for (const auto &nhw : CONCAT_NHW)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++)
        for (const auto &channels : CONCAT_CHANNELS) {
          check_concat(t, nhw, nhwc, channels, {}, {});
          /* The backward without the last input's gradient (a constant), and the
           * first's. */
          const int last = (int)channels.size() - 1;
          check_concat(t, nhw, nhwc, channels, {}, {last});
          if (last > 0) check_concat(t, nhw, nhwc, channels, {}, {0});
        }
}
END_TEST

/* pad_channels' use: one part, zero channels before and after it. */
START_TEST(pad_channels_matches_reference) {
  static const int32_t pads[][2] = {{0, 0}, {1, 2}, {3, 0}, {0, 5}, {4, 4}};
  static const int32_t channels[] = {1, 3, 7, 257};
  char what[200];
  for (gpu_dtype t : FLOAT_TYPES)
    for (const auto &nhw : CONCAT_NHW)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++)
        for (int32_t c : channels)
          for (const auto &p : pads) {
            const gpu_dims xd = dims(nhw[0], c, nhw[1], nhw[2], nhwc);
            const gpu_dims yd = dims(xd.n, p[0] + c + p[1], xd.h, xd.w, nhwc);
            const std::vector<float> x = round_all(t, random_floats(count_of(xd), -3.0f, 3.0f));
            std::unique_ptr<dev> xb(put(t, xd, x));
            dev y((size_t)count_of(yd) * gpu_dtype_size(t));
            gpu_concat_part part = {xb->p, p[0], c};
            ck_assert_int_eq(gpu_k_concat(y.p, yd, &part, 1, t, 0), cudaSuccess);
            std::vector<float> want((size_t)count_of(yd));
            ref_pad_channels_forward(x.data(), shape_of(xd), p[0], p[1], want.data());
            snprintf(what, sizeof what, "pad_channels %s x " DIMS_FMT " by %d, %d", type_name(t),
                     DIMS_ARGS(xd), p[0], p[1]);
            expect_same(what, get(t, yd, y), want);

            const std::vector<float> dy = round_all(t, random_floats(count_of(yd), -3.0f, 3.0f));
            std::unique_ptr<dev> dyb(put(t, yd, dy));
            dev dx((size_t)count_of(xd) * gpu_dtype_size(t));
            part.data = dx.p;
            ck_assert_int_eq(gpu_k_concat_backward(dyb->p, yd, &part, 1, t, 0), cudaSuccess);
            std::vector<float> dwant((size_t)count_of(xd));
            ref_pad_channels_backward(dy.data(), shape_of(xd), p[0], p[1], dwant.data());
            snprintf(what, sizeof what, "pad_channels %s x " DIMS_FMT " by %d, %d: backward",
                     type_name(t), DIMS_ARGS(xd), p[0], p[1]);
            expect_same(what, get(t, xd, dx), dwant);
          }
}
END_TEST

/* More parts than one launch takes: several launches, each over its own channels,
 * with gaps (zeros) between parts and at both ends, empty parts, and gradients left out
 * on either side of the launches' boundaries. */
START_TEST(concat_more_than_max_inputs) {
  const int count = 2 * GPU_CONCAT_MAX_INPUTS + 7;
  static const int32_t cycle[] = {1, 3, 7, 1, 0, 3};
  std::vector<int32_t> channels, gaps;
  for (int k = 0; k < count; k++) channels.push_back(cycle[k % 6]);
  for (int k = 0; k <= count; k++) gaps.push_back(k == 0 ? 2 : k == count ? 3 : k % 4 == 1);
  /* Nonempty parts (k % 6 != 4) on both sides of the launches' boundaries. */
  const std::vector<int> skip = {0, GPU_CONCAT_MAX_INPUTS - 1, GPU_CONCAT_MAX_INPUTS,
                                 2 * GPU_CONCAT_MAX_INPUTS + 1, count - 2};
  /* No empty parts: exactly one launch's worth, and one more. */
  std::vector<int32_t> full;
  for (int k = 0; k <= GPU_CONCAT_MAX_INPUTS; k++) full.push_back(cycle[k % 3]);
  static const int32_t nhw[3] = {2, 3, 5};
  for (gpu_dtype t : FLOAT_TYPES)
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      check_concat(t, nhw, nhwc, channels, {}, {});
      check_concat(t, nhw, nhwc, channels, gaps, skip);
      check_concat(t, nhw, nhwc, std::vector<int32_t>(full.begin(), full.end() - 1), {}, {});
      check_concat(t, nhw, nhwc, full, {}, {GPU_CONCAT_MAX_INPUTS - 1});
    }
}
END_TEST

START_TEST(concat_refuses_bad_parts) {
  dev any(4096);
  const gpu_dims yd = dims(1, 6, 3, 5, 1);
  const gpu_concat_part overlap[] = {{any.p, 0, 3}, {any.p, 2, 3}};
  const gpu_concat_part unordered[] = {{any.p, 3, 3}, {any.p, 0, 3}};
  const gpu_concat_part beyond[] = {{any.p, 4, 3}};
  const gpu_concat_part negative[] = {{any.p, 0, -1}};
  const gpu_concat_part no_data[] = {{any.p, 0, 3}, {nullptr, 3, 3}};
  ck_assert_int_eq(gpu_k_concat(any.p, yd, overlap, 2, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat(any.p, yd, unordered, 2, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat(any.p, yd, beyond, 1, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat(any.p, yd, negative, 1, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat_backward(any.p, yd, overlap, 2, GPU_F16, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat_backward(any.p, yd, beyond, 1, GPU_BF16, 0), cudaErrorInvalidValue);
  /* The forward reads every part; the backward skips a gradient nobody wants. */
  ck_assert_int_eq(gpu_k_concat(any.p, yd, no_data, 2, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat_backward(any.p, yd, no_data, 2, GPU_F32, 0), cudaSuccess);
  ck_assert_int_eq(gpu_k_concat(any.p, yd, no_data, 1, GPU_I32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_concat(any.p, dims(1, -6, 3, 5, 0), no_data, 0, GPU_F32, 0),
                   cudaErrorInvalidValue);
  /* Nothing to do: no launch, whatever the pointers. */
  ck_assert_int_eq(gpu_k_concat(nullptr, dims(0, 6, 3, 5, 0), no_data, 1, GPU_F32, 0), cudaSuccess);
  /* No part at all: the forward writes zeros everywhere. */
  const gpu_dims zd = dims(2, 5, 3, 1, 0);
  dev z((size_t)count_of(zd) * 2);
  ck_assert_int_eq(gpu_k_concat(z.p, zd, nullptr, 0, GPU_F16, 0), cudaSuccess);
  expect_same("concat of no parts", get(GPU_F16, zd, z),
              std::vector<float>((size_t)count_of(zd), 0.0f));
}
END_TEST

/* kernels_concat.cu's placement of a launch's element i (host/kernels_host.cpp: the
 * same locate() the kernels run), in its 32-bit (wide 0) or 64-bit (wide 1) index
 * type: y's offset, the part holding it (returned; -1: none) and the offset in it. The
 * launch covers y's channels [lo, lo + width) with `count` nonempty parts (at most
 * GPU_CONCAT_MAX_INPUTS). */
extern "C" int32_t gpu_host_concat_locate(gpu_dims d, const gpu_concat_part *parts, int32_t count,
                                          int32_t lo, int32_t width, int64_t i, int wide,
                                          int64_t *y_offset, int64_t *x_offset);

/* The index math on tensors too large to allocate: past 2^32 elements in the 64-bit
 * type the launcher takes for them, and up to 2^32 - 1 in the 32-bit one, against this
 * file's own layout math. */
START_TEST(concat_index_math_wide) {
  struct index_case {
    gpu_dims y;
    int wide;
    int32_t lo, width;
    std::vector<gpu_concat_part> parts;
  };
  const index_case cases[] = {
      /* 5.0e9 elements: all channels, and a later launch's range with a gap. */
      {{3, 400, 2049, 2049, 0},
       1,
       0,
       400,
       {{nullptr, 0, 1}, {nullptr, 1, 257}, {nullptr, 300, 100}}},
      {{3, 400, 2049, 2049, 0}, 1, 258, 142, {{nullptr, 300, 99}}},
      /* 2^32 - 1 elements in 32 bits. */
      {{1, 65535, 65537, 1, 0}, 0, 0, 65535, {{nullptr, 0, 65534}, {nullptr, 65534, 1}}},
      {{1, 3, 1431655765, 1, 0}, 0, 1, 2, {{nullptr, 1, 1}}},
  };
  for (const index_case &ic : cases)
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      const gpu_dims y = dims(ic.y.n, ic.y.c, ic.y.h, ic.y.w, nhwc);
      /* The launch's elements: y's [N, width, H, W] in y's layout. */
      const gpu_dims range = dims(y.n, ic.width, y.h, y.w, nhwc);
      const int64_t n = count_of(range);
      ck_assert(ic.wide ? count_of(y) > UINT32_MAX : count_of(y) <= UINT32_MAX);
      const int64_t probes[] = {0,
                                1,
                                ic.width,
                                INT32_MAX,
                                (int64_t)INT32_MAX + 1,
                                n / 2 + 12345,
                                n - ic.width - 1,
                                n - 2,
                                n - 1,
                                (int64_t)(rng_next() % (uint64_t)n)};
      for (int64_t i : probes) {
        if (i < 0 || i >= n) continue;
        /* i's logical coordinates in the range, by the test's own unravelling. */
        int64_t pn, pc, ph, pw, r = i;
        if (nhwc) {
          pc = r % range.c, r /= range.c;
          pw = r % range.w, r /= range.w;
          ph = r % range.h, pn = r / range.h;
        } else {
          pw = r % range.w, r /= range.w;
          ph = r % range.h, r /= range.h;
          pc = r % range.c, pn = r / range.c;
        }
        const int64_t c = ic.lo + pc;
        int32_t want_part = -1;
        for (size_t k = 0; k < ic.parts.size(); k++)
          if (c >= ic.parts[k].start && c < ic.parts[k].start + ic.parts[k].channels)
            want_part = (int32_t)k;
        int64_t y_offset = -1, x_offset = -1;
        const int32_t part = gpu_host_concat_locate(y, ic.parts.data(), (int32_t)ic.parts.size(),
                                                    ic.lo, ic.width, i, ic.wide, &y_offset,
                                                    &x_offset);
        EXPECT(part == want_part && y_offset == layout_at(y, pn, c, ph, pw),
               DIMS_FMT " [%d, %d) element %lld: part %d at %lld, expected %d at %lld",
               DIMS_ARGS(y), ic.lo, ic.lo + ic.width, (long long)i, part, (long long)y_offset,
               want_part, (long long)layout_at(y, pn, c, ph, pw));
        if (part >= 0) {
          const gpu_concat_part &p = ic.parts[(size_t)part];
          const gpu_dims xd = dims(y.n, p.channels, y.h, y.w, nhwc);
          const int64_t want = layout_at(xd, pn, c - p.start, ph, pw);
          EXPECT(x_offset == want, DIMS_FMT " element %lld: offset %lld in part %d, expected %lld",
                 DIMS_ARGS(y), (long long)i, (long long)x_offset, part, (long long)want);
        }
      }
    }
}
END_TEST

/* ---- slice_channels and channel_shuffle (ABI 1.14) ------------------------------------- */

/* N, H, W of the channel moves' cases over every C in 1..257 (small), and of the few
 * larger ones. */
static const int32_t MOVE_NHW_SMALL[][3] = {{2, 1, 3}, {1, 3, 1}};
static const int32_t MOVE_NHW_LARGE[][3] = {{3, 5, 7}, {2, 9, 1}};

/* slice_channels' use of the concat kernels (ops_channels.c): the forward is
 * gpu_k_concat_backward from x into the one part {y, begin, count}, the backward
 * gpu_k_concat of the part {dy, begin, count} into dx, zeros around. Against
 * ref_slice_channels_forward / _backward, exactly; y and dx freshly allocated (the fake
 * fills them with NaN), so an element left unwritten shows. */
static void check_slice(gpu_dtype t, const int32_t nhw[3], int32_t nhwc, int32_t c, int32_t begin,
                        int32_t count) {
  const gpu_dims xd = dims(nhw[0], c, nhw[1], nhw[2], nhwc);
  const gpu_dims yd = dims(nhw[0], count, nhw[1], nhw[2], nhwc);
  const size_t size = gpu_dtype_size(t);
  char what[200];
  snprintf(what, sizeof what, "slice_channels %s x " DIMS_FMT " [%d, %d)", type_name(t),
           DIMS_ARGS(xd), begin, begin + count);
  const std::vector<float> x = round_all(t, random_floats(count_of(xd), -3.0f, 3.0f));
  std::unique_ptr<dev> xb(put(t, xd, x));
  dev y((size_t)count_of(yd) * size);
  gpu_concat_part part = {y.p, begin, count};
  ck_assert_msg(gpu_k_concat_backward(xb->p, xd, &part, 1, t, 0) == cudaSuccess, "%s", what);
  std::vector<float> want((size_t)count_of(yd));
  ref_slice_channels_forward(x.data(), shape_of(xd), begin, count, want.data());
  expect_same(what, get(t, yd, y), want);

  const std::vector<float> dy = round_all(t, random_floats(count_of(yd), -3.0f, 3.0f));
  std::unique_ptr<dev> dyb(put(t, yd, dy));
  dev dx((size_t)count_of(xd) * size);
  part.data = dyb->p;
  ck_assert_msg(gpu_k_concat(dx.p, xd, &part, 1, t, 0) == cudaSuccess, "%s: backward", what);
  std::vector<float> dwant((size_t)count_of(xd));
  ref_slice_channels_backward(dy.data(), shape_of(xd), begin, count, dwant.data());
  snprintf(what + strlen(what), sizeof what - strlen(what), ": backward");
  expect_same(what, get(t, xd, dx), dwant);
}

/* Slices of C channels: all of them, the first and the last one, both halves of a chunk
 * (odd C: uneven), and ones starting and ending at odd channels inside. */
static std::vector<std::pair<int32_t, int32_t>> slices_of(int32_t c) {
  std::vector<std::pair<int32_t, int32_t>> s = {{0, c}, {0, 1}, {c - 1, 1}};
  if (c >= 2) s.push_back({0, c / 2}), s.push_back({c / 2, c - c / 2});
  if (c >= 3) s.push_back({1, c - 2});
  if (c >= 6) s.push_back({3, c / 2 - 1}), s.push_back({c / 3 | 1, c / 3});
  return s;
}

START_TEST(slice_channels_matches_reference) {
  for (gpu_dtype t : FLOAT_TYPES)
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      for (const auto &nhw : MOVE_NHW_SMALL)
        for (int32_t c = 1; c <= 257; c++)
          for (const auto &s : slices_of(c)) check_slice(t, nhw, nhwc, c, s.first, s.second);
      static const int32_t large_c[] = {1, 7, 24, 116, 257};
      for (const auto &nhw : MOVE_NHW_LARGE)
        for (int32_t c : large_c)
          for (const auto &s : slices_of(c)) check_slice(t, nhw, nhwc, c, s.first, s.second);
    }
}
END_TEST

/* gpu_k_channel_shuffle in g groups, and its inverse (g' = C / g: the backward), against
 * ref_channel_shuffle_forward / _backward, exactly. */
static void check_shuffle(gpu_dtype t, const int32_t nhw[3], int32_t nhwc, int32_t c,
                          int32_t groups) {
  const gpu_dims d = dims(nhw[0], c, nhw[1], nhw[2], nhwc);
  const size_t size = gpu_dtype_size(t);
  char what[200];
  snprintf(what, sizeof what, "channel_shuffle %s " DIMS_FMT " in %d groups", type_name(t),
           DIMS_ARGS(d), groups);
  const std::vector<float> x = round_all(t, random_floats(count_of(d), -3.0f, 3.0f));
  std::unique_ptr<dev> xb(put(t, d, x));
  dev y((size_t)count_of(d) * size);
  ck_assert_msg(gpu_k_channel_shuffle(y.p, xb->p, d, groups, t, 0) == cudaSuccess, "%s", what);
  std::vector<float> want((size_t)count_of(d));
  ref_channel_shuffle_forward(x.data(), shape_of(d), groups, want.data());
  expect_same(what, get(t, d, y), want);

  const std::vector<float> dy = round_all(t, random_floats(count_of(d), -3.0f, 3.0f));
  std::unique_ptr<dev> dyb(put(t, d, dy));
  dev dx((size_t)count_of(d) * size);
  ck_assert_msg(gpu_k_channel_shuffle(dx.p, dyb->p, d, c / groups, t, 0) == cudaSuccess,
                "%s: backward", what);
  std::vector<float> dwant((size_t)count_of(d));
  ref_channel_shuffle_backward(dy.data(), shape_of(d), groups, dwant.data());
  snprintf(what + strlen(what), sizeof what - strlen(what), ": backward");
  expect_same(what, get(t, d, dx), dwant);
}

START_TEST(channel_shuffle_matches_reference) {
  static const int32_t groups[] = {1, 2, 3, 4};
  for (gpu_dtype t : FLOAT_TYPES)
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      for (const auto &nhw : MOVE_NHW_SMALL)
        for (int32_t c = 1; c <= 257; c++) {
          for (int32_t g : groups)
            if (c % g == 0) check_shuffle(t, nhw, nhwc, c, g);
          if (c > 4) check_shuffle(t, nhw, nhwc, c, c); /* every channel its own group */
        }
      static const int32_t large_c[] = {1, 12, 24, 116, 232};
      for (const auto &nhw : MOVE_NHW_LARGE)
        for (int32_t c : large_c)
          for (int32_t g : groups)
            if (c % g == 0) check_shuffle(t, nhw, nhwc, c, g);
    }
}
END_TEST

START_TEST(channel_shuffle_refuses) {
  dev a(4096), b(4096);
  const gpu_dims d = dims(2, 6, 3, 5, 1);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, 0, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, -2, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, 4, GPU_F16, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, 7, GPU_BF16, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, 2, GPU_I32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, a.p, d, 2, GPU_F32, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, dims(2, -6, 3, 5, 0), 2, GPU_F32, 0),
                   cudaErrorInvalidValue);
  /* Nothing to do: no launch, whatever the pointers. */
  ck_assert_int_eq(gpu_k_channel_shuffle(nullptr, nullptr, dims(0, 6, 3, 5, 0), 3, GPU_F32, 0),
                   cudaSuccess);
  ck_assert_int_eq(gpu_k_channel_shuffle(a.p, b.p, d, 6, GPU_F32, 0), cudaSuccess);
}
END_TEST

/* kernels_concat.cu's source in x of channel_shuffle's element i of y (host/kernels_host.cpp:
 * the same shuffle_source() the kernel runs), in its 32-bit (wide 0) or 64-bit (wide 1)
 * index type. */
extern "C" int64_t gpu_host_shuffle_source(gpu_dims d, int32_t groups, int64_t i, int wide);

/* The shuffle's index math on tensors too large to allocate, against this file's own
 * layout math: past 2^32 elements in 64 bits, up to 2^32 - 1 in 32. */
START_TEST(channel_shuffle_index_math_wide) {
  struct index_case {
    gpu_dims d;
    int32_t groups;
    int wide;
  };
  const index_case cases[] = {{{3, 400, 2049, 2049, 0}, 4, 1},
                              {{2, 232, 4097, 4097, 0}, 2, 1},
                              {{1, 65535, 65537, 1, 0}, 5, 0},
                              {{1, 3, 1431655765, 1, 0}, 3, 0}};
  for (const index_case &ic : cases)
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      const gpu_dims d = dims(ic.d.n, ic.d.c, ic.d.h, ic.d.w, nhwc);
      const int64_t n = count_of(d);
      ck_assert(ic.wide ? n > UINT32_MAX : n <= UINT32_MAX);
      const int64_t probes[] = {0,
                                1,
                                d.c,
                                INT32_MAX,
                                (int64_t)INT32_MAX + 1,
                                n / 2 + 7,
                                n - 2,
                                n - 1,
                                (int64_t)(rng_next() % (uint64_t)n)};
      for (int64_t i : probes) {
        int64_t pn, pc, ph, pw, r = i;
        if (nhwc) {
          pc = r % d.c, r /= d.c;
          pw = r % d.w, r /= d.w;
          ph = r % d.h, pn = r / d.h;
        } else {
          pw = r % d.w, r /= d.w;
          ph = r % d.h, r /= d.h;
          pc = r % d.c, pn = r / d.c;
        }
        const int64_t source = (pc % ic.groups) * (d.c / ic.groups) + pc / ic.groups;
        const int64_t want = layout_at(d, pn, source, ph, pw);
        const int64_t got = gpu_host_shuffle_source(d, ic.groups, i, ic.wide);
        EXPECT(got == want, DIMS_FMT " in %d groups, element %lld: source %lld, expected %lld",
               DIMS_ARGS(d), ic.groups, (long long)i, (long long)got, (long long)want);
      }
    }
}
END_TEST

/* ---- elementwise ------------------------------------------------------------------------- */

/* Values for the ReLUs: random, and the bounds exactly (0, -0, 6) now and then. */
static std::vector<float> relu_inputs(gpu_dtype t, int64_t n) {
  std::vector<float> x = random_floats(n, -8.0f, 8.0f);
  for (int64_t i = 0; i < n; i += 5)
    x[(size_t)i] = (i / 5) % 3 == 0 ? 0.0f : (i / 5) % 3 == 1 ? 6.0f : -0.0f;
  return round_all(t, x);
}

START_TEST(relu_family) {
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES)
    for (int64_t n : COUNTS) {
      if (t != GPU_F32 && n > 100000) continue; /* the long one once */
      const size_t bytes = (size_t)n * gpu_dtype_size(t);
      const std::vector<float> x = relu_inputs(t, n);
      const std::vector<float> dy = round_all(t, random_floats(n, -1.0f, 1.0f));
      std::unique_ptr<dev> dx_(put(t, flat(n), x)), ddy(put(t, flat(n), dy));
      dev y(bytes), y6(bytes), dx(bytes), dx6(bytes);
      std::vector<float> want((size_t)n), want6((size_t)n), g((size_t)n), g6((size_t)n);
      ref_relu_forward(x.data(), n, want.data());
      ref_relu6_forward(x.data(), n, want6.data());
      ref_relu_backward(want.data(), dy.data(), n, g.data());
      ref_relu6_backward(x.data(), dy.data(), n, g6.data()); /* from the input */

      ck_assert_int_eq(gpu_k_relu(y.p, dx_->p, t, n, 0), cudaSuccess);
      ck_assert_int_eq(gpu_k_relu6(y6.p, dx_->p, t, n, 0), cudaSuccess);
      snprintf(what, sizeof what, "relu %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), y), want);
      snprintf(what, sizeof what, "relu6 %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), y6), want6);

      /* The gradients from the outputs the kernels just wrote. */
      ck_assert_int_eq(gpu_k_relu_backward(dx.p, ddy->p, y.p, t, n, 0), cudaSuccess);
      ck_assert_int_eq(gpu_k_relu6_backward(dx6.p, ddy->p, y6.p, t, n, 0), cudaSuccess);
      snprintf(what, sizeof what, "relu_backward %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), dx), g);
      snprintf(what, sizeof what, "relu6_backward %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), dx6), g6);

      /* In place: y over x, dx over dy. */
      ck_assert_int_eq(gpu_k_relu(dx_->p, dx_->p, t, n, 0), cudaSuccess);
      snprintf(what, sizeof what, "relu in place %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), *dx_), want);
      ck_assert_int_eq(gpu_k_relu6_backward(ddy->p, ddy->p, y6.p, t, n, 0), cudaSuccess);
      snprintf(what, sizeof what, "relu6_backward in place %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), *ddy), g6);
    }
  dev any(16);
  ck_assert_int_eq(gpu_k_relu(any.p, any.p, GPU_I32, 3, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_relu(any.p, any.p, GPU_F16, 0, 0), cudaSuccess);
}
END_TEST

/* The activations of ABI 1.14 against ref_ops.c's (double, as torch.nn defines them):
 * fp32 within 1e-5 of the element plus the tensor's scale, fp16 and bf16 within the
 * device suite's tolerances (tests/support/tolerance.c), each plus 2^-24, their inputs and
 * gradients rounded to the type first, and backward fed the output the forward kernel wrote where
 * the slope comes from it (sigmoid, hard_sigmoid), against that output's slope. */
START_TEST(activations) {
  static const struct {
    int32_t act;
    uint32_t op;
    int32_t tanh;
    const char *name;
  } acts[] = {{GPU_ACT_SIGMOID, CNNB_OP_SIGMOID, 0, "sigmoid"},
              {GPU_ACT_SILU, CNNB_OP_SILU, 0, "silu"},
              {GPU_ACT_HARD_SIGMOID, CNNB_OP_HARD_SIGMOID, 0, "hard_sigmoid"},
              {GPU_ACT_HARD_SWISH, CNNB_OP_HARD_SWISH, 0, "hard_swish"},
              {GPU_ACT_GELU, CNNB_OP_GELU, 0, "gelu"},
              {GPU_ACT_GELU_TANH, CNNB_OP_GELU, 1, "gelu_tanh"}};
  char what[160];
  for (const auto &a : acts)
    for (gpu_dtype t : FLOAT_TYPES)
      for (int64_t n : {int64_t(1), int64_t(7), int64_t(257), int64_t(65537)}) {
        const double rel = t == GPU_F32 ? 1e-5 : t == GPU_F16 ? 1e-2 : 4e-2;
        const size_t bytes = (size_t)n * gpu_dtype_size(t);
        const std::vector<float> x = round_all(t, random_floats(n, -6.0f, 6.0f));
        const std::vector<float> dy = round_all(t, random_floats(n, -1.0f, 1.0f));
        std::unique_ptr<dev> dx_(put(t, flat(n), x)), ddy(put(t, flat(n), dy));
        dev y(bytes), dx(bytes);
        std::vector<float> want((size_t)n), g((size_t)n);
        ref_activation_forward(a.op, a.tanh, x.data(), n, want.data());
        ref_activation_backward(a.op, a.tanh, x.data(), dy.data(), n, g.data());
        auto within = [&](const std::vector<float> &ref) {
          double scale = 0.0;
          for (float v : ref) scale = fmax(scale, fabs(v));
          /* + 2^-24, fp16's subnormal step: gelu's far tail (-6e-10) stores as -0 there,
           * and 1 + erf(x) cancels in fp32 as it does in torch's kernel. */
          return [&ref, scale, rel](size_t i) { return rel * (fabs(ref[i]) + scale) + 0x1p-24; };
        };
        ck_assert_int_eq(gpu_k_act(y.p, dx_->p, a.act, t, n, 0), cudaSuccess);
        snprintf(what, sizeof what, "%s %s n %lld", a.name, type_name(t), (long long)n);
        expect_near(what, get(t, flat(n), y), want, within(want));
        const void *v = gpu_act_slope_from_output(a.act) ? y.p : dx_->p;
        if (gpu_act_slope_from_output(a.act)) {
          /* From the stored output, whose rounding (1 - y near y = 1) the slope inherits:
           * sigmoid's y (1 - y), hard_sigmoid's 1/6 where 0 < y < 1. */
          const std::vector<float> ys = get(t, flat(n), y);
          for (size_t i = 0; i < ys.size(); i++) {
            const double yi = ys[i];
            const double slope = a.act == GPU_ACT_SIGMOID ? yi * (1.0 - yi)
                                 : yi > 0.0 && yi < 1.0   ? 1.0 / 6.0
                                                          : 0.0;
            g[i] = (float)(dy[i] * slope);
          }
        }
        ck_assert_int_eq(gpu_k_act_backward(dx.p, ddy->p, v, a.act, t, n, 0), cudaSuccess);
        snprintf(what, sizeof what, "%s backward %s n %lld", a.name, type_name(t), (long long)n);
        expect_near(what, get(t, flat(n), dx), g, within(g));
      }
  dev any(16);
  ck_assert_int_eq(gpu_k_act(any.p, any.p, GPU_ACT_SILU, GPU_I32, 3, 0), cudaErrorInvalidValue);
}
END_TEST

START_TEST(add_and_accumulate) {
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES)
    for (int64_t n : COUNTS) {
      if (t != GPU_F32 && n > 100000) continue;
      const size_t bytes = (size_t)n * gpu_dtype_size(t);
      const std::vector<float> a = round_all(t, random_floats(n, -4.0f, 4.0f));
      const std::vector<float> b = round_all(t, random_floats(n, -4.0f, 4.0f));
      std::unique_ptr<dev> da(put(t, flat(n), a)), db(put(t, flat(n), b));
      std::vector<float> sum((size_t)n), sum_relu((size_t)n);
      ref_add_forward(a.data(), b.data(), n, sum.data()); /* fp32 sums */
      ref_relu_forward(sum.data(), n, sum_relu.data());
      for (int32_t relu = 0; relu < 2; relu++) {
        dev y(bytes);
        ck_assert_int_eq(gpu_k_add(y.p, da->p, db->p, t, n, relu, 0), cudaSuccess);
        snprintf(what, sizeof what, "add%s %s n %lld", relu ? "+relu" : "", type_name(t),
                 (long long)n);
        expect_same(what, get(t, flat(n), y), round_all(t, relu ? sum_relu : sum));
      }
      /* The add's backward: both gradients from one pass, through the fused ReLU's mask
       * (of y = relu(a + b)) or not, either one wanted alone. */
      std::unique_ptr<dev> dy(put(t, flat(n), a)), y(put(t, flat(n), round_all(t, sum_relu)));
      std::vector<float> masked((size_t)n);
      ref_relu_backward(round_all(t, sum_relu).data(), a.data(), n, masked.data());
      for (int32_t relu = 0; relu < 2; relu++)
        for (int32_t which = 0; which < 3; which++) { /* both, only ga, only gb */
          dev ga(bytes), gb(bytes);
          ck_assert_int_eq(gpu_k_add_backward(which == 2 ? NULL : ga.p, which == 1 ? NULL : gb.p,
                                              dy->p, relu ? y->p : NULL, t, n, 0),
                           cudaSuccess);
          snprintf(what, sizeof what, "add backward%s %s n %lld (%s)", relu ? "+relu" : "",
                   type_name(t), (long long)n,
                   which == 0   ? "both"
                   : which == 1 ? "ga"
                                : "gb");
          if (which != 2) expect_same(what, get(t, flat(n), ga), relu ? masked : a);
          if (which != 1) expect_same(what, get(t, flat(n), gb), relu ? masked : a);
        }
      ck_assert_int_eq(gpu_k_accumulate(da->p, db->p, t, n, 0), cudaSuccess);
      snprintf(what, sizeof what, "accumulate %s n %lld", type_name(t), (long long)n);
      expect_same(what, get(t, flat(n), *da), round_all(t, sum));
    }
}
END_TEST

START_TEST(dropout_mask_and_scale) {
  /* The mask is gpu_math.h's counter hash (its rate is unit_cuda_math's); here: that
   * the kernel applies it at each element's own index, and scales by fl(1 / keep). */
  static const float keeps[] = {0.5f, 0.9f, 1.0f};
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES)
    for (int64_t n : COUNTS)
      for (float keep : keeps) {
        if (t != GPU_F32 && n > 100000) continue;
        const std::vector<float> x = round_all(t, random_floats(n, -4.0f, 4.0f));
        std::unique_ptr<dev> dx_(put(t, flat(n), x));
        dev y((size_t)n * gpu_dtype_size(t)), dx((size_t)n * gpu_dtype_size(t));
        const uint32_t seed = 77;
        const uint64_t step = 5 + (uint64_t)n;
        ck_assert_int_eq(gpu_k_dropout(y.p, dx_->p, t, n, keep, seed, step, 0), cudaSuccess);
        ck_assert_int_eq(gpu_k_dropout_backward(dx.p, dx_->p, t, n, keep, seed, step, 0),
                         cudaSuccess);
        const float scale = 1.0f / keep;
        std::vector<float> want((size_t)n);
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++) {
          const bool k = gpu_dropout_keep(seed, step, i, keep);
          kept += k;
          want[(size_t)i] = round_to(t, k ? x[(size_t)i] * scale : 0.0f);
        }
        if (keep == 1.0f) ck_assert_int_eq(kept, n);
        snprintf(what, sizeof what, "dropout %s n %lld keep %g", type_name(t), (long long)n,
                 (double)keep);
        expect_same(what, get(t, flat(n), y), want);
        snprintf(what, sizeof what, "dropout_backward %s n %lld keep %g", type_name(t),
                 (long long)n, (double)keep);
        expect_same(what, get(t, flat(n), dx), want);
      }
  dev any(16);
  ck_assert_int_eq(gpu_k_dropout(any.p, any.p, GPU_F32, 3, 0.0f, 1, 1, 0), cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_dropout(any.p, any.p, GPU_F32, 3, 1.5f, 1, 1, 0), cudaErrorInvalidValue);
}
END_TEST

START_TEST(bias_and_relu) {
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES) FOR_SHAPES(d) {
      const std::vector<float> x = round_all(t, random_floats(count_of(d), -2.0f, 2.0f));
      const std::vector<float> bias = random_floats(d.c, -1.0f, 1.0f);
      dev db(bytes_of(bias));
      for (int variant = 0; variant < 4; variant++) {
        const bool with_bias = variant & 1;
        const int32_t relu = variant >> 1;
        std::unique_ptr<dev> y(put(t, d, x));
        ck_assert_int_eq(gpu_k_bias_relu(y->p, d, t, with_bias ? db.as<float>() : nullptr, relu, 0),
                         cudaSuccess);
        std::vector<float> want(x);
        for (int64_t n = 0; n < d.n; n++)
          for (int64_t c = 0; c < d.c; c++)
            for (int64_t h = 0; h < d.h; h++)
              for (int64_t w = 0; w < d.w; w++) {
                float &v = want[(size_t)nchw_at(d, n, c, h, w)];
                if (with_bias) v = v + bias[(size_t)c];
                if (relu) ref_relu_forward(&v, 1, &v);
                v = round_to(t, v);
              }
        snprintf(what, sizeof what, "bias_relu %s " DIMS_FMT " bias %d relu %d", type_name(t),
                 DIMS_ARGS(d), with_bias, relu);
        expect_same(what, get(t, d, *y), want);
      }
    }
}
END_TEST

/* Shapes for the bias gradient beyond SHAPES: several chunks of rows (NHWC: 118 chunks,
 * two tiles of 32 channels) or images (NCHW), a plane smaller than a block. */
static const gpu_dims BIAS_GRAD_SHAPES[] = {
    {3, 7, 57, 57, 0}, {3, 33, 100, 100, 0}, {3, 3, 5, 7, 0}, {1, 257, 3, 3, 0}};

static void check_bias_grad(gpu_dtype t, gpu_dims d) {
  char what[160];
  const std::vector<float> dy = round_all(t, random_floats(count_of(d), -1.0f, 1.0f));
  std::unique_ptr<dev> ddy(put(t, d, dy));
  const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(d);
  dev scratch(scratch_bytes), db((size_t)d.c * 4);
  ck_assert_int_eq(gpu_k_bias_grad(db.as<float>(), ddy->p, d, t,
                                   scratch_bytes ? scratch.as<float>() : nullptr, 0),
                   cudaSuccess);
  /* The reference: a dense layer's bias gradient over rows [N * H * W, C]. */
  const int64_t m = (int64_t)d.n * d.h * d.w;
  std::vector<float> rows((size_t)count_of(d)), want((size_t)d.c);
  std::vector<double> magnitude((size_t)d.c, 0.0);
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const float v = dy[(size_t)nchw_at(d, n, c, h, w)];
          rows[(size_t)(((n * d.h + h) * d.w + w) * d.c + c)] = v;
          magnitude[(size_t)c] += fabs(v);
        }
  float unused = 0.0f;
  ref_dense_backward_weights(&unused, rows.data(), (int)m, 0, d.c, &unused, want.data());
  const std::vector<float> got = values_of<float>(db.get());
  snprintf(what, sizeof what, "bias_grad %s " DIMS_FMT, type_name(t), DIMS_ARGS(d));
  expect_near(what, got, want,
              [&](size_t c) { return m > 1 ? (double)(m - 1) * 0x1p-24 * magnitude[c] : 0.0; });
  /* Deterministic: the same bits again. */
  ck_assert_int_eq(gpu_k_bias_grad(db.as<float>(), ddy->p, d, t,
                                   scratch_bytes ? scratch.as<float>() : nullptr, 0),
                   cudaSuccess);
  ck_assert_msg(values_of<float>(db.get()) == got, "%s: a second run gave other bits", what);
}

START_TEST(bias_grad_two_passes) {
  for (gpu_dtype t : FLOAT_TYPES) {
    FOR_SHAPES(d) check_bias_grad(t, d);
    for (const gpu_dims &s : BIAS_GRAD_SHAPES)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++) check_bias_grad(t, dims(s.n, s.c, s.h, s.w, nhwc));
  }
  /* No elements per channel: zeros, no scratch needed; no channels: nothing. */
  dev db(7 * 4);
  for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
    const gpu_dims empty = dims(0, 7, 5, 3, nhwc);
    ck_assert_uint_eq(gpu_k_bias_grad_scratch_bytes(empty), 0);
    ck_assert_int_eq(gpu_k_bias_grad(db.as<float>(), nullptr, empty, GPU_F16, nullptr, 0),
                     cudaSuccess);
    for (float v : values_of<float>(db.get())) ck_assert(v == 0.0f && !signbit(v));
  }
  ck_assert_int_eq(gpu_k_bias_grad(db.as<float>(), db.p, dims(1, 0, 3, 3, 0), GPU_F32, nullptr, 0),
                   cudaSuccess);
  ck_assert_int_eq(gpu_k_bias_grad(db.as<float>(), db.p, dims(1, 7, 1, 1, 0), GPU_F32, nullptr, 0),
                   cudaErrorInvalidValue); /* scratch needed */
}
END_TEST

/* ---- multiply, channel_scale, layer norm (ABI 1.14) ---------------------------------------- */

/* The elementwise products against ref_ops.c's (a double product rounded): fp32 exactly
 * (the product of two floats is exact in double, so both round it once), fp16 / bf16
 * within one ulp of the type (the kernel rounds to fp32, then to the type). The channel
 * sums (the gate's and the scale's gradients) as the bias gradient's: m products, each
 * rounded to fp32, summed in fp32, within 2 m 2^-24 sum |dy x| of the double reference
 * (plus one ulp of the type where they are stored in it), and the same bits on a second
 * run. */
static double product_tol(gpu_dtype t, float want) { return t == GPU_F32 ? 0.0 : ulp_of(t, want); }

/* Beyond SHAPES: several chunks of rows or images, a plane larger than a block, two tiles
 * of 32 channels, ConvNeXt's first width. */
static const gpu_dims PRODUCT_SHAPES[] = {{3, 7, 57, 57, 0}, {2, 33, 20, 20, 0}, {4, 96, 7, 7, 0}};

static void check_multiply(gpu_dtype t, gpu_dims d, int per_channel) {
  char what[200];
  const gpu_dims gd = per_channel ? dims(d.n, d.c, 1, 1, d.nhwc) : d;
  const cnnb_shape s = shape_of(d), gs = shape_of(gd);
  const int64_t count = count_of(d), gcount = count_of(gd), m = count / (gcount ? gcount : 1);
  const std::vector<float> x = round_all(t, random_floats(count, -2.0f, 2.0f));
  const std::vector<float> gate = round_all(t, random_floats(gcount, -1.5f, 1.5f));
  const std::vector<float> dy = round_all(t, random_floats(count, -1.0f, 1.0f));
  std::unique_ptr<dev> dx_(put(t, d, x)), dgate_(put(t, gd, gate)), ddy(put(t, d, dy));
  dev y((size_t)count * gpu_dtype_size(t)), dx((size_t)count * gpu_dtype_size(t));
  dev dgate((size_t)gcount * gpu_dtype_size(t));
  std::vector<float> want((size_t)count), want_dx((size_t)count), want_dgate((size_t)gcount);
  ref_multiply_forward(x.data(), s, gate.data(), gs, want.data());
  ref_multiply_backward(x.data(), s, gate.data(), gs, dy.data(), want_dx.data(), want_dgate.data());
  std::vector<double> magnitude((size_t)gcount, 0.0);
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const size_t i = (size_t)nchw_at(d, n, c, h, w);
          magnitude[per_channel ? (size_t)(n * d.c + c) : i] += fabs((double)dy[i] * x[i]);
        }
  for (float &v : want) v = round_to(t, v);
  for (float &v : want_dx) v = round_to(t, v);
  snprintf(what, sizeof what, "multiply %s " DIMS_FMT " gate %s", type_name(t), DIMS_ARGS(d),
           per_channel ? "[N, C, 1, 1]" : "of x's shape");
  ck_assert_int_eq(gpu_k_multiply(y.p, dx_->p, dgate_->p, per_channel, d, t, 0), cudaSuccess);
  expect_near(what, get(t, d, y), want, [&](size_t i) { return product_tol(t, want[i]); });
  ck_assert_int_eq(gpu_k_multiply(dx.p, ddy->p, dgate_->p, per_channel, d, t, 0), cudaSuccess);
  strcat(what, " dx");
  expect_near(what, get(t, d, dx), want_dx, [&](size_t i) { return product_tol(t, want_dx[i]); });
  what[strlen(what) - 2] = 0;
  strcat(what, "dgate");
  if (per_channel)
    ck_assert_int_eq(gpu_k_multiply_gate_grad(dgate.p, ddy->p, dx_->p, d, t, 0), cudaSuccess);
  else ck_assert_int_eq(gpu_k_multiply(dgate.p, ddy->p, dx_->p, 0, d, t, 0), cudaSuccess);
  const std::vector<uint8_t> bits = dgate.get();
  expect_near(what, get(t, gd, dgate), want_dgate, [&](size_t k) {
    const double rounding = t == GPU_F32 ? 0.0 : ulp_of(t, want_dgate[k]);
    return m > 1 ? 2.0 * (double)m * 0x1p-24 * magnitude[k] + rounding
                 : product_tol(t, want_dgate[k]);
  });
  if (per_channel) { /* deterministic */
    ck_assert_int_eq(gpu_k_multiply_gate_grad(dgate.p, ddy->p, dx_->p, d, t, 0), cudaSuccess);
    ck_assert_msg(dgate.get() == bits, "%s: a second run gave other bits", what);
  }
}

START_TEST(multiply_and_gate_grad) {
  for (gpu_dtype t : FLOAT_TYPES)
    for (int per_channel = 0; per_channel < 2; per_channel++) {
      FOR_SHAPES(d) check_multiply(t, d, per_channel);
      for (const gpu_dims &s : PRODUCT_SHAPES)
        for (int32_t nhwc = 0; nhwc < 2; nhwc++)
          check_multiply(t, dims(s.n, s.c, s.h, s.w, nhwc), per_channel);
    }
  /* multiply(x, x)'s one-buffer gradient as ops_multiply.c forms it: dy * x, doubled in
   * place, is fl(2 dy x) exactly. */
  for (gpu_dtype t : FLOAT_TYPES) {
    const gpu_dims d = dims(3, 7, 5, 3, 1);
    const int64_t count = count_of(d);
    const std::vector<float> x = round_all(t, random_floats(count, -2.0f, 2.0f));
    const std::vector<float> dy = round_all(t, random_floats(count, -1.0f, 1.0f));
    std::unique_ptr<dev> dx_(put(t, d, x)), ddy(put(t, d, dy));
    dev g((size_t)count * gpu_dtype_size(t));
    ck_assert_int_eq(gpu_k_multiply(g.p, ddy->p, dx_->p, 0, d, t, 0), cudaSuccess);
    ck_assert_int_eq(gpu_k_add(g.p, g.p, g.p, t, count, 0, 0), cudaSuccess);
    std::vector<float> want((size_t)count);
    for (size_t i = 0; i < want.size(); i++) want[i] = 2.0f * round_to(t, dy[i] * x[i]);
    expect_same("multiply(x, x) doubled", get(t, d, g), want);
  }
  dev any(64);
  ck_assert_int_eq(gpu_k_multiply(any.p, any.p, any.p, 0, dims(1, 3, 1, 1, 0), GPU_I32, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_multiply(any.p, any.p, any.p, 0, dims(-1, 3, 1, 1, 0), GPU_F32, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_multiply_gate_grad(any.p, any.p, any.p, dims(65536, 1, 1, 1, 0), GPU_F32,
                                            0),
                   cudaErrorInvalidValue);
}
END_TEST

static void check_channel_scale(gpu_dtype t, gpu_dims d) {
  char what[200];
  const cnnb_shape s = shape_of(d);
  const int64_t count = count_of(d), m = (int64_t)d.n * d.h * d.w;
  const std::vector<float> x = round_all(t, random_floats(count, -2.0f, 2.0f));
  const std::vector<float> dy = round_all(t, random_floats(count, -1.0f, 1.0f));
  const std::vector<float> scale = random_floats(d.c, -1.5f, 1.5f);
  std::unique_ptr<dev> dx_(put(t, d, x)), ddy(put(t, d, dy));
  dev dscale_(bytes_of(scale)), y((size_t)count * gpu_dtype_size(t));
  dev dx((size_t)count * gpu_dtype_size(t)), ds((size_t)d.c * 4);
  const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(d);
  dev scratch(scratch_bytes);
  std::vector<float> want((size_t)count), want_dx((size_t)count), want_ds((size_t)d.c);
  ref_channel_scale_forward(x.data(), s, scale.data(), want.data());
  ref_channel_scale_backward(x.data(), s, scale.data(), dy.data(), want_dx.data(), want_ds.data());
  std::vector<double> magnitude((size_t)d.c, 0.0);
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const size_t i = (size_t)nchw_at(d, n, c, h, w);
          magnitude[(size_t)c] += fabs((double)dy[i] * x[i]);
        }
  for (float &v : want) v = round_to(t, v);
  for (float &v : want_dx) v = round_to(t, v);
  snprintf(what, sizeof what, "channel_scale %s " DIMS_FMT, type_name(t), DIMS_ARGS(d));
  ck_assert_int_eq(gpu_k_channel_scale(y.p, dx_->p, dscale_.as<float>(), d, t, 0), cudaSuccess);
  expect_near(what, get(t, d, y), want, [&](size_t i) { return product_tol(t, want[i]); });
  ck_assert_int_eq(gpu_k_channel_scale(dx.p, ddy->p, dscale_.as<float>(), d, t, 0), cudaSuccess);
  strcat(what, " dx");
  expect_near(what, get(t, d, dx), want_dx, [&](size_t i) { return product_tol(t, want_dx[i]); });
  what[strlen(what) - 2] = 0;
  strcat(what, "dscale");
  float *sp = scratch_bytes ? scratch.as<float>() : nullptr;
  ck_assert_int_eq(gpu_k_channel_dot(ds.as<float>(), ddy->p, dx_->p, d, t, sp, 0), cudaSuccess);
  const std::vector<float> got = values_of<float>(ds.get());
  expect_near(what, got, want_ds,
              [&](size_t c) { return m > 1 ? 2.0 * (double)m * 0x1p-24 * magnitude[c] : 0.0; });
  ck_assert_int_eq(gpu_k_channel_dot(ds.as<float>(), ddy->p, dx_->p, d, t, sp, 0), cudaSuccess);
  ck_assert_msg(values_of<float>(ds.get()) == got, "%s: a second run gave other bits", what);
}

START_TEST(channel_scale_and_dot) {
  for (gpu_dtype t : FLOAT_TYPES) {
    FOR_SHAPES(d) check_channel_scale(t, d);
    for (const gpu_dims &s : PRODUCT_SHAPES)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++)
        check_channel_scale(t, dims(s.n, s.c, s.h, s.w, nhwc));
  }
  dev any(64);
  ck_assert_int_eq(gpu_k_channel_dot(any.as<float>(), any.p, any.p, dims(1, 7, 1, 1, 0), GPU_F32,
                                     nullptr, 0),
                   cudaErrorInvalidValue); /* scratch needed */
  ck_assert_int_eq(gpu_k_channel_scale(any.p, any.p, any.as<float>(), dims(1, 3, 1, 1, 0), GPU_I32,
                                       0),
                   cudaErrorInvalidValue);
}
END_TEST

/* Layer norm against ref_ops.c's (double, on the inputs rounded to the type). The kernel
 * sums C values per position in fp32 (the mean, the centred squares, dx's two sums) and m =
 * N * H * W per channel (the parameter gradients), so the bounds grow with those counts:
 *  - y within (C + 8) 2^-22 of max |y| (a tolerance of the whole tensor: the rounding of
 *    x - mean scales with the position's spread, not with the element), plus one ulp of
 *    the type for fp16 / bf16;
 *  - mean within C 2^-23 max |x|, inv_std within (C + 8) 2^-22 relative;
 *  - dx within (C + 8) 2^-21 of max |dx|, plus one ulp of the type;
 *  - dscale, doffset within (m + C + 8) 2^-22 of the channel's sum of |terms| (dy x^, dy);
 * the backward fed the reference's statistics, and it is the same bits on a second run.
 * Inference (no statistics kept) writes the same y as training. */
static void check_layer_norm(gpu_dtype t, gpu_dims d, float epsilon) {
  char what[200];
  const cnnb_shape s = shape_of(d);
  const int64_t count = count_of(d), positions = (int64_t)d.n * d.h * d.w;
  const std::vector<float> x = round_all(t, random_floats(count, -2.0f, 3.0f));
  const std::vector<float> dy = round_all(t, random_floats(count, -1.0f, 1.0f));
  const std::vector<float> scale = random_floats(d.c, 0.5f, 1.5f);
  const std::vector<float> offset = random_floats(d.c, -0.5f, 0.5f);
  std::vector<float> want((size_t)count), mean((size_t)positions), var((size_t)positions);
  std::vector<float> want_dx((size_t)count), want_ds((size_t)d.c), want_do((size_t)d.c);
  ref_layer_norm_forward(x.data(), s, scale.data(), offset.data(), epsilon, want.data(),
                         mean.data(), var.data());
  ref_layer_norm_backward(x.data(), s, scale.data(), dy.data(), mean.data(), var.data(), epsilon,
                          want_dx.data(), want_ds.data(), want_do.data());
  std::vector<float> inv_std((size_t)positions);
  for (size_t p = 0; p < inv_std.size(); p++)
    inv_std[p] = (float)(1.0 / sqrt((double)var[p] + epsilon));
  double max_x = 0.0, max_y = 0.0, max_dx = 0.0;
  for (float v : x) max_x = fmax(max_x, fabs(v));
  for (float v : want) max_y = fmax(max_y, fabs(v));
  for (float v : want_dx) max_dx = fmax(max_dx, fabs(v));
  std::vector<double> mag_ds((size_t)d.c, 0.0), mag_do((size_t)d.c, 0.0);
  for (int64_t n = 0; n < d.n; n++)
    for (int64_t c = 0; c < d.c; c++)
      for (int64_t h = 0; h < d.h; h++)
        for (int64_t w = 0; w < d.w; w++) {
          const size_t i = (size_t)nchw_at(d, n, c, h, w), p = (size_t)((n * d.h + h) * d.w + w);
          mag_ds[(size_t)c] += fabs((double)dy[i] * ((double)x[i] - mean[p]) * inv_std[p]);
          mag_do[(size_t)c] += fabs((double)dy[i]);
        }
  const double cs = (double)d.c + 8.0;
  std::unique_ptr<dev> dx_(put(t, d, x)), ddy(put(t, d, dy));
  dev dscale(bytes_of(scale)), doffset(bytes_of(offset));
  dev dmean(bytes_of(mean)), dinv(bytes_of(inv_std)); /* the reference's, for the backward */
  dev y((size_t)count * gpu_dtype_size(t)), y2((size_t)count * gpu_dtype_size(t));
  dev dx((size_t)count * gpu_dtype_size(t));
  dev kmean((size_t)positions * 4), kinv((size_t)positions * 4);
  dev ds((size_t)d.c * 4), dof((size_t)d.c * 4);
  const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(d);
  dev scratch(scratch_bytes);
  float *sp = scratch_bytes ? scratch.as<float>() : nullptr;

  snprintf(what, sizeof what, "layer_norm %s " DIMS_FMT " eps %g", type_name(t), DIMS_ARGS(d),
           (double)epsilon);
  ck_assert_int_eq(gpu_k_layer_norm(y.p, dx_->p, dscale.as<float>(), doffset.as<float>(), epsilon,
                                    kmean.as<float>(), kinv.as<float>(), d, t, 0),
                   cudaSuccess);
  expect_near(what, get(t, d, y), want, [&](size_t i) {
    return cs * 0x1p-22 * max_y + (t == GPU_F32 ? 0.0 : ulp_of(t, want[i]));
  });
  const std::vector<float> got_mean = values_of<float>(kmean.get());
  const std::vector<float> got_inv = values_of<float>(kinv.get());
  expect_near("layer_norm mean", got_mean, mean,
              [&](size_t) { return (double)d.c * 0x1p-23 * max_x; });
  expect_near("layer_norm inv_std", got_inv, inv_std,
              [&](size_t p) { return cs * 0x1p-22 * inv_std[p]; });
  ck_assert_int_eq(gpu_k_layer_norm(y2.p, dx_->p, dscale.as<float>(), doffset.as<float>(), epsilon,
                                    nullptr, nullptr, d, t, 0),
                   cudaSuccess);
  ck_assert_msg(y2.get() == y.get(), "%s: inference wrote another y than training", what);

  ck_assert_int_eq(gpu_k_layer_norm_backward(dx.p, ds.as<float>(), dof.as<float>(), ddy->p, dx_->p,
                                             dscale.as<float>(), dmean.as<float>(),
                                             dinv.as<float>(), d, t, sp, 0),
                   cudaSuccess);
  const std::vector<uint8_t> dx_bits = dx.get(), ds_bits = ds.get(), do_bits = dof.get();
  for (float &v : want_dx) v = round_to(t, v);
  strcat(what, " dx");
  expect_near(what, get(t, d, dx), want_dx, [&](size_t i) {
    return cs * 0x1p-21 * max_dx + (t == GPU_F32 ? 0.0 : ulp_of(t, want_dx[i]));
  });
  const double ms = (double)positions + cs;
  what[strlen(what) - 2] = 0;
  strcat(what, "dscale");
  expect_near(what, values_of<float>(ds_bits), want_ds,
              [&](size_t c) { return ms * 0x1p-22 * mag_ds[c]; });
  what[strlen(what) - 6] = 0;
  strcat(what, "doffset");
  expect_near(what, values_of<float>(do_bits), want_do,
              [&](size_t c) { return ms * 0x1p-22 * mag_do[c]; });
  /* deterministic, and dx is optional */
  ck_assert_int_eq(gpu_k_layer_norm_backward(dx.p, ds.as<float>(), dof.as<float>(), ddy->p, dx_->p,
                                             dscale.as<float>(), dmean.as<float>(),
                                             dinv.as<float>(), d, t, sp, 0),
                   cudaSuccess);
  ck_assert_msg(dx.get() == dx_bits && ds.get() == ds_bits && dof.get() == do_bits,
                "%s: a second run gave other bits", what);
  ck_assert_int_eq(gpu_k_layer_norm_backward(nullptr, ds.as<float>(), dof.as<float>(), ddy->p,
                                             dx_->p, dscale.as<float>(), dmean.as<float>(),
                                             dinv.as<float>(), d, t, sp, 0),
                   cudaSuccess);
  ck_assert_msg(ds.get() == ds_bits && dof.get() == do_bits,
                "%s: without dx, other parameter gradients", what);
}

START_TEST(layer_norm) {
  for (gpu_dtype t : FLOAT_TYPES) {
    FOR_SHAPES(d) check_layer_norm(t, d, 1e-5f);
    for (const gpu_dims &s : PRODUCT_SHAPES)
      for (int32_t nhwc = 0; nhwc < 2; nhwc++)
        check_layer_norm(t, dims(s.n, s.c, s.h, s.w, nhwc), 1e-6f);
  }
  dev any(64);
  ck_assert_int_eq(gpu_k_layer_norm(any.p, any.p, any.as<float>(), any.as<float>(), 1e-5f,
                                    any.as<float>(), nullptr, dims(1, 3, 1, 1, 0), GPU_F32, 0),
                   cudaErrorInvalidValue); /* mean without inv_std */
  ck_assert_int_eq(gpu_k_layer_norm(any.p, any.p, any.as<float>(), any.as<float>(), 0.0f, nullptr,
                                    nullptr, dims(1, 3, 1, 1, 0), GPU_F32, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_layer_norm(any.p, any.p, any.as<float>(), any.as<float>(), 1e-5f, nullptr,
                                    nullptr, dims(1, 3, 1, 1, 0), GPU_I32, 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_layer_norm_backward(any.p, any.as<float>(), any.as<float>(), any.p, any.p,
                                             any.as<float>(), any.as<float>(), any.as<float>(),
                                             dims(1, 7, 1, 1, 0), GPU_F32, nullptr, 0),
                   cudaErrorInvalidValue); /* scratch needed */
}
END_TEST

/* ---- softmax cross-entropy -------------------------------------------------------------- */

START_TEST(softmax_xent) {
  /* (N, K): one row, odd ones, more rows than the forward's 32 warps (warps take 3 rows),
   * a row wider than a warp. */
  static const int32_t cases[][2] = {{1, 1}, {3, 3}, {7, 257}, {70, 33}, {33, 1000}, {1, 40}};
  static const float scales[] = {1.0f, 128.0f};
  static const float smoothings[] = {0.0f, 0.1f}; /* none, and ImageNet recipes' */
  char what[160];
  for (float sm : smoothings)
    for (gpu_dtype t : FLOAT_TYPES)
      for (const auto &nk : cases) {
        const int32_t n = nk[0], k = nk[1];
        const std::vector<float> logits = round_all(t, random_floats((int64_t)n * k, -8.0f, 8.0f));
        std::vector<int32_t> labels((size_t)n);
        for (int32_t &l : labels) l = (int32_t)(rng_next() % (uint64_t)k);
        std::unique_ptr<dev> dlogits(put(t, flat((int64_t)n * k), logits));
        dev dlabels(bytes_of(labels)), loss(4), probs((size_t)n * k * 4);
        dev errors(bytes_of(std::vector<gpu_kernel_errors>(1, gpu_kernel_errors{0, 0, 0, 0})));
        ck_assert_int_eq(gpu_k_xent_forward(loss.as<float>(), probs.as<float>(), dlogits->p, t,
                                            dlabels.as<int32_t>(), n, k, sm,
                                            errors.as<gpu_kernel_errors>(), 0),
                         cudaSuccess);
        std::vector<float> ref_probs((size_t)n * k);
        const double ref_loss = ref_softmax_xent_forward(logits.data(), n, k, labels.data(), sm,
                                                         ref_probs.data());
        const float got_loss = values_of<float>(loss.get())[0];
        ck_assert_msg(fabs(got_loss - ref_loss) <= 0x1p-16 * fmax(1.0, fabs(ref_loss)),
                      "xent_forward %s N %d K %d smoothing %g: loss %.9g, reference %.9g",
                      type_name(t), n, k, (double)sm, (double)got_loss, ref_loss);
        snprintf(what, sizeof what, "xent_forward %s N %d K %d probs", type_name(t), n, k);
        expect_near(what, values_of<float>(probs.get()), ref_probs,
                    [&](size_t i) { return 32 * ulp_of(GPU_F32, ref_probs[i]); });
        ck_assert_int_eq(values_of<gpu_kernel_errors>(errors.get())[0].bad_label_count, 0);

        /* The backward on the reference's probabilities: exactly fl(s fl(p - spread)), less
         * fl(s peak) at the label, per element (s = fl(scale / N), spread = fl(sm / K), peak
         * = fl(1 - sm)), and near the reference's own gradient. */
        dev dprobs(bytes_of(ref_probs));
        for (float scale : scales) {
          dev g((size_t)n * k * gpu_dtype_size(t));
          ck_assert_int_eq(gpu_k_xent_backward(g.p, t, dprobs.as<float>(), dlabels.as<int32_t>(), n,
                                               k, sm, scale, 0),
                           cudaSuccess);
          const float s = scale / (float)n, spread = sm / (float)k, peak = 1.0f - sm;
          std::vector<float> exact((size_t)n * k), ref((size_t)n * k);
          for (int64_t i = 0; i < (int64_t)n * k; i++) {
            const float sp = s * (ref_probs[(size_t)i] - spread);
            exact[(size_t)i] = round_to(t, i % k == labels[(size_t)(i / k)] ? sp - s * peak : sp);
          }
          ref_softmax_xent_backward(logits.data(), n, k, labels.data(), sm, scale, ref.data());
          const std::vector<float> got = get(t, flat((int64_t)n * k), g);
          snprintf(what, sizeof what, "xent_backward %s N %d K %d scale %g", type_name(t), n, k,
                   (double)scale);
          expect_same(what, got, exact);
          expect_near(what, got, ref, [&](size_t i) {
            return (double)s * 0x1p-18 + (t == GPU_F32 ? 0.0 : ulp_of(t, ref[i]));
          });
        }
      }

  /* Labels outside [0, K): counted, their rows add nothing and get no gradient. */
  const int32_t n = 5, k = 7;
  const std::vector<float> logits = random_floats(n * k, -8.0f, 8.0f);
  const std::vector<int32_t> labels = {0, -1, 3, 7, 2};
  dev dlogits(bytes_of(logits)), dlabels(bytes_of(labels)), loss(4), probs(n * k * 4), g(n * k * 4);
  dev errors(bytes_of(std::vector<gpu_kernel_errors>(1, gpu_kernel_errors{0, 0, 0, 0})));
  ck_assert_int_eq(gpu_k_xent_forward(loss.as<float>(), probs.as<float>(), dlogits.p, GPU_F32,
                                      dlabels.as<int32_t>(), n, k, 0.0f,
                                      errors.as<gpu_kernel_errors>(), 0),
                   cudaSuccess);
  const gpu_kernel_errors e = values_of<gpu_kernel_errors>(errors.get())[0];
  ck_assert_int_eq(e.bad_label_count, 2);
  ck_assert_int_eq(e.classes, k);
  ck_assert_msg((e.first_bad_label == -1 && e.first_bad_index == 1) ||
                    (e.first_bad_label == 7 && e.first_bad_index == 3),
                "first bad label %d at %d", e.first_bad_label, e.first_bad_index);
  double total = 0.0;
  for (int32_t i = 0; i < n; i++)
    if (labels[(size_t)i] >= 0 && labels[(size_t)i] < k)
      total += ref_softmax_xent_forward(&logits[(size_t)(i * k)], 1, k, &labels[(size_t)i], 0.0f,
                                        nullptr);
  const float got_loss = values_of<float>(loss.get())[0];
  ck_assert_msg(fabs(got_loss - total / n) <= 0x1p-16 * fmax(1.0, fabs(total / n)),
                "loss with bad labels %.9g, reference %.9g", (double)got_loss, total / n);
  ck_assert_int_eq(gpu_k_xent_backward(g.p, GPU_F32, probs.as<float>(), dlabels.as<int32_t>(), n, k,
                                       0.0f, 1.0f, 0),
                   cudaSuccess);
  const std::vector<float> grad = values_of<float>(g.get());
  for (int32_t j = 0; j < k; j++)
    ck_assert(grad[(size_t)(1 * k + j)] == 0.0f && grad[(size_t)(3 * k + j)] == 0.0f);
}
END_TEST

/* ---- optimizer and loss scaling ------------------------------------------------------------ */

START_TEST(update_matches_reference) {
  struct rule_case {
    const char *name;
    uint32_t rule;
    int32_t nesterov;
    float weight_decay, clip, grad_scale;
  };
  static const rule_case rules[] = {
      {"sgd", CNNB_OPT_SGD, 0, 0.0f, 0.0f, 1.0f},
      {"sgd wd clip", CNNB_OPT_SGD, 0, 4e-5f, 0.5f, 0.25f},
      {"momentum", CNNB_OPT_MOMENTUM, 0, 1e-4f, 0.0f, 1.0f},
      {"nesterov", CNNB_OPT_MOMENTUM, 1, 1e-4f, 0.0f, 0.5f},
      {"rmsprop", CNNB_OPT_RMSPROP, 0, 0.0f, 0.0f, 1.0f},
      {"adam", CNNB_OPT_ADAM, 0, 1e-4f, 1.0f, 1.0f},
  };
  for (const rule_case &r : rules)
    for (int64_t n : COUNTS) {
      if (n > 100000) continue;
      std::vector<float> w = random_floats(n, -1.0f, 1.0f), g = random_floats(n, -2.0f, 2.0f),
                         s1 = random_floats(n, -0.5f, 0.5f), s2 = random_floats(n, 0.0f, 0.5f);
      if (n > 7) g[3] = INFINITY, g[5] = NAN; /* a broken step stays visible */
      dev dw(bytes_of(w)), dg(bytes_of(g)), ds1(bytes_of(s1)), ds2(bytes_of(s2));
      cnnb_update u = {};
      u.struct_size = sizeof u;
      u.rule = r.rule;
      u.count = n;
      u.params = w.data();
      u.grads = g.data();
      u.slot1 = s1.data();
      u.slot2 = s2.data();
      u.learning_rate = 0.1f;
      u.weight_decay = r.weight_decay;
      u.grad_scale = r.grad_scale;
      u.clip = r.clip;
      u.momentum = 0.9f;
      u.rho = 0.9f;
      u.epsilon = r.rule == CNNB_OPT_RMSPROP ? 1.0f : 1e-8f;
      u.beta1 = 0.9f;
      u.beta2 = 0.999f;
      u.nesterov = r.nesterov;
      u.step = 6;
      gpu_update_args a = {};
      a.rule = (int32_t)u.rule;
      a.nesterov = u.nesterov;
      a.count = n;
      a.params = dw.as<float>();
      a.grads = dg.as<float>();
      a.slot1 = ds1.as<float>();
      a.slot2 = ds2.as<float>();
      a.learning_rate = u.learning_rate;
      a.weight_decay = u.weight_decay;
      a.grad_scale = u.grad_scale;
      a.clip = u.clip;
      a.momentum = u.momentum;
      a.rho = u.rho;
      a.epsilon = u.epsilon;
      a.beta1 = u.beta1;
      a.beta2 = u.beta2;
      a.adam_lr_t = gpu_adam_lr_t(u.learning_rate, u.beta1, u.beta2, u.step);
      ck_assert_int_eq(gpu_k_update(&a, 0), cudaSuccess);
      cnnb_update_reference(&u);
      const std::vector<float> gw = values_of<float>(dw.get()), g1 = values_of<float>(ds1.get()),
                               g2 = values_of<float>(ds2.get());
      for (int64_t i = 0; i < n; i++) {
        const size_t j = (size_t)i;
        EXPECT(memcmp(&gw[j], &w[j], 4) == 0 && memcmp(&g1[j], &s1[j], 4) == 0 &&
                   memcmp(&g2[j], &s2[j], 4) == 0,
               "update %s n %lld [%lld]: w %a s1 %a s2 %a, reference %a %a %a", r.name,
               (long long)n, (long long)i, (double)gw[j], (double)g1[j], (double)g2[j],
               (double)w[j], (double)s1[j], (double)s2[j]);
      }
    }
  gpu_update_args bad = {};
  bad.rule = 9;
  bad.count = 3;
  ck_assert_int_eq(gpu_k_update(&bad, 0), cudaErrorInvalidValue);
  bad.rule = CNNB_OPT_SGD;
  bad.count = 0;
  ck_assert_int_eq(gpu_k_update(&bad, 0), cudaSuccess);
}
END_TEST

START_TEST(all_finite_flag) {
  for (int64_t n : COUNTS) {
    std::vector<float> x = random_floats(n, -1e30f, 1e30f);
    dev flag(4);
    /* -1: all finite; else the position of an inf / NaN: first, middle, last. */
    const int64_t where[] = {-1, 0, n / 2, n - 1};
    for (int64_t at : where)
      for (float bad : {INFINITY, -INFINITY, NAN}) {
        std::vector<float> v(x);
        if (at >= 0) v[(size_t)at] = bad;
        dev dv(bytes_of(v));
        ck_assert_int_eq(gpu_k_all_finite(flag.as<int32_t>(), dv.as<float>(), n, 0), cudaSuccess);
        ck_assert_msg(values_of<int32_t>(flag.get())[0] == (at < 0),
                      "all_finite n %lld, %g at %lld: flag %d", (long long)n, (double)bad,
                      (long long)at, values_of<int32_t>(flag.get())[0]);
        if (at < 0) break;
      }
  }
  dev flag(bytes_of(std::vector<int32_t>{0}));
  ck_assert_int_eq(gpu_k_all_finite(flag.as<int32_t>(), nullptr, 0, 0), cudaSuccess);
  ck_assert_int_eq(values_of<int32_t>(flag.get())[0], 1);
}
END_TEST

/* ---- pooling and LRN ------------------------------------------------------------------------- */

struct pool_case {
  int32_t kh, kw, sh, sw, pt, pb, pl, pr;
};
/* TF SAME's one-sided padding, symmetric, none, windows entirely in the padding (empty:
 * -inf / 0, no gradient), a window taller than wide, strides wider than windows. */
static const pool_case POOLS[] = {{3, 3, 2, 2, 1, 1, 1, 1}, {3, 3, 2, 2, 0, 1, 0, 1},
                                  {2, 2, 2, 2, 0, 0, 0, 0}, {1, 1, 1, 1, 0, 0, 0, 0},
                                  {3, 1, 1, 2, 2, 0, 0, 1}, {5, 3, 3, 2, 2, 1, 1, 0},
                                  {1, 1, 1, 1, 2, 2, 0, 1}, {2, 3, 3, 1, 1, 0, 2, 2}};
static const gpu_dims POOL_SHAPES[] = {
    {1, 1, 1, 1, 0}, {3, 3, 5, 7, 0}, {1, 7, 9, 13, 0}, {3, 257, 3, 5, 0}, {1, 1, 6, 1, 0}};

/* Pool inputs: ties (a few small integers) half the time, -inf now and then. */
static std::vector<float> pool_inputs(gpu_dtype t, int64_t n, bool with_inf) {
  std::vector<float> x((size_t)n);
  for (float &v : x) {
    const uint64_t r = rng_next();
    v = r % 2 ? (float)((int)(r >> 8 & 3) - 1) : rng_uniform(-3.0f, 3.0f);
    if (with_inf && r % 17 == 0) v = -INFINITY;
  }
  return round_all(t, x);
}

START_TEST(pool_matches_reference) {
  char what[220];
  for (gpu_dtype t : FLOAT_TYPES)
    for (const gpu_dims &s : POOL_SHAPES)
      for (const pool_case &p : POOLS)
        for (int32_t nhwc = 0; nhwc < 2; nhwc++)
          for (int32_t max = 0; max < 2; max++) {
            if (s.h + p.pt + p.pb < p.kh || s.w + p.pl + p.pr < p.kw) continue;
            const gpu_dims xd = dims(s.n, s.c, s.h, s.w, nhwc);
            const gpu_dims yd = dims(s.n, s.c, (s.h + p.pt + p.pb - p.kh) / p.sh + 1,
                                     (s.w + p.pl + p.pr - p.kw) / p.sw + 1, nhwc);
            const ref_window rw = {p.kh, p.kw, p.sh, p.sw, p.pt, p.pb, p.pl, p.pr, 1, 1, 1};
            const gpu_pool_window win = {p.kh, p.kw, p.sh, p.sw, p.pt, p.pl, max};
            const std::vector<float> x = pool_inputs(t, count_of(xd), max);
            const std::vector<float> dy = round_all(t, random_floats(count_of(yd), -1.0f, 1.0f));
            std::unique_ptr<dev> dx_(put(t, xd, x)), ddy(put(t, yd, dy));
            const size_t size = gpu_dtype_size(t);
            dev y((size_t)count_of(yd) * size), argmax((size_t)count_of(yd));
            dev dx((size_t)count_of(xd) * size), dx2((size_t)count_of(xd) * size);
            std::vector<float> want((size_t)count_of(yd)), gwant((size_t)count_of(xd));
            if (max) {
              ref_max_pool_forward(x.data(), shape_of(xd), &rw, want.data(), shape_of(yd));
              ref_max_pool_backward(x.data(), shape_of(xd), dy.data(), shape_of(yd), &rw,
                                    gwant.data());
            } else {
              ref_avg_pool_forward(x.data(), shape_of(xd), &rw, want.data(), shape_of(yd));
              ref_avg_pool_backward(dy.data(), shape_of(yd), &rw, gwant.data(), shape_of(xd));
            }
            const int passes = max ? 2 : 1; /* max: with and without the argmax record */
            for (int rec = 0; rec < passes; rec++) {
              uint8_t *am = rec ? argmax.as<uint8_t>() : nullptr;
              snprintf(what, sizeof what,
                       "%s pool %s x " DIMS_FMT " win %dx%d/%d,%d pad %d,%d,%d,%d%s",
                       max ? "max" : "avg", type_name(t), DIMS_ARGS(xd), p.kh, p.kw, p.sh, p.sw,
                       p.pt, p.pb, p.pl, p.pr, rec ? " argmax" : "");
              ck_assert_int_eq(gpu_k_pool(y.p, yd, dx_->p, xd, t, win, am, 0), cudaSuccess);
              expect_same(what, get(t, yd, y), round_all(t, want));
              /* The backward reads dy (and x, or the record), never y. */
              ck_assert_int_eq(gpu_k_pool_backward(rec ? dx2.p : dx.p, xd, dx_->p, nullptr, ddy->p,
                                                   yd, t, win, am, 0),
                               cudaSuccess);
              expect_same(what, get(t, xd, rec ? dx2 : dx), round_all(t, gwant));
            }
            if (!max) continue;
            /* The record: each window's first maximum, kh * kernel_w + kw, or NONE. */
            const std::vector<uint8_t> rec = argmax.get();
            for (int64_t n = 0; n < yd.n; n++)
              for (int64_t c = 0; c < yd.c; c++)
                for (int64_t oh = 0; oh < yd.h; oh++)
                  for (int64_t ow = 0; ow < yd.w; ow++) {
                    float best = -INFINITY;
                    int at = GPU_POOL_ARGMAX_NONE;
                    for (int kh = 0; kh < p.kh; kh++)
                      for (int kw = 0; kw < p.kw; kw++) {
                        const int64_t ih = oh * p.sh - p.pt + kh, iw = ow * p.sw - p.pl + kw;
                        if (ih < 0 || ih >= xd.h || iw < 0 || iw >= xd.w) continue;
                        const float v = x[(size_t)nchw_at(xd, n, c, ih, iw)];
                        if (v > best) best = v, at = kh * p.kw + kw;
                      }
                    const uint8_t got = rec[(size_t)layout_at(yd, n, c, oh, ow)];
                    EXPECT(got == at, "%s: argmax at (%lld, %lld, %lld, %lld) %d, expected %d",
                           what, (long long)n, (long long)c, (long long)oh, (long long)ow, got, at);
                  }
          }
  /* The record is for max pooling, and numbers at most 255 window positions. */
  dev any(4096);
  const gpu_dims d = dims(1, 1, 16, 16, 0), one = dims(1, 1, 1, 1, 0);
  gpu_pool_window avg = {3, 3, 1, 1, 0, 0, 0}, wide = {16, 16, 1, 1, 0, 0, 1};
  ck_assert_int_eq(gpu_k_pool(any.p, d, any.p, d, GPU_F32, avg, any.as<uint8_t>(), 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_pool(any.p, one, any.p, d, GPU_F32, wide, any.as<uint8_t>(), 0),
                   cudaErrorInvalidValue);
  ck_assert_int_eq(gpu_k_pool(any.p, one, any.p, d, GPU_F32, wide, nullptr, 0), cudaSuccess);
}
END_TEST

START_TEST(lrn_matches_reference) {
  static const gpu_dims shapes[] = {
      {1, 1, 3, 5, 0}, {3, 7, 5, 3, 0}, {1, 257, 3, 1, 0}, {3, 3, 1, 1, 0}};
  static const int32_t radii[] = {0, 1, 2, 5};
  const float bias = 2.0f, alpha = 0.25f, beta = 0.75f;
  char what[160];
  for (gpu_dtype t : FLOAT_TYPES)
    for (const gpu_dims &s : shapes)
      for (int32_t r : radii)
        for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
          const gpu_dims d = dims(s.n, s.c, s.h, s.w, nhwc);
          const std::vector<float> x = round_all(t, random_floats(count_of(d), -2.0f, 2.0f));
          const std::vector<float> dy = round_all(t, random_floats(count_of(d), -1.0f, 1.0f));
          std::unique_ptr<dev> dx_(put(t, d, x)), ddy(put(t, d, dy));
          dev y((size_t)count_of(d) * gpu_dtype_size(t)),
              dx((size_t)count_of(d) * gpu_dtype_size(t));
          ck_assert_int_eq(gpu_k_lrn(y.p, dx_->p, d, t, r, bias, alpha, beta, 0), cudaSuccess);
          ck_assert_int_eq(gpu_k_lrn_backward(dx.p, ddy->p, dx_->p, nullptr, d, t, r, bias, alpha,
                                              beta, 0),
                           cudaSuccess);
          std::vector<float> want((size_t)count_of(d)), gwant((size_t)count_of(d));
          ref_lrn_forward(x.data(), shape_of(d), r, bias, alpha, beta, want.data());
          ref_lrn_backward(x.data(), shape_of(d), dy.data(), r, bias, alpha, beta, gwant.data());
          /* The size of the gradient's terms, for its tolerance: |dy_j N_j^-b| +
           * 2ab |x_j| sum |dy_c x_c N_c^(-b-1)|. */
          std::vector<double> scale((size_t)count_of(d));
          for (int64_t n = 0; n < d.n; n++)
            for (int64_t h = 0; h < d.h; h++)
              for (int64_t w = 0; w < d.w; w++) {
                std::vector<double> norm((size_t)d.c);
                for (int64_t c = 0; c < d.c; c++) {
                  double sum = 0.0;
                  for (int64_t j = c - r; j <= c + r; j++)
                    if (j >= 0 && j < d.c) {
                      const double v = x[(size_t)nchw_at(d, n, j, h, w)];
                      sum += v * v;
                    }
                  norm[(size_t)c] = bias + alpha * sum;
                }
                for (int64_t j = 0; j < d.c; j++) {
                  const size_t at = (size_t)nchw_at(d, n, j, h, w);
                  double cross = 0.0;
                  for (int64_t c = j - r; c <= j + r; c++)
                    if (c >= 0 && c < d.c) {
                      const size_t ac = (size_t)nchw_at(d, n, c, h, w);
                      cross += fabs(dy[ac] * x[ac] * pow(norm[(size_t)c], -beta - 1.0));
                    }
                  scale[at] = fabs(dy[at] * pow(norm[(size_t)j], -beta)) +
                              2.0 * alpha * beta * fabs(x[at]) * cross;
                }
              }
          snprintf(what, sizeof what, "lrn %s " DIMS_FMT " radius %d", type_name(t), DIMS_ARGS(d),
                   r);
          const std::vector<float> rw = round_all(t, want), rg = round_all(t, gwant);
          expect_near(what, get(t, d, y), rw, [&](size_t i) {
            return (2 * r + 4) * 0x1p-24 * fabs(want[i]) +
                   (t == GPU_F32 ? 0.0 : ulp_of(t, want[i]));
          });
          snprintf(what, sizeof what, "lrn_backward %s " DIMS_FMT " radius %d", type_name(t),
                   DIMS_ARGS(d), r);
          expect_near(what, get(t, d, dx), rg, [&](size_t i) {
            return (4 * r + 8) * 0x1p-24 * scale[i] + (t == GPU_F32 ? 0.0 : ulp_of(t, gwant[i]));
          });
        }
}
END_TEST

/* ---- index arithmetic past 2^31 elements, without allocating ---------------------------- */

START_TEST(index_math_past_2_31) {
  /* gpu_blocks caps the grid at 8192 blocks; GPU_GRID_STRIDE then walks each thread
   * through its residue class in 64 bits: first index, count, last index < n. */
  const int64_t big[] = {((int64_t)1 << 31) + 5, ((int64_t)1 << 32) + 257};
  for (int64_t n : big) {
    bool past_2_31 = false;
    ck_assert_uint_eq(gpu_blocks(n), 8192);
    const int64_t stride = 8192 * (int64_t)GPU_THREADS;
    gridDim = dim3(gpu_blocks(n));
    blockDim = dim3(GPU_THREADS);
    const unsigned sample_blocks[] = {0, 1, 4095, 8191};
    const unsigned sample_threads[] = {0, 1, 255};
    for (unsigned b : sample_blocks)
      for (unsigned t : sample_threads) {
        blockIdx = make_uint3(b, 0, 0);
        threadIdx = make_uint3(t, 0, 0);
        const int64_t first = (int64_t)b * GPU_THREADS + t;
        int64_t count = 0, expect = first, last = -1;
        GPU_GRID_STRIDE(i, n) {
          EXPECT(i == expect, "thread %u of block %u: index %lld, expected %lld", t, b,
                 (long long)i, (long long)expect);
          expect += stride;
          last = i;
          count++;
        }
        ck_assert_int_eq(count, (n - first + stride - 1) / stride);
        ck_assert(last < n && last + stride >= n);
        past_2_31 |= last > INT32_MAX;
      }
    ck_assert(past_2_31);
  }

  /* gpu_math.h's offsets and their inverse on tensors of 3.2e9 and 4.3e9 elements. */
  const gpu_dims huge[] = {
      {3, 257, 2049, 2049, 0}, {1, 1, 65537, 65537, 0}, {2, 3, 46341, 46341, 0}};
  for (const gpu_dims &s : huge) {
    const int64_t count = count_of(s);
    ck_assert(count > INT32_MAX);
    for (int32_t nhwc = 0; nhwc < 2; nhwc++) {
      const gpu_dims d = dims(s.n, s.c, s.h, s.w, nhwc);
      ck_assert_int_eq(gpu_offset(nhwc, d.c, d.h, d.w, d.n - 1, d.c - 1, d.h - 1, d.w - 1),
                       count - 1);
      const int64_t probes[] = {0,         INT32_MAX, (int64_t)INT32_MAX + 1,
                                count / 2, count - 1, count - d.c - 1};
      for (int64_t i : probes) {
        const gpu_coord p = gpu_coord_of(nhwc, d.c, d.h, d.w, i);
        ck_assert_int_eq(gpu_offset(nhwc, d.c, d.h, d.w, p.n, p.c, p.h, p.w), i);
        ck_assert_int_eq(layout_at(d, p.n, p.c, p.h, p.w), i);
        ck_assert_int_eq(gpu_channel_of(nhwc, d.c, d.h, d.w, i), p.c);
        /* The pool kernels' own int64_t index math agrees. */
        int32_t n, c, h, w;
        gpu_host_pool_unravel(d, i, &n, &c, &h, &w);
        ck_assert(n == p.n && c == p.c && h == p.h && w == p.w);
        ck_assert_int_eq(gpu_host_pool_offset(d, n, c, h, w), i);
      }
    }
    /* Too large for int32_t indices: the pool kernels take their int64_t instance. */
    ck_assert(!gpu_host_pool_fits_int32(count));
  }
  /* The int32_t choice leaves room for the last grid-stride step: every index below
   * count plus one grid width stays below 2^31. */
  const int64_t width = (int64_t)gpu_host_pool_blocks((int64_t)1 << 40) * 256;
  ck_assert_int_eq(width, (int64_t)1 << 28);
  const int64_t limit = (int64_t)INT32_MAX - width;
  ck_assert(gpu_host_pool_fits_int32(limit) && !gpu_host_pool_fits_int32(limit + 1));
  ck_assert(gpu_host_pool_fits_int32(limit) && limit - 1 + width <= INT32_MAX);
  ck_assert_uint_eq(gpu_host_pool_blocks(limit),
                    (unsigned)((limit + 255) / 256 < (1 << 20) ? (limit + 255) / 256 : 1 << 20));

  /* The bias gradient's split of 2^34 elements: at most 512 chunks covering every row
   * (NHWC) or image (NCHW), no empty chunk, and the scratch it asks for. */
  const gpu_dims splits[] = {{64, 64, 2048, 2048, 1}, {1024, 64, 512, 512, 0}, {600, 7, 64, 64, 0}};
  for (const gpu_dims &d : splits) {
    int64_t chunks, per;
    gpu_host_bias_grad_plan(d, &chunks, &per);
    const int64_t units = d.nhwc ? (int64_t)d.n * d.h * d.w : d.n;
    ck_assert(chunks >= 1 && chunks <= 512);
    ck_assert(chunks * per >= units && (chunks - 1) * per < units);
    ck_assert_uint_eq(gpu_k_bias_grad_scratch_bytes(d), (uint64_t)chunks * (uint64_t)d.c * 4);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cuda_kernels_host");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, image_check);
  tcase_add_test(tc, cast_rounds_to_nearest_even);
  tcase_add_test(tc, layouts_from_and_to_nchw);
  tcase_add_test(tc, uint8_input);
  tcase_add_test(tc, filters_to_compute_and_back);
  tcase_add_test(tc, pad_and_crop_spatial);
  tcase_add_test(tc, shift_spatial_matches_reference);
  tcase_add_test(tc, concat_matches_reference);
  tcase_add_test(tc, pad_channels_matches_reference);
  tcase_add_test(tc, concat_more_than_max_inputs);
  tcase_add_test(tc, concat_refuses_bad_parts);
  tcase_add_test(tc, concat_index_math_wide);
  tcase_add_test(tc, slice_channels_matches_reference);
  tcase_add_test(tc, channel_shuffle_matches_reference);
  tcase_add_test(tc, channel_shuffle_refuses);
  tcase_add_test(tc, channel_shuffle_index_math_wide);
  tcase_add_test(tc, relu_family);
  tcase_add_test(tc, activations);
  tcase_add_test(tc, add_and_accumulate);
  tcase_add_test(tc, dropout_mask_and_scale);
  tcase_add_test(tc, bias_and_relu);
  tcase_add_test(tc, bias_grad_two_passes);
  tcase_add_test(tc, multiply_and_gate_grad);
  tcase_add_test(tc, channel_scale_and_dot);
  tcase_add_test(tc, layer_norm);
  tcase_add_test(tc, softmax_xent);
  tcase_add_test(tc, update_matches_reference);
  tcase_add_test(tc, all_finite_flag);
  tcase_add_test(tc, pool_matches_reference);
  tcase_add_test(tc, lrn_matches_reference);
  tcase_add_test(tc, index_math_past_2_31);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
