/* test_init.c — parameter initializers: statistics of large draws (mean, stddev, the
 * truncation bound) for each distribution, exact constants, and determinism per
 * (seed, parameter index). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/init.h"

typedef struct stats {
  double mean, stddev, max_abs;
} stats;

static stats measure(const float *x, int64_t n) {
  double sum = 0, sq = 0, max_abs = 0;
  for (int64_t i = 0; i < n; i++) {
    sum += x[i];
    if (fabs(x[i]) > max_abs) max_abs = fabs(x[i]);
  }
  double mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
  return (stats){mean, sqrt(sq / (double)(n - 1)), max_abs};
}

/* A param of the given shape and init, filled by cnnb_param_initialize. */
static float *draw(int32_t ndims, const int32_t *dims, cnnb_init init, uint64_t seed, int32_t index,
                   int64_t *count) {
  cnnb_param p = {.struct_size = sizeof p, .ndims = ndims, .init = init};
  p.count = 1;
  for (int i = 0; i < ndims; i++) p.dims[i] = dims[i], p.count *= dims[i];
  float *x = malloc((size_t)p.count * sizeof(float));
  ck_assert_int_eq(cnnb_param_initialize(&p, index, seed, x), CNNB_OK);
  *count = p.count;
  return x;
}

#define ck_assert_close(got, want, rel)                                                          \
  ck_assert_msg(fabs((got) - (want)) <= (rel)*fabs(want), "%s = %g, expected %g (+-%g%%)", #got, \
                (double)(got), (double)(want), 100.0 * (rel))

START_TEST(test_truncated_normal) {
  int64_t n;
  float *x = draw(2, (int32_t[]){500, 400}, (cnnb_init){CNNB_INIT_TRUNCATED_NORMAL, 0.1f}, 1, 0,
                  &n);
  stats s = measure(x, n);
  /* A unit normal cut at +-2 keeps stddev 0.8796. */
  ck_assert_close(s.stddev, 0.1 * 0.87962566, 0.01);
  ck_assert_msg(fabs(s.mean) < 4 * 0.1 / sqrt((double)n), "mean %g", s.mean);
  ck_assert_msg(s.max_abs <= 0.2 + 1e-6, "max |x| %g beyond 2 stddev", s.max_abs);
  ck_assert_msg(s.max_abs > 0.19, "max |x| %g: the tails are missing", s.max_abs);
  free(x);
}
END_TEST

START_TEST(test_normal_uniform_glorot) {
  int64_t n;
  float *x = draw(1, (int32_t[]){200000}, (cnnb_init){CNNB_INIT_NORMAL, 2.0f}, 2, 0, &n);
  stats s = measure(x, n);
  ck_assert_close(s.stddev, 2.0, 0.01);
  ck_assert_msg(fabs(s.mean) < 4 * 2.0 / sqrt((double)n), "mean %g", s.mean);
  ck_assert_msg(s.max_abs > 4 * 2.0, "an untruncated normal reaches past 4 stddev in 200k draws");
  free(x);

  x = draw(1, (int32_t[]){200000}, (cnnb_init){CNNB_INIT_UNIFORM, 0.5f}, 3, 0, &n);
  s = measure(x, n);
  ck_assert_close(s.stddev, 0.5 / sqrt(3.0), 0.01);
  ck_assert_msg(s.max_abs <= 0.5 && s.max_abs > 0.499, "max |x| %g", s.max_abs);
  free(x);

  /* Dense [units 300, K 500]: limit sqrt(6 / 800). */
  x = draw(2, (int32_t[]){300, 500}, (cnnb_init){CNNB_INIT_GLOROT_UNIFORM, 0}, 4, 0, &n);
  s = measure(x, n);
  double limit = sqrt(6.0 / 800.0);
  ck_assert_close(s.stddev, limit / sqrt(3.0), 0.01);
  ck_assert_msg(s.max_abs <= limit + 1e-6 && s.max_abs > 0.99 * limit, "max |x| %g", s.max_abs);
  free(x);
}
END_TEST

START_TEST(test_variance_scaling_and_he) {
  /* Conv kernel [O 64, I 32, 3, 3]: fan_in 288, fan_out 576. */
  const int32_t dims[4] = {64, 32, 3, 3};
  int64_t n;
  float *x = draw(4, dims, (cnnb_init){CNNB_INIT_VARIANCE_SCALING, 0}, 5, 0, &n);
  stats s = measure(x, n);
  double want = sqrt(1.0 / 288.0);
  ck_assert_close(s.stddev, want, 0.02);
  ck_assert_msg(s.max_abs <= 2 * want / 0.87962566 * (1 + 1e-6), "max |x| %g", s.max_abs);
  ck_assert_msg(fabs(s.mean) < 4 * want / sqrt((double)n), "mean %g", s.mean);
  free(x);

  x = draw(4, dims, (cnnb_init){CNNB_INIT_VARIANCE_SCALING, 2.0f}, 5, 0, &n);
  ck_assert_close(measure(x, n).stddev, sqrt(2.0 / 288.0), 0.02);
  free(x);

  x = draw(4, dims, (cnnb_init){CNNB_INIT_HE_NORMAL, 0}, 6, 0, &n);
  s = measure(x, n);
  want = sqrt(2.0 / 576.0);
  ck_assert_close(s.stddev, want, 0.02);
  ck_assert_msg(s.max_abs <= 2 * want / 0.87962566 * (1 + 1e-6), "max |x| %g", s.max_abs);
  free(x);

  /* Grouped conv: [O 32, I/groups 4, 3, 3] has fan_in 36. */
  cnnb_param p = {.ndims = 4, .dims = {32, 4, 3, 3}, .count = 32 * 4 * 9};
  double fi, fo;
  cnnb_param_fans(&p, &fi, &fo);
  ck_assert_double_eq(fi, 36.0);
  ck_assert_double_eq(fo, 288.0);
}
END_TEST

START_TEST(test_graph_arenas) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 8, 8, 10);
  cnnb_tensor t = cnnb_conv2d(g, "c1", 0,
                              CNNB_CONV2D(.filters = 64, .kernel_h = 5, .kernel_w = 5,
                                          .use_bias = 1, .bias_init = 0.25f));
  t = cnnb_batch_norm(g, "bn", t, CNNB_BATCH_NORM(.scale = 1));
  t = cnnb_conv2d(g, "c2", t, CNNB_CONV2D(.filters = 64, .kernel_h = 5, .kernel_w = 5));
  t = cnnb_dense(g, "fc", t, CNNB_DENSE(.units = 10));
  cnnb_graph_set_logits(g, t);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  int64_t np = cnnb_graph_param_arena_count(g), ns = cnnb_graph_stat_arena_count(g);
  float *params = malloc((size_t)np * sizeof(float)), *stats_ = malloc((size_t)ns * sizeof(float));
  float *again = malloc((size_t)np * sizeof(float)), *other = malloc((size_t)np * sizeof(float));
  ck_assert_int_eq(cnnb_params_initialize(g, 42, params, stats_), CNNB_OK);
  ck_assert_int_eq(cnnb_params_initialize(g, 42, again, stats_), CNNB_OK);
  ck_assert_int_eq(cnnb_params_initialize(g, 43, other, stats_), CNNB_OK);
  ck_assert_int_eq(memcmp(params, again, (size_t)np * sizeof(float)), 0);
  ck_assert_int_ne(memcmp(params, other, (size_t)np * sizeof(float)), 0);

  const cnnb_param *bias = cnnb_graph_param(g, cnnb_graph_find_param(g, "c1/bias"));
  for (int64_t i = 0; i < bias->count; i++) ck_assert_float_eq(params[bias->offset + i], 0.25f);
  const cnnb_param *gamma = cnnb_graph_param(g, cnnb_graph_find_param(g, "bn/gamma"));
  const cnnb_param *beta = cnnb_graph_param(g, cnnb_graph_find_param(g, "bn/beta"));
  const cnnb_param *mean = cnnb_graph_param(g, cnnb_graph_find_param(g, "bn/moving_mean"));
  const cnnb_param *var = cnnb_graph_param(g, cnnb_graph_find_param(g, "bn/moving_variance"));
  for (int64_t i = 0; i < 64; i++) {
    ck_assert_float_eq(params[gamma->offset + i], 1.0f);
    ck_assert_float_eq(params[beta->offset + i], 0.0f);
    ck_assert_float_eq(stats_[mean->offset + i], 0.0f);
    ck_assert_float_eq(stats_[var->offset + i], 1.0f);
  }
  /* Same shape, same init, different index: different streams. */
  const cnnb_param *k1 = cnnb_graph_param(g, cnnb_graph_find_param(g, "c1/kernel"));
  const cnnb_param *k2 = cnnb_graph_param(g, cnnb_graph_find_param(g, "c2/kernel"));
  ck_assert_int_ne(memcmp(params + k1->offset, params + k2->offset, 64 * sizeof(float)), 0);
  /* c2 kernel [64, 64, 5, 5]: variance scaling over fan_in 1600. */
  ck_assert_close(measure(params + k2->offset, k2->count).stddev, sqrt(1.0 / 1600.0), 0.03);
  /* fc [10, 64*8*8]: truncated normal sqrt(1/K), as drawn 0.8796 of it. */
  const cnnb_param *w = cnnb_graph_param(g, cnnb_graph_find_param(g, "fc/kernel"));
  ck_assert_close(measure(params + w->offset, w->count).stddev, sqrt(1.0 / 4096.0) * 0.87962566,
                  0.03);

  ck_assert_int_eq(cnnb_params_initialize(g, 1, NULL, stats_), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_params_initialize(g, 1, params, NULL), CNNB_EINVAL);
  cnnb_param bad = *k1;
  bad.init.kind = CNNB_INIT_DEFAULT;
  ck_assert_int_eq(cnnb_param_initialize(&bad, 0, 1, again), CNNB_EINVAL);
  free(params);
  free(stats_);
  free(again);
  free(other);
  cnnb_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("init");
  TCase *tc = tcase_create("initializers");
  tcase_add_test(tc, test_truncated_normal);
  tcase_add_test(tc, test_normal_uniform_glorot);
  tcase_add_test(tc, test_variance_scaling_and_he);
  tcase_add_test(tc, test_graph_arenas);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
