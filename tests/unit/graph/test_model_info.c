/* test_model_info.c — the model report: per-layer params and FLOPs of a small graph
 * counted by hand, the printed summary lines, and tf_cnn_benchmarks' AlexNet built
 * inline (models/alexnet_model.py), whose trainable parameter count with 1001 classes
 * is 61,842,345. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/model_info.h"

/* [2, 3, 8, 8] -> conv 4x3x3 SAME + bias -> bn (offset only) -> relu -> max pool 2x2
 * -> dense 10 + bias, then the loss. */
static cnnb_graph *small_graph(void) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 8, 8, 10);
  cnnb_tensor t = cnnb_conv2d(g, "conv", 0,
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3,
                                          .use_bias = 1));
  t = cnnb_batch_norm(g, "bn", t, NULL);
  t = cnnb_relu(g, "relu", t);
  t = cnnb_max_pool(g, "pool", t, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  t = cnnb_dense(g, "fc", t, CNNB_DENSE(.units = 10, .use_bias = 1));
  cnnb_graph_set_logits(g, t);
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  return g;
}

/* Captures cnnb_model_info_print's output. */
static char *print_to_string(const cnnb_graph *g, const cnnb_model_report *r) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  cnnb_model_info_print(g, r, f);
  long size = ftell(f);
  rewind(f);
  char *text = calloc(1, (size_t)size + 1);
  ck_assert_int_eq(fread(text, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  return text;
}

START_TEST(test_small_graph) {
  cnnb_graph *g = small_graph();
  cnnb_model_report r;
  ck_assert_int_eq(cnnb_model_info_compute(g, &r), CNNB_OK);
  ck_assert_int_eq(r.num_layers, 8); /* input conv bn relu pool fc labels loss */
  static const struct {
    const char *name, *op;
    int64_t params, flops, matmul, bytes;
  } want[] = {
      {"input", "input", 0, 0, 0, 192 * 4},
      /* 2*3*3*3*4*8*8 = 13824, + bias 256 */
      {"conv", "conv2d", 108 + 4, 14080, 14080, 256 * 4},
      /* (3 stats + 2 normalise + 1 offset) per element; gamma absent */
      {"bn", "batch_norm", 4, 256 * 6, 0, 256 * 4},
      {"relu", "relu", 0, 256, 0, 256 * 4},
      /* 4 comparisons per output element, [4, 4, 4] */
      {"pool", "max_pool", 0, 64 * 4, 0, 64 * 4},
      /* 2*64*10 + 10 */
      {"fc", "dense", 640 + 10, 1290, 1290, 10 * 4},
      {"labels", "labels", 0, 0, 0, 1 * 4},
      {"loss", "softmax_xent", 0, 4 * 10 + 1, 0, 0},
  };
  for (int i = 0; i < 8; i++) {
    const cnnb_model_layer *l = &r.layers[i];
    ck_assert_str_eq(l->name, want[i].name);
    ck_assert_str_eq(l->op, want[i].op);
    ck_assert_int_eq(l->node, i);
    ck_assert_int_eq(l->params, want[i].params);
    ck_assert_int_eq(l->flops, want[i].flops);
    ck_assert_int_eq(l->flops_matmul, want[i].matmul);
    ck_assert_int_eq(l->activation_bytes, want[i].bytes);
  }
  ck_assert_int_eq(r.layers[1].shape.n, 2);
  ck_assert_int_eq(r.layers[4].shape.h, 4);
  ck_assert_int_eq(r.trainable_params, 766);
  ck_assert_int_eq(r.stat_count, 8);
  ck_assert_int_eq(r.flops_matmul, 15370);
  ck_assert_int_eq(r.flops, 15370 + 1536 + 256 + 256 + 41);
  ck_assert_int_eq(r.activation_bytes, 1035 * 4);

  char *text = print_to_string(g, &r);
  ck_assert_msg(strstr(text, "\nTrainable parameters: 766\n"), "%s", text);
  ck_assert_msg(strstr(text, "\nForward GFLOPs per image: 0.000\n"), "%s", text);
  ck_assert_msg(strstr(text, "\nActivation memory per image (training): 0.0 MiB\n"), "%s", text);
  ck_assert_msg(strstr(text, "[4, 8, 8]"), "%s", text);
  ck_assert_msg(strstr(text, "0.014"), "conv's 14080 FLOPs as MFLOPs: %s", text);
  free(text);
  cnnb_model_report_free(&r);
  ck_assert_ptr_null(r.layers);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_conv_variants) {
  /* Groups and stride: 2*3*3*(16/4)*32*16*16 = 589824; no bias. Fused ReLU adds 1 per element. */
  cnnb_graph *g = cnnb_graph_create(1, 16, 32, 32, 10);
  cnnb_tensor t = cnnb_conv2d(g, "c", 0,
                              CNNB_CONV2D(.filters = 32, .kernel_h = 3, .kernel_w = 3,
                                          .stride_h = 2, .stride_w = 2, .groups = 4));
  cnnb_tensor a = cnnb_avg_pool(g, "a", t, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  cnnb_tensor p = cnnb_global_avg_pool(g, "gap", a);
  ck_assert_int_eq(cnnb_graph_set_fused_relu(g, t, 1), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_fused_relu(g, p, 1), CNNB_EINVAL);
  cnnb_model_report r;
  ck_assert_int_eq(cnnb_model_info_compute(g, &r), CNNB_OK);
  ck_assert_int_eq(r.layers[1].flops_matmul, 589824);
  ck_assert_int_eq(r.layers[1].flops, 589824 + 32 * 16 * 16);
  ck_assert_int_eq(r.layers[1].params, 32 * 4 * 9);
  ck_assert_int_eq(r.layers[2].flops, 32 * 8 * 8 * 5); /* 4 adds + 1 divide */
  ck_assert_int_eq(r.layers[3].flops, 32 * (8 * 8 + 1));
  cnnb_model_report_free(&r);
  cnnb_graph_destroy(g);

  /* A failed graph has no report. */
  g = cnnb_graph_create(1, 3, 2, 2, 10);
  cnnb_max_pool(g, "p", 0, CNNB_POOL(.kernel_h = 3, .kernel_w = 3));
  ck_assert_int_eq(cnnb_model_info_compute(g, &r), CNNB_EINVAL);
  ck_assert_ptr_null(r.layers);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_relu6_flops) {
  /* relu6 counts 2 per output element (max, then min), relu 1; neither is matmul, and
   * relu6 is never folded into the conv's fused-ReLU count. */
  cnnb_graph *g = cnnb_graph_create(3, 8, 7, 5, 10);
  cnnb_tensor c = cnnb_conv2d(g, "c", 0, CNNB_CONV2D(.filters = 6, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor r6 = cnnb_relu6(g, "r6", c);
  cnnb_tensor r = cnnb_relu(g, "r", r6);
  (void)r;
  cnnb_model_report rep;
  ck_assert_int_eq(cnnb_model_info_compute(g, &rep), CNNB_OK);
  ck_assert_int_eq(rep.num_layers, 4);
  const cnnb_model_layer *l = &rep.layers[r6];
  ck_assert_str_eq(l->op, "relu6");
  ck_assert_int_eq(l->flops, 2 * 6 * 7 * 5);
  ck_assert_int_eq(l->flops_matmul, 0);
  ck_assert_int_eq(l->params, 0);
  ck_assert_int_eq(l->activation_bytes, 6 * 7 * 5 * 4);
  ck_assert_int_eq(rep.layers[r].flops, 6 * 7 * 5);
  ck_assert_int_eq(rep.layers[c].flops, 2 * 8 * 6 * 7 * 5);
  ck_assert_int_eq(rep.flops, 2 * 8 * 6 * 7 * 5 + 3 * 6 * 7 * 5);
  ck_assert_int_eq(rep.flops_matmul, 2 * 8 * 6 * 7 * 5);
  cnnb_model_report_free(&rep);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_pad_channels_counts) {
  /* pad_channels moves data: 0 FLOPs, no parameters; its output (zeros included) is an
   * activation like any other. The add after it counts its padded width. */
  cnnb_graph *g = cnnb_graph_create(2, 3, 6, 5, 10);
  cnnb_tensor c = cnnb_conv2d(g, "c", 0, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor p = cnnb_pad_channels(g, "p", c, 2, 3);
  cnnb_tensor r = cnnb_conv2d(g, "r", c, CNNB_CONV2D(.filters = 9, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor a = cnnb_add(g, "a", p, r);
  cnnb_model_report rep;
  ck_assert_int_eq(cnnb_model_info_compute(g, &rep), CNNB_OK);
  ck_assert_int_eq(rep.num_layers, 5);
  const cnnb_model_layer *l = &rep.layers[p];
  ck_assert_str_eq(l->op, "pad_channels");
  ck_assert_int_eq(l->shape.c, 9);
  ck_assert_int_eq(l->flops, 0);
  ck_assert_int_eq(l->flops_matmul, 0);
  ck_assert_int_eq(l->params, 0);
  ck_assert_int_eq(l->activation_bytes, 9 * 6 * 5 * 4);
  ck_assert_int_eq(rep.layers[a].flops, 9 * 6 * 5);
  ck_assert_int_eq(rep.trainable_params, 3 * 4 + 4 * 9);
  ck_assert_int_eq(rep.flops, 2 * 3 * 4 * 6 * 5 + 2 * 4 * 9 * 6 * 5 + 9 * 6 * 5);
  cnnb_model_report_free(&rep);
  cnnb_graph_destroy(g);
}
END_TEST

/* tf_cnn_benchmarks' AlexnetModel: image size 224 + 3 (VALID needs the extra 3),
 * conv = conv + bias + ReLU, affine = dense + bias (+ ReLU but for the logits), dropout
 * keep 0.5. */
static cnnb_graph *alexnet(int32_t batch) {
  cnnb_graph *g = cnnb_graph_create(batch, 3, 227, 227, 1001);
  cnnb_tensor t = cnnb_graph_input(g);
#define CONV(f, k, s, pad)                                                                  \
  t = cnnb_relu(g, NULL,                                                                    \
                cnnb_conv2d(g, NULL, t,                                                     \
                            CNNB_CONV2D(.filters = (f), .kernel_h = (k), .kernel_w = (k),   \
                                        .stride_h = (s), .stride_w = (s), .padding = (pad), \
                                        .use_bias = 1)))
#define MPOOL()                 \
  t = cnnb_max_pool(g, NULL, t, \
                    CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2))
  CONV(64, 11, 4, CNNB_PAD_VALID);
  MPOOL();
  CONV(192, 5, 1, CNNB_PAD_SAME);
  MPOOL();
  CONV(384, 3, 1, CNNB_PAD_SAME);
  CONV(384, 3, 1, CNNB_PAD_SAME);
  CONV(256, 3, 1, CNNB_PAD_SAME);
  MPOOL();
#undef CONV
#undef MPOOL
  t = cnnb_reshape(g, NULL, t, 256 * 6 * 6, 1, 1);
  t = cnnb_relu(g, NULL, cnnb_dense(g, NULL, t, CNNB_DENSE(.units = 4096, .use_bias = 1)));
  t = cnnb_dropout(g, NULL, t, 0.5f);
  t = cnnb_relu(g, NULL, cnnb_dense(g, NULL, t, CNNB_DENSE(.units = 4096, .use_bias = 1)));
  t = cnnb_dropout(g, NULL, t, 0.5f);
  t = cnnb_dense(g, "logits", t, CNNB_DENSE(.units = 1001, .use_bias = 1));
  cnnb_graph_set_logits(g, t);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  return g;
}

START_TEST(test_alexnet) {
  cnnb_graph *g = alexnet(4);
  cnnb_model_report r;
  ck_assert_int_eq(cnnb_model_info_compute(g, &r), CNNB_OK);
  ck_assert_int_eq(r.trainable_params, 61842345);
  ck_assert_int_eq(cnnb_graph_trainable_count(g), 61842345);
  ck_assert_int_eq(r.stat_count, 0);
  /* Conv + dense FLOPs, with biases, by hand:
   * 140747200 + 448037568 + 224345472 + 448626048 + 299084032 + 75501568 + 33558528 + 8201193 */
  ck_assert_int_eq(r.flops_matmul, 1678101609LL);
  ck_assert_int_gt(r.flops, r.flops_matmul);
  /* conv1 is 55x55, pool1 27x27, the last pool 6x6. */
  ck_assert_int_eq(r.layers[1].shape.h, 55);
  ck_assert_int_eq(r.layers[3].shape.h, 27);
  char *text = print_to_string(g, &r);
  ck_assert_msg(strstr(text, "\nTrainable parameters: 61842345\n"), "%s", text);
  ck_assert_msg(strstr(text, "\nForward GFLOPs per image: 1.678\n"), "%s", text);
  ck_assert_msg(strstr(text, "\nActivation memory per image (training): "), "%s", text);
  ck_assert_msg(strstr(text, "logits"), "%s", text);
  /* Per image: the report does not depend on the batch. */
  cnnb_graph *g1 = alexnet(1);
  cnnb_model_report r1;
  ck_assert_int_eq(cnnb_model_info_compute(g1, &r1), CNNB_OK);
  ck_assert_int_eq(r1.flops, r.flops);
  ck_assert_int_eq(r1.activation_bytes, r.activation_bytes);
  char *text1 = print_to_string(g1, &r1);
  ck_assert_str_eq(strstr(text1, "Trainable parameters:"), strstr(text, "Trainable parameters:"));
  free(text1);
  free(text);
  cnnb_model_report_free(&r1);
  cnnb_model_report_free(&r);
  cnnb_graph_destroy(g1);
  cnnb_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("model_info");
  TCase *tc = tcase_create("report");
  tcase_add_test(tc, test_small_graph);
  tcase_add_test(tc, test_conv_variants);
  tcase_add_test(tc, test_relu6_flops);
  tcase_add_test(tc, test_pad_channels_counts);
  tcase_add_test(tc, test_alexnet);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
