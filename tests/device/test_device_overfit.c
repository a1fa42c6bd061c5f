/* test_device_overfit.c — end to end on the device under test (`test_device_overfit
 * NAME`, device_harness.h): executor + trainer (built from flags, as the run loop does)
 * train a small conv net (conv, batch norm, relu, max
 * pool, residual add, concat, dense) on one fixed batch of 8 random images with
 * momentum; the loss must fall below 0.05 and every example be classified right. This
 * fails if any gradient in the chain is wrong enough to stop learning, if the optimizer
 * or the wiring of updates is off, or if memory reuse corrupts an activation. In fp32,
 * which every device has: the thresholds are about learning, not rounding. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/cnnb.h>
#include "device_harness.h"
#include "exec/executor.h"
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "config/run_config.h"
#include "exec/trainer.h"
#include "config/core_flags.h"
#include "test_datasets.h"

/* The device under test: the loader's copy of its vtable. */
static const cnnb_device_vtable *dut;

enum { BATCH = 8, CH = 3, HW = 8, CLASSES = 10, STEPS = 150 };

static cnnb_graph *small_net(void) {
  cnnb_graph *g = cnnb_graph_create(BATCH, CH, HW, HW, CLASSES);
  cnnb_tensor x = cnnb_conv2d(g, "conv1", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3));
  x = cnnb_batch_norm(g, "bn1", x, CNNB_BATCH_NORM(.scale = 1));
  x = cnnb_relu(g, "relu1", x);
  x = cnnb_max_pool(g, "pool1", x, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  cnnb_tensor r = cnnb_conv2d(g, "conv2", x,
                              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3,
                                          .use_bias = 1));
  r = cnnb_relu(g, "relu2", r);
  cnnb_tensor sum = cnnb_add(g, "residual", x, r);
  cnnb_tensor cat[2] = {sum, x};
  x = cnnb_concat(g, "cat", 2, cat);
  x = cnnb_flatten(g, "flat", x);
  x = cnnb_dense(g, "fc1", x, CNNB_DENSE(.units = 32, .use_bias = 1));
  x = cnnb_relu(g, "relu3", x);
  x = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = CLASSES, .use_bias = 1));
  cnnb_graph_set_logits(g, x);
  cnnb_graph_add_loss(g);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  return g;
}

START_TEST(overfits_a_fixed_batch) {
  static float images[BATCH * CH * HW * HW];
  int32_t labels[BATCH];
  unsigned s = 12345;
  for (size_t i = 0; i < sizeof images / sizeof images[0]; ++i) {
    s = s * 1664525u + 1013904223u;
    images[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
  for (int i = 0; i < BATCH; ++i) labels[i] = (i * 7 + 3) % CLASSES;

  const char *name = device_harness_name();
  cnnb_ctx *dctx = cnnb_ctx_create(name, NULL), *ctx = cnnb_ctx_create("test", NULL);
  cnnb_device_config dcfg = {.struct_size = sizeof dcfg,
                             .num_threads = 1,
                             .precision = CNNB_PRECISION_FP32,
                             .training = 1,
                             .seed = 1};
  void *dev = NULL;
  ck_assert_msg(dut->create(dctx, name, &dcfg, &dev) == CNNB_OK, "%s", cnnb_error_message(dctx));
  cnnb_graph *g = small_net();
  cnnb_executor_config ecfg = {.training = true, .device_ctx = dctx};
  cnnb_executor *ex;
  ck_assert_msg(cnnb_executor_create(ctx, dut, dev, g, &ecfg, &ex) == CNNB_OK, "%s",
                cnnb_error_message(ctx));
  ck_assert_int_eq(cnnb_executor_init_params(ex, 1), CNNB_OK);

  cnnb_flags *flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  char err[256];
  ck_assert_int_eq(cnnb_flags_set(flags, "optimizer", "momentum", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_set(flags, "init_learning_rate", "0.05", err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_set(flags, "weight_decay", "0", err, sizeof err), CNNB_OK);
  cnnb_run_config cfg;
  ck_assert_msg(cnnb_run_config_from_flags(flags, &cfg, err, sizeof err) == CNNB_OK, "%s", err);
  cfg.trainer.lr.examples_per_epoch = BATCH;
  cfg.trainer.lr.global_batch_size = BATCH;
  cnnb_trainer *tr;
  ck_assert_msg(cnnb_trainer_create(ctx, &cfg.trainer, ex, &tr) == CNNB_OK, "%s",
                cnnb_error_message(ctx));

  float first = 0, loss = 0;
  for (int step = 0; step < STEPS; ++step) {
    cnnb_status st = cnnb_executor_step(ex, images, labels, cnnb_trainer_loss_scale(tr),
                                        (uint64_t)step);
    ck_assert_msg(st == CNNB_OK, "step %d: %s", step, cnnb_error_message(ctx));
    ck_assert_int_eq(cnnb_executor_loss(ex, &loss), CNNB_OK);
    ck_assert_msg(isfinite(loss), "step %d: loss %g", step, loss);
    if (step == 0) first = loss;
    int skipped = -1;
    float lr = 0;
    ck_assert_int_eq(cnnb_trainer_apply(tr, step, &skipped, &lr), CNNB_OK);
    ck_assert_int_eq(skipped, 0);
    ck_assert_float_eq(lr, 0.05f);
  }
  int top1 = 0, top5 = 0;
  ck_assert_int_eq(cnnb_executor_accuracy(ex, labels, &top1, &top5), CNNB_OK);
  printf("test_device_overfit (%s): loss %.4f -> %.5f in %d steps, top-1 %d/%d; arena %.1f KiB "
         "(%.1f KiB without reuse)\n",
         name, first, loss, STEPS, top1, BATCH, cnnb_executor_peak_bytes(ex) / 1024.0,
         cnnb_executor_naive_bytes(ex) / 1024.0);
  ck_assert_msg(first > 1.5f, "initial loss %g: expected about ln(10)", first);
  ck_assert_msg(loss < 0.05f, "loss after %d steps: %g (from %g)", STEPS, loss, first);
  ck_assert_int_eq(top1, BATCH);
  ck_assert_uint_lt(cnnb_executor_peak_bytes(ex), cnnb_executor_naive_bytes(ex));

  cnnb_trainer_destroy(tr);
  cnnb_flags_destroy(flags);
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  dut->destroy(dev);
  cnnb_ctx_destroy(ctx);
  cnnb_ctx_destroy(dctx);
}
END_TEST

static Suite *overfit_suite(void) {
  dut = device_harness_vtable();
  Suite *s = suite_create("overfit");
  TCase *tc = tcase_create("overfit");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, overfits_a_fixed_batch);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  cnnb_loader *datasets = test_datasets_load(); /* the run configuration's --data_name */
  int status = device_harness_run(argc, argv, "test_device_overfit", overfit_suite);
  cnnb_loader_destroy(datasets);
  return status;
}
