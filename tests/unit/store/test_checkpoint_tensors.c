/* test_checkpoint_tensors.c — a graph's state as checkpoint tensors and back
 * (checkpoint_tensors.h), through a real safetensors file: every parameter, statistic and
 * optimizer slot comes back at its offset; torchvision's extras are written (the global
 * step as num_batches_tracked, ones for a scale-less batch norm's weight) and accepted on
 * reading; and a file that is not this graph's is refused naming the tensor: a stranger
 * tensor, a learned scale where the graph has none, a missing or reshaped parameter, and
 * an optimizer slot present for only some parameters. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cnnb/optimizer.h>

#include "store/checkpoint_tensors.h"
#include "graph/graph_internal.h"

#define ck_assert_error_has(ctx, needle)                                                    \
  ck_assert_msg(strstr(cnnb_error_message(ctx), (needle)) != NULL, "error '%s' lacks '%s'", \
                cnnb_error_message(ctx), (needle))

/* input [1, 3, 8, 8] -> conv "c" (bias, named conv1) -> batch norm "bn" (no scale, named
 * bn1) -> relu -> dense "fc" (own names). */
static cnnb_graph *build(void) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_tensor c = cnnb_conv2d(g, "c", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3,
                                          .use_bias = 1));
  cnnb_tensor bn = cnnb_batch_norm(g, "bn", c, CNNB_BATCH_NORM(.scale = 0));
  cnnb_dense(g, "fc", cnnb_relu(g, "r", bn), CNNB_DENSE(.units = 5, .use_bias = 1));
  cnnb_graph_set_checkpoint_name(g, c, "conv1");
  cnnb_graph_set_checkpoint_name(g, bn, "bn1");
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  return g;
}

typedef struct fixture {
  cnnb_graph *g;
  cnnb_ctx *ctx;
  cnnb_ckpt_arenas a;
  int64_t np, ns;
  char path[64];
} fixture;

/* Zeroes the elements of an arena that belong to no param (the CNNB_PARAM_ALIGN gaps):
 * zero in every arena a run makes, and in no file. */
static void zero_gaps(const cnnb_graph *g, float *arena, int32_t is_stat) {
  int64_t end = is_stat ? cnnb_graph_stat_arena_count(g) : cnnb_graph_param_arena_count(g);
  char *used = calloc((size_t)end + 1, 1);
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (p->is_stat == is_stat) memset(used + p->offset, 1, (size_t)p->count);
  }
  for (int64_t i = 0; i < end; i++)
    if (!used[i]) arena[i] = 0.0f;
  free(used);
}

/* Arenas of distinct values (a slot per rule's two), and the file they make. */
static void setup(fixture *f, uint32_t rule) {
  f->g = build();
  f->ctx = cnnb_ctx_create_child(NULL, "test");
  f->np = cnnb_graph_param_arena_count(f->g);
  f->ns = cnnb_graph_stat_arena_count(f->g);
  f->a = (cnnb_ckpt_arenas){.params = malloc(f->np * sizeof(float)),
                            .stats = malloc(f->ns * sizeof(float)),
                            .ones = malloc(4 * sizeof(float)),
                            .step = 77};
  for (int64_t i = 0; i < f->np; i++) f->a.params[i] = 0.5f + (float)i;
  for (int64_t i = 0; i < f->ns; i++) f->a.stats[i] = -1.0f - (float)i;
  zero_gaps(f->g, f->a.params, 0);
  zero_gaps(f->g, f->a.stats, 1);
  for (int i = 0; i < 4; i++) f->a.ones[i] = 1.0f;
  for (int s = 0; s < 2; s++) {
    if (!cnnb_ckpt_slot_name(rule, s + 1)) continue;
    f->a.slot[s] = malloc(f->np * sizeof(float));
    for (int64_t i = 0; i < f->np; i++) f->a.slot[s][i] = 1000.0f * (s + 1) + (float)i;
    zero_gaps(f->g, f->a.slot[s], 0);
  }
  snprintf(f->path, sizeof f->path, "/tmp/ckpt_tensors_%d.safetensors", (int)getpid());
}

static void write_file(fixture *f, uint32_t rule, const char *drop) {
  cnnb_ckpt_tensors l = {0};
  ck_assert(cnnb_ckpt_add_model(&l, f->g, &f->a));
  ck_assert(cnnb_ckpt_add_slots(&l, f->g, rule, &f->a));
  size_t kept = 0;
  for (size_t i = 0; i < l.count; i++)
    if (!drop || strcmp(l.items[i].name, drop) != 0) l.items[kept++] = l.items[i];
  ck_assert_int_eq(cnnb_safetensors_write(f->ctx, f->path, l.items, kept, NULL, 0), CNNB_OK);
  cnnb_ckpt_tensors_free(&l); /* frees the names it made, by their own list */
}

static void teardown(fixture *f) {
  unlink(f->path);
  free(f->a.params);
  free(f->a.stats);
  free(f->a.ones);
  free(f->a.slot[0]);
  free(f->a.slot[1]);
  cnnb_ctx_destroy(f->ctx);
  cnnb_graph_destroy(f->g);
}

static cnnb_safetensors *open_file(fixture *f) {
  cnnb_safetensors *file = NULL;
  ck_assert_int_eq(cnnb_safetensors_open(f->ctx, f->path, &file), CNNB_OK);
  return file;
}

START_TEST(test_round_trip) {
  fixture f;
  setup(&f, CNNB_OPT_ADAM);
  write_file(&f, CNNB_OPT_ADAM, NULL);
  cnnb_safetensors *file = open_file(&f);
  /* torchvision's names and extras. */
  const cnnb_st_tensor *t = cnnb_safetensors_find(file, "bn1.num_batches_tracked");
  ck_assert_ptr_nonnull(t);
  ck_assert_int_eq(t->dtype, CNNB_ST_I64);
  ck_assert_int_eq(t->ndims, 0);
  int64_t step;
  memcpy(&step, t->data, sizeof step);
  ck_assert_int_eq(step, 77);
  ck_assert_ptr_nonnull(t = cnnb_safetensors_find(file, "bn1.weight"));
  ck_assert_int_eq(t->dims[0], 4);
  ck_assert_ptr_nonnull(cnnb_safetensors_find(file, "conv1.weight"));
  ck_assert_ptr_nonnull(cnnb_safetensors_find(file, "bn1.running_var"));
  ck_assert_ptr_nonnull(cnnb_safetensors_find(file, "fc/kernel"));
  ck_assert_ptr_nonnull(cnnb_safetensors_find(file, "optimizer.exp_avg.conv1.weight"));
  ck_assert_ptr_nonnull(cnnb_safetensors_find(file, "optimizer.exp_avg_sq.fc/bias"));

  float *params = calloc(f.np, sizeof(float)), *stats = calloc(f.ns, sizeof(float));
  float *slot = calloc(f.np, sizeof(float));
  ck_assert_int_eq(cnnb_ckpt_read_model(f.ctx, file, f.path, f.g, params, stats), CNNB_OK);
  ck_assert_mem_eq(params, f.a.params, f.np * sizeof(float));
  ck_assert_mem_eq(stats, f.a.stats, f.ns * sizeof(float));
  for (int s = 1; s <= 2; s++) {
    bool present = false;
    ck_assert_int_eq(cnnb_ckpt_read_slot(f.ctx, file, f.path, f.g, CNNB_OPT_ADAM, s, slot,
                                         &present),
                     CNNB_OK);
    ck_assert(present);
    ck_assert_mem_eq(slot, f.a.slot[s - 1], f.np * sizeof(float));
  }
  /* Momentum's buffer is not in an Adam checkpoint: absent, not an error. */
  bool present = true;
  ck_assert_int_eq(cnnb_ckpt_read_slot(f.ctx, file, f.path, f.g, CNNB_OPT_MOMENTUM, 1, slot,
                                       &present),
                   CNNB_OK);
  ck_assert(!present);
  free(params);
  free(stats);
  free(slot);
  cnnb_safetensors_close(file);
  teardown(&f);
}
END_TEST

/* Each way a file can fail to be this graph's, and the words its refusal must hold. */
static const struct {
  const char *what;
  int ones;         /* the scale-less weight is not all ones */
  const char *drop; /* tensor left out */
  int stranger;     /* another graph's tensor added */
  const char *expect;
} refusals[] = {
    {"learned scale", 1, NULL, 0, "holds a learned batch-norm scale"},
    {"missing kernel", 0, "conv1.weight", 0, "has no tensor 'conv1.weight'"},
    {"stranger", 0, NULL, 1, "tensor 'layer9.weight' is no parameter of this model"},
    {"partial slot", 0, "optimizer.momentum_buffer.fc/kernel", 0, "for 4 of the 5 parameters"},
};

START_TEST(test_refusals) {
  fixture f;
  setup(&f, CNNB_OPT_MOMENTUM);
  if (refusals[_i].ones) f.a.ones[2] = 0.5f;
  if (refusals[_i].stranger) {
    cnnb_ckpt_tensors l = {0};
    ck_assert(cnnb_ckpt_add_model(&l, f.g, &f.a));
    cnnb_st_tensor extra = {.name = "layer9.weight",
                            .dtype = CNNB_ST_F32,
                            .ndims = 1,
                            .dims = {2},
                            .data = f.a.params,
                            .bytes = 8};
    cnnb_st_tensor *all = malloc((l.count + 1) * sizeof *all);
    memcpy(all, l.items, l.count * sizeof *all);
    all[l.count] = extra;
    ck_assert_int_eq(cnnb_safetensors_write(f.ctx, f.path, all, l.count + 1, NULL, 0), CNNB_OK);
    free(all);
    cnnb_ckpt_tensors_free(&l);
  } else {
    write_file(&f, CNNB_OPT_MOMENTUM, refusals[_i].drop);
  }
  cnnb_safetensors *file = open_file(&f);
  float *params = calloc(f.np, sizeof(float)), *stats = calloc(f.ns, sizeof(float));
  cnnb_status st = cnnb_ckpt_read_model(f.ctx, file, f.path, f.g, params, stats);
  if (st == CNNB_OK) {
    bool present;
    st = cnnb_ckpt_read_slot(f.ctx, file, f.path, f.g, CNNB_OPT_MOMENTUM, 1, params, &present);
  }
  ck_assert_msg(st == CNNB_EINVAL, "%s: accepted", refusals[_i].what);
  ck_assert_error_has(f.ctx, refusals[_i].expect);
  ck_assert_error_has(f.ctx, f.path);
  free(params);
  free(stats);
  cnnb_safetensors_close(file);
  teardown(&f);
}
END_TEST

/* Issue 23, finding 11: a NaN or an infinity in a parameter, a statistic or an optimizer
 * slot is refused, naming the file, the tensor and the first bad element. */
START_TEST(test_not_finite) {
  fixture f;
  setup(&f, CNNB_OPT_MOMENTUM);
  /* _i: 0 a parameter (NaN), 1 a statistic (+Inf), 2 a momentum slot (-Inf). */
  float *where = _i == 0 ? f.a.params : _i == 1 ? f.a.stats : f.a.slot[0];
  float bad = _i == 0 ? NAN : _i == 1 ? INFINITY : -INFINITY;
  where[1] = bad;
  write_file(&f, CNNB_OPT_MOMENTUM, NULL);
  cnnb_safetensors *file = open_file(&f);
  float *params = calloc(f.np, sizeof(float)), *stats = calloc(f.ns, sizeof(float));
  cnnb_status st = cnnb_ckpt_read_model(f.ctx, file, f.path, f.g, params, stats);
  if (_i == 2) {
    ck_assert_int_eq(st, CNNB_OK);
    bool present;
    st = cnnb_ckpt_read_slot(f.ctx, file, f.path, f.g, CNNB_OPT_MOMENTUM, 1, params, &present);
  }
  ck_assert_int_eq(st, CNNB_EDATA);
  ck_assert_error_has(f.ctx, f.path);
  ck_assert_error_has(f.ctx, "holds 1 value(s) that are not finite (the first, element 1 of");
  ck_assert_error_has(f.ctx, _i == 0   ? "tensor 'conv1.weight'"
                             : _i == 1 ? "tensor 'bn1.running_mean'"
                                       : "tensor 'optimizer.momentum_buffer.conv1.weight'");
  free(params);
  free(stats);
  cnnb_safetensors_close(file);
  teardown(&f);
}
END_TEST

/* A reshaped parameter names both shapes. */
START_TEST(test_wrong_shape) {
  fixture f;
  setup(&f, CNNB_OPT_SGD);
  cnnb_ckpt_tensors l = {0};
  ck_assert(cnnb_ckpt_add_model(&l, f.g, &f.a));
  for (size_t i = 0; i < l.count; i++)
    if (strcmp(l.items[i].name, "conv1.weight") == 0) {
      int64_t d = l.items[i].dims[0];
      l.items[i].dims[0] = l.items[i].dims[1];
      l.items[i].dims[1] = d;
    }
  ck_assert_int_eq(cnnb_safetensors_write(f.ctx, f.path, l.items, l.count, NULL, 0), CNNB_OK);
  cnnb_ckpt_tensors_free(&l);
  cnnb_safetensors *file = open_file(&f);
  float *params = calloc(f.np, sizeof(float)), *stats = calloc(f.ns, sizeof(float));
  ck_assert_int_eq(cnnb_ckpt_read_model(f.ctx, file, f.path, f.g, params, stats), CNNB_EINVAL);
  ck_assert_error_has(f.ctx, "'conv1.weight' is F32 [3, 4, 3, 3]");
  ck_assert_error_has(f.ctx, "F32 [4, 3, 3, 3]");
  free(params);
  free(stats);
  cnnb_safetensors_close(file);
  teardown(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("checkpoint_tensors");
  TCase *tc = tcase_create("tensors");
  tcase_add_test(tc, test_round_trip);
  tcase_add_loop_test(tc, test_refusals, 0, (int)(sizeof refusals / sizeof refusals[0]));
  tcase_add_test(tc, test_wrong_shape);
  tcase_add_loop_test(tc, test_not_finite, 0, 3);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
