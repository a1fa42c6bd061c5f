/* test_device_executor.c — the host's executor on the device under test
 * (`test_device_executor NAME`, device_harness.h: found by name through the host's
 * loader). test_device_ops checks every op against the reference; here we check what
 * the executor adds, and that the device works under the executor's real planner
 * (buffers reused, gradients accumulated in place, data nodes filled in node order):
 *  - gradient accumulation: a graph where a tensor feeds three consumers (conv, relu,
 *    concat) and a node reads a tensor twice (add(y, y)) gives exactly the sum of the
 *    gradients of the same graph with every shared tensor duplicated (each path alone,
 *    weights tied by copying);
 *  - buckets: announced in decreasing offset order, covering [0, param_count) exactly
 *    once, each right after the backward of the earliest node owning a param in it,
 *    and already final then (a snapshot taken in the callback equals the end result);
 *  - with cfg.profile, per-node times are collected;
 *  - forward-only runs the same forward with a smaller arena, without labels too;
 *  - device errors come back naming the node; init_params matches the initializers;
 *  - the ReLU fusion pass changes nothing but memory: same loss and gradients;
 *  - top-1 / top-5 with TF's in_top_k tie rule;
 *  - a device offering CNNB_EXT_DEVICE_UINT8_INPUT makes from uint8 NHWC pixels exactly
 *    the input tensor_from_host makes from the normalized floats (bitwise, in fp32 and in
 *    each low precision it accepts), and a step on uint8 batches trains as one on floats;
 *  - a constant batch (synthetic data) is uploaded once and trains as one uploaded per step.
 * In fp32 (every device has it), within tolerance.c's same-device bounds. */
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
#include "graph/init.h"

/* The device under test: the loader's copy of its vtable. */
static const cnnb_device_vtable *dut;
/* fp32 row of tolerance.c: one device against itself. */
static double same_abs, same_rel;

/* ---- a wrapper device: logs backward order and bucket events, injects failures ----- */

typedef struct wnode {
  void *inner;
  int32_t index;
} wnode;

enum { MAX_EVENTS = 4096 };
static int events[MAX_EVENTS]; /* node index >= 0: its backward; -1 - k: bucket k */
static int num_events;
static int fail_forward = -1;
static cnnb_ctx *dev_ctx;

static cnnb_status w_prepare(void *dev, const cnnb_graph *g, int32_t node, void **state) {
  wnode *w = calloc(1, sizeof *w);
  w->index = node;
  *state = w;
  return dut->prepare(dev, g, node, &w->inner);
}
static void w_release(void *dev, void *state) {
  wnode *w = state;
  if (w->inner) dut->release(dev, w->inner);
  free(w);
}
static cnnb_status w_forward(void *dev, void *state, const cnnb_node_io *io) {
  wnode *w = state;
  if (w->index == fail_forward) return cnnb_error(dev_ctx, CNNB_EINTERNAL, "injected failure");
  return dut->forward(dev, w->inner, io);
}
static cnnb_status w_backward(void *dev, void *state, const cnnb_node_io *io) {
  wnode *w = state;
  if (num_events < MAX_EVENTS) events[num_events++] = w->index;
  return dut->backward(dev, w->inner, io);
}
static int uploads; /* tensor_from_host calls */
static cnnb_status w_tensor_from_host(void *dev, const cnnb_graph *g, cnnb_tensor t, void *buffer,
                                      const void *host) {
  uploads++;
  return dut->tensor_from_host(dev, g, t, buffer, host);
}
static cnnb_device_vtable wrapped;
static cnnb_ctx *exec_ctx; /* executors made by make_executor report here */

typedef struct device {
  cnnb_ctx *ctx;
  void *dev;
} device;

static device open_device(int training) {
  const char *name = device_harness_name();
  device d = {cnnb_ctx_create(name, NULL), NULL};
  cnnb_device_config cfg = {.struct_size = sizeof cfg,
                            .num_threads = 1,
                            .precision = CNNB_PRECISION_FP32,
                            .training = training,
                            .seed = 1};
  cnnb_status st = dut->create(d.ctx, name, &cfg, &d.dev);
  ck_assert_msg(st == CNNB_OK, "%s create: %s", name, cnnb_error_message(d.ctx));
  dev_ctx = d.ctx;
  wrapped = *dut;
  wrapped.prepare = w_prepare;
  wrapped.release = w_release;
  wrapped.forward = w_forward;
  wrapped.backward = w_backward;
  wrapped.tensor_from_host = w_tensor_from_host;
  return d;
}

static void close_device(device *d) {
  dut->destroy(d->dev);
  cnnb_ctx_destroy(d->ctx);
}

/* ---- graphs ---------------------------------------------------------------------------- */

enum { BATCH = 2, CH = 3, HW = 5, CLASSES = 5 };

static cnnb_tensor c0(cnnb_graph *g, const char *name, cnnb_tensor in) {
  return cnnb_conv2d(g, name, in,
                     CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3, .use_bias = 1));
}

/* tied:   x = c0(in); y = concat(ca(x), relu(x), x); z = add(y, y); fc(gap(z))
 * untied: the same with every shared tensor recomputed per use (c0_0..c0_5, ca_0, ca_1),
 *         so no tensor has two consumers. */
static cnnb_graph *build(bool tied) {
  cnnb_graph *g = cnnb_graph_create(BATCH, CH, HW, HW, CLASSES);
  cnnb_tensor in = cnnb_graph_input(g);
  cnnb_tensor x = tied ? c0(g, "c0", in) : CNNB_NO_TENSOR;
  cnnb_tensor ys[2];
  char name[32];
  for (int c = 0; c < (tied ? 1 : 2); ++c) {
    cnnb_tensor xs[3];
    for (int k = 0; k < 3; ++k) {
      snprintf(name, sizeof name, "c0_%d", 3 * c + k);
      xs[k] = tied ? x : c0(g, name, in);
    }
    snprintf(name, sizeof name, "ca_%d", c);
    cnnb_tensor a = cnnb_conv2d(g, tied ? "ca" : name, xs[0],
                                CNNB_CONV2D(.filters = 3, .kernel_h = 1, .kernel_w = 1));
    cnnb_tensor cat[3] = {a, cnnb_relu(g, NULL, xs[1]), xs[2]};
    ys[c] = cnnb_concat(g, NULL, 3, cat);
  }
  cnnb_tensor z = cnnb_add(g, "z", ys[0], tied ? ys[0] : ys[1]);
  cnnb_tensor l = cnnb_dense(g, "fc", cnnb_global_avg_pool(g, NULL, z),
                             CNNB_DENSE(.units = CLASSES, .use_bias = 1));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  return g;
}

/* "c0_4/kernel" -> "c0/kernel", "ca_1/kernel" -> "ca/kernel", others unchanged. */
static void tied_name(const char *untied, char *out, size_t size) {
  snprintf(out, size, "%s", untied);
  char *us = strchr(out, '_'), *slash = strchr(out, '/');
  if (us && slash && us < slash && (strncmp(out, "c0_", 3) == 0 || strncmp(out, "ca_", 3) == 0))
    memmove(us, slash, strlen(slash) + 1);
}

static float images[BATCH * CH * HW * HW];
static int32_t labels[BATCH] = {1, 3};

static void make_images(void) {
  unsigned s = 7;
  for (size_t i = 0; i < sizeof images / sizeof images[0]; ++i) {
    s = s * 1664525u + 1013904223u;
    images[i] = (float)((s >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static cnnb_executor *make_executor(device *d, const cnnb_graph *g, bool training,
                                    cnnb_executor_config *cfg_in) {
  cnnb_executor_config cfg = cfg_in ? *cfg_in : (cnnb_executor_config){0};
  cfg.training = training;
  cfg.device_ctx = d->ctx;
  cnnb_executor *ex = NULL;
  cnnb_status st = cnnb_executor_create(exec_ctx, &wrapped, d->dev, g, &cfg, &ex);
  ck_assert_msg(st == CNNB_OK, "executor: %s", cnnb_error_message(exec_ctx));
  return ex;
}

static float *download(device *d, const float *src, int64_t count) {
  float *h = malloc((size_t)(count ? count : 1) * sizeof(float));
  ck_assert_int_eq(dut->copy_to_host(d->dev, h, src, (size_t)count * sizeof(float)), CNNB_OK);
  return h;
}

START_TEST(accumulation_equals_paths_alone) {
  make_images();
  device d = open_device(1);
  cnnb_graph *gt = build(true), *gu = build(false);
  cnnb_ctx *ctx = cnnb_ctx_create("executor", NULL);
  cnnb_executor_config cfg = {.training = true, .device_ctx = d.ctx};
  cnnb_executor *et, *eu;
  ck_assert_int_eq(cnnb_executor_create(ctx, &wrapped, d.dev, gt, &cfg, &et), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_create(ctx, &wrapped, d.dev, gu, &cfg, &eu), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_init_params(et, 11), CNNB_OK);

  /* Tie the untied copies to the tied weights. */
  int64_t nt = cnnb_executor_param_count(et), nu = cnnb_executor_param_count(eu);
  float *pt = download(&d, cnnb_executor_params(et), nt);
  float *pu = calloc((size_t)nu, sizeof(float));
  for (int32_t i = 0; i < cnnb_graph_num_params(gu); ++i) {
    const cnnb_param *p = cnnb_graph_param(gu, i);
    if (p->is_stat) continue;
    char name[256];
    tied_name(p->name, name, sizeof name);
    int32_t j = cnnb_graph_find_param(gt, name);
    ck_assert_msg(j >= 0, "no tied param for %s (%s)", p->name, name);
    memcpy(pu + p->offset, pt + cnnb_graph_param(gt, j)->offset, (size_t)p->count * sizeof(float));
  }
  ck_assert_int_eq(cnnb_executor_upload_params(eu, pu, NULL), CNNB_OK);

  ck_assert_msg(cnnb_executor_step(et, images, labels, 1.0f, 0) == CNNB_OK, "%s",
                cnnb_error_message(ctx));
  ck_assert_msg(cnnb_executor_step(eu, images, labels, 1.0f, 0) == CNNB_OK, "%s",
                cnnb_error_message(ctx));
  float lt, lu;
  ck_assert_int_eq(cnnb_executor_loss(et, &lt), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_loss(eu, &lu), CNNB_OK);
  ck_assert_msg(fabsf(lt - lu) < same_abs, "loss tied %g untied %g", lt, lu);

  /* The tied graph really accumulates: c0's output has 3 consumers, y is read twice. */
  const cnnb_plan *plan = cnnb_executor_plan(et);
  int scratch = 0;
  for (int32_t b = 0; b < plan->num_buffers; ++b)
    scratch += plan->buffers[b].kind == CNNB_BUFFER_SCRATCH;
  ck_assert_int_eq(scratch, 3);

  float *gtd = download(&d, cnnb_executor_grads(et), nt);
  float *gud = download(&d, cnnb_executor_grads(eu), nu);
  float *sum = calloc((size_t)nt, sizeof(float));
  int copies[64] = {0};
  for (int32_t i = 0; i < cnnb_graph_num_params(gu); ++i) {
    const cnnb_param *p = cnnb_graph_param(gu, i);
    if (p->is_stat) continue;
    char name[256];
    tied_name(p->name, name, sizeof name);
    int32_t j = cnnb_graph_find_param(gt, name);
    copies[j]++;
    for (int64_t k = 0; k < p->count; ++k)
      sum[cnnb_graph_param(gt, j)->offset + k] += gud[p->offset + k];
  }
  double maxabs = 0;
  for (int64_t k = 0; k < nt; ++k) maxabs = fmax(maxabs, fabs(gtd[k]));
  ck_assert_msg(maxabs > 1e-4, "gradients are all ~0: the test would prove nothing");
  for (int32_t j = 0; j < cnnb_graph_num_params(gt); ++j) {
    const cnnb_param *p = cnnb_graph_param(gt, j);
    if (p->is_stat) continue;
    ck_assert_int_eq(copies[j], strncmp(p->name, "c0/", 3) == 0   ? 6
                                : strncmp(p->name, "ca/", 3) == 0 ? 2
                                                                  : 1);
    for (int64_t k = p->offset; k < p->offset + p->count; ++k)
      ck_assert_msg(fabs(gtd[k] - sum[k]) <= same_abs + same_rel * fabs(sum[k]),
                    "%s[%lld]: tied %.7g, sum of paths %.7g", p->name, (long long)(k - p->offset),
                    gtd[k], sum[k]);
  }
  free(pt);
  free(pu);
  free(gtd);
  free(gud);
  free(sum);
  cnnb_executor_destroy(et);
  cnnb_executor_destroy(eu);
  cnnb_graph_destroy(gt);
  cnnb_graph_destroy(gu);
  cnnb_ctx_destroy(ctx);
  close_device(&d);
}
END_TEST

/* ---- buckets ------------------------------------------------------------------------- */

typedef struct bucket_log {
  device *d;
  cnnb_executor *ex;
  int64_t offset[256], count[256];
  float *snapshot;
  int n;
} bucket_log;

static void on_bucket(void *user, int64_t offset, int64_t count) {
  bucket_log *b = user;
  if (b->n < 256) {
    b->offset[b->n] = offset;
    b->count[b->n] = count;
  }
  if (num_events < MAX_EVENTS) events[num_events++] = -1 - b->n;
  b->n++;
  dut->copy_to_host(b->d->dev, b->snapshot + offset, cnnb_executor_grads(b->ex) + offset,
                    (size_t)count * sizeof(float));
}

START_TEST(buckets_reverse_cover_final) {
  make_images();
  device d = open_device(1);
  cnnb_graph *g = build(false); /* many params in many nodes */
  bucket_log log = {.d = &d};
  cnnb_executor_config cfg = {.bucket_bytes = 256, .on_bucket = on_bucket, .user = &log};
  cnnb_executor *ex = make_executor(&d, g, true, &cfg);
  log.ex = ex;
  int64_t n = cnnb_executor_param_count(ex);
  log.snapshot = calloc((size_t)n, sizeof(float));
  ck_assert_int_eq(cnnb_executor_init_params(ex, 3), CNNB_OK);
  int nb = cnnb_executor_num_buckets(ex);
  ck_assert_int_gt(nb, 4);

  for (int step = 0; step < 2; ++step) { /* the second step must announce the same way */
    log.n = 0;
    num_events = 0;
    ck_assert_int_eq(cnnb_executor_step(ex, images, labels, 1.0f, (uint64_t)step), CNNB_OK);
    ck_assert_int_eq(log.n, nb);
    int64_t end = n;
    for (int i = 0; i < nb; ++i) {
      int64_t off, cnt;
      cnnb_executor_bucket(ex, i, &off, &cnt);
      ck_assert_int_eq(log.offset[i], off);
      ck_assert_int_eq(log.count[i], cnt);
      ck_assert_msg(off + cnt == end, "bucket %d [%lld, %lld) does not end where %lld", i,
                    (long long)off, (long long)(off + cnt), (long long)end);
      ck_assert_int_gt(cnt, 0);
      end = off;
    }
    ck_assert_int_eq(end, 0);

    /* Each bucket right after the backward of its earliest owner. */
    for (int e = 0; e < num_events; ++e) {
      if (events[e] >= 0) continue;
      int k = -1 - events[e];
      int32_t earliest = 1 << 30;
      for (int32_t i = 0; i < cnnb_graph_num_params(g); ++i) {
        const cnnb_param *p = cnnb_graph_param(g, i);
        if (!p->is_stat && p->offset >= log.offset[k] && p->offset < log.offset[k] + log.count[k] &&
            p->node < earliest)
          earliest = p->node;
      }
      int prev = e - 1;
      while (prev >= 0 && events[prev] < 0) --prev;
      ck_assert_msg(prev >= 0 && events[prev] == earliest,
                    "bucket %d announced after the backward of node %d, not of %d", k,
                    prev >= 0 ? events[prev] : -1, earliest);
    }
    /* Final when announced. */
    float *grads = download(&d, cnnb_executor_grads(ex), n);
    ck_assert_int_eq(memcmp(grads, log.snapshot, (size_t)n * sizeof(float)), 0);
    free(grads);
  }
  free(log.snapshot);
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  close_device(&d);
}
END_TEST

START_TEST(one_default_bucket) {
  make_images();
  device d = open_device(1);
  cnnb_graph *g = build(true);
  cnnb_executor_config cfg = {.profile = true};
  cnnb_executor *ex = make_executor(&d, g, true, &cfg);
  ck_assert_int_eq(cnnb_executor_step(ex, images, labels, 1.0f, 0), CNNB_OK);
  double fwd = -1, bwd = -1;
  cnnb_executor_node_time(ex, cnnb_graph_find_node(g, "ca"), &fwd, &bwd);
  ck_assert_msg(fwd > 0 && bwd > 0, "profiled times %g %g", fwd, bwd);
  cnnb_executor_node_time(ex, cnnb_graph_input(g), &fwd, &bwd);
  ck_assert(fwd == 0 && bwd == 0);                    /* data nodes never run */
  ck_assert_int_eq(cnnb_executor_num_buckets(ex), 1); /* 25 MiB holds this toy */
  int64_t off, cnt;
  cnnb_executor_bucket(ex, 0, &off, &cnt);
  ck_assert_int_eq(off, 0);
  ck_assert_int_eq(cnt, cnnb_executor_param_count(ex));
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  close_device(&d);
}
END_TEST

/* ---- forward only, errors, init, accuracy -------------------------------------------- */

START_TEST(forward_only_matches_training_forward) {
  make_images();
  device dt = open_device(1);
  cnnb_graph *g = build(true);
  cnnb_executor *et = make_executor(&dt, g, true, NULL);
  ck_assert_int_eq(cnnb_executor_init_params(et, 5), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_step(et, images, labels, 1.0f, 0), CNNB_OK);
  float lt, logits_t[BATCH * CLASSES], logits_f[BATCH * CLASSES];
  ck_assert_int_eq(cnnb_executor_loss(et, &lt), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_logits(et, logits_t), CNNB_OK);
  size_t train_peak = cnnb_executor_peak_bytes(et);
  ck_assert_uint_le(train_peak, cnnb_executor_naive_bytes(et));
  int64_t n = cnnb_executor_param_count(et);
  float *params = download(&dt, cnnb_executor_params(et), n);
  cnnb_executor_destroy(et);
  close_device(&dt);

  device df = open_device(0);
  cnnb_executor *ef = make_executor(&df, g, false, NULL);
  ck_assert_ptr_null(cnnb_executor_grads(ef));
  ck_assert_int_eq(cnnb_executor_num_buckets(ef), 0);
  ck_assert_uint_le(cnnb_executor_peak_bytes(ef), train_peak);
  ck_assert_int_eq(cnnb_executor_upload_params(ef, params, NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_step(ef, images, labels, 1.0f, 0), CNNB_OK);
  float lf;
  ck_assert_int_eq(cnnb_executor_loss(ef, &lf), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_logits(ef, logits_f), CNNB_OK);
  ck_assert_msg(fabsf(lt - lf) < same_abs, "loss: training %g, forward-only %g", lt, lf);
  for (int i = 0; i < BATCH * CLASSES; ++i)
    ck_assert_msg(fabsf(logits_t[i] - logits_f[i]) < same_abs, "logit %d", i);

  /* No labels: the forward runs, the loss is not there to read. */
  ck_assert_int_eq(cnnb_executor_step(ef, images, NULL, 1.0f, 1), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_logits(ef, logits_f), CNNB_OK);
  for (int i = 0; i < BATCH * CLASSES; ++i) ck_assert(fabsf(logits_t[i] - logits_f[i]) < same_abs);
  float dummy;
  cnnb_clear_error(exec_ctx);
  ck_assert_int_eq(cnnb_executor_loss(ef, &dummy), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(exec_ctx), "no loss"));
  free(params);
  cnnb_executor_destroy(ef);
  cnnb_graph_destroy(g);
  close_device(&df);
}
END_TEST

START_TEST(errors_name_the_node) {
  make_images();
  device d = open_device(1);
  cnnb_graph *g = build(true);
  cnnb_ctx *ctx = cnnb_ctx_create("executor", NULL);
  cnnb_executor_config cfg = {.training = true, .device_ctx = d.ctx};
  cnnb_executor *ex;
  ck_assert_int_eq(cnnb_executor_create(ctx, &wrapped, d.dev, g, &cfg, &ex), CNNB_OK);
  fail_forward = cnnb_graph_find_node(g, "ca");
  cnnb_status st = cnnb_executor_step(ex, images, labels, 1.0f, 0);
  fail_forward = -1;
  ck_assert_int_eq(st, CNNB_EINTERNAL);
  ck_assert_str_eq(cnnb_error_message(ctx), "forward of node 'ca' (conv2d): injected failure");
  ck_assert_str_eq(cnnb_error_message(d.ctx), ""); /* moved, not duplicated */
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_executor_step(ex, images, NULL, 1.0f, 0), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "labels"));
  cnnb_executor_destroy(ex);

  /* A training executor needs the loss. */
  cnnb_graph *nl = cnnb_graph_create(BATCH, CH, HW, HW, CLASSES);
  cnnb_graph_set_logits(nl,
                        cnnb_dense(nl, NULL, cnnb_graph_input(nl), CNNB_DENSE(.units = CLASSES)));
  cnnb_clear_error(ctx);
  ex = (cnnb_executor *)1;
  ck_assert_int_eq(cnnb_executor_create(ctx, &wrapped, d.dev, nl, &cfg, &ex), CNNB_EINVAL);
  ck_assert_ptr_null(ex);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "loss"));
  cnnb_graph_destroy(nl);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  close_device(&d);
}
END_TEST

START_TEST(init_params_uploads_initializers) {
  device d = open_device(1);
  cnnb_graph *g = build(true);
  cnnb_executor *ex = make_executor(&d, g, true, NULL);
  ck_assert_int_eq(cnnb_executor_init_params(ex, 42), CNNB_OK);
  int64_t n = cnnb_executor_param_count(ex);
  float *want = calloc((size_t)n, sizeof(float));
  ck_assert_int_eq(cnnb_params_initialize(g, 42, want, NULL), CNNB_OK);
  float *got = download(&d, cnnb_executor_params(ex), n);
  ck_assert_int_eq(memcmp(want, got, (size_t)n * sizeof(float)), 0);
  free(want);
  free(got);
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  close_device(&d);
}
END_TEST

/* conv -> relu -> conv -> bn -> relu, plus a conv -> relu side branch added in; with
 * `tail`, a relu after the add (a residual block's tail), which fuses into the add when
 * the device has CNNB_EXT_FUSED_RELU_ADD (`add_ok`), as the host fuses. */
static cnnb_graph *fusable(bool fuse, bool tail, bool add_ok) {
  cnnb_graph *g = cnnb_graph_create(BATCH, CH, HW, HW, CLASSES);
  cnnb_tensor in = cnnb_graph_input(g);
  cnnb_tensor x = cnnb_relu(g, NULL, c0(g, "c1", in));
  x = cnnb_conv2d(g, "c2", x, CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3));
  x = cnnb_relu(g, NULL, cnnb_batch_norm(g, "bn", x, CNNB_BATCH_NORM(.scale = 1)));
  cnnb_tensor side = cnnb_relu(g, NULL, c0(g, "c3", in));
  x = cnnb_add(g, "sum", x, side);
  if (tail) x = cnnb_relu(g, NULL, x);
  cnnb_tensor l = cnnb_dense(g, "fc", cnnb_global_avg_pool(g, NULL, x),
                             CNNB_DENSE(.units = CLASSES, .use_bias = 1));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  if (fuse)
    ck_assert_int_eq(cnnb_plan_fuse_relus(g, add_ok ? CNNB_FUSE_ALL : CNNB_FUSE_ABI_1_0),
                     tail && add_ok ? 4 : 3);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  return g;
}

START_TEST(fused_relu_matches_unfused) {
  /* _i = 1: with the add + relu tail. A fused add keeps its output until its backward
   * (for the mask), one step past where the ReLU's output would have died, so only the
   * graph without the tail must plan no more memory than the unfused one. */
  const bool tail = _i == 1;
  make_images();
  device d = open_device(1);
  const bool add_ok = device_harness_has_extension(d.dev, CNNB_EXT_FUSED_RELU_ADD);
  cnnb_graph *gp = fusable(false, tail, add_ok), *gf = fusable(true, tail, add_ok);
  cnnb_executor *ep = make_executor(&d, gp, true, NULL), *ef = make_executor(&d, gf, true, NULL);
  ck_assert_int_eq(cnnb_executor_init_params(ep, 9), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_init_params(ef, 9), CNNB_OK);
  if (!tail) ck_assert_uint_le(cnnb_executor_peak_bytes(ef), cnnb_executor_peak_bytes(ep));
  ck_assert_uint_lt(cnnb_executor_naive_bytes(ef), cnnb_executor_naive_bytes(ep));
  ck_assert_msg(cnnb_executor_step(ep, images, labels, 1.0f, 0) == CNNB_OK, "%s",
                cnnb_error_message(exec_ctx));
  ck_assert_msg(cnnb_executor_step(ef, images, labels, 1.0f, 0) == CNNB_OK, "%s",
                cnnb_error_message(exec_ctx));
  float lp, lf;
  ck_assert_int_eq(cnnb_executor_loss(ep, &lp), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_loss(ef, &lf), CNNB_OK);
  ck_assert_msg(fabsf(lp - lf) < same_abs, "loss plain %g fused %g", lp, lf);
  int64_t n = cnnb_executor_param_count(ep);
  float *gpd = download(&d, cnnb_executor_grads(ep), n),
        *gfd = download(&d, cnnb_executor_grads(ef), n);
  double maxabs = 0;
  for (int64_t k = 0; k < n; ++k) {
    maxabs = fmax(maxabs, fabs(gpd[k]));
    ck_assert_msg(fabs(gpd[k] - gfd[k]) <= same_abs + same_rel * fabs(gpd[k]),
                  "grad %lld: plain %.7g fused %.7g", (long long)k, gpd[k], gfd[k]);
  }
  ck_assert(maxabs > 1e-4);
  free(gpd);
  free(gfd);
  cnnb_executor_destroy(ep);
  cnnb_executor_destroy(ef);
  cnnb_graph_destroy(gp);
  cnnb_graph_destroy(gf);
  close_device(&d);
}
END_TEST

START_TEST(accuracy_in_top_k) {
  /* logits = input through an identity dense layer: 4 rows of 7 classes. */
  enum { R = 4, K = 7 };
  device d = open_device(0);
  cnnb_graph *g = cnnb_graph_create(R, K, 1, 1, K);
  cnnb_tensor l = cnnb_dense(g, "fc", cnnb_graph_input(g), CNNB_DENSE(.units = K, .use_bias = 1));
  cnnb_graph_set_logits(g, l);
  cnnb_graph_add_loss(g);
  cnnb_executor *ex = make_executor(&d, g, false, NULL);
  /* The kernel is the arena's first param; the bias (zero) starts after its gap. */
  float *w = calloc((size_t)cnnb_graph_param_arena_count(g), sizeof *w);
  ck_assert_ptr_nonnull(w);
  for (int i = 0; i < K; ++i) w[i * K + i] = 1.0f;
  ck_assert_int_eq(cnnb_executor_upload_params(ex, w, NULL), CNNB_OK);
  free(w);
  float x[R * K] = {
      1, 3, 3, 0, 2, -1, -2, /* label 2: tied for the max -> top-1 and top-5 */
      1, 3, 3, 0, 2, -1, -2, /* label 4: two above -> top-5 only */
      1, 3, 3, 0, 2, -1, -2, /* label 6: six above -> neither */
      1, 3, 3, 0, 2, -1, -2, /* label 3: four above -> top-5 only */
  };
  int32_t lab[R] = {2, 4, 6, 3};
  ck_assert_int_eq(cnnb_executor_step(ex, x, lab, 1.0f, 0), CNNB_OK);
  int top1 = -1, top5 = -1;
  ck_assert_int_eq(cnnb_executor_accuracy(ex, lab, &top1, &top5), CNNB_OK);
  ck_assert_int_eq(top1, 1);
  ck_assert_int_eq(top5, 3);
  int32_t lab2[R] = {1, 1, 5, 99};
  ck_assert_int_eq(cnnb_executor_accuracy(ex, lab2, &top1, &top5), CNNB_OK);
  ck_assert_int_eq(top1, 2); /* an out-of-range label is never a hit */
  ck_assert_int_eq(top5, 2);
  cnnb_executor_destroy(ex);
  cnnb_graph_destroy(g);
  close_device(&d);
}
END_TEST

/* ---- uint8 input (CNNB_EXT_DEVICE_UINT8_INPUT) ------------------------------------------ */

/* The device's uint8 conversion, or NULL (the case is skipped, saying so). */
static const cnnb_device_uint8_input *uint8_input(const cnnb_device_vtable *dv, void *dev) {
  const cnnb_device_uint8_input *ext = NULL;
  if (dv->get_extension) ext = dv->get_extension(dev, CNNB_EXT_DEVICE_UINT8_INPUT);
  const cnnb_plugin *plugin = device_harness_plugin();
  if (!ext && plugin->get_extension) ext = plugin->get_extension(CNNB_EXT_DEVICE_UINT8_INPUT);
  if (!ext) {
    printf("note: device '%s' has no %s: its uint8 input is not tested\n", device_harness_name(),
           CNNB_EXT_DEVICE_UINT8_INPUT);
    return NULL;
  }
  ck_assert_uint_ge(ext->struct_size, sizeof(cnnb_device_uint8_input));
  ck_assert_ptr_nonnull(ext->input_from_host_uint8);
  return ext;
}

/* Pixels [n, h, w, c] and their normalization (channels differ, so a channel mix-up
 * shows); floats [n, c, h, w] = (float)v * scale[c] + offset[c]. */
static const float u8_scale[CH] = {(float)(1.0 / 127.5), 1.0f / 64.0f, 0.01f};
static const float u8_offset[CH] = {-1.0f, -2.0f, 0.5f};

static void make_uint8_batch(uint8_t *pixels, float *floats) {
  unsigned s = 11;
  for (int i = 0; i < BATCH * HW * HW * CH; ++i) {
    s = s * 1664525u + 1013904223u;
    pixels[i] = (uint8_t)(s >> 24);
  }
  for (int n = 0; n < BATCH; ++n)
    for (int c = 0; c < CH; ++c)
      for (int p = 0; p < HW * HW; ++p)
        floats[(n * CH + c) * HW * HW + p] =
            (float)pixels[(n * HW * HW + p) * CH + c] * u8_scale[c] + u8_offset[c];
}

/* _i: 0 fp32, then each of device_harness_low_precisions. */
START_TEST(uint8_input_is_the_float_input) {
  uint32_t precision = _i == 0 ? CNNB_PRECISION_FP32 : device_harness_low_precisions[_i - 1];
  device_harness h;
  int rc = device_harness_open(&h, precision, 0, 1);
  if (rc == DEVICE_HARNESS_REFUSED) {
    device_harness_close(&h);
    return;
  }
  ck_assert_msg(rc == 0, "%s", h.error);
  const cnnb_device_uint8_input *ext = uint8_input(h.dv, h.dev);
  if (!ext) {
    device_harness_close(&h);
    return;
  }
  cnnb_graph *g = cnnb_graph_create(BATCH, CH, HW, HW, CLASSES);
  cnnb_tensor in = cnnb_graph_input(g);
  cnnb_graph_set_logits(g, cnnb_dense(g, "fc", in, CNNB_DENSE(.units = CLASSES)));
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  size_t bytes = 0;
  ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, in, &bytes), CNNB_OK);
  void *from_uint8 = NULL, *from_float = NULL;
  ck_assert_int_eq(h.dv->alloc(h.dev, bytes, &from_uint8), CNNB_OK);
  ck_assert_int_eq(h.dv->alloc(h.dev, bytes, &from_float), CNNB_OK);
  static uint8_t pixels[BATCH * HW * HW * CH];
  static float floats[BATCH * CH * HW * HW], back_u[BATCH * CH * HW * HW],
      back_f[BATCH * CH * HW * HW];
  make_uint8_batch(pixels, floats);
  ck_assert_msg(ext->input_from_host_uint8(h.dev, g, in, from_uint8, pixels, u8_scale, u8_offset) ==
                    CNNB_OK,
                "%s", cnnb_error_message(h.ctx));
  ck_assert_int_eq(h.dv->tensor_from_host(h.dev, g, in, from_float, floats), CNNB_OK);
  ck_assert_int_eq(h.dv->tensor_to_host(h.dev, g, in, from_uint8, back_u), CNNB_OK);
  ck_assert_int_eq(h.dv->tensor_to_host(h.dev, g, in, from_float, back_f), CNNB_OK);
  ck_assert_int_eq(h.dv->synchronize(h.dev), CNNB_OK);
  for (int i = 0; i < BATCH * CH * HW * HW; ++i)
    ck_assert_msg(memcmp(&back_u[i], &back_f[i], sizeof(float)) == 0,
                  "precision %u element %d: from uint8 %a, from floats %a", precision, i,
                  (double)back_u[i], (double)back_f[i]);
  if (precision == CNNB_PRECISION_FP32)
    for (int i = 0; i < BATCH * CH * HW * HW; ++i)
      ck_assert_msg(memcmp(&back_u[i], &floats[i], sizeof(float)) == 0, "element %d", i);
  h.dv->free(h.dev, from_uint8);
  h.dv->free(h.dev, from_float);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

START_TEST(uint8_step_trains_as_float_step) {
  device du = open_device(1), df = open_device(1);
  const cnnb_device_uint8_input *ext = uint8_input(dut, du.dev);
  if (!ext) {
    close_device(&du);
    close_device(&df);
    return;
  }
  cnnb_graph *g = build(true);
  cnnb_executor *eu = make_executor(&du, g, true, NULL), *ef = make_executor(&df, g, true, NULL);
  ck_assert_int_eq(cnnb_executor_init_params(eu, 5), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_init_params(ef, 5), CNNB_OK);
  static uint8_t pixels[BATCH * HW * HW * CH];
  static float floats[BATCH * CH * HW * HW];
  make_uint8_batch(pixels, floats);
  cnnb_clear_error(exec_ctx);
  ck_assert_int_eq(cnnb_executor_step_uint8(eu, pixels, labels, 1.0f, 0), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(exec_ctx), "no uint8 input"));
  ck_assert_int_eq(cnnb_executor_set_uint8_input(eu, ext, u8_scale, u8_offset), CNNB_OK);
  ck_assert_msg(cnnb_executor_step_uint8(eu, pixels, labels, 1.0f, 0) == CNNB_OK, "%s",
                cnnb_error_message(exec_ctx));
  ck_assert_int_eq(cnnb_executor_step(ef, floats, labels, 1.0f, 0), CNNB_OK);
  float lu, lf;
  ck_assert_int_eq(cnnb_executor_loss(eu, &lu), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_loss(ef, &lf), CNNB_OK);
  ck_assert_msg(fabsf(lu - lf) <= same_abs, "loss: uint8 %g, float %g", lu, lf);
  int64_t n = cnnb_executor_param_count(eu);
  float *gu = download(&du, cnnb_executor_grads(eu), n),
        *gf = download(&df, cnnb_executor_grads(ef), n);
  for (int64_t i = 0; i < n; ++i)
    ck_assert_msg(fabsf(gu[i] - gf[i]) <= same_abs + same_rel * fabsf(gf[i]),
                  "gradient %lld: uint8 %g, float %g", (long long)i, gu[i], gf[i]);
  free(gu);
  free(gf);
  cnnb_executor_destroy(eu);
  cnnb_executor_destroy(ef);
  cnnb_graph_destroy(g);
  close_device(&du);
  close_device(&df);
}
END_TEST

/* cfg.constant_batch: the images and labels go up at the first step only, and the run
 * trains exactly as one that uploads every step. The labels node sits near the end of
 * the graph, so the arena lends its bytes to earlier activations: without buffers of
 * their own, a batch kept from the first step would be overwritten. */
START_TEST(constant_batch_uploads_once) {
  make_images();
  device dc = open_device(1), dn = open_device(1);
  cnnb_graph *g = build(true);
  cnnb_executor_config constant = {.constant_batch = true};
  cnnb_executor *ec = make_executor(&dc, g, true, &constant),
                *en = make_executor(&dn, g, true, NULL);
  ck_assert_int_eq(cnnb_executor_init_params(ec, 5), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_init_params(en, 5), CNNB_OK);
  int64_t n = cnnb_executor_param_count(ec);
  /* The batch the constant executor must ignore after its first step. */
  static float other[BATCH * CH * HW * HW];
  static int32_t other_labels[BATCH] = {0, 0};
  enum { STEPS = 4 };
  int constant_uploads = 0, normal_uploads = 0;
  for (int step = 0; step < STEPS; ++step) {
    uploads = 0;
    ck_assert_int_eq(cnnb_executor_step(ec, step ? other : images, step ? other_labels : labels,
                                        1.0f, (uint64_t)step),
                     CNNB_OK);
    constant_uploads += uploads;
    uploads = 0;
    ck_assert_int_eq(cnnb_executor_step(en, images, labels, 1.0f, (uint64_t)step), CNNB_OK);
    normal_uploads += uploads;
    float lc, ln;
    ck_assert_int_eq(cnnb_executor_loss(ec, &lc), CNNB_OK);
    ck_assert_int_eq(cnnb_executor_loss(en, &ln), CNNB_OK);
    ck_assert_msg(fabsf(lc - ln) <= same_abs, "step %d: loss %g with a constant batch, %g without",
                  step, lc, ln);
    /* A plain SGD step, so later steps see different weights. */
    float *p = download(&dn, cnnb_executor_params(en), n),
          *gr = download(&dn, cnnb_executor_grads(en), n);
    for (int64_t i = 0; i < n; ++i) p[i] -= 0.1f * gr[i];
    ck_assert_int_eq(cnnb_executor_upload_params(en, p, NULL), CNNB_OK);
    ck_assert_int_eq(cnnb_executor_upload_params(ec, p, NULL), CNNB_OK);
    free(p);
    free(gr);
  }
  ck_assert_int_eq(constant_uploads, 2); /* images and labels, once */
  ck_assert_int_eq(normal_uploads, 2 * STEPS);
  cnnb_executor_destroy(ec);
  cnnb_executor_destroy(en);
  cnnb_graph_destroy(g);
  close_device(&dc);
  close_device(&dn);
}
END_TEST

/* Gradient elements announced final through on_bucket, per executor (user: an int64_t). */
static void count_announced(void *user, int64_t offset, int64_t count) {
  (void)offset;
  *(int64_t *)user += count;
}

/* cfg.step_graph (--cuda_graphs) on a device answering CNNB_EXT_STEP_GRAPH: steps 1 and 2
 * make their calls, step 3 is recorded and replayed, later steps replay it, and a new
 * loss scale (dynamic loss scaling) makes a new recording. Training through the replays
 * is training through the calls: the same losses and gradients as an executor making
 * every call, step after step, while the weights change between steps (as the update,
 * outside the recording, changes them), and every gradient announced final once a step.
 * A device without the extension makes every step's calls: nothing is recorded and it
 * trains the same. */
START_TEST(step_graph_replays_the_calls) {
  make_images();
  device dg = open_device(1), dn = open_device(1);
  bool offered = dut->get_extension && dut->get_extension(dg.dev, CNNB_EXT_STEP_GRAPH);
  cnnb_graph *g = build(true); /* accumulates: its recording holds accumulate calls too */
  int64_t announced_g = 0, announced_n = 0;
  cnnb_executor_config graphed = {.constant_batch = true,
                                  .step_graph = true,
                                  .on_bucket = count_announced,
                                  .user = &announced_g};
  cnnb_executor_config plain = {
      .constant_batch = true, .on_bucket = count_announced, .user = &announced_n};
  cnnb_executor *eg = make_executor(&dg, g, true, &graphed),
                *en = make_executor(&dn, g, true, &plain);
  ck_assert_int_eq(cnnb_executor_init_params(eg, 5), CNNB_OK);
  ck_assert_int_eq(cnnb_executor_init_params(en, 5), CNNB_OK);
  int64_t n = cnnb_executor_param_count(eg);
  enum { STEPS = 7, NEW_SCALE_AT = 4 };
  for (int step = 0; step < STEPS; ++step) {
    float scale = step < NEW_SCALE_AT ? 1.0f : 4.0f;
    announced_g = announced_n = 0;
    ck_assert_int_eq(cnnb_executor_step(eg, images, labels, scale, (uint64_t)step), CNNB_OK);
    ck_assert_int_eq(cnnb_executor_step(en, images, labels, scale, (uint64_t)step), CNNB_OK);
    ck_assert_msg(announced_g == n && announced_n == n,
                  "step %d: %lld gradients announced through the recording, %lld through the "
                  "calls, of %lld",
                  step, (long long)announced_g, (long long)announced_n, (long long)n);
    float lg, ln;
    ck_assert_int_eq(cnnb_executor_loss(eg, &lg), CNNB_OK);
    ck_assert_int_eq(cnnb_executor_loss(en, &ln), CNNB_OK);
    ck_assert_msg(fabsf(lg - ln) <= same_abs + same_rel * fabsf(ln),
                  "step %d: loss %g through the recording, %g through the calls", step, lg, ln);
    float *gg = download(&dg, cnnb_executor_grads(eg), n),
          *gn = download(&dn, cnnb_executor_grads(en), n);
    for (int64_t i = 0; i < n; ++i)
      ck_assert_msg(fabsf(gg[i] - gn[i]) <= same_abs + same_rel * fabsf(gn[i]),
                    "step %d: gradient %lld is %g through the recording, %g through the calls",
                    step, (long long)i, gg[i], gn[i]);
    /* A plain SGD step on both, so the recording must read the weights of each step. */
    float *p = download(&dn, cnnb_executor_params(en), n);
    for (int64_t i = 0; i < n; ++i) p[i] -= 0.1f * gn[i] / scale;
    ck_assert_int_eq(cnnb_executor_upload_params(en, p, NULL), CNNB_OK);
    ck_assert_int_eq(cnnb_executor_upload_params(eg, p, NULL), CNNB_OK);
    free(p);
    free(gg);
    free(gn);
  }
  int64_t recorded = -1, replayed = -1;
  cnnb_executor_step_graph_counts(eg, &recorded, &replayed);
  if (offered) {
    ck_assert_msg(recorded == 2 && replayed == STEPS - 2,
                  "%lld recordings and %lld replays in %d steps (want 2: at step 3 and at the new "
                  "loss scale; and %d replays)",
                  (long long)recorded, (long long)replayed, STEPS, STEPS - 2);
  } else {
    ck_assert_msg(recorded == 0 && replayed == 0, "%s offers no step graph, yet %lld recordings",
                  device_harness_name(), (long long)recorded);
  }
  int64_t plain_recorded = -1, plain_replayed = -1;
  cnnb_executor_step_graph_counts(en, &plain_recorded, &plain_replayed);
  ck_assert_int_eq(plain_recorded + plain_replayed, 0); /* not asked: never */
  cnnb_executor_destroy(eg);
  cnnb_executor_destroy(en);
  cnnb_graph_destroy(g);
  close_device(&dg);
  close_device(&dn);
}
END_TEST

static Suite *executor_suite(void) {
  dut = device_harness_vtable();
  const test_tolerance *tol = test_tolerance_of(CNNB_PRECISION_FP32);
  same_abs = tol->same_abs;
  same_rel = tol->same_rel;
  Suite *s = suite_create("executor");
  TCase *tc = tcase_create("executor");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, accumulation_equals_paths_alone);
  tcase_add_test(tc, buckets_reverse_cover_final);
  tcase_add_test(tc, one_default_bucket);
  tcase_add_test(tc, forward_only_matches_training_forward);
  tcase_add_test(tc, errors_name_the_node);
  tcase_add_test(tc, init_params_uploads_initializers);
  tcase_add_loop_test(tc, fused_relu_matches_unfused, 0, 2);
  tcase_add_test(tc, accuracy_in_top_k);
  tcase_add_loop_test(tc, uint8_input_is_the_float_input, 0, 3);
  tcase_add_test(tc, uint8_step_trains_as_float_step);
  tcase_add_test(tc, constant_batch_uploads_once);
  tcase_add_test(tc, step_graph_replays_the_calls);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  exec_ctx = cnnb_ctx_create("executor", NULL);
  int rc = device_harness_run(argc, argv, "test_device_executor", executor_suite);
  cnnb_ctx_destroy(exec_ctx);
  return rc;
}
