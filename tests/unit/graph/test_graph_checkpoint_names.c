/* test_graph_checkpoint_names.c — cnnb_graph_set_checkpoint_name (graph.h, ABI 1.5): the
 * keys it gives a conv2d's, a dense layer's and a batch norm's params and stats (the op
 * table's torch suffixes), with and without a batch-norm scale; the params it leaves
 * under their own names; the prefix copied; and each refusal (no params, unknown tensor,
 * NULL or empty prefix, a prefix or a node named twice), which is the graph's sticky
 * error naming the node and the prefix. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

#define ck_assert_error_has(g, needle)                                                  \
  ck_assert_msg(strstr(cnnb_graph_error(g), (needle)) != NULL, "error '%s' lacks '%s'", \
                cnnb_graph_error(g), (needle))

/* The key of node t's k-th param (k < num_params) or stat (k - num_params). */
static const char *key_of(const cnnb_graph *g, cnnb_tensor t, int k) {
  const cnnb_node *n = cnnb_graph_node(g, t);
  ck_assert_ptr_nonnull(n);
  ck_assert_int_lt(k, n->num_params + n->num_stats);
  int32_t index = k < n->num_params ? n->params[k] : n->stats[k - n->num_params];
  return cnnb_graph_param_key(g, index);
}

/* input [1, 3, 8, 8] -> conv "c" (bias) -> batch norm "bn" (scale per `scale`) -> relu
 * -> dense "fc" (bias). */
typedef struct small {
  cnnb_graph *g;
  cnnb_tensor conv, bn, relu, fc;
} small;

static small build(int scale) {
  small s;
  s.g = cnnb_graph_create(1, 3, 8, 8, 5);
  ck_assert_ptr_nonnull(s.g);
  s.conv = cnnb_conv2d(s.g, "c", cnnb_graph_input(s.g),
                       CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3, .use_bias = 1));
  s.bn = cnnb_batch_norm(s.g, "bn", s.conv, CNNB_BATCH_NORM(.scale = scale));
  s.relu = cnnb_relu(s.g, "r", s.bn);
  s.fc = cnnb_dense(s.g, "fc", s.relu, CNNB_DENSE(.units = 5, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_status(s.g), CNNB_OK);
  return s;
}

START_TEST(test_keys) {
  small s = build(1);
  cnnb_graph *g = s.g;
  /* Before any call, every param is saved under its own name. */
  ck_assert_str_eq(key_of(g, s.conv, 0), "c/kernel");
  ck_assert_ptr_null(cnnb_graph_node_checkpoint_name(g, s.conv));

  char prefix[32];
  snprintf(prefix, sizeof prefix, "layer1.0.conv1");
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, s.conv, prefix), CNNB_OK);
  strcpy(prefix, "scribbled"); /* the graph keeps its own copy */
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, s.bn, "layer1.0.bn1"), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, s.fc, "fc"), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);

  ck_assert_str_eq(cnnb_graph_node_checkpoint_name(g, s.conv), "layer1.0.conv1");
  ck_assert_str_eq(key_of(g, s.conv, 0), "layer1.0.conv1.weight");
  ck_assert_str_eq(key_of(g, s.conv, 1), "layer1.0.conv1.bias");
  ck_assert_str_eq(key_of(g, s.bn, 0), "layer1.0.bn1.weight");       /* gamma */
  ck_assert_str_eq(key_of(g, s.bn, 1), "layer1.0.bn1.bias");         /* beta */
  ck_assert_str_eq(key_of(g, s.bn, 2), "layer1.0.bn1.running_mean"); /* moving_mean */
  ck_assert_str_eq(key_of(g, s.bn, 3), "layer1.0.bn1.running_var");  /* moving_variance */
  ck_assert_str_eq(key_of(g, s.fc, 0), "fc.weight");
  ck_assert_str_eq(key_of(g, s.fc, 1), "fc.bias");
  /* The params' own names are unchanged: the executor and the logs still use them. */
  ck_assert_str_eq(cnnb_graph_param(g, cnnb_graph_node(g, s.conv)->params[0])->name, "c/kernel");
  ck_assert_ptr_null(cnnb_graph_node_checkpoint_name(g, s.relu));
  ck_assert_ptr_null(cnnb_graph_param_key(g, cnnb_graph_num_params(g)));
  ck_assert_ptr_null(cnnb_graph_param_key(g, -1));
  ck_assert_ptr_null(cnnb_graph_node_checkpoint_name(g, 99));
  cnnb_graph_destroy(g);
}
END_TEST

/* A batch norm without a learned scale still names its offset, mean and variance
 * (the writer adds torchvision's ones "weight" itself); other nodes keep their names. */
START_TEST(test_keys_without_scale) {
  small s = build(0);
  cnnb_graph *g = s.g;
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, s.bn, "features.0.1"), CNNB_OK);
  const cnnb_node *bn = cnnb_graph_node(g, s.bn);
  ck_assert_int_eq(bn->num_params + bn->num_stats, 3);
  ck_assert_str_eq(key_of(g, s.bn, 0), "features.0.1.bias");
  ck_assert_str_eq(key_of(g, s.bn, 1), "features.0.1.running_mean");
  ck_assert_str_eq(key_of(g, s.bn, 2), "features.0.1.running_var");
  ck_assert_str_eq(key_of(g, s.conv, 0), "c/kernel");
  ck_assert_str_eq(key_of(g, s.fc, 1), "fc/bias");
  cnnb_graph_destroy(g);
}
END_TEST

/* Each refusal: the status, the sticky error naming the node and the prefix, no key set,
 * and later calls refused with the first error kept. */
typedef struct refusal {
  const char *why;
  const char *prefix;
  int target;            /* 0 conv, 1 bn, 2 relu, 3 fc, 4 a tensor that does not exist */
  int first;             /* -1: nothing named first; else the node named "taken" before */
  const char *expect[3]; /* substrings of the error */
} refusal;

static const refusal refusals[] = {
    {"no params", "r", 2, -1, {"relu 'r'", "owns no parameters", "'r'"}},
    {"unknown tensor", "ghost", 4, -1, {"tensor 42 does not exist", "'ghost'"}},
    {"empty prefix", "", 0, -1, {"conv2d 'c'", "prefix is empty"}},
    {"NULL prefix", NULL, 0, -1, {"conv2d 'c'", "prefix is NULL"}},
    {"duplicate prefix", "taken", 3, 0, {"dense 'fc'", "prefix 'taken'", "conv2d 'c'"}},
    {"node named twice", "again", 0, 0, {"conv2d 'c'", "'taken'", "'again'"}},
};

START_TEST(test_refusals) {
  const refusal *r = &refusals[_i];
  small s = build(1);
  cnnb_graph *g = s.g;
  const cnnb_tensor targets[5] = {s.conv, s.bn, s.relu, s.fc, 42};
  if (r->first >= 0)
    ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, targets[r->first], "taken"), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, targets[r->target], r->prefix), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(g, "set_checkpoint_name");
  for (int k = 0; k < 3 && r->expect[k]; k++) ck_assert_error_has(g, r->expect[k]);
  /* The refused node kept its own keys (or the first name it was given). */
  if (r->target == 3) ck_assert_str_eq(key_of(g, s.fc, 0), "fc/kernel");
  if (r->target == 0)
    ck_assert_str_eq(key_of(g, s.conv, 0), r->first == 0 ? "taken.weight" : "c/kernel");
  /* Sticky: a valid call afterwards is refused with the first error kept. */
  char first[1024];
  snprintf(first, sizeof first, "%s", cnnb_graph_error(g));
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, s.bn, "fine"), CNNB_EINVAL);
  ck_assert_str_eq(cnnb_graph_error(g), first);
  ck_assert_ptr_null(cnnb_graph_node_checkpoint_name(g, s.bn));
  cnnb_graph_destroy(g);
}
END_TEST

/* After an earlier builder error, naming returns that error and records nothing. */
START_TEST(test_after_error) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_tensor c = cnnb_conv2d(g, "c", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3));
  cnnb_conv2d(g, "bad", c, CNNB_CONV2D(.filters = 0, .kernel_h = 3, .kernel_w = 3));
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(g, c, "conv1"), CNNB_EINVAL);
  ck_assert_error_has(g, "filters 0");
  ck_assert_ptr_null(cnnb_graph_node_checkpoint_name(g, c));
  ck_assert_int_eq(cnnb_graph_set_checkpoint_name(NULL, c, "conv1"), CNNB_EINVAL);
  cnnb_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("graph_checkpoint_names");
  TCase *tc = tcase_create("names");
  tcase_add_test(tc, test_keys);
  tcase_add_test(tc, test_keys_without_scale);
  tcase_add_loop_test(tc, test_refusals, 0, (int)(sizeof refusals / sizeof refusals[0]));
  tcase_add_test(tc, test_after_error);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
