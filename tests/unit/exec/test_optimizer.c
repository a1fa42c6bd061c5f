/* test_optimizer.c — cnnb_update_reference against closed-form values of TF's rules
 * over three steps (sgd, momentum with and without Nesterov, rmsprop, adam), weight
 * decay, clipping by value, grad_scale; then the trainer over a host "device" that
 * runs the reference: decay skipped exactly on CNNB_PARAM_NO_DECAY params, one update
 * call per run of equal decay, RMSProp's ms starting at ones, Adam's t counting applied
 * updates, and dynamic loss scaling skipping the step whose gradients hold inf/NaN. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/cnnb.h>
#include "exec/executor.h"
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "config/run_config.h"
#include "exec/trainer.h"
#include "config/core_flags.h"
#include "test_datasets.h"

#define N 4
static const float G[N] = {0.5f, -0.25f, 2.0f, -1.5f};
static const float W0[N] = {1.0f, -2.0f, 0.5f, 3.0f};

static cnnb_update base(uint32_t rule, float *w, float *grads, float *s1, float *s2) {
  return (cnnb_update){.struct_size = sizeof(cnnb_update),
                       .rule = rule,
                       .count = N,
                       .params = w,
                       .grads = grads,
                       .slot1 = s1,
                       .slot2 = s2,
                       .learning_rate = 0.1f,
                       .grad_scale = 1.0f,
                       .momentum = 0.9f,
                       .rho = 0.9f,
                       .epsilon = 1e-8f,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f};
}

static void near(double got, double want, double rel, const char *what, int i) {
  double tol = rel * fmax(1.0, fabs(want));
  ck_assert_msg(fabs(got - want) <= tol, "%s[%d]: got %.9g, want %.9g", what, i, got, want);
}

START_TEST(sgd_three_steps) {
  float w[N], g[N];
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_SGD, w, g, NULL, NULL);
  for (int s = 0; s < 3; ++s) cnnb_update_reference(&u);
  for (int i = 0; i < N; ++i) near(w[i], W0[i] - 3 * 0.1 * G[i], 1e-6, "sgd", i);
}
END_TEST

START_TEST(sgd_weight_decay_closed_form) {
  /* w_{k+1} = a w_k - lr g, a = 1 - lr wd: w_3 = a^3 w0 - lr g (1 + a + a^2). */
  float w[N], g[N];
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_SGD, w, g, NULL, NULL);
  u.weight_decay = 0.5f;
  for (int s = 0; s < 3; ++s) cnnb_update_reference(&u);
  double a = 1.0 - 0.1 * 0.5;
  for (int i = 0; i < N; ++i)
    near(w[i], a * a * a * W0[i] - 0.1 * G[i] * (1 + a + a * a), 1e-6, "sgd+wd", i);
}
END_TEST

START_TEST(momentum_three_steps) {
  float w[N], g[N], acc[N] = {0};
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_MOMENTUM, w, g, acc, NULL);
  for (int s = 0; s < 3; ++s) cnnb_update_reference(&u);
  double m = 0.9;
  for (int i = 0; i < N; ++i) {
    /* a_k = g (1 + m + ... + m^(k-1)); w_3 = w0 - lr (a_1 + a_2 + a_3). */
    near(w[i], W0[i] - 0.1 * G[i] * (3 + 2 * m + m * m), 1e-6, "momentum", i);
    near(acc[i], G[i] * (1 + m + m * m), 1e-6, "momentum accum", i);
  }
}
END_TEST

START_TEST(momentum_nesterov_three_steps) {
  float w[N], g[N], acc[N] = {0};
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_MOMENTUM, w, g, acc, NULL);
  u.nesterov = 1;
  for (int s = 0; s < 3; ++s) cnnb_update_reference(&u);
  double m = 0.9;
  for (int i = 0; i < N; ++i) {
    /* each step: w -= lr (g + m a_k), so w_3 = w0 - lr (3 g + m (a_1 + a_2 + a_3)). */
    double want = W0[i] - 0.1 * (3 * G[i] + m * G[i] * (3 + 2 * m + m * m));
    near(w[i], want, 1e-6, "nesterov", i);
  }
}
END_TEST

START_TEST(rmsprop_three_steps) {
  float w[N], g[N], ms[N], mom[N] = {0};
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  for (int i = 0; i < N; ++i) ms[i] = 1.0f; /* TF starts ms at ones */
  cnnb_update u = base(CNNB_OPT_RMSPROP, w, g, ms, mom);
  u.epsilon = 1.0f;
  u.momentum = 0.5f;
  for (int s = 0; s < 3; ++s) cnnb_update_reference(&u);
  double rho = 0.9, m = 0.5, lr = 0.1, eps = 1.0;
  for (int i = 0; i < N; ++i) {
    double g2 = (double)G[i] * G[i], total = 0.0, mk = 0.0;
    for (int k = 1; k <= 3; ++k) {
      double msk = pow(rho, k) + (1 - pow(rho, k)) * g2; /* closed form of the ms recursion */
      mk = m * mk + lr * G[i] / sqrt(msk + eps);
      total += mk;
    }
    near(ms[i], pow(rho, 3) + (1 - pow(rho, 3)) * g2, 1e-6, "rmsprop ms", i);
    near(w[i], W0[i] - total, 1e-6, "rmsprop", i);
  }
}
END_TEST

START_TEST(adam_three_steps) {
  /* With a constant gradient m_k = (1 - b1^k) g and v_k = (1 - b2^k) g^2, so each step
   * is lr sqrt(1-b2^k) g / (sqrt(1-b2^k) |g| + eps): with eps = 0 exactly lr sign(g). */
  float w[N], g[N], m1[N] = {0}, v[N] = {0};
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_ADAM, w, g, m1, v);
  u.epsilon = 0.0f;
  for (int s = 0; s < 3; ++s) {
    u.step = s;
    cnnb_update_reference(&u);
  }
  for (int i = 0; i < N; ++i)
    near(w[i], W0[i] - 3 * 0.1 * (G[i] > 0 ? 1 : -1), 1e-5, "adam eps=0", i);

  memcpy(w, W0, sizeof w);
  memset(m1, 0, sizeof m1);
  memset(v, 0, sizeof v);
  u.epsilon = 0.1f;
  for (int s = 0; s < 3; ++s) {
    u.step = s;
    cnnb_update_reference(&u);
  }
  for (int i = 0; i < N; ++i) {
    double want = W0[i];
    for (int k = 1; k <= 3; ++k) {
      double c = sqrt(1 - pow(0.999, k));
      want -= 0.1 * c * G[i] / (c * fabs(G[i]) + 0.1);
    }
    near(w[i], want, 1e-5, "adam eps=0.1", i);
  }
}
END_TEST

START_TEST(adam_step_is_bias_correction) {
  /* One update at step 9 (t = 10): lr_t = lr sqrt(1-b2^10)/(1-b1^10), m = (1-b1) g,
   * v = (1-b2) g^2 from zero slots. */
  float w[N], g[N], m1[N] = {0}, v[N] = {0};
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(CNNB_OPT_ADAM, w, g, m1, v);
  u.step = 9;
  cnnb_update_reference(&u);
  double lrt = 0.1 * sqrt(1 - pow(0.999, 10)) / (1 - pow(0.9, 10));
  for (int i = 0; i < N; ++i) {
    double m = 0.1 * G[i], vv = 0.001 * G[i] * G[i];
    near(w[i], W0[i] - lrt * m / (sqrt(vv) + 1e-8), 1e-5, "adam t=10", i);
  }
}
END_TEST

START_TEST(clip_scale_and_nan) {
  float w[N], g[N] = {128 * 5.0f, 128 * -5.0f, 128 * 0.5f, NAN};
  memcpy(w, W0, sizeof w);
  cnnb_update u = base(CNNB_OPT_SGD, w, g, NULL, NULL);
  u.grad_scale = 1.0f / 128;
  u.clip = 1.0f;
  u.weight_decay = 0.1f;
  cnnb_update_reference(&u);
  /* Clip first, then decay: g = clip(grad / 128) + wd w. */
  near(w[0], W0[0] - 0.1 * (1.0 + 0.1 * W0[0]), 1e-6, "clip+", 0);
  near(w[1], W0[1] - 0.1 * (-1.0 + 0.1 * W0[1]), 1e-6, "clip-", 1);
  near(w[2], W0[2] - 0.1 * (0.5 + 0.1 * W0[2]), 1e-6, "inside", 2);
  ck_assert_msg(isnan(w[3]), "a NaN gradient must stay NaN through clipping, got %g", w[3]);
}
END_TEST

START_TEST(no_op_cases) {
  float w[N], g[N];
  memcpy(w, W0, sizeof w);
  memcpy(g, G, sizeof g);
  cnnb_update u = base(99, w, g, NULL, NULL);
  cnnb_update_reference(&u);
  u = base(CNNB_OPT_SGD, w, g, NULL, NULL);
  u.count = 0;
  cnnb_update_reference(&u);
  cnnb_update_reference(NULL);
  ck_assert_int_eq(memcmp(w, W0, sizeof w), 0);
}
END_TEST

/* ---- the trainer over a host device that runs the reference ------------------------- */

static int update_calls;
static cnnb_update last_updates[16];

static cnnb_status h_alloc(void *d, size_t bytes, void **ptr) {
  *ptr = calloc(1, bytes ? bytes : 1);
  return *ptr ? CNNB_OK : CNNB_ENOMEM;
}
static void h_free(void *d, void *ptr) { free(ptr); }
static cnnb_status h_copy(void *d, void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return CNNB_OK;
}
static cnnb_status h_zero(void *d, void *ptr, size_t bytes) {
  memset(ptr, 0, bytes);
  return CNNB_OK;
}
static cnnb_status h_sync(void *d) { return CNNB_OK; }
static cnnb_status h_bytes(void *d, const cnnb_graph *g, cnnb_tensor t, size_t *bytes) {
  *bytes = (size_t)cnnb_shape_count(cnnb_graph_node(g, t)->shape) * 4;
  return CNNB_OK;
}
static cnnb_status h_from(void *d, const cnnb_graph *g, cnnb_tensor t, void *buf, const void *h) {
  size_t b;
  h_bytes(d, g, t, &b);
  memcpy(buf, h, b);
  return CNNB_OK;
}
static cnnb_status h_to(void *d, const cnnb_graph *g, cnnb_tensor t, const void *buf, void *h) {
  size_t b;
  h_bytes(d, g, t, &b);
  memcpy(h, buf, b);
  return CNNB_OK;
}
static cnnb_status h_prepare(void *d, const cnnb_graph *g, int32_t node, void **state) {
  *state = NULL;
  return CNNB_OK;
}
static void h_release(void *d, void *state) {}
static cnnb_status h_run(void *d, void *state, const cnnb_node_io *io) { return CNNB_OK; }
static cnnb_status h_acc(void *d, const cnnb_graph *g, cnnb_tensor t, void *dst, const void *src) {
  return CNNB_OK;
}
static cnnb_status h_update(void *d, const cnnb_update *u) {
  if (update_calls < 16) last_updates[update_calls] = *u;
  update_calls++;
  cnnb_update_reference(u);
  return CNNB_OK;
}
static cnnb_status h_finite(void *d, const float *g, int64_t count, int32_t *finite) {
  *finite = 1;
  for (int64_t i = 0; i < count; ++i)
    if (!isfinite(g[i])) *finite = 0;
  return CNNB_OK;
}

static const cnnb_device_vtable host_dev = {.struct_size = sizeof(cnnb_device_vtable),
                                            .alloc = h_alloc,
                                            .free = h_free,
                                            .copy_to_device = h_copy,
                                            .copy_to_host = h_copy,
                                            .fill_zero = h_zero,
                                            .synchronize = h_sync,
                                            .tensor_bytes = h_bytes,
                                            .tensor_from_host = h_from,
                                            .tensor_to_host = h_to,
                                            .prepare = h_prepare,
                                            .release = h_release,
                                            .forward = h_run,
                                            .backward = h_run,
                                            .accumulate = h_acc,
                                            .update = h_update,
                                            .all_finite = h_finite};

/* The same device without its optional slots (accumulate, all_finite): the trainer must
 * check for inf/NaN itself, on a host copy. */
static const cnnb_device_vtable host_dev_minimal = {.struct_size = sizeof(cnnb_device_vtable),
                                                    .alloc = h_alloc,
                                                    .free = h_free,
                                                    .copy_to_device = h_copy,
                                                    .copy_to_host = h_copy,
                                                    .fill_zero = h_zero,
                                                    .synchronize = h_sync,
                                                    .tensor_bytes = h_bytes,
                                                    .tensor_from_host = h_from,
                                                    .tensor_to_host = h_to,
                                                    .prepare = h_prepare,
                                                    .release = h_release,
                                                    .forward = h_run,
                                                    .backward = h_run,
                                                    .update = h_update};

typedef struct fixture {
  cnnb_ctx *ctx;
  cnnb_graph *g;
  cnnb_executor *ex;
  int dummy;
} fixture;

/* dense(5) -> batch norm (scale + offset: no decay) -> dense(3) logits: three runs of
 * decay (decayed, not decayed, decayed). */
static fixture make_fixture_on(const cnnb_device_vtable *dv) {
  fixture f = {0};
  f.ctx = cnnb_ctx_create("test", NULL);
  f.g = cnnb_graph_create(2, 1, 2, 2, 3);
  cnnb_tensor x = cnnb_graph_input(f.g);
  x = cnnb_dense(f.g, "fc1", x, CNNB_DENSE(.units = 5, .use_bias = 1));
  x = cnnb_batch_norm(f.g, "bn", x, CNNB_BATCH_NORM(.scale = 1));
  x = cnnb_dense(f.g, "fc2", x, CNNB_DENSE(.units = 3, .use_bias = 1));
  cnnb_graph_set_logits(f.g, x);
  cnnb_graph_add_loss(f.g);
  ck_assert_msg(cnnb_graph_status(f.g) == CNNB_OK, "graph: %s", cnnb_graph_error(f.g));
  cnnb_executor_config cfg = {.training = true};
  cnnb_status st = cnnb_executor_create(f.ctx, dv, &f.dummy, f.g, &cfg, &f.ex);
  ck_assert_msg(st == CNNB_OK, "executor: %s", cnnb_error_message(f.ctx));
  return f;
}

static fixture make_fixture(void) { return make_fixture_on(&host_dev); }

static void free_fixture(fixture *f) {
  cnnb_executor_destroy(f->ex);
  cnnb_graph_destroy(f->g);
  cnnb_ctx_destroy(f->ctx);
}

static cnnb_trainer_config sgd_config(void) {
  cnnb_trainer_config c = {.rule = CNNB_OPT_SGD,
                           .nesterov = true,
                           .momentum = 0.9f,
                           .rmsprop_decay = 0.9f,
                           .rmsprop_momentum = 0.9f,
                           .rmsprop_epsilon = 1.0f,
                           .adam_beta1 = 0.9f,
                           .adam_beta2 = 0.999f,
                           .adam_epsilon = 1e-8f,
                           .weight_decay = 0.5f};
  c.lr.has_init_learning_rate = true;
  c.lr.init_learning_rate = 0.1;
  c.lr.global_batch_size = 2;
  c.lr.examples_per_epoch = 100;
  return c;
}

/* Fills params with 1 + i/10 and grads with a pattern, returns copies. */
static void fill(fixture *f, float *w, float *g) {
  int64_t n = cnnb_executor_param_count(f->ex);
  for (int64_t i = 0; i < n; ++i) {
    w[i] = 1.0f + 0.1f * (float)i;
    g[i] = (float)((i % 7) - 3) * 0.25f;
  }
  memcpy(cnnb_executor_params(f->ex), w, (size_t)n * 4);
  memcpy(cnnb_executor_grads(f->ex), g, (size_t)n * 4);
}

START_TEST(trainer_decay_runs) {
  fixture f = make_fixture();
  cnnb_trainer_config c = sgd_config();
  cnnb_trainer *tr;
  ck_assert_msg(cnnb_trainer_create(f.ctx, &c, f.ex, &tr) == CNNB_OK, "%s",
                cnnb_error_message(f.ctx));
  int64_t n = cnnb_executor_param_count(f.ex);
  float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
  fill(&f, w, g);
  update_calls = 0;
  int skipped = -1;
  float lr = 0;
  ck_assert_int_eq(cnnb_trainer_apply(tr, 0, &skipped, &lr), CNNB_OK);
  ck_assert_int_eq(skipped, 0);
  ck_assert_float_eq(lr, 0.1f);
  ck_assert_int_eq(update_calls, 3); /* fc1 | bn | fc2 */
  int64_t covered = 0;
  for (int k = 0; k < 3; ++k) {
    ck_assert_int_eq(last_updates[k].params - cnnb_executor_params(f.ex), covered);
    covered += last_updates[k].count;
  }
  ck_assert_int_eq(covered, n);
  const float *got = cnnb_executor_params(f.ex);
  for (int32_t p = 0; p < cnnb_graph_num_params(f.g); ++p) {
    const cnnb_param *pp = cnnb_graph_param(f.g, p);
    if (pp->is_stat) continue;
    double wd = (pp->flags & CNNB_PARAM_NO_DECAY) ? 0.0 : 0.5;
    for (int64_t k = pp->offset; k < pp->offset + pp->count; ++k)
      near(got[k], w[k] - 0.1 * (g[k] + wd * w[k]), 1e-6, pp->name, (int)k);
  }
  free(w);
  free(g);
  cnnb_trainer_destroy(tr);
  free_fixture(&f);
}
END_TEST

START_TEST(trainer_slots) {
  fixture f = make_fixture();
  cnnb_trainer_config c = sgd_config();
  cnnb_trainer *tr;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  ck_assert_ptr_null(cnnb_trainer_slot1(tr)); /* sgd keeps no state */
  ck_assert_ptr_null(cnnb_trainer_slot2(tr));
  cnnb_trainer_destroy(tr);

  c.rule = CNNB_OPT_RMSPROP;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  int64_t n = cnnb_executor_param_count(f.ex);
  for (int64_t i = 0; i < n; ++i) {
    ck_assert_float_eq(cnnb_trainer_slot1(tr)[i], 1.0f);
    ck_assert_float_eq(cnnb_trainer_slot2(tr)[i], 0.0f);
  }
  cnnb_trainer_destroy(tr);

  /* Adam's t counts applied updates, not the global step the caller passes. */
  c.rule = CNNB_OPT_ADAM;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
  fill(&f, w, g);
  update_calls = 0;
  ck_assert_int_eq(cnnb_trainer_apply(tr, 500, NULL, NULL), CNNB_OK);
  ck_assert_int_eq(last_updates[0].step, 0);
  ck_assert_int_eq(cnnb_trainer_apply(tr, 501, NULL, NULL), CNNB_OK);
  ck_assert_int_eq(last_updates[update_calls - 1].step, 1);
  ck_assert_int_eq(cnnb_trainer_updates(tr), 2);
  free(w);
  free(g);
  cnnb_trainer_destroy(tr);
  free_fixture(&f);
}
END_TEST

START_TEST(trainer_loss_scale_skips_nonfinite) {
  fixture f = make_fixture();
  cnnb_trainer_config c = sgd_config();
  c.weight_decay = 0.0f;
  c.fp16 = true;
  c.fp16_loss_scale = 64.0f;
  c.auto_loss_scale = true;
  c.inc_loss_scale_every_n = 2;
  cnnb_trainer *tr;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  ck_assert_float_eq(cnnb_trainer_loss_scale(tr), 64.0f);
  int64_t n = cnnb_executor_param_count(f.ex);
  float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
  fill(&f, w, g);
  cnnb_executor_grads(f.ex)[n / 2] = INFINITY;
  int skipped = 0;
  update_calls = 0;
  ck_assert_int_eq(cnnb_trainer_apply(tr, 0, &skipped, NULL), CNNB_OK);
  ck_assert_int_eq(skipped, 1);
  ck_assert_int_eq(update_calls, 0);
  ck_assert_int_eq(memcmp(cnnb_executor_params(f.ex), w, (size_t)n * 4), 0);
  ck_assert_float_eq(cnnb_trainer_loss_scale(tr), 32.0f);

  /* A clean step: the update divides by the scale backward ran with (32). */
  memcpy(cnnb_executor_grads(f.ex), g, (size_t)n * 4);
  ck_assert_int_eq(cnnb_trainer_apply(tr, 1, &skipped, NULL), CNNB_OK);
  ck_assert_int_eq(skipped, 0);
  ck_assert_float_eq(last_updates[0].grad_scale, 1.0f / 32.0f);
  for (int64_t i = 0; i < n; ++i)
    near(cnnb_executor_params(f.ex)[i], w[i] - 0.1 * g[i] / 32.0, 1e-6, "scaled sgd", (int)i);
  ck_assert_int_eq(cnnb_trainer_updates(tr), 1);
  free(w);
  free(g);
  cnnb_trainer_destroy(tr);

  /* Without fp16 there is no scaling and no check, even when asked for auto. */
  c.fp16 = false;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  ck_assert_float_eq(cnnb_trainer_loss_scale(tr), 1.0f);
  cnnb_trainer_destroy(tr);
  free_fixture(&f);
}
END_TEST

START_TEST(trainer_checks_gradients_without_all_finite) {
  fixture f = make_fixture_on(&host_dev_minimal);
  cnnb_trainer_config c = sgd_config();
  c.fp16 = true;
  c.fp16_loss_scale = 8.0f;
  c.auto_loss_scale = true;
  c.inc_loss_scale_every_n = 1000;
  cnnb_trainer *tr;
  ck_assert_int_eq(cnnb_trainer_create(f.ctx, &c, f.ex, &tr), CNNB_OK);
  int64_t n = cnnb_executor_param_count(f.ex);
  float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
  fill(&f, w, g);
  cnnb_executor_grads(f.ex)[n - 1] = NAN; /* the last element: the whole range is read */
  int skipped = 0;
  update_calls = 0;
  ck_assert_int_eq(cnnb_trainer_apply(tr, 0, &skipped, NULL), CNNB_OK);
  ck_assert_int_eq(skipped, 1);
  ck_assert_int_eq(update_calls, 0);
  ck_assert_float_eq(cnnb_trainer_loss_scale(tr), 4.0f);
  memcpy(cnnb_executor_grads(f.ex), g, (size_t)n * 4);
  ck_assert_int_eq(cnnb_trainer_apply(tr, 1, &skipped, NULL), CNNB_OK);
  ck_assert_int_eq(skipped, 0);
  ck_assert_int_gt(update_calls, 0);
  free(w);
  free(g);
  cnnb_trainer_destroy(tr);
  free_fixture(&f);
}
END_TEST

START_TEST(trainer_from_run_config) {
  fixture f = make_fixture();
  cnnb_flags *flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  char err[256];
  ck_assert_int_eq(cnnb_flags_set(flags, "optimizer", "momentum", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_set(flags, "momentum", "0.8", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_set(flags, "init_learning_rate", "0.2", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_set(flags, "weight_decay", "0", err, sizeof err), CNNB_OK);
  /* The flags reach the trainer through the run configuration, read once. */
  cnnb_run_config cfg;
  ck_assert_msg(cnnb_run_config_from_flags(flags, &cfg, err, sizeof err) == CNNB_OK, "%s", err);
  cfg.trainer.lr.examples_per_epoch = 100;
  cfg.trainer.lr.global_batch_size = 2;
  cnnb_trainer *tr;
  cnnb_status st = cnnb_trainer_create(f.ctx, &cfg.trainer, f.ex, &tr);
  ck_assert_msg(st == CNNB_OK, "%s", cnnb_error_message(f.ctx));
  ck_assert_float_eq(cnnb_trainer_learning_rate(tr, 7), 0.2f);
  ck_assert_ptr_nonnull(cnnb_trainer_slot1(tr));
  ck_assert_ptr_nonnull(strstr(cnnb_trainer_describe(tr), "momentum (nesterov, m=0.8)"));
  int64_t n = cnnb_executor_param_count(f.ex);
  float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
  fill(&f, w, g);
  update_calls = 0;
  ck_assert_int_eq(cnnb_trainer_apply(tr, 0, NULL, NULL), CNNB_OK);
  ck_assert_int_eq(update_calls, 1); /* no decay anywhere: one run */
  ck_assert_int_eq(last_updates[0].nesterov, 1);
  ck_assert_float_eq(last_updates[0].momentum, 0.8f);
  for (int64_t i = 0; i < n; ++i) /* first nesterov step: w -= lr (g + m g) */
    near(cnnb_executor_params(f.ex)[i], w[i] - 0.2 * (g[i] + 0.8 * g[i]), 1e-6, "flags", (int)i);
  free(w);
  free(g);
  cnnb_trainer_destroy(tr);
  cnnb_flags_destroy(flags);
  free_fixture(&f);
}
END_TEST

START_TEST(trainer_refuses_forward_only) {
  cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
  cnnb_graph *g = cnnb_graph_create(2, 1, 2, 2, 3);
  cnnb_tensor x = cnnb_dense(g, "fc", cnnb_graph_input(g), CNNB_DENSE(.units = 3));
  cnnb_graph_set_logits(g, x);
  int dummy;
  cnnb_executor *ex;
  cnnb_executor_config cfg = {.training = false};
  ck_assert_int_eq(cnnb_executor_create(ctx, &host_dev, &dummy, g, &cfg, &ex), CNNB_OK);
  ck_assert_ptr_null(cnnb_executor_grads(ex));
  cnnb_trainer_config c = sgd_config();
  cnnb_trainer *tr = (void *)1;
  ck_assert_int_eq(cnnb_trainer_create(ctx, &c, ex, &tr), CNNB_EINVAL);
  ck_assert_ptr_null(tr);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "training"));
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
}
END_TEST

int main(void) {
  cnnb_loader *datasets = test_datasets_load(); /* the run configuration's --data_name */
  Suite *s = suite_create("optimizer");
  TCase *rules = tcase_create("rules");
  tcase_add_test(rules, sgd_three_steps);
  tcase_add_test(rules, sgd_weight_decay_closed_form);
  tcase_add_test(rules, momentum_three_steps);
  tcase_add_test(rules, momentum_nesterov_three_steps);
  tcase_add_test(rules, rmsprop_three_steps);
  tcase_add_test(rules, adam_three_steps);
  tcase_add_test(rules, adam_step_is_bias_correction);
  tcase_add_test(rules, clip_scale_and_nan);
  tcase_add_test(rules, no_op_cases);
  suite_add_tcase(s, rules);
  TCase *trainer = tcase_create("trainer");
  tcase_add_test(trainer, trainer_decay_runs);
  tcase_add_test(trainer, trainer_slots);
  tcase_add_test(trainer, trainer_loss_scale_skips_nonfinite);
  tcase_add_test(trainer, trainer_from_run_config);
  tcase_add_test(trainer, trainer_checks_gradients_without_all_finite);
  tcase_add_test(trainer, trainer_refuses_forward_only);
  suite_add_tcase(s, trainer);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cnnb_loader_destroy(datasets);
  return failed != 0;
}
