/* device_run.c — see device_run.h: every buffer its own allocation; a tensor's gradient
 * is taken over from its first consumer's slot and summed with the others' through the
 * device's accumulate, or through the host when the device has none. */
#define _POSIX_C_SOURCE 200809L
#include "device_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"

static int fail(device_harness *h, const char *fmt, ...) CNNB_PRINTF(2, 3);
static int fail(device_harness *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->error, sizeof h->error, fmt, ap);
  va_end(ap);
  return -1;
}

/* Appends the device's own message to h->error. */
static int fail_dev(device_harness *h, const char *what, cnnb_status st) {
  return fail(h, "%s: %s (%s)", what, cnnb_error_message(h->ctx), cnnb_status_name(st));
}

struct device_run {
  device_harness *h;
  const cnnb_graph *g;
  int32_t n;
  size_t *bytes;
  void **act, **grad; /* per tensor */
  int *grad_set;      /* per tensor: gradient written this backward */
  void ***slot;       /* per node, per input: where its backward writes */
  void **state;
  float *params, *grads, *stats;
  int64_t param_count, stat_count;
  int no_image_grads;
};

void device_run_want_image_grads(device_run *r, int wanted) { r->no_image_grads = !wanted; }

void device_run_destroy(device_run *r) {
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

device_run *device_run_create(device_harness *h, const cnnb_graph *g) {
  device_run *r = calloc(1, sizeof *r);
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
    device_run_destroy(r);
    return fail(h, "out of memory"), NULL;
  }
  const cnnb_device_vtable *dv = h->dv;
  cnnb_status st;
  for (int32_t t = 0; t < r->n; t++) {
    if ((st = dv->tensor_bytes(h->dev, g, t, &r->bytes[t])) ||
        (st = dv->alloc(h->dev, r->bytes[t], &r->act[t])) ||
        (st = dv->alloc(h->dev, r->bytes[t], &r->grad[t]))) {
      fail_dev(h, "tensor buffers", st);
      device_run_destroy(r);
      return NULL;
    }
  }
  for (int32_t i = 0; i < r->n; i++) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    r->slot[i] = calloc((size_t)(node->num_inputs ? node->num_inputs : 1), sizeof(void *));
    if (!r->slot[i]) {
      device_run_destroy(r);
      return fail(h, "out of memory"), NULL;
    }
    for (int32_t k = 0; k < node->num_inputs; k++)
      if ((st = dv->alloc(h->dev, r->bytes[node->inputs[k]], &r->slot[i][k]))) {
        fail_dev(h, "gradient slots", st);
        device_run_destroy(r);
        return NULL;
      }
  }
  r->param_count = cnnb_graph_param_arena_count(g);
  r->stat_count = cnnb_graph_stat_arena_count(g);
  if ((st = dv->alloc(h->dev, (size_t)r->param_count * sizeof(float), (void **)&r->params)) ||
      (st = dv->alloc(h->dev, (size_t)r->param_count * sizeof(float), (void **)&r->grads)) ||
      (st = dv->alloc(h->dev, (size_t)r->stat_count * sizeof(float), (void **)&r->stats))) {
    fail_dev(h, "arenas", st);
    device_run_destroy(r);
    return NULL;
  }
  for (int32_t i = 0; i < r->n; i++)
    if ((st = dv->prepare(h->dev, g, i, &r->state[i]))) {
      char what[256];
      snprintf(what, sizeof what, "prepare node '%s'", cnnb_graph_node(g, i)->name);
      fail_dev(h, what, st);
      device_run_destroy(r);
      return NULL;
    }
  return r;
}

size_t device_run_tensor_bytes(const device_run *r, cnnb_tensor t) { return r->bytes[t]; }

int device_run_set_params(device_run *r, const float *params, const float *stats) {
  cnnb_status st;
  if (params && (st = r->h->dv->copy_to_device(r->h->dev, r->params, params,
                                               (size_t)r->param_count * sizeof(float))))
    return fail_dev(r->h, "upload params", st);
  if (stats && (st = r->h->dv->copy_to_device(r->h->dev, r->stats, stats,
                                              (size_t)r->stat_count * sizeof(float))))
    return fail_dev(r->h, "upload stats", st);
  return 0;
}

int device_run_get_params(device_run *r, float *params, float *stats) {
  cnnb_status st;
  if (params && (st = r->h->dv->copy_to_host(r->h->dev, params, r->params,
                                             (size_t)r->param_count * sizeof(float))))
    return fail_dev(r->h, "download params", st);
  if (stats && (st = r->h->dv->copy_to_host(r->h->dev, stats, r->stats,
                                            (size_t)r->stat_count * sizeof(float))))
    return fail_dev(r->h, "download stats", st);
  return 0;
}

int device_run_get_param_grads(device_run *r, float *grads) {
  cnnb_status st = r->h->dv->copy_to_host(r->h->dev, grads, r->grads,
                                          (size_t)r->param_count * sizeof(float));
  return st ? fail_dev(r->h, "download grads", st) : 0;
}

static cnnb_node_io make_io(device_run *r, int32_t i, void **inputs, void **input_grads,
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

int device_run_forward(device_run *r, const float *images, const int32_t *labels, uint64_t step) {
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

/* grad[t] += src: the device's accumulate, or (the slot is optional) in logical fp32 on
 * the host, as device.h says the host does without it. */
static cnnb_status accumulate(device_run *r, cnnb_tensor t, const void *src) {
  const cnnb_device_vtable *dv = r->h->dv;
  if (dv->accumulate) return dv->accumulate(r->h->dev, r->g, t, r->grad[t], src);
  int64_t count = cnnb_shape_count(cnnb_graph_node(r->g, t)->shape);
  float *sum = malloc((size_t)count * sizeof *sum), *add = malloc((size_t)count * sizeof *add);
  cnnb_status st = sum && add ? CNNB_OK : cnnb_error(r->h->ctx, CNNB_ENOMEM, "out of memory");
  if (!st) st = dv->tensor_to_host(r->h->dev, r->g, t, r->grad[t], sum);
  if (!st) st = dv->tensor_to_host(r->h->dev, r->g, t, src, add);
  if (!st) {
    for (int64_t k = 0; k < count; k++) sum[k] += add[k];
    st = dv->tensor_from_host(r->h->dev, r->g, t, r->grad[t], sum);
  }
  free(sum);
  free(add);
  return st;
}

int device_run_backward(device_run *r, cnnb_tensor seed, const float *seed_grad, float loss_scale,
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
        /* The first gradient to arrive becomes the tensor's: swap the buffers (both are
         * bytes[t] in t's layout, and a slot is written once per backward), which needs
         * no copy of device memory. */
        void *taken = r->slot[i][k];
        r->slot[i][k] = r->grad[t];
        r->grad[t] = taken;
        r->grad_set[t] = 1;
      } else if ((st = accumulate(r, t, input_grads[k]))) {
        return fail_dev(r->h, "accumulate", st);
      }
    }
  }
  return 0;
}

int device_run_activation(device_run *r, cnnb_tensor t, float *host) {
  cnnb_status st = r->h->dv->tensor_to_host(r->h->dev, r->g, t, r->act[t], host);
  return st ? fail_dev(r->h, "activation to host", st) : 0;
}

int device_run_gradient(device_run *r, cnnb_tensor t, float *host) {
  if (!r->grad_set[t]) return fail(r->h, "no gradient reached tensor %d", t);
  cnnb_status st = r->h->dv->tensor_to_host(r->h->dev, r->g, t, r->grad[t], host);
  return st ? fail_dev(r->h, "gradient to host", st) : 0;
}
