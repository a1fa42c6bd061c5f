/* test_plan.c — the memory plan on random DAGs built with the graph builder (relu,
 * conv, batch norm, pools, residual adds, concats, dead branches), with a fake
 * tensor_bytes so no device is needed. Checked on every graph:
 *  - no two buffers alive at the same time overlap in memory; offsets 64-byte aligned;
 *  - every read and write of a step (forward, backward, accumulation) touches a buffer
 *    alive at that moment, which together with the first point makes reuse safe;
 *  - a tensor with k gradient contributions gets one gradient buffer written by its
 *    last consumer and k-1 scratch buffers accumulated into it;
 *  - forward-only plans have no gradients and a peak no higher than training's;
 *  - planned peak <= the naive sum.
 * Half the random graphs go through the ReLU fusion pass first (aliases share their
 * producer's buffers and never run). Plus hand-built cases: a tensor feeding two
 * consumers, add(x, x), dead branches, fusion (and relu6, which is never fused), the
 * pad_channels shortcut, errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/cnnb.h>
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "exec/plan.h"

static cnnb_ctx *ctx;
static void setup(void) { ctx = cnnb_ctx_create("test", NULL); }
static void teardown(void) { cnnb_ctx_destroy(ctx); }

/* fp32 elements plus an odd tail, so sizes are rarely multiples of the alignment. */
static cnnb_status fake_bytes(void *user, const cnnb_graph *g, cnnb_tensor t, size_t *bytes) {
  int *fail_at = user;
  if (fail_at && *fail_at == t) return cnnb_error(ctx, CNNB_EUNSUPPORTED, "fake device: no layout");
  *bytes = (size_t)cnnb_shape_count(cnnb_graph_node(g, t)->shape) * 4 + (size_t)(t * 7 % 13);
  return CNNB_OK;
}

static unsigned rng_state;
static unsigned rnd(unsigned n) {
  rng_state = rng_state * 1103515245u + 12345u;
  return (rng_state >> 16) % n;
}

/* A random graph: every op keeps H and W (SAME, stride 1) so any two tensors of equal
 * channels can be added and any two concatenated; then a head and the loss. */
static cnnb_graph *random_graph(unsigned seed, int ops) {
  rng_state = seed;
  cnnb_graph *g = cnnb_graph_create(2, 3, 5, 5, 4);
  cnnb_tensor t[256];
  int nt = 0;
  t[nt++] = cnnb_graph_input(g);
  for (int i = 0; i < ops && nt < 250; ++i) {
    cnnb_tensor a = t[nt - 1 - (int)rnd((unsigned)(nt < 4 ? nt : 4))];
    cnnb_tensor b = t[rnd((unsigned)nt)];
    cnnb_shape sa = cnnb_graph_tensor_shape(g, a), sb = cnnb_graph_tensor_shape(g, b);
    cnnb_tensor out = CNNB_NO_TENSOR;
    switch (rnd(9)) {
      case 0: out = cnnb_relu(g, NULL, a); break;
      case 1:
        out = cnnb_conv2d(g, NULL, a,
                          CNNB_CONV2D(.filters = 3 + (int)rnd(2), .kernel_h = 1 + 2 * (int)rnd(2),
                                      .kernel_w = 1 + 2 * (int)rnd(2)));
        break;
      case 2: out = cnnb_batch_norm(g, NULL, a, CNNB_BATCH_NORM(.scale = (int)rnd(2))); break;
      case 3:
        out = cnnb_max_pool(g, NULL, a,
                            CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
                                      .padding = CNNB_PAD_SAME));
        break;
      case 4:
        out = cnnb_avg_pool(g, NULL, a,
                            CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
                                      .padding = CNNB_PAD_SAME));
        break;
      case 5: out = sa.c == sb.c ? cnnb_add(g, NULL, a, b) : cnnb_relu(g, NULL, b); break;
      case 6: {
        cnnb_tensor xs[3] = {a, b, t[rnd((unsigned)nt)]};
        out = cnnb_concat(g, NULL, 2 + (int)rnd(2), xs);
        break;
      }
      case 7:
        out = cnnb_lrn(g, NULL, a,
                       CNNB_LRN(.depth_radius = 1, .bias = 1, .alpha = 1e-3f, .beta = 0.75f));
        break;
      default: out = cnnb_dropout(g, NULL, a, 0.5f); break;
    }
    if (out == CNNB_NO_TENSOR) break;
    t[nt++] = out;
  }
  /* The head reads the last tensor; others may be dead ends (no gradient, no backward). */
  cnnb_tensor x = cnnb_global_avg_pool(g, NULL, t[nt - 1]);
  x = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = 4, .use_bias = 1));
  cnnb_graph_set_logits(g, x);
  cnnb_graph_add_loss(g);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "seed %u: %s", seed, cnnb_graph_error(g));
  return g;
}

static void alive(const cnnb_plan *p, int32_t b, int32_t when, const char *what, int32_t node) {
  ck_assert_msg(b >= 0 && b < p->num_buffers, "%s of node %d: no buffer", what, node);
  const cnnb_plan_buffer *x = &p->buffers[b];
  ck_assert_msg(x->first <= when && when <= x->last,
                "%s of node %d at time %d: buffer %d (tensor %d) lives [%d, %d]", what, node, when,
                b, x->tensor, x->first, x->last);
}

/* Simulates one step's reads and writes against the lifetimes. */
static void check_accesses(const cnnb_graph *g, const cnnb_plan *p) {
  int32_t n = p->num_nodes;
  for (int32_t i = 0; i < n; ++i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    if (p->alias[i] >= 0) continue; /* never runs */
    alive(p, p->activation[i], i, "forward write", i);
    for (int32_t k = 0; k < node->num_inputs; ++k)
      alive(p, p->activation[node->inputs[k]], i, "forward read", i);
  }
  if (!p->training) return;
  for (int32_t i = n - 1; i >= 0; --i) {
    if (!p->has_backward[i]) continue;
    const cnnb_node *node = cnnb_graph_node(g, i);
    int32_t when = cnnb_plan_backward_time(p, i);
    if (i != cnnb_graph_loss(g)) alive(p, p->gradient[i], when, "backward dy", i);
    uint32_t mask;
    bool out;
    cnnb_op_backward_reads(node, &mask, &out);
    if (out) alive(p, p->activation[i], when, "backward reads y", i);
    for (int32_t k = 0; k < node->num_inputs; ++k) {
      int32_t slot = p->slot_base[i] + k;
      cnnb_tensor t = node->inputs[k];
      if ((mask >> (k < 31 ? k : 31)) & 1u) alive(p, p->activation[t], when, "backward reads x", i);
      if (p->input_grad[slot] >= 0) {
        alive(p, p->input_grad[slot], when, "backward dx", i);
        if (p->accumulate[slot]) alive(p, p->gradient[t], when, "accumulate into", i);
      }
    }
  }
}

static void check_no_overlap(const cnnb_plan *p) {
  for (int32_t a = 0; a < p->num_buffers; ++a) {
    const cnnb_plan_buffer *x = &p->buffers[a];
    ck_assert_msg(x->offset % CNNB_PLAN_ALIGN == 0, "buffer %d offset %zu unaligned", a, x->offset);
    ck_assert_msg(x->offset + x->bytes <= p->arena_bytes, "buffer %d past the arena", a);
    for (int32_t b = a + 1; b < p->num_buffers; ++b) {
      const cnnb_plan_buffer *y = &p->buffers[b];
      bool time = x->first <= y->last && y->first <= x->last;
      bool space = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
      ck_assert_msg(!(time && space && x->bytes && y->bytes),
                    "buffers %d [%d,%d]@%zu+%zu and %d [%d,%d]@%zu+%zu overlap", a, x->first,
                    x->last, x->offset, x->bytes, b, y->first, y->last, y->offset, y->bytes);
    }
  }
}

/* One gradient written by the last consumer, every other contribution accumulated
 * (readers of an alias read its producer). */
static void check_accumulation(const cnnb_graph *g, const cnnb_plan *p) {
  for (int32_t t = 0; t < p->num_nodes; ++t) {
    int32_t writers = 0, scratch = 0, last_consumer = -1;
    if (p->alias[t] >= 0) {
      ck_assert_int_eq(p->activation[t], p->activation[p->alias[t]]);
      ck_assert_int_eq(p->gradient[t], p->gradient[p->alias[t]]);
      ck_assert(!p->has_backward[t]);
      continue;
    }
    for (int32_t c = t + 1; c < p->num_nodes; ++c) {
      const cnnb_node *cn = cnnb_graph_node(g, c);
      for (int32_t k = 0; k < cn->num_inputs; ++k) {
        if (cnnb_plan_resolve(p, cn->inputs[k]) != t || !p->has_backward[c]) continue;
        int32_t slot = p->slot_base[c] + k;
        if (p->input_grad[slot] < 0) continue;
        last_consumer = c;
        if (p->accumulate[slot]) {
          scratch++;
          ck_assert_int_eq(p->buffers[p->input_grad[slot]].kind, CNNB_BUFFER_SCRATCH);
        } else {
          writers++;
          ck_assert_int_eq(p->input_grad[slot], p->gradient[t]);
        }
      }
    }
    if (p->gradient[t] < 0) {
      ck_assert_int_eq(writers + scratch, 0);
      continue;
    }
    ck_assert_msg(writers == 1, "tensor %d: %d gradient writers", t, writers);
    /* The writer runs first in backward: the consumer with the largest index. */
    ck_assert_int_eq(p->buffers[p->gradient[t]].first, cnnb_plan_backward_time(p, last_consumer));
  }
}

START_TEST(random_dags) {
  int multi = 0, fused = 0;
  double worst = 1.0;
  for (unsigned seed = 1; seed <= 80; ++seed) {
    cnnb_graph *g = random_graph(seed, 5 + (int)(seed % 40));
    if (seed % 2) fused += cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL);
    cnnb_plan *train = NULL, *fwd = NULL;
    ck_assert_msg(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &train) == CNNB_OK, "%s",
                  cnnb_error_message(ctx));
    ck_assert_int_eq(cnnb_plan_create(ctx, g, false, fake_bytes, NULL, &fwd), CNNB_OK);
    check_no_overlap(train);
    check_no_overlap(fwd);
    check_accesses(g, train);
    check_accesses(g, fwd);
    check_accumulation(g, train);
    for (int32_t b = 0; b < fwd->num_buffers; ++b)
      ck_assert_int_eq(fwd->buffers[b].kind, CNNB_BUFFER_ACTIVATION);
    for (int32_t i = 0; i < fwd->num_nodes; ++i) ck_assert(!fwd->has_backward[i]);
    ck_assert_msg(fwd->arena_bytes <= train->arena_bytes,
                  "seed %u: forward-only %zu > training %zu", seed, fwd->arena_bytes,
                  train->arena_bytes);
    ck_assert(train->arena_bytes <= train->naive_bytes);
    ck_assert(train->live_bytes <= train->arena_bytes && fwd->live_bytes <= fwd->arena_bytes);
    worst = fmax(worst, (double)train->arena_bytes / (double)train->live_bytes);
    ck_assert(fwd->arena_bytes <= fwd->naive_bytes);
    for (int32_t b = 0; b < train->num_buffers; ++b)
      multi += train->buffers[b].kind == CNNB_BUFFER_SCRATCH;
    cnnb_plan_destroy(train);
    cnnb_plan_destroy(fwd);
    cnnb_graph_destroy(g);
  }
  ck_assert_msg(multi > 20, "random graphs exercised only %d accumulations", multi);
  ck_assert_msg(fused > 10, "random graphs exercised only %d fusions", fused);
  /* Best-fit stays close to the bound on these graphs (a loose guard against a
   * placement that stops reusing memory). */
  ck_assert_msg(worst < 1.5, "arena up to %.2fx the live peak", worst);
}
END_TEST

/* A deep chain reuses memory: the peak stays far below the sum. */
START_TEST(chain_reuses_memory) {
  cnnb_graph *g = cnnb_graph_create(8, 16, 8, 8, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  for (int i = 0; i < 30; ++i)
    x = cnnb_avg_pool(g, NULL, x, CNNB_POOL(.kernel_h = 1, .kernel_w = 1));
  x = cnnb_dense(g, NULL, x, CNNB_DENSE(.units = 10));
  cnnb_graph_set_logits(g, x);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, false, fake_bytes, NULL, &p), CNNB_OK);
  check_no_overlap(p);
  /* Pools read nothing in backward, so forward-only needs ~two activations at once. */
  ck_assert_msg(p->arena_bytes * 8 < p->naive_bytes, "peak %zu naive %zu", p->arena_bytes,
                p->naive_bytes);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(two_consumers_accumulate) {
  /* x = conv(input); a = relu(x); b = conv(x); y = add(a, b): x has two consumers. */
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor x = cnnb_conv2d(g, "x", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor a = cnnb_relu(g, "a", x);
  cnnb_tensor b = cnnb_conv2d(g, "b", x, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor y = cnnb_add(g, "y", a, b);
  cnnb_tensor z = cnnb_add(g, "z", y, y); /* one node reading a tensor twice */
  cnnb_tensor l = cnnb_dense(g, "logits", cnnb_global_avg_pool(g, NULL, z), CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  check_no_overlap(p);
  check_accesses(g, p);
  /* b (index higher than a) runs backward first and writes dx; a's slot accumulates. */
  ck_assert_int_eq(p->input_grad[p->slot_base[b]], p->gradient[x]);
  ck_assert(!p->accumulate[p->slot_base[b]]);
  ck_assert(p->accumulate[p->slot_base[a]]);
  ck_assert_int_eq(p->buffers[p->input_grad[p->slot_base[a]]].kind, CNNB_BUFFER_SCRATCH);
  /* add(y, y): slot 0 writes the gradient, slot 1 a scratch added into it. */
  ck_assert_int_eq(p->input_grad[p->slot_base[z]], p->gradient[y]);
  ck_assert(p->accumulate[p->slot_base[z] + 1]);
  ck_assert_int_ne(p->input_grad[p->slot_base[z] + 1], p->gradient[y]);
  /* The input needs no gradient: the first conv's dx is NULL. */
  ck_assert_int_eq(p->gradient[cnnb_graph_input(g)], -1);
  ck_assert_int_eq(p->input_grad[p->slot_base[x]], -1);
  ck_assert(!p->has_backward[cnnb_graph_input(g)]);
  ck_assert(p->has_backward[cnnb_graph_loss(g)]);
  /* Relu keeps its output for backward; the conv keeps its input. */
  ck_assert_int_ge(p->buffers[p->activation[a]].last, cnnb_plan_backward_time(p, a));
  ck_assert_int_ge(p->buffers[p->activation[x]].last, cnnb_plan_backward_time(p, b));
  /* The logits and the loss stay readable after the step. */
  ck_assert_int_eq(p->buffers[p->activation[l]].last, p->timeline - 1);
  ck_assert_int_eq(p->buffers[p->activation[cnnb_graph_loss(g)]].last, p->timeline - 1);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(dead_branch_has_no_backward) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor x = cnnb_conv2d(g, "x", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor dead = cnnb_conv2d(g, "dead", x,
                                 CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor l = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert(!p->has_backward[dead]);
  ck_assert_int_eq(p->gradient[dead], -1);
  ck_assert_int_eq(p->input_grad[p->slot_base[dead]], -1);
  ck_assert(p->has_backward[x]);
  check_accumulation(g, p);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(relu_fusion) {
  /* c1 -> relu (fusable); c2 -> {relu, add} (two readers: not); bn -> relu -> relu (the
   * second relu aliases through the first); dense -> relu (not a fusable op). */
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor c1 = cnnb_conv2d(g, "c1", cnnb_graph_input(g),
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor r1 = cnnb_relu(g, "r1", c1);
  cnnb_tensor c2 = cnnb_conv2d(g, "c2", r1,
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor r2 = cnnb_relu(g, "r2", c2);
  cnnb_tensor sum = cnnb_add(g, "sum", r2, c2);
  cnnb_tensor bn = cnnb_batch_norm(g, "bn", sum, NULL);
  cnnb_tensor r3 = cnnb_relu(g, "r3", bn);
  cnnb_tensor r4 = cnnb_relu(g, "r4", r3);
  cnnb_tensor d = cnnb_dense(g, "d", r4, CNNB_DENSE(.units = 6));
  cnnb_tensor r5 = cnnb_relu(g, "r5", d);
  cnnb_tensor l = cnnb_dense(g, "logits", r5, CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL), 2);
  ck_assert(cnnb_graph_node(g, c1)->fused_relu);
  ck_assert(!cnnb_graph_node(g, c2)->fused_relu);
  ck_assert(cnnb_graph_node(g, bn)->fused_relu);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL), 0); /* idempotent */
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert_int_eq(p->alias[r1], c1);
  ck_assert_int_eq(p->alias[r2], -1);
  ck_assert_int_eq(p->alias[r3], bn);
  ck_assert_int_eq(p->alias[r4], bn);
  ck_assert_int_eq(p->alias[r5], -1);
  ck_assert(!p->has_backward[r1] && !p->has_backward[r3] && !p->has_backward[r4]);
  /* c2 reads r1: its dx is c1's gradient; the fused conv keeps its output for backward. */
  ck_assert_int_eq(p->input_grad[p->slot_base[c2]], p->gradient[c1]);
  ck_assert_int_ge(p->buffers[p->activation[c1]].last, cnnb_plan_backward_time(p, c1));
  ck_assert_int_ge(p->buffers[p->activation[bn]].last, cnnb_plan_backward_time(p, d));
  check_no_overlap(p);
  check_accesses(g, p);
  check_accumulation(g, p);
  int activations = 0;
  for (int32_t b = 0; b < p->num_buffers; ++b)
    activations += p->buffers[b].kind == CNNB_BUFFER_ACTIVATION;
  ck_assert_int_eq(activations, p->num_nodes - 3); /* r1, r3, r4 have none of their own */
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(add_relu_fusion) {
  /* A residual tail: sum1 = add(c1, x) -> r1 (fusable: the ReLU is its only reader);
   * sum2 = add(r1, c2) read by r2 and the logits' dense (two readers: not fused). */
  cnnb_graph *g = cnnb_graph_create(2, 4, 4, 4, 5);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c1 = cnnb_conv2d(g, "c1", x, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor sum1 = cnnb_add(g, "sum1", c1, x);
  cnnb_tensor r1 = cnnb_relu(g, "r1", sum1);
  cnnb_tensor c2 = cnnb_conv2d(g, "c2", r1,
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor sum2 = cnnb_add(g, "sum2", r1, c2);
  cnnb_tensor r2 = cnnb_relu(g, "r2", sum2);
  cnnb_tensor both = cnnb_add(g, "both", r2, sum2);
  cnnb_tensor l = cnnb_dense(g, "logits", both, CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL), 1);
  ck_assert(cnnb_graph_node(g, sum1)->fused_relu);
  ck_assert(!cnnb_graph_node(g, sum2)->fused_relu);
  ck_assert(!cnnb_graph_node(g, both)->fused_relu);
  /* The fused add's backward masks dy by its output; a plain add reads nothing. */
  uint32_t mask;
  bool out;
  cnnb_op_backward_reads(cnnb_graph_node(g, sum1), &mask, &out);
  ck_assert_uint_eq(mask, 0);
  ck_assert(out);
  cnnb_op_backward_reads(cnnb_graph_node(g, sum2), &mask, &out);
  ck_assert_uint_eq(mask, 0);
  ck_assert(!out);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert_int_eq(p->alias[r1], sum1);
  ck_assert_int_eq(p->alias[r2], -1);
  ck_assert(!p->has_backward[r1] && p->has_backward[sum1] && p->has_backward[r2]);
  /* c2 and sum2 read r1: their gradients land in sum1's; its output lives to its backward. */
  ck_assert_int_eq(p->input_grad[p->slot_base[sum2]], p->gradient[sum1]);
  ck_assert(p->accumulate[p->slot_base[c2]]);
  ck_assert_int_ge(p->buffers[p->activation[sum1]].last, cnnb_plan_backward_time(p, sum1));
  ck_assert_int_lt(p->buffers[p->activation[sum2]].last, cnnb_plan_backward_time(p, sum2));
  check_no_overlap(p);
  check_accesses(g, p);
  check_accumulation(g, p);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(relu6_not_fused) {
  /* conv -> relu6 and bn -> relu6 stay as written (fused_relu means max(x, 0) only);
   * relu6 after a fused relu is not an alias; relu6 keeps its output for backward. */
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor c1 = cnnb_conv2d(g, "c1", cnnb_graph_input(g),
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor a1 = cnnb_relu6(g, "a1", c1);
  cnnb_tensor bn = cnnb_batch_norm(g, "bn", a1, NULL);
  cnnb_tensor a2 = cnnb_relu6(g, "a2", bn);
  cnnb_tensor c2 = cnnb_conv2d(g, "c2", a2,
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor r = cnnb_relu(g, "r", c2);
  cnnb_tensor a3 = cnnb_relu6(g, "a3", r);
  cnnb_tensor l = cnnb_dense(g, "logits", a3, CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL), 1); /* only c2 -> r */
  ck_assert(!cnnb_graph_node(g, c1)->fused_relu);
  ck_assert(!cnnb_graph_node(g, bn)->fused_relu);
  ck_assert(cnnb_graph_node(g, c2)->fused_relu);
  uint32_t mask;
  bool out;
  cnnb_op_backward_reads(cnnb_graph_node(g, a1), &mask, &out);
  ck_assert_uint_eq(mask, 0);
  ck_assert(out);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert_int_eq(p->alias[r], c2);
  ck_assert_int_eq(p->alias[a1], -1);
  ck_assert_int_eq(p->alias[a2], -1);
  ck_assert_int_eq(p->alias[a3], -1);
  ck_assert(p->has_backward[a1] && p->has_backward[a2] && p->has_backward[a3]);
  ck_assert_int_ge(p->buffers[p->activation[a2]].last, cnnb_plan_backward_time(p, a2));
  check_no_overlap(p);
  check_accesses(g, p);
  check_accumulation(g, p);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(pad_channels_reads_nothing) {
  /* The CIFAR ResNet shortcut: avg pool -> pad_channels, added to a strided conv. The
   * pad's backward (dy's middle channels) needs shapes only, so neither its input nor
   * its output lives until its backward; c1's gradient gets both paths. */
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor c1 = cnnb_conv2d(g, "c1", cnnb_graph_input(g),
                               CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor ap = cnnb_avg_pool(g, "ap", c1,
                                 CNNB_POOL(.kernel_h = 1, .kernel_w = 1, .stride_h = 2,
                                           .stride_w = 2));
  cnnb_tensor sc = cnnb_pad_channels(g, "sc", ap, 2, 2);
  cnnb_tensor c2 = cnnb_conv2d(g, "c2", c1,
                               CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3,
                                           .stride_h = 2, .stride_w = 2));
  cnnb_tensor sum = cnnb_add(g, "sum", sc, c2);
  cnnb_tensor r = cnnb_relu(g, "r", sum);
  cnnb_graph_set_logits(g, cnnb_dense(g, "logits", r, CNNB_DENSE(.units = 5)));
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  uint32_t mask;
  bool out;
  cnnb_op_backward_reads(cnnb_graph_node(g, sc), &mask, &out);
  ck_assert_uint_eq(mask, 0);
  ck_assert(!out);
  cnnb_plan *p;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert(p->has_backward[sc] && p->has_backward[ap]);
  ck_assert_int_eq(p->alias[sc], -1);
  ck_assert_int_lt(p->buffers[p->activation[sc]].last, cnnb_plan_backward_time(p, sc));
  ck_assert_int_lt(p->buffers[p->activation[ap]].last, cnnb_plan_backward_time(p, sc));
  /* sum's dy reaches the pad whole; the pad's dx is the pool's gradient. */
  ck_assert_int_eq(p->input_grad[p->slot_base[sum]], p->gradient[sc]);
  ck_assert_int_eq(p->input_grad[p->slot_base[sc]], p->gradient[ap]);
  check_no_overlap(p);
  check_accesses(g, p);
  check_accumulation(g, p);
  cnnb_plan_destroy(p);
  /* Forward only: nothing of it outlives the add. */
  ck_assert_int_eq(cnnb_plan_create(ctx, g, false, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert_int_eq(p->gradient[sc], -1);
  check_no_overlap(p);
  check_accesses(g, p);
  cnnb_plan_destroy(p);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(fusion_follows_device_capability) {
  /* A device without CNNB_EXT_FUSED_RELU_ADD gets conv/bn fusion only: an add it would run
   * without its ReLU must keep the ReLU as a node of its own. */
  cnnb_graph *g = cnnb_graph_create(2, 4, 4, 4, 5);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "c", x, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor rc = cnnb_relu(g, "rc", c);
  cnnb_tensor sum = cnnb_add(g, "sum", rc, x);
  cnnb_tensor rs = cnnb_relu(g, "rs", sum);
  cnnb_graph_set_logits(g, cnnb_dense(g, "logits", rs, CNNB_DENSE(.units = 5)));
  cnnb_graph_add_loss(g);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ABI_1_0), 1);
  ck_assert(cnnb_graph_node(g, c)->fused_relu);
  ck_assert(!cnnb_graph_node(g, sum)->fused_relu);
  ck_assert_int_eq(cnnb_plan_fuse_relus(g, CNNB_FUSE_ALL), 1); /* now the add too */
  ck_assert(cnnb_graph_node(g, sum)->fused_relu);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(errors) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_tensor l = cnnb_dense(g, "logits", cnnb_graph_input(g), CNNB_DENSE(.units = 5));
  cnnb_graph_set_logits(g, l);
  cnnb_plan *p = (cnnb_plan *)1;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, NULL, &p), CNNB_EINVAL);
  ck_assert_ptr_null(p);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "loss"));
  cnnb_clear_error(ctx);
  cnnb_graph_add_loss(g);
  int fail_at = l;
  ck_assert_int_eq(cnnb_plan_create(ctx, g, true, fake_bytes, &fail_at, &p), CNNB_EUNSUPPORTED);
  ck_assert_msg(strstr(cnnb_error_message(ctx), "'logits'") &&
                    strstr(cnnb_error_message(ctx), "no layout"),
                "message: %s", cnnb_error_message(ctx));
  cnnb_clear_error(ctx);
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(2, 3, 4, 4, 5);
  cnnb_conv2d(g, "big", cnnb_graph_input(g),
              CNNB_CONV2D(.filters = 1, .kernel_h = 9, .kernel_w = 9, .padding = CNNB_PAD_VALID));
  ck_assert_int_ne(cnnb_plan_create(ctx, g, false, fake_bytes, NULL, &p), CNNB_OK);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "graph has an error"));
  cnnb_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, random_dags);
  tcase_add_test(tc, chain_reuses_memory);
  tcase_add_test(tc, two_consumers_accumulate);
  tcase_add_test(tc, dead_branch_has_no_backward);
  tcase_add_test(tc, relu_fusion);
  tcase_add_test(tc, add_relu_fusion);
  tcase_add_test(tc, relu6_not_fused);
  tcase_add_test(tc, pad_channels_reads_nothing);
  tcase_add_test(tc, fusion_follows_device_capability);
  tcase_add_test(tc, errors);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
