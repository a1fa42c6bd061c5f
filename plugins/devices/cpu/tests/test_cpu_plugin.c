/* test_cpu_plugin.c — what only the `cpu` device (oneDNN) promises, beside the device
 * conformance suites (tests/device/, which it passes like any device): its descriptor,
 * its refusals and description word for word, the optional slots and extension it has
 * (so the suites' "the device lacks it" skips never hide a cpu regression), the layouts
 * it picks (pad_channels keeps a conv's channel blocks), and bf16's refusal on a CPU
 * without avx512_bf16, shown by lowering oneDNN's ISA with ONEDNN_MAX_CPU_ISA in a child
 * process. Skips (77) when the plugin is not built. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_harness.h"
#include "device_harness_internal.h"
#include "device_run.h"
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "graph/op_device.h"
#include "exec/plan.h"

/* This executable, for the child runs. */
static char self[4096];

START_TEST(test_descriptor_slots_and_description) {
  device_harness h;
  ck_assert_int_eq(device_harness_load(&h), 0);
  ck_assert_str_eq(h.plugin->name, "cpu");
  ck_assert_str_eq(h.plugin->offers[0], "cpu");
  ck_assert_ptr_null(h.plugin->offers[1]);
  ck_assert_ptr_nonnull(h.dv->describe);
  ck_assert_ptr_nonnull(h.dv->accumulate);
  ck_assert_ptr_nonnull(h.dv->all_finite);
  ck_assert(device_harness_has_extension(NULL, CNNB_EXT_FUSED_RELU_ADD));
  void *dev = NULL;
  cnnb_device_config cfg = {
      .struct_size = sizeof cfg, .precision = CNNB_PRECISION_FP16, .training = 1};
  ck_assert_int_eq(h.dv->create(h.ctx, "cpu", &cfg, &dev), CNNB_EUNSUPPORTED);
  ck_assert_ptr_null(dev);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "fp16 is not supported on this CPU device") &&
                    strstr(cnnb_error_message(h.ctx), "fp32"),
                "message: %s", cnnb_error_message(h.ctx));
  cnnb_clear_error(h.ctx);
  cfg.precision = 99;
  ck_assert_int_eq(h.dv->create(h.ctx, "cpu", &cfg, &dev), CNNB_EINVAL);
  ck_assert_ptr_null(dev);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "unknown precision 99"), "message: %s",
                cnnb_error_message(h.ctx));
  cnnb_clear_error(h.ctx);
  cfg.precision = CNNB_PRECISION_FP32;
  cfg.num_threads = 2;
  ck_assert_int_eq(h.dv->create(h.ctx, "cpu", &cfg, &dev), CNNB_OK);
  const char *desc = h.dv->describe(dev);
  ck_assert_msg(strstr(desc, "CPU") && strstr(desc, "2 threads") && strstr(desc, "oneDNN"), "%s",
                desc);
  h.dv->destroy(dev);
  device_harness_close(&h);
}
END_TEST

/* The refusal of an op the device does not know, word for word (test_device_ops checks
 * what every device must say: the status, and the op's number). */
START_TEST(test_unknown_op_messages) {
  device_harness h;
  ck_assert_int_eq(device_harness_open(&h, CNNB_PRECISION_FP32, 1, 1), 0);
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 10);
  cnnb_tensor y = cnnb_pad_channels(g, "newer_op", cnnb_graph_input(g), 1, 2);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ((cnnb_node *)cnnb_graph_node(g, y))->op = 99;
  size_t bytes = 0;
  ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, y, &bytes), CNNB_EUNSUPPORTED);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "node 'newer_op': op 99 is not supported"),
                "message: %s", cnnb_error_message(h.ctx));
  cnnb_clear_error(h.ctx);
  void *state = NULL;
  ck_assert_int_eq(h.dv->prepare(h.dev, g, y, &state), CNNB_EUNSUPPORTED);
  ck_assert_ptr_null(state);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "op 99 is not supported"), "message: %s",
                cnnb_error_message(h.ctx));
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

/* conv -> pad_channels (-> add): the pad keeps the conv's layout, so when the conv's
 * channels are padded to a block (fewer filters than one block: nChw16c / nChw8c), the
 * pad's are padded to the same block. The cases test_device_ops runs numerically. */
START_TEST(test_pad_keeps_conv_layout) {
  static const int cases[][3] = {
      /* filters, before, after */
      {16, 8, 8}, {32, 16, 16}, {16, 0, 16}, {16, 5, 0}, {5, 3, 4}, {7, 0, 0}, {8, 4, 12},
  };
  int blocked = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int with_add = 0; with_add < 2; with_add++) {
      const int filters = cases[i][0], before = cases[i][1], after = cases[i][2];
      const int width = before + filters + after;
      device_harness h;
      ck_assert_int_eq(device_harness_open(&h, CNNB_PRECISION_FP32, 1, 1), 0);
      cnnb_graph *g = cnnb_graph_create(2, 3, 7, 5, 10);
      cnnb_tensor x = cnnb_graph_input(g);
      cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                                  CNNB_CONV2D(.filters = filters, .kernel_h = 3, .kernel_w = 3));
      cnnb_tensor p = cnnb_pad_channels(g, "pad", c, before, after);
      if (with_add)
        cnnb_add(g, "add", p,
                 cnnb_conv2d(g, "side", x,
                             CNNB_CONV2D(.filters = width, .kernel_h = 1, .kernel_w = 1)));
      ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "graph: %s", cnnb_graph_error(g));
      cnnb_shape cs = cnnb_graph_node(g, c)->shape;
      size_t cbytes = 0, pbytes = 0;
      int64_t plane = (int64_t)cs.n * cs.h * cs.w * (int64_t)sizeof(float);
      ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, c, &cbytes), CNNB_OK);
      ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, p, &pbytes), CNNB_OK);
      int64_t block = (int64_t)cbytes / plane;
      if (block > filters) {
        blocked++;
        ck_assert_msg((int64_t)pbytes == (width + block - 1) / block * block * plane,
                      "conv %d -> pad %d, %d%s: %zu bytes for %d channels, want them in blocks "
                      "of %lld",
                      filters, before, after, with_add ? " + add" : "", pbytes, width,
                      (long long)block);
      }
      cnnb_graph_destroy(g);
      device_harness_close(&h);
    }
  printf("test_pad_keeps_conv_layout: %d of %d cases had a padded channel block\n", blocked,
         (int)(2 * sizeof cases / sizeof *cases));
}
END_TEST

/* The child's side of the test below: the cpu device as loaded under this environment,
 * and what create(bf16) said. */
static int bf16_child(void) {
  char msg[2048];
  int rc = device_harness_init("cpu", msg, sizeof msg);
  if (rc != 0) {
    printf("init: %s\n", msg);
  } else {
    const char *why = NULL;
    printf("bf16: %s\n", device_harness_can(CNNB_PRECISION_BF16, &why) ? "accepted" : why);
  }
  device_harness_fini();
  return rc != 0;
}

/* oneDNN held below avx512_core_bf16 (ONEDNN_MAX_CPU_ISA, read once per process, hence the
 * child): the device refuses bf16, naming the ISA it needs and what it can do, whatever
 * this CPU has (avx512_core, or avx2 on a CPU without AVX-512). */
START_TEST(test_bf16_refused_below_avx512_bf16) {
  char cmd[sizeof self + 128];
  snprintf(cmd, sizeof cmd, "ONEDNN_MAX_CPU_ISA=AVX512_CORE '%s' --bf16-child 2>&1", self);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  char out[4096] = "";
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = '\0';
  int status = pclose(f);
  ck_assert_msg(status == 0, "child exited %d: %s", status, out);
  ck_assert_msg(strstr(out, "bf16: cpu: bf16 needs avx512_bf16 (oneDNN ISA avx512_core_bf16)") &&
                    (strstr(out, "offers avx512_core;") || strstr(out, "offers avx2;")) &&
                    strstr(out, "it supports fp32"),
                "child said: %s", out);
}
END_TEST

/* The cpu device runs every op of the core's table: supports_op says so, the core's
 * check agrees, it fuses a ReLU into every op that can take one, and it prepares a
 * graph holding every op. */
static cnnb_graph *every_op_graph(void) {
  cnnb_graph *g = cnnb_graph_create(2, 4, 8, 8, 5);
  cnnb_tensor c = cnnb_conv2d(g, NULL, 0, CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor t = cnnb_batch_norm(g, NULL, c, NULL);
  t = cnnb_relu(g, NULL, t);
  t = cnnb_relu6(g, NULL, t);
  t = cnnb_hard_swish(g, NULL, cnnb_silu(g, NULL, cnnb_sigmoid(g, NULL, t))); /* ABI 1.14 */
  t = cnnb_gelu(g, NULL, cnnb_hard_sigmoid(g, NULL, t), 1);
  t = cnnb_stochastic_depth(g, NULL, t, 0.2f);
  t = cnnb_multiply(g, NULL, t, cnnb_global_avg_pool(g, NULL, t));
  t = cnnb_channel_scale(g, NULL, cnnb_layer_norm(g, NULL, t, 1e-6f), 0.5f);
  t = cnnb_concat(g, NULL, 2,
                  (cnnb_tensor[]){cnnb_slice_channels(g, NULL, t, 0, 3),
                                  cnnb_slice_channels(g, NULL, t, 3, 5)});
  t = cnnb_channel_shuffle(g, NULL, t, 2);
  t = cnnb_lrn(g, NULL, t, CNNB_LRN(.depth_radius = 1, .bias = 1, .alpha = 1e-3f, .beta = 0.75f));
  t = cnnb_max_pool(g, NULL, t, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  cnnb_tensor a = cnnb_avg_pool(g, NULL, c, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  t = cnnb_add(g, NULL, t, a);
  t = cnnb_concat(g, NULL, 2, (cnnb_tensor[]){t, a});
  t = cnnb_pad_channels(g, NULL, t, 1, 2);
  t = cnnb_pad_spatial(g, NULL, t, 0, 1, 0, 1);   /* NASNet's shift: pad bottom and right, */
  t = cnnb_pad_spatial(g, NULL, t, -1, 0, -1, 0); /* then cut the first row and column */
  t = cnnb_global_avg_pool(g, NULL, t);
  t = cnnb_reshape(g, NULL, t, 19, 1, 1);
  t = cnnb_dense(g, NULL, cnnb_flatten(g, NULL, t), CNNB_DENSE(.units = 16));
  t = cnnb_dropout(g, NULL, t, 0.5f);
  cnnb_graph_set_logits(g, cnnb_dense(g, "logits", t, CNNB_DENSE(.units = 5)));
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  return g;
}

START_TEST(cpu_supports_every_op) {
  device_harness h;
  ck_assert_msg(device_harness_open(&h, CNNB_PRECISION_FP32, 1, 1) == 0, "%s", h.error);
  ck_assert_uint_ge(h.dv->struct_size,
                    offsetof(cnnb_device_vtable, supports_op) + sizeof(h.dv->supports_op));
  ck_assert_ptr_nonnull(h.dv->supports_op);
  for (uint32_t op = 1; op < CNNB_OP_COUNT_; op++)
    ck_assert_msg(h.dv->supports_op(h.dev, op) == 1, "cpu does not run %s", cnnb_op_name(op));
  ck_assert_int_eq(h.dv->supports_op(h.dev, 0), 0);
  ck_assert_int_eq(h.dv->supports_op(h.dev, CNNB_OP_COUNT_), 0);
  ck_assert_int_eq(h.dv->supports_op(h.dev, 99), 0);

  cnnb_graph *g = every_op_graph();
  bool seen[CNNB_OP_COUNT_] = {false};
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) seen[cnnb_graph_node(g, i)->op] = true;
  for (uint32_t op = 1; op < CNNB_OP_COUNT_; op++)
    ck_assert_msg(seen[op], "every_op_graph lacks %s", cnnb_op_name(op));
  ck_assert_int_eq(cnnb_ops_check_device(h.ctx, g, h.dv, h.dev, h.plugin->abi_minor, "cpu"),
                   CNNB_OK);
  ck_assert_uint_eq(cnnb_ops_device_relu_fusion(h.plugin, h.dv, h.dev), CNNB_FUSE_ALL);
  /* And what it says it runs, it prepares. */
  device_run *run = device_run_create(&h, g);
  ck_assert_msg(run != NULL, "%s", h.error);
  device_run_destroy(run);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cpu_plugin");
  TCase *tc = tcase_create("cpu");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_descriptor_slots_and_description);
  tcase_add_test(tc, test_unknown_op_messages);
  tcase_add_test(tc, test_pad_keeps_conv_layout);
  tcase_add_test(tc, test_bf16_refused_below_avx512_bf16);
  tcase_add_test(tc, cpu_supports_every_op);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  snprintf(self + (len > 0 ? len : 0), sizeof self - (size_t)(len > 0 ? len : 0), "%s",
           len > 0 ? "" : argv[0]);
  if (argc > 1 && strcmp(argv[1], "--bf16-child") == 0) return bf16_child();
  return device_harness_main("test_cpu_plugin", "cpu", suite);
}
