/* cpu_harness.c — see cpu_harness.h: loading the cpu device plugin and a deliberately
 * simple executor for tests (every buffer its own allocation, every gradient summed
 * from per-slot buffers with the device's accumulate), so a bug in the real planner
 * cannot hide or fake a bug in the device. */
#define _POSIX_C_SOURCE 200809L
#include "cpu_harness.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"

static int fail(cpu_harness *h, const char *fmt, ...) CNNB_PRINTF(2, 3);
static int fail(cpu_harness *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->error, sizeof h->error, fmt, ap);
  va_end(ap);
  return -1;
}

/* Appends the device's own message to h->error. */
static int fail_dev(cpu_harness *h, const char *what, cnnb_status st) {
  return fail(h, "%s: %s (%s)", what, cnnb_error_message(h->ctx), cnnb_status_name(st));
}

int cpu_harness_load(cpu_harness *h) {
  memset(h, 0, sizeof *h);
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (!dir) {
    snprintf(h->error, sizeof h->error, "CNNB_PLUGIN_DIR is not set");
    return 1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/libcnnb_device_cpu.so", dir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(h->error, sizeof h->error, "%.900s not built (oneDNN missing?): skipping", path);
    return 1;
  }
  fclose(f);
  h->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h->dl) return fail(h, "dlopen %.900s: %.100s", path, dlerror());
  cnnb_plugin_entry_fn entry = (cnnb_plugin_entry_fn)(uintptr_t)dlsym(h->dl, CNNB_PLUGIN_ENTRY_SYMBOL);
  if (!entry) return fail(h, "%s: no %s", path, CNNB_PLUGIN_ENTRY_SYMBOL);
  cnnb_host host = {sizeof host, CNNB_ABI_MAJOR, CNNB_ABI_MINOR, 0, "test"};
  h->plugin = entry(&host);
  if (!h->plugin || h->plugin->kind != CNNB_KIND_DEVICE || !h->plugin->vtable)
    return fail(h, "%s: not a device plugin", path);
  h->dv = h->plugin->vtable;
  h->ctx = cnnb_ctx_create("cpu", NULL);
  if (!h->ctx) return fail(h, "out of memory");
  return 0;
}

int cpu_harness_open(cpu_harness *h, uint32_t precision, int training, uint32_t seed) {
  int rc = cpu_harness_load(h);
  if (rc) return rc;
  /* One compute thread unless CNNB_TEST_THREADS says otherwise: the test graphs are
   * tiny, and on a loaded 2-core machine OpenMP's barriers cost more than they save. */
  const char *threads = getenv("CNNB_TEST_THREADS");
  cnnb_device_config cfg = {.struct_size = sizeof cfg,
                            .device_index = 0,
                            .num_threads = threads ? atoi(threads) : 1,
                            .precision = precision,
                            .training = training,
                            .seed = seed};
  cnnb_status st = h->dv->create(h->ctx, "cpu", &cfg, &h->dev);
  if (st == CNNB_EUNSUPPORTED && precision != CNNB_PRECISION_FP32) {
    fail_dev(h, "create", st);
    return 2;
  }
  if (st) return fail_dev(h, "create", st);
  return 0;
}

void cpu_harness_close(cpu_harness *h) {
  if (h->dev) h->dv->destroy(h->dev);
  if (h->ctx) cnnb_ctx_destroy(h->ctx);
  if (h->dl) dlclose(h->dl);
  memset(h, 0, sizeof *h);
}

struct cpu_run {
  cpu_harness *h;
  const cnnb_graph *g;
  int32_t n;
  size_t *bytes;
  void **act, **grad;      /* per tensor */
  int *grad_set;           /* per tensor: gradient written this backward */
  void ***slot;            /* per node, per input: where its backward writes */
  void **state;
  float *params, *grads, *stats;
  int64_t param_count, stat_count;
  int no_image_grads;
};

void cpu_run_want_image_grads(cpu_run *r, int wanted) { r->no_image_grads = !wanted; }

void cpu_run_destroy(cpu_run *r) {
  if (!r) return;
  const cnnb_device_vtable *dv = r->h->dv;
  void *dev = r->h->dev;
  for (int32_t i = 0; i < r->n; i++) {
    if (r->state && r->state[i]) dv->release(dev, r->state[i]);
    if (r->act && r->act[i]) dv->free(dev, r->act[i]);
    if (r->grad && r->grad[i]) dv->free(dev, r->grad[i]);
    if (r->slot && r->slot[i]) {
      const cnnb_node *node = cnnb_graph_node(r->g, i);
      for (int32_t k = 0; k < node->num_inputs; k++)
        if (r->slot[i][k]) dv->free(dev, r->slot[i][k]);
      free(r->slot[i]);
    }
  }
  if (r->params) dv->free(dev, r->params);
  if (r->grads) dv->free(dev, r->grads);
  if (r->stats) dv->free(dev, r->stats);
  free(r->bytes);
  free(r->act);
  free(r->grad);
  free(r->grad_set);
  free(r->slot);
  free(r->state);
  free(r);
}

cpu_run *cpu_run_create(cpu_harness *h, const cnnb_graph *g) {
  cpu_run *r = calloc(1, sizeof *r);
  if (!r) return fail(h, "out of memory"), NULL;
  r->h = h;
  r->g = g;
  r->n = cnnb_graph_num_nodes(g);
  size_t n = (size_t)r->n;
  r->bytes = calloc(n, sizeof *r->bytes);
  r->act = calloc(n, sizeof *r->act);
  r->grad = calloc(n, sizeof *r->grad);
  r->grad_set = calloc(n, sizeof *r->grad_set);
  r->slot = calloc(n, sizeof *r->slot);
  r->state = calloc(n, sizeof *r->state);
  if (!r->bytes || !r->act || !r->grad || !r->grad_set || !r->slot || !r->state) {
    cpu_run_destroy(r);
    return fail(h, "out of memory"), NULL;
  }
  const cnnb_device_vtable *dv = h->dv;
  cnnb_status st;
  for (int32_t t = 0; t < r->n; t++) {
    if ((st = dv->tensor_bytes(h->dev, g, t, &r->bytes[t])) ||
        (st = dv->alloc(h->dev, r->bytes[t], &r->act[t])) ||
        (st = dv->alloc(h->dev, r->bytes[t], &r->grad[t]))) {
      fail_dev(h, "tensor buffers", st);
      cpu_run_destroy(r);
      return NULL;
    }
  }
  for (int32_t i = 0; i < r->n; i++) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    r->slot[i] = calloc((size_t)(node->num_inputs ? node->num_inputs : 1), sizeof(void *));
    if (!r->slot[i]) {
      cpu_run_destroy(r);
      return fail(h, "out of memory"), NULL;
    }
    for (int32_t k = 0; k < node->num_inputs; k++)
      if ((st = dv->alloc(h->dev, r->bytes[node->inputs[k]], &r->slot[i][k]))) {
        fail_dev(h, "gradient slots", st);
        cpu_run_destroy(r);
        return NULL;
      }
  }
  r->param_count = cnnb_graph_param_arena_count(g);
  r->stat_count = cnnb_graph_stat_arena_count(g);
  if ((st = dv->alloc(h->dev, (size_t)r->param_count * sizeof(float), (void **)&r->params)) ||
      (st = dv->alloc(h->dev, (size_t)r->param_count * sizeof(float), (void **)&r->grads)) ||
      (st = dv->alloc(h->dev, (size_t)r->stat_count * sizeof(float), (void **)&r->stats))) {
    fail_dev(h, "arenas", st);
    cpu_run_destroy(r);
    return NULL;
  }
  for (int32_t i = 0; i < r->n; i++)
    if ((st = dv->prepare(h->dev, g, i, &r->state[i]))) {
      char what[256];
      snprintf(what, sizeof what, "prepare node '%s'", cnnb_graph_node(g, i)->name);
      fail_dev(h, what, st);
      cpu_run_destroy(r);
      return NULL;
    }
  return r;
}

size_t cpu_run_tensor_bytes(const cpu_run *r, cnnb_tensor t) { return r->bytes[t]; }

int cpu_run_set_params(cpu_run *r, const float *params, const float *stats) {
  cnnb_status st;
  if (params && (st = r->h->dv->copy_to_device(r->h->dev, r->params, params,
                                               (size_t)r->param_count * sizeof(float))))
    return fail_dev(r->h, "upload params", st);
  if (stats && (st = r->h->dv->copy_to_device(r->h->dev, r->stats, stats,
                                              (size_t)r->stat_count * sizeof(float))))
    return fail_dev(r->h, "upload stats", st);
  return 0;
}

int cpu_run_get_params(cpu_run *r, float *params, float *stats) {
  cnnb_status st;
  if (params && (st = r->h->dv->copy_to_host(r->h->dev, params, r->params,
                                             (size_t)r->param_count * sizeof(float))))
    return fail_dev(r->h, "download params", st);
  if (stats && (st = r->h->dv->copy_to_host(r->h->dev, stats, r->stats,
                                            (size_t)r->stat_count * sizeof(float))))
    return fail_dev(r->h, "download stats", st);
  return 0;
}

int cpu_run_get_param_grads(cpu_run *r, float *grads) {
  cnnb_status st = r->h->dv->copy_to_host(r->h->dev, grads, r->grads,
                                          (size_t)r->param_count * sizeof(float));
  return st ? fail_dev(r->h, "download grads", st) : 0;
}

static cnnb_node_io make_io(cpu_run *r, int32_t i, void **inputs, void **input_grads,
                            float loss_scale, uint64_t step) {
  const cnnb_node *node = cnnb_graph_node(r->g, i);
  for (int32_t k = 0; k < node->num_inputs; k++) {
    inputs[k] = r->act[node->inputs[k]];
    input_grads[k] = r->slot[i][k];
  }
  cnnb_node_io io = {.struct_size = sizeof io,
                     .num_inputs = node->num_inputs,
                     .inputs = inputs,
                     .output = r->act[i],
                     .input_grads = input_grads,
                     .output_grad = r->grad[i],
                     .params = r->params,
                     .grads = r->grads,
                     .stats = r->stats,
                     .loss_scale = loss_scale,
                     .step = step};
  return io;
}

int cpu_run_forward(cpu_run *r, const float *images, const int32_t *labels, uint64_t step) {
  const cnnb_device_vtable *dv = r->h->dv;
  void *inputs[64], *input_grads[64];
  cnnb_status st;
  for (int32_t i = 0; i < r->n; i++) {
    const cnnb_node *node = cnnb_graph_node(r->g, i);
    if (node->op == CNNB_OP_INPUT) {
      if ((st = dv->tensor_from_host(r->h->dev, r->g, i, r->act[i], images)))
        return fail_dev(r->h, "images", st);
      continue;
    }
    if (node->op == CNNB_OP_LABELS) {
      if (labels && (st = dv->tensor_from_host(r->h->dev, r->g, i, r->act[i], labels)))
        return fail_dev(r->h, "labels", st);
      continue;
    }
    if (node->num_inputs > 64) return fail(r->h, "node with %d inputs", node->num_inputs);
    cnnb_node_io io = make_io(r, i, inputs, input_grads, 1.0f, step);
    if ((st = dv->forward(r->h->dev, r->state[i], &io))) {
      char what[256];
      snprintf(what, sizeof what, "forward of '%s'", node->name);
      return fail_dev(r->h, what, st);
    }
  }
  return 0;
}

int cpu_run_backward(cpu_run *r, cnnb_tensor seed, const float *seed_grad, float loss_scale,
                     uint64_t step) {
  const cnnb_device_vtable *dv = r->h->dv;
  void *inputs[64], *input_grads[64];
  cnnb_status st;
  memset(r->grad_set, 0, (size_t)r->n * sizeof *r->grad_set);
  int32_t last = r->n - 1;
  if (seed >= 0) {
    if ((st = dv->tensor_from_host(r->h->dev, r->g, seed, r->grad[seed], seed_grad)))
      return fail_dev(r->h, "seed gradient", st);
    r->grad_set[seed] = 1;
    last = seed;
  }
  for (int32_t i = last; i >= 0; i--) {
    const cnnb_node *node = cnnb_graph_node(r->g, i);
    if (node->op == CNNB_OP_INPUT || node->op == CNNB_OP_LABELS) continue;
    if (!r->grad_set[i] && node->op != CNNB_OP_SOFTMAX_XENT) continue; /* nothing flows here */
    cnnb_node_io io = make_io(r, i, inputs, input_grads, loss_scale, step);
    for (int32_t k = 0; k < node->num_inputs; k++) {
      uint32_t op = cnnb_graph_node(r->g, node->inputs[k])->op;
      if (op == CNNB_OP_LABELS) input_grads[k] = NULL; /* never needed */
      if (op == CNNB_OP_INPUT && r->no_image_grads) input_grads[k] = NULL;
    }
    if ((st = dv->backward(r->h->dev, r->state[i], &io))) {
      char what[256];
      snprintf(what, sizeof what, "backward of '%s'", node->name);
      return fail_dev(r->h, what, st);
    }
    for (int32_t k = 0; k < node->num_inputs; k++) {
      cnnb_tensor t = node->inputs[k];
      if (!input_grads[k]) continue;
      if (!r->grad_set[t]) {
        memcpy(r->grad[t], input_grads[k], r->bytes[t]);
        r->grad_set[t] = 1;
      } else if ((st = dv->accumulate(r->h->dev, r->g, t, r->grad[t], input_grads[k]))) {
        return fail_dev(r->h, "accumulate", st);
      }
    }
  }
  return 0;
}

int cpu_run_activation(cpu_run *r, cnnb_tensor t, float *host) {
  cnnb_status st = r->h->dv->tensor_to_host(r->h->dev, r->g, t, r->act[t], host);
  return st ? fail_dev(r->h, "activation to host", st) : 0;
}

int cpu_run_gradient(cpu_run *r, cnnb_tensor t, float *host) {
  if (!r->grad_set[t]) return fail(r->h, "no gradient reached tensor %d", t);
  cnnb_status st = r->h->dv->tensor_to_host(r->h->dev, r->g, t, r->grad[t], host);
  return st ? fail_dev(r->h, "gradient to host", st) : 0;
}
