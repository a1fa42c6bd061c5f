/* test_op_table.c — the op table (core/src/graph/op_table.c): every op code has a whole row
 * indexed by its op, with a unique name and an ABI minor no newer than this SDK's; the
 * ReLU fusion sets and backward reads it derives; and cnnb_ops_check_device
 * (op_device.c), which refuses a device lacking an op before anything is allocated,
 * against fake device vtables (the real cpu device's answers: test_cpu_plugin.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/cnnb.h>
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "graph/op_device.h"
#include "graph/op_table.h"
#include "exec/plan.h"

static cnnb_ctx *ctx;
static void setup(void) { ctx = cnnb_ctx_create("test", NULL); }
static void teardown(void) { cnnb_ctx_destroy(ctx); }

#define ck_assert_message_has(needle)                                                         \
  ck_assert_msg(strstr(cnnb_error_message(ctx), (needle)) != NULL, "message '%s' lacks '%s'", \
                cnnb_error_message(ctx), (needle))

START_TEST(rows_complete) {
  for (uint32_t op = 1; op < CNNB_OP_COUNT_; op++) {
    const cnnb_op_row *row = cnnb_op_row_of(op);
    ck_assert_msg(row != NULL, "op %u has no row", op);
    ck_assert_uint_eq(row->op, op);
    ck_assert_msg(row->name && row->name[0], "op %u has no name", op);
    ck_assert_str_eq(cnnb_op_name(op), row->name);
    ck_assert_msg(row->min_inputs >= 0 && row->max_inputs >= row->min_inputs, "%s: arity %d..%d",
                  row->name, row->min_inputs, row->max_inputs);
    ck_assert_msg(row->infer != NULL, "%s has no shape rule", row->name);
    ck_assert_msg(row->flops != NULL, "%s has no FLOPs rule", row->name);
    ck_assert_msg(row->backward_output >= CNNB_OP_OUTPUT_UNREAD &&
                      row->backward_output <= CNNB_OP_OUTPUT_READ_IF_FUSED,
                  "%s: backward reads of its output not stated (%u)", row->name,
                  row->backward_output);
    ck_assert_msg(row->since_minor <= CNNB_ABI_MINOR, "%s since ABI 1.%u, this SDK is 1.%d",
                  row->name, row->since_minor, CNNB_ABI_MINOR);
    ck_assert_msg(row->fuse_relu || !row->fuse_relu_ext, "%s: an extension for no fusion",
                  row->name);
    for (uint32_t other = 1; other < op; other++)
      ck_assert_msg(strcmp(cnnb_op_row_of(other)->name, row->name) != 0,
                    "ops %u and %u are both '%s'", other, op, row->name);
  }
  ck_assert_ptr_null(cnnb_op_row_of(0));
  ck_assert_ptr_null(cnnb_op_row_of(CNNB_OP_COUNT_));
  ck_assert_ptr_null(cnnb_op_row_of(99));
  ck_assert_str_eq(cnnb_op_name(99), "unknown");
}
END_TEST

START_TEST(since_minor) {
  /* The versions graph.h and abi.h state; they never change once released. */
  ck_assert_uint_eq(cnnb_op_row_of(CNNB_OP_CONV2D)->since_minor, 0);
  ck_assert_uint_eq(cnnb_op_row_of(CNNB_OP_SOFTMAX_XENT)->since_minor, 0);
  ck_assert_uint_eq(cnnb_op_row_of(CNNB_OP_RELU6)->since_minor, 1);
  ck_assert_uint_eq(cnnb_op_row_of(CNNB_OP_PAD_CHANNELS)->since_minor, 2);
  for (uint32_t op = 1; op < CNNB_OP_RELU6; op++)
    ck_assert_uint_eq(cnnb_op_row_of(op)->since_minor, 0);
}
END_TEST

static int only_add_ext(void *user, const char *id) {
  ++*(int *)user;
  return strcmp(id, CNNB_EXT_FUSED_RELU_ADD) == 0;
}

static int no_ext(void *user, const char *id) {
  ++*(int *)user;
  return 0;
}

START_TEST(relu_fusion_sets) {
  const uint32_t v10 = CNNB_FUSE_OP(CNNB_OP_CONV2D) | CNNB_FUSE_OP(CNNB_OP_BATCH_NORM);
  ck_assert_uint_eq(CNNB_FUSE_ABI_1_0, v10);
  ck_assert_uint_eq(CNNB_FUSE_ALL, v10 | CNNB_FUSE_OP(CNNB_OP_ADD));
  int asked = 0;
  ck_assert_uint_eq(cnnb_ops_relu_fusion(only_add_ext, &asked), CNNB_FUSE_ALL);
  ck_assert_int_eq(asked, 1); /* only rows behind an extension ask */
  asked = 0;
  ck_assert_uint_eq(cnnb_ops_relu_fusion(no_ext, &asked), v10);
  ck_assert_int_eq(asked, 1);
}
END_TEST

START_TEST(backward_reads) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor c = cnnb_conv2d(g, "c", 0, CNNB_CONV2D(.filters = 5, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor p = cnnb_global_avg_pool(g, "p", c);
  cnnb_tensor l = cnnb_dense(g, "logits", p, CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  uint32_t mask;
  bool out;
  cnnb_op_backward_reads(cnnb_graph_node(g, c), &mask, &out);
  ck_assert_uint_eq(mask, 1);
  ck_assert(!out);
  ck_assert_int_eq(cnnb_graph_set_fused_relu(g, c, 1), CNNB_OK);
  cnnb_op_backward_reads(cnnb_graph_node(g, c), &mask, &out);
  ck_assert_uint_eq(mask, 1);
  ck_assert(out); /* the fused ReLU's mask */
  cnnb_op_backward_reads(cnnb_graph_node(g, cnnb_graph_loss(g)), &mask, &out);
  ck_assert_uint_eq(mask, 2); /* the labels, not the logits */
  ck_assert(!out);
  cnnb_op_backward_reads(cnnb_graph_node(g, 0), &mask, &out);
  ck_assert_uint_eq(mask, 0);
  ck_assert(!out);
  /* An op the host does not know keeps everything. */
  cnnb_node unknown = *cnnb_graph_node(g, p);
  unknown.op = 99;
  cnnb_op_backward_reads(&unknown, &mask, &out);
  ck_assert_uint_eq(mask, ~0u);
  ck_assert(out);
  /* A fused ReLU counts 1 per output element on top of the op's own FLOPs. */
  int64_t flops, matmul;
  const cnnb_node *conv = cnnb_graph_node(g, c);
  cnnb_op_flops(cnnb_graph_node(g, conv->inputs[0])->shape, conv, &flops, &matmul);
  ck_assert_int_eq(matmul, 2 * 3 * 5 * 16);
  ck_assert_int_eq(flops, matmul + 5 * 16);
  cnnb_op_flops(conv->shape, &unknown, &flops, &matmul);
  ck_assert_int_eq(flops, 0);
  ck_assert_int_eq(matmul, 0);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(arity_refused_by_name) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 4, 4, 5);
  ck_assert_int_eq(cnnb_concat(g, "cat", 0, NULL), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_str_eq(cnnb_graph_error(g), "concat 'cat': count 0 must be >= 1");
  cnnb_graph_destroy(g);
}
END_TEST

/* ---- cnnb_ops_check_device with fake devices -------------------------------------------- */

typedef struct fake_device {
  uint32_t refuse; /* op it says no to; 0: none */
  int asked[CNNB_OP_COUNT_ + 1];
} fake_device;

static int32_t fake_supports_op(void *device, uint32_t op) {
  fake_device *d = device;
  d->asked[op < CNNB_OP_COUNT_ ? op : CNNB_OP_COUNT_]++;
  return op != d->refuse;
}

/* Nothing may be allocated or sized before the check passes. */
static cnnb_status fake_alloc(void *device, size_t bytes, void **ptr) {
  ck_abort_msg("alloc called during the op check");
  return CNNB_EINTERNAL;
}

static cnnb_status fake_tensor_bytes(void *device, const cnnb_graph *g, cnnb_tensor t,
                                     size_t *bytes) {
  ck_abort_msg("tensor_bytes called during the op check");
  return CNNB_EINTERNAL;
}

static cnnb_device_vtable fake_vtable(bool with_supports_op) {
  return (cnnb_device_vtable){.struct_size = sizeof(cnnb_device_vtable),
                              .alloc = fake_alloc,
                              .tensor_bytes = fake_tensor_bytes,
                              .supports_op = with_supports_op ? fake_supports_op : NULL};
}

/* input -> conv -> relu6 "act1" -> pad_channels -> relu6 "act2" -> relu6 -> gap -> dense,
 * and the loss. */
static cnnb_graph *mobile_graph(void) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 6, 6, 5);
  cnnb_tensor t = cnnb_conv2d(g, "conv", 0,
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3));
  t = cnnb_relu6(g, "act1", t);
  t = cnnb_pad_channels(g, "pad", t, 1, 1);
  t = cnnb_relu6(g, "act2", t);
  t = cnnb_relu6(g, "act3", t);
  t = cnnb_global_avg_pool(g, "gap", t);
  cnnb_graph_set_logits(g, cnnb_dense(g, "logits", t, CNNB_DENSE(.units = 5)));
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  return g;
}

START_TEST(check_refused_op_named) {
  cnnb_graph *g = mobile_graph();
  cnnb_device_vtable dv = fake_vtable(true);
  fake_device dev = {.refuse = CNNB_OP_RELU6};
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"),
                   CNNB_EUNSUPPORTED);
  ck_assert_message_has(
      "device 'fake' cannot run op relu6, which node 'act1' (and 2 more nodes) uses");
  ck_assert_message_has("the device says it does not support relu6");
  ck_assert_int_eq(dev.asked[CNNB_OP_RELU6], 1);
  ck_assert_int_eq(dev.asked[CNNB_OP_PAD_CHANNELS], 0); /* stops at the first refusal */
  cnnb_clear_error(ctx);

  /* Refusing an op used once: no "more" clause. */
  dev = (fake_device){.refuse = CNNB_OP_PAD_CHANNELS};
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"),
                   CNNB_EUNSUPPORTED);
  ck_assert_message_has("cannot run op pad_channels, which node 'pad' uses: the device says");
  cnnb_clear_error(ctx);

  /* Even the host's own nodes are asked about: a device must run the loss too. */
  dev = (fake_device){.refuse = CNNB_OP_SOFTMAX_XENT};
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"),
                   CNNB_EUNSUPPORTED);
  ck_assert_message_has("op softmax_xent, which node 'loss' uses");
  cnnb_clear_error(ctx);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(check_old_minor_refuses_newer_op) {
  cnnb_graph *g = mobile_graph();
  cnnb_device_vtable dv = fake_vtable(false);
  fake_device dev = {0};
  /* Built for 1.0, no supports_op: relu6 (1.1) comes first in node order. */
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, 0, "old"), CNNB_EUNSUPPORTED);
  ck_assert_message_has(
      "device 'old' cannot run op relu6, which node 'act1' (and 2 more nodes) uses");
  ck_assert_message_has("built for cnnbench ABI 1.0, before relu6 was added in ABI 1.1; "
                        "rebuild it against the 1.1 SDK or newer");
  cnnb_clear_error(ctx);
  /* Built for 1.1: relu6 is fine, pad_channels (1.2) is not. */
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, 1, "old"), CNNB_EUNSUPPORTED);
  ck_assert_message_has("op pad_channels, which node 'pad' uses: the device was built for "
                        "cnnbench ABI 1.1, before pad_channels was added in ABI 1.2");
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, 2, "old"), CNNB_OK);

  /* A supports_op that says yes to an op from after its minor is not believed. */
  dv = fake_vtable(true);
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, 1, "liar"), CNNB_EUNSUPPORTED);
  ck_assert_message_has("built for cnnbench ABI 1.1, before pad_channels");
  cnnb_clear_error(ctx);

  /* A 1.2-sized vtable has no supports_op slot, whatever lies past its end. */
  dev = (fake_device){.refuse = CNNB_OP_RELU6};
  dv.struct_size = (uint32_t)offsetof(cnnb_device_vtable, supports_op);
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, 2, "old"), CNNB_OK);
  ck_assert_int_eq(dev.asked[CNNB_OP_RELU6], 0);
  cnnb_graph_destroy(g);
}
END_TEST

/* Label smoothing is an attribute of the loss, not an op: a device of a minor before 1.14
 * would compute the plain loss, so it is refused, naming the loss and the flag. */
START_TEST(check_old_minor_refuses_label_smoothing) {
  cnnb_graph *g = mobile_graph();
  cnnb_device_vtable dv = fake_vtable(false);
  fake_device dev = {0};
  const uint32_t old = CNNB_ABI_MINOR_ACTIVATIONS - 1;
  /* The graph's other ops are older than 1.14: without smoothing the old device runs it. */
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, old, "old"), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_label_smoothing(g, 0.1f), CNNB_OK);
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, old, "old"), CNNB_EUNSUPPORTED);
  ck_assert_message_has("device 'old' cannot smooth the labels of loss 'loss' "
                        "(--label_smoothing): the device was built for cnnbench ABI 1.13, "
                        "before label smoothing was added in ABI 1.14");
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR_ACTIVATIONS, "new"),
                   CNNB_OK);
  /* Outside [0, 1): refused by the graph, which keeps the error. */
  ck_assert_int_eq(cnnb_graph_set_label_smoothing(g, 1.0f), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "label smoothing 1 must be in [0, 1)"));
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(check_accepting_device) {
  cnnb_graph *g = mobile_graph();
  cnnb_device_vtable dv = fake_vtable(true);
  fake_device dev = {0};
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"), CNNB_OK);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  /* Each distinct op once. */
  int distinct = 0;
  for (uint32_t op = 0; op <= CNNB_OP_COUNT_; op++) {
    ck_assert_int_le(dev.asked[op], 1);
    distinct += dev.asked[op];
  }
  ck_assert_int_eq(distinct, 8); /* input conv relu6 pad gap dense labels loss */
  ck_assert_int_eq(dev.asked[CNNB_OP_RELU6], 1);
  ck_assert_int_eq(dev.asked[CNNB_OP_LABELS], 1);

  /* A failed graph, or no device, is not checked. */
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, NULL, &dev, CNNB_ABI_MINOR, "fake"), CNNB_EINVAL);
  cnnb_clear_error(ctx);
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(1, 3, 2, 2, 5);
  cnnb_max_pool(g, "p", 0, CNNB_POOL(.kernel_h = 3, .kernel_w = 3));
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"), CNNB_EINVAL);
  ck_assert_message_has("graph has an error");
  cnnb_clear_error(ctx);
  cnnb_graph_destroy(g);
}
END_TEST

/* An op code this host has no row for (a patched node) is refused by number. */
START_TEST(check_unknown_op) {
  cnnb_graph *g = mobile_graph();
  ((cnnb_node *)cnnb_graph_node(g, cnnb_graph_find_node(g, "act2")))->op = 99;
  cnnb_device_vtable dv = fake_vtable(true);
  fake_device dev = {0};
  ck_assert_int_eq(cnnb_ops_check_device(ctx, g, &dv, &dev, CNNB_ABI_MINOR, "fake"),
                   CNNB_EUNSUPPORTED);
  ck_assert_message_has("device 'fake' cannot run op 99, which node 'act2' uses");
  cnnb_clear_error(ctx);
  cnnb_graph_destroy(g);
}
END_TEST

/* ---- the cpu device ------------------------------------------------------------------------- */

/* A graph with every op a model can emit, and the loss. */

int main(void) {
  Suite *s = suite_create("op_table");
  TCase *tc = tcase_create("table");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, rows_complete);
  tcase_add_test(tc, since_minor);
  tcase_add_test(tc, relu_fusion_sets);
  tcase_add_test(tc, backward_reads);
  tcase_add_test(tc, arity_refused_by_name);
  tcase_add_test(tc, check_refused_op_named);
  tcase_add_test(tc, check_old_minor_refuses_newer_op);
  tcase_add_test(tc, check_old_minor_refuses_label_smoothing);
  tcase_add_test(tc, check_accepting_device);
  tcase_add_test(tc, check_unknown_op);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
