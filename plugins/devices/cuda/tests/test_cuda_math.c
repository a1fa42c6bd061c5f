/* test_cuda_math.c — the cuda device's kernel math (plugins/devices/cuda/gpu_math.h),
 * compiled here as plain C: the functions the kernels call element by element, so this
 * checks on any machine, without a GPU, what the GPU computes.
 *  - layouts: NCHW and NHWC offsets are bijections onto [0, count), gpu_coord_of inverts
 *    them, and both name the same logical element; the channel of an offset; filters
 *    OIHW <-> OHWI round trip;
 *  - the dropout mask: deterministic, its keep rate within 6 standard deviations of
 *    keep_prob over 1e6 elements, a different mask for another step or seed;
 *  - the optimizer: gpu_update_element bit for bit against cnnb_update_reference for
 *    every rule (nesterov, clipping, weight decay, grad_scale, Adam's step) on a few
 *    thousand random elements with infinities and NaNs among them. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/optimizer.h>

#include "gpu_math.h"

/* xorshift64*: reproducible test data. */
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

/* ---- layouts ------------------------------------------------------------------------ */

static const int64_t SHAPES[][4] = {{1, 1, 1, 1}, {2, 3, 4, 5},  {3, 7, 1, 1}, {1, 16, 5, 3},
                                    {4, 1, 6, 2}, {2, 64, 3, 3}, {5, 3, 7, 11}};

START_TEST(layout_offsets_are_bijections) {
  for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
    const int64_t N = SHAPES[s][0], C = SHAPES[s][1], H = SHAPES[s][2], W = SHAPES[s][3];
    const int64_t count = N * C * H * W;
    unsigned char *seen[2] = {calloc((size_t)count, 1), calloc((size_t)count, 1)};
    ck_assert(seen[0] && seen[1]);
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t w = 0; w < W; w++) {
            for (int nhwc = 0; nhwc < 2; nhwc++) {
              int64_t at = gpu_offset(nhwc, C, H, W, n, c, h, w);
              ck_assert_msg(at >= 0 && at < count, "shape %zu layout %d: offset %lld out of range",
                            s, nhwc, (long long)at);
              ck_assert_msg(!seen[nhwc][at], "shape %zu layout %d: offset %lld twice", s, nhwc,
                            (long long)at);
              seen[nhwc][at] = 1;
              /* The inverse gives the same logical element back. */
              gpu_coord p = gpu_coord_of(nhwc, C, H, W, at);
              ck_assert(p.n == n && p.c == c && p.h == h && p.w == w);
              ck_assert_int_eq(gpu_channel_of(nhwc, C, H, W, at), c);
            }
            /* The named layouts are what they say. */
            ck_assert_int_eq(gpu_offset_nchw(C, H, W, n, c, h, w),
                             n * C * H * W + c * H * W + h * W + w);
            ck_assert_int_eq(gpu_offset_nhwc(C, H, W, n, c, h, w),
                             n * H * W * C + h * W * C + w * C + c);
          }
    /* Every offset was hit exactly once (count hits, none twice). */
    for (int nhwc = 0; nhwc < 2; nhwc++)
      for (int64_t i = 0; i < count; i++) ck_assert(seen[nhwc][i]);
    /* Walking one layout's buffer and reading the other at the same logical element is
     * a permutation that maps back: what the conversion kernels do. */
    for (int64_t i = 0; i < count; i++) {
      gpu_coord p = gpu_coord_of(1, C, H, W, i);
      int64_t j = gpu_offset(0, C, H, W, p.n, p.c, p.h, p.w);
      gpu_coord q = gpu_coord_of(0, C, H, W, j);
      ck_assert_int_eq(gpu_offset(1, C, H, W, q.n, q.c, q.h, q.w), i);
    }
    free(seen[0]);
    free(seen[1]);
  }
}
END_TEST

START_TEST(filter_oihw_ohwi_round_trip) {
  const int64_t K = 5, C = 3, R = 7, S = 2, count = K * C * R * S;
  float *oihw = malloc((size_t)count * sizeof(float));
  float *ohwi = malloc((size_t)count * sizeof(float));
  float *back = malloc((size_t)count * sizeof(float));
  ck_assert(oihw && ohwi && back);
  for (int64_t i = 0; i < count; i++) oihw[i] = (float)i;
  /* filter_to_compute (nhwc 1): walk the OHWI destination, read OIHW. */
  for (int64_t i = 0; i < count; i++) {
    gpu_coord p = gpu_coord_of(1, C, R, S, i);
    ohwi[i] = oihw[gpu_filter_offset_oihw(C, R, S, p.n, p.c, p.h, p.w)];
  }
  /* filter_grad_to_arena (nhwc 1): walk the OIHW destination, read OHWI. */
  for (int64_t i = 0; i < count; i++) {
    gpu_coord p = gpu_coord_of(0, C, R, S, i);
    back[i] = ohwi[gpu_filter_offset_ohwi(C, R, S, p.n, p.c, p.h, p.w)];
  }
  for (int64_t i = 0; i < count; i++) ck_assert_float_eq(back[i], (float)i);
  /* One element by hand: (k, c, r, s) = (4, 2, 5, 1). */
  ck_assert_int_eq(gpu_filter_offset_oihw(C, R, S, 4, 2, 5, 1), ((4 * C + 2) * R + 5) * S + 1);
  ck_assert_int_eq(gpu_filter_offset_ohwi(C, R, S, 4, 2, 5, 1), ((4 * R + 5) * S + 1) * C + 2);
  ck_assert_float_eq(ohwi[((4 * R + 5) * S + 1) * C + 2], (float)(((4 * C + 2) * R + 5) * S + 1));
  free(oihw);
  free(ohwi);
  free(back);
}
END_TEST

/* ---- activations -------------------------------------------------------------------- */

START_TEST(relu_and_masks) {
  ck_assert_float_eq(gpu_relu(2.5f), 2.5f);
  ck_assert_float_eq(gpu_relu(-2.5f), 0.0f);
  ck_assert(!signbit(gpu_relu(-0.0f)));
  ck_assert(isnan(gpu_relu(NAN)));
  ck_assert_float_eq(gpu_relu6(7.0f), 6.0f);
  ck_assert_float_eq(gpu_relu6(5.5f), 5.5f);
  ck_assert_float_eq(gpu_relu6(-1.0f), 0.0f);
  ck_assert_float_eq(gpu_relu6(INFINITY), 6.0f);
  ck_assert(isnan(gpu_relu6(NAN)));
  ck_assert(gpu_relu_passes(1e-30f) && !gpu_relu_passes(0.0f) && !gpu_relu_passes(-1.0f));
  ck_assert(gpu_relu6_passes(3.0f) && !gpu_relu6_passes(0.0f) && !gpu_relu6_passes(6.0f));
  ck_assert(!gpu_relu6_passes(NAN) && !gpu_relu_passes(NAN));
}
END_TEST

/* ---- dropout ------------------------------------------------------------------------ */

#define DROP_N 1000000

START_TEST(dropout_rate_and_determinism) {
  static const float probs[] = {0.5f, 0.9f, 0.1f, 0.75f};
  for (size_t k = 0; k < sizeof probs / sizeof probs[0]; k++) {
    const float p = probs[k];
    const uint64_t key = gpu_dropout_key(1234u, 17u), threshold = gpu_dropout_threshold(p);
    int64_t kept = 0, same_next_step = 0, same_other_seed = 0;
    const uint64_t key_next = gpu_dropout_key(1234u, 18u), key_seed = gpu_dropout_key(1235u, 17u);
    for (int64_t i = 0; i < DROP_N; i++) {
      int a = gpu_dropout_keep_at(key, threshold, i);
      /* The same element asked again, and through the one-call form: the same answer. */
      if (a != gpu_dropout_keep_at(key, threshold, i) ||
          (i % 1000 == 0 && a != gpu_dropout_keep(1234u, 17u, i, p)))
        ck_abort_msg("keep_prob %g: element %lld answered two ways", (double)p, (long long)i);
      kept += a;
      same_next_step += a == gpu_dropout_keep_at(key_next, threshold, i);
      same_other_seed += a == gpu_dropout_keep_at(key_seed, threshold, i);
    }
    /* Binomial(N, p): within 6 standard deviations (about 3000 for p = 0.5). */
    double mean = (double)DROP_N * p, sd = sqrt((double)DROP_N * p * (1.0 - p));
    ck_assert_msg(fabs((double)kept - mean) <= 6.0 * sd, "keep_prob %g: kept %lld of %d", (double)p,
                  (long long)kept, DROP_N);
    /* Independent masks agree on p^2 + (1 - p)^2 of the elements, not on all. */
    double agree = p * p + (1.0 - p) * (1.0 - p), sd2 = sqrt(DROP_N * agree * (1.0 - agree));
    ck_assert(fabs((double)same_next_step - DROP_N * agree) <= 6.0 * sd2);
    ck_assert(fabs((double)same_other_seed - DROP_N * agree) <= 6.0 * sd2);
  }
  /* The exact rule's ends: keep_prob 1 keeps everything; the threshold is keep * 2^32. */
  ck_assert_uint_eq(gpu_dropout_threshold(1.0f), 1ull << 32);
  ck_assert_uint_eq(gpu_dropout_threshold(0.5f), 1ull << 31);
  ck_assert_uint_eq(gpu_dropout_threshold(0.0f), 0);
  for (int64_t i = 0; i < 100000; i++)
    if (!gpu_dropout_keep(7u, 3u, i, 1.0f))
      ck_abort_msg("keep_prob 1 dropped element %lld", (long long)i);
}
END_TEST

/* ---- the optimizer ------------------------------------------------------------------ */

#define UPD_N 4096

typedef struct update_case {
  const char *name;
  uint32_t rule;
  int32_t nesterov;
  float weight_decay, grad_scale, clip;
  int64_t step;
} update_case;

static const update_case UPDATE_CASES[] = {
    {"sgd", CNNB_OPT_SGD, 0, 0.0f, 1.0f, 0.0f, 0},
    {"sgd decay scale clip", CNNB_OPT_SGD, 0, 4e-5f, 1.0f / 128.0f, 0.5f, 0},
    {"momentum", CNNB_OPT_MOMENTUM, 0, 0.0f, 1.0f, 0.0f, 0},
    {"momentum decay scale", CNNB_OPT_MOMENTUM, 0, 1e-4f, 1.0f / 1024.0f, 0.0f, 3},
    {"nesterov", CNNB_OPT_MOMENTUM, 1, 0.0f, 1.0f, 0.0f, 0},
    {"nesterov decay clip", CNNB_OPT_MOMENTUM, 1, 5e-4f, 0.25f, 1.5f, 9},
    {"rmsprop", CNNB_OPT_RMSPROP, 0, 0.0f, 1.0f, 0.0f, 0},
    {"rmsprop decay scale clip", CNNB_OPT_RMSPROP, 0, 4e-5f, 1.0f / 64.0f, 2.0f, 5},
    {"adam first step", CNNB_OPT_ADAM, 0, 0.0f, 1.0f, 0.0f, 0},
    {"adam step 7 decay", CNNB_OPT_ADAM, 0, 1e-4f, 1.0f, 0.0f, 7},
    {"adam step 12345 scale clip", CNNB_OPT_ADAM, 0, 2e-5f, 1.0f / 32768.0f, 0.75f, 12345},
};

static int same_float(float a, float b) {
  return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

START_TEST(update_matches_reference_bit_for_bit) {
  const update_case *c = &UPDATE_CASES[_i];
  static float w_ref[UPD_N], s1_ref[UPD_N], s2_ref[UPD_N], grads[UPD_N];
  static float w[UPD_N], s1[UPD_N], s2[UPD_N];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < UPD_N; i++) {
      /* Gradients over several magnitudes, with a few infinities and NaNs (a loss-scaled
       * step that overflowed); parameters either sign; slots as the rules leave them
       * (rmsprop's ms and adam's v are non-negative). */
      float mag = ldexpf(1.0f, (int)(rng_next() % 24) - 16);
      grads[i] = rng_uniform(-1.0f, 1.0f) * mag;
      if (i % 509 == 0) grads[i] = INFINITY;
      if (i % 743 == 0) grads[i] = -INFINITY;
      if (i % 997 == 0) grads[i] = NAN;
      if (i % 17 == 0) grads[i] = 0.0f;
      w_ref[i] = rng_uniform(-2.0f, 2.0f);
      s1_ref[i] = c->rule == CNNB_OPT_RMSPROP ? rng_uniform(0.0f, 2.0f) : rng_uniform(-0.5f, 0.5f);
      s2_ref[i] = c->rule == CNNB_OPT_ADAM ? rng_uniform(0.0f, 0.01f) : rng_uniform(-0.5f, 0.5f);
    }
    memcpy(w, w_ref, sizeof w);
    memcpy(s1, s1_ref, sizeof s1);
    memcpy(s2, s2_ref, sizeof s2);
    cnnb_update u = {.struct_size = sizeof(cnnb_update),
                     .rule = c->rule,
                     .count = UPD_N,
                     .params = w_ref,
                     .grads = grads,
                     .slot1 = s1_ref,
                     .slot2 = s2_ref,
                     .learning_rate = 0.1f * (float)(round + 1) / 3.0f,
                     .weight_decay = c->weight_decay,
                     .grad_scale = c->grad_scale,
                     .clip = c->clip,
                     .momentum = 0.9f,
                     .rho = 0.9f,
                     .epsilon = 1e-8f,
                     .beta1 = 0.9f,
                     .beta2 = 0.999f,
                     .nesterov = c->nesterov,
                     .step = c->step + round};
    if (c->rule == CNNB_OPT_RMSPROP) u.epsilon = 1.0f; /* tf_cnn_benchmarks' default */
    cnnb_update_reference(&u);

    gpu_update_hyper h = {.rule = (int32_t)u.rule,
                          .nesterov = u.nesterov,
                          .learning_rate = u.learning_rate,
                          .weight_decay = u.weight_decay,
                          .grad_scale = u.grad_scale,
                          .clip = u.clip,
                          .momentum = u.momentum,
                          .rho = u.rho,
                          .epsilon = u.epsilon,
                          .beta1 = u.beta1,
                          .beta2 = u.beta2,
                          .adam_lr_t = gpu_adam_lr_t(u.learning_rate, u.beta1, u.beta2, u.step)};
    for (int i = 0; i < UPD_N; i++) {
      /* As the kernel does: slots in registers only where the rule has them. */
      float a = gpu_update_uses_slot1(h.rule) ? s1[i] : 0.0f;
      float b = gpu_update_uses_slot2(h.rule) ? s2[i] : 0.0f;
      gpu_update_element(&h, grads[i], &w[i], &a, &b);
      if (gpu_update_uses_slot1(h.rule)) s1[i] = a;
      if (gpu_update_uses_slot2(h.rule)) s2[i] = b;
    }
    for (int i = 0; i < UPD_N; i++)
      if (!same_float(w[i], w_ref[i]) || !same_float(s1[i], s1_ref[i]) ||
          !same_float(s2[i], s2_ref[i]))
        ck_abort_msg("%s round %d [%d] (grad %a): w %a slot1 %a slot2 %a, reference %a %a %a",
                     c->name, round, i, (double)grads[i], (double)w[i], (double)s1[i],
                     (double)s2[i], (double)w_ref[i], (double)s1_ref[i], (double)s2_ref[i]);
  }
}
END_TEST

START_TEST(adam_lr_t_is_bias_correction) {
  /* t = 1: lr * sqrt(1 - b2) / (1 - b1); large t: lr. */
  float lr = 0.001f;
  double want1 = (double)lr * sqrt(1.0 - 0.999f) / (1.0 - 0.9f);
  ck_assert_float_eq(gpu_adam_lr_t(lr, 0.9f, 0.999f, 0), (float)want1);
  ck_assert(fabsf(gpu_adam_lr_t(lr, 0.9f, 0.999f, 1000000) - lr) <= 1e-9f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda_math");
  TCase *layout = tcase_create("layout");
  tcase_add_test(layout, layout_offsets_are_bijections);
  tcase_add_test(layout, filter_oihw_ohwi_round_trip);
  suite_add_tcase(s, layout);
  TCase *elementwise = tcase_create("elementwise");
  tcase_set_timeout(elementwise, 60);
  tcase_add_test(elementwise, relu_and_masks);
  tcase_add_test(elementwise, dropout_rate_and_determinism);
  suite_add_tcase(s, elementwise);
  TCase *update = tcase_create("update");
  tcase_add_loop_test(update, update_matches_reference_bit_for_bit, 0,
                      (int)(sizeof UPDATE_CASES / sizeof UPDATE_CASES[0]));
  tcase_add_test(update, adam_lr_t_is_bias_correction);
  suite_add_tcase(s, update);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
