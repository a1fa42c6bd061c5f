/* executor.c — one replica's step on one device (executor.h): arenas, prepared nodes,
 * forward, backward with gradient accumulation, and bucket announcements. The node I/O
 * records are filled once at creation: the arenas never move, so a step only walks the
 * nodes and calls the device. */
#define _POSIX_C_SOURCE 200809L
#include "exec/executor.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/crash_guard.h"
#include "graph/graph_internal.h"
#include "graph/init.h"
#include "base/trace.h"

#include <jansson.h>

typedef struct bucket {
  int64_t offset, count; /* elements of the gradient arena */
  int32_t ready_after;   /* announce after the backward of this node; INT_MAX: at once */
} bucket;

struct cnnb_executor {
  cnnb_ctx *ctx, *device_ctx;
  const cnnb_device_vtable *dv;
  void *device;
  const cnnb_graph *g;
  cnnb_executor_config cfg;
  cnnb_plan *plan;
  int32_t n;
  void **state;       /* [n] device node states */
  cnnb_node_io *io;   /* [n] */
  void **inputs;      /* [slots] activation of each input */
  void **input_grads; /* [slots] where backward writes d loss / d input, or NULL */
  float *params, *grads, *stats;
  int64_t param_count, stat_count;
  unsigned char *arena;
  bucket *buckets;
  int32_t num_buckets;
  cnnb_tensor labels, logits, loss;
  float *host_logits; /* [N * classes] for accuracy */
  bool have_labels;   /* the last step computed the loss */
  bool stepped;
  bool tracing;       /* this step is traced: every node is timed and recorded */
  bool *reads_labels; /* [n] the node reads the labels, directly or through others */
  double *fwd_time, *bwd_time;
  json_t **trace_args;    /* [n] with cfg.trace_track: each node's args in the trace */
  float *host_accumulate; /* [2 * host_accumulate_count]: a device without accumulate */
  size_t host_accumulate_count;
  void **resident; /* [n] constant_batch: the data nodes' own buffers (else NULL) */
  bool *uploaded;  /* [n] constant_batch: the data node's batch is on the device */
  const cnnb_device_uint8_input *uint8_input; /* NULL until set_uint8_input */
  float *uint8_scale, *uint8_offset;          /* [channels of the input] */
  /* CNNB_EXT_STEP_GRAPH, when used (NULL: every step makes its calls). A recording holds
   * the step's calls with the loss scale and labels' presence they were made with. */
  const cnnb_device_step_graph *step_graph;
  int64_t steps_run; /* steps that made their calls (recorded ones included) */
  bool recording;    /* between begin_capture and end_capture */
  bool recorded;     /* a recording exists */
  float recorded_loss_scale;
  bool recorded_labels;
  int64_t recordings, replays;
};

/* ---- errors ------------------------------------------------------------------------- */

static cnnb_status vdevice_error(cnnb_executor *ex, cnnb_status status, const char *fmt,
                                 va_list ap) {
  char where[512];
  vsnprintf(where, sizeof where, fmt, ap);
  cnnb_ctx *dctx = ex->device_ctx ? ex->device_ctx : ex->ctx;
  const char *dmsg = cnnb_error_message(dctx);
  char *copy = strdup(dmsg && *dmsg ? dmsg : cnnb_status_name(status));
  cnnb_clear_error(dctx);
  status = cnnb_error(ex->ctx, status, "%s: %s", where, copy ? copy : "(out of memory)");
  free(copy);
  return status;
}

cnnb_status cnnb_executor_device_error(cnnb_executor *ex, cnnb_status status, const char *fmt,
                                       ...) {
  va_list ap;
  va_start(ap, fmt);
  status = vdevice_error(ex, status, fmt, ap);
  va_end(ap);
  return status;
}

static cnnb_status node_error(cnnb_executor *ex, cnnb_status st, const char *what, int32_t i) {
  const cnnb_node *node = cnnb_graph_node(ex->g, i);
  return cnnb_executor_device_error(ex, st, "%s of node '%s' (%s)", what, node->name,
                                    cnnb_op_name(node->op));
}

/* ---- creation ---------------------------------------------------------------------- */

static cnnb_status plan_bytes(void *user, const cnnb_graph *g, cnnb_tensor t, size_t *bytes) {
  cnnb_executor *ex = user;
  cnnb_status st = ex->dv->tensor_bytes(ex->device, g, t, bytes);
  return st == CNNB_OK ? st : cnnb_executor_device_error(ex, st, "tensor sizes");
}

static cnnb_status alloc_arena(cnnb_executor *ex, size_t bytes, const char *what, void **ptr) {
  *ptr = NULL;
  if (bytes == 0) return CNNB_OK;
  cnnb_status st = ex->dv->alloc(ex->device, bytes, ptr);
  if (st != CNNB_OK)
    return cnnb_executor_device_error(ex, st, "allocating the %s arena (%zu bytes)", what, bytes);
  st = ex->dv->fill_zero(ex->device, *ptr, bytes);
  if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "zeroing the %s arena", what);
  return CNNB_OK;
}

/* Buckets of ~bucket_bytes from the end of the arena back to 0, cut between params. */
static cnnb_status make_buckets(cnnb_executor *ex) {
  const cnnb_graph *g = ex->g;
  int32_t np = cnnb_graph_num_params(g);
  if (!ex->cfg.training || ex->param_count == 0) return CNNB_OK;
  ex->buckets = calloc((size_t)np + 1, sizeof *ex->buckets);
  if (!ex->buckets) return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory for buckets");
  /* Params are appended to the arena as the graph is built, so index order is offset
   * order; walking indices backwards walks the arena from its end. */
  int64_t limit = ex->cfg.bucket_bytes / (int64_t)sizeof(float);
  if (limit < 1) limit = 1;
  int64_t end = ex->param_count, start = end;
  int32_t ready = INT_MAX;
  bool open = false;
  for (int32_t i = np - 1; i >= 0; --i) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (p->is_stat || p->count == 0) continue;
    open = true;
    start = p->offset;
    if (ex->plan->has_backward[p->node] && p->node < ready) ready = p->node;
    if (end - start >= limit) {
      ex->buckets[ex->num_buckets++] = (bucket){start, end - start, ready};
      end = start;
      ready = INT_MAX;
      open = false;
    }
  }
  if (open || end > 0) {
    if (!open && ex->num_buckets > 0) {
      /* Elements below the first param (none today) join the last bucket. */
      bucket *b = &ex->buckets[ex->num_buckets - 1];
      b->count += b->offset;
      b->offset = 0;
    } else {
      ex->buckets[ex->num_buckets++] = (bucket){0, end, ready};
    }
  }
  return CNNB_OK;
}

/* With a constant batch the images and labels stay on the device from the first step:
 * buffers of their own, since the arena lends a data node's bytes to other tensors
 * outside its lifetime. */
static cnnb_status alloc_resident(cnnb_executor *ex) {
  if (!ex->cfg.constant_batch) return CNNB_OK;
  ex->resident = calloc((size_t)ex->n, sizeof *ex->resident);
  ex->uploaded = calloc((size_t)ex->n, sizeof *ex->uploaded);
  if (!ex->resident || !ex->uploaded)
    return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  for (int32_t i = 0; i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    if (node->op != CNNB_OP_INPUT && node->op != CNNB_OP_LABELS) continue;
    size_t bytes = ex->plan->buffers[ex->plan->activation[i]].bytes;
    cnnb_status st = alloc_arena(ex, bytes, "constant batch", &ex->resident[i]);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

/* Where tensor t's activation lives. */
static unsigned char *activation_of(const cnnb_executor *ex, cnnb_tensor t) {
  if (ex->resident && ex->resident[t]) return ex->resident[t];
  return ex->arena + ex->plan->buffers[ex->plan->activation[t]].offset;
}

static cnnb_status wire_nodes(cnnb_executor *ex) {
  const cnnb_plan *p = ex->plan;
  int32_t slots = p->slot_base[ex->n];
  ex->state = calloc((size_t)ex->n, sizeof *ex->state);
  ex->io = calloc((size_t)ex->n, sizeof *ex->io);
  ex->inputs = calloc((size_t)(slots ? slots : 1), sizeof *ex->inputs);
  ex->input_grads = calloc((size_t)(slots ? slots : 1), sizeof *ex->input_grads);
  if (!ex->state || !ex->io || !ex->inputs || !ex->input_grads)
    return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  for (int32_t i = 0; i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    int32_t base = p->slot_base[i];
    for (int32_t k = 0; k < node->num_inputs; ++k) {
      ex->inputs[base + k] = activation_of(ex, node->inputs[k]);
      int32_t gb = p->input_grad[base + k];
      ex->input_grads[base + k] = gb >= 0 ? ex->arena + p->buffers[gb].offset : NULL;
    }
    ex->io[i] = (cnnb_node_io){
        .struct_size = (uint32_t)sizeof(cnnb_node_io),
        .num_inputs = node->num_inputs,
        .inputs = ex->inputs + base,
        .output = activation_of(ex, i),
        .input_grads = ex->input_grads + base,
        .output_grad = p->gradient[i] >= 0 ? ex->arena + p->buffers[p->gradient[i]].offset : NULL,
        .params = ex->params,
        .grads = ex->grads,
        .stats = ex->stats,
        .loss_scale = 1.0f,
    };
  }
  return CNNB_OK;
}

/* Host room for two copies of the largest gradient the host must add itself. */
static cnnb_status reserve_host_accumulate(cnnb_executor *ex) {
  if (ex->dv->accumulate || !ex->cfg.training) return CNNB_OK;
  int64_t largest = 0;
  for (int32_t i = 0; i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    for (int32_t k = 0; k < node->num_inputs; ++k) {
      if (!ex->plan->accumulate[ex->plan->slot_base[i] + k]) continue;
      cnnb_tensor t = cnnb_plan_resolve(ex->plan, node->inputs[k]);
      int64_t count = cnnb_shape_count(cnnb_graph_node(ex->g, t)->shape);
      if (count > largest) largest = count;
    }
  }
  if (largest == 0) return CNNB_OK;
  ex->host_accumulate = malloc(2 * (size_t)largest * sizeof(float));
  if (!ex->host_accumulate)
    return cnnb_error(ex->ctx, CNNB_ENOMEM,
                      "executor: out of memory for host gradient accumulation (%lld floats; the "
                      "device has no accumulate)",
                      (long long)(2 * largest));
  ex->host_accumulate_count = (size_t)largest;
  return CNNB_OK;
}

/* Each node's args in the trace, made once so a traced step only takes a reference:
 * its op, its output's shape [N, C, H, W], and the nodes that run inside it (a ReLU its
 * producer applies has no kernel, so no event of its own). */
static cnnb_status make_trace_args(cnnb_executor *ex) {
  ex->trace_args = calloc((size_t)ex->n, sizeof *ex->trace_args);
  if (!ex->trace_args) return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  for (int32_t i = 0; i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    cnnb_shape s = node->shape;
    ex->trace_args[i] = json_pack("{s:s, s:[i,i,i,i]}", "op", cnnb_op_name(node->op), "shape",
                                  (int)s.n, (int)s.c, (int)s.h, (int)s.w);
    if (!ex->trace_args[i]) return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  }
  for (int32_t i = 0; i < ex->n; ++i) {
    int32_t into = ex->plan->alias[i];
    if (into < 0) continue;
    json_t *fused = json_object_get(ex->trace_args[into], "fused");
    if (!fused) json_object_set_new(ex->trace_args[into], "fused", fused = json_array());
    if (!fused || json_array_append_new(fused, json_string(cnnb_graph_node(ex->g, i)->name)))
      return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  }
  return CNNB_OK;
}

static void use_step_graph(cnnb_executor *ex); /* below, with the steps */

cnnb_status cnnb_executor_create(cnnb_ctx *ctx, const cnnb_device_vtable *dv, void *device,
                                 const cnnb_graph *g, const cnnb_executor_config *cfg,
                                 cnnb_executor **out) {
  *out = NULL;
  if (!dv || !device || !g || !cfg)
    return cnnb_error(ctx, CNNB_EINVAL, "executor: missing device, graph or config");
  cnnb_executor *ex = calloc(1, sizeof *ex);
  if (!ex) return cnnb_error(ctx, CNNB_ENOMEM, "executor: out of memory");
  ex->ctx = ctx;
  ex->device_ctx = cfg->device_ctx;
  ex->dv = dv;
  ex->device = device;
  ex->g = g;
  ex->cfg = *cfg;
  if (ex->cfg.bucket_bytes <= 0) ex->cfg.bucket_bytes = CNNB_DEFAULT_BUCKET_BYTES;
  ex->n = cnnb_graph_num_nodes(g);
  ex->labels = cnnb_graph_labels(g);
  ex->logits = cnnb_graph_logits(g);
  ex->loss = cnnb_graph_loss(g);
  ex->param_count = cnnb_graph_param_arena_count(g);
  ex->stat_count = cnnb_graph_stat_arena_count(g);

  cnnb_status st = cnnb_plan_create(ctx, g, cfg->training, plan_bytes, ex, &ex->plan);
  if (st == CNNB_OK && ex->logits == CNNB_NO_TENSOR)
    st = cnnb_error(ctx, CNNB_EINVAL, "executor: the graph has no logits");
  if (st == CNNB_OK)
    st = alloc_arena(ex, (size_t)ex->param_count * sizeof(float), "parameter",
                     (void **)&ex->params);
  if (st == CNNB_OK && cfg->training)
    st = alloc_arena(ex, (size_t)ex->param_count * sizeof(float), "gradient", (void **)&ex->grads);
  if (st == CNNB_OK)
    st = alloc_arena(ex, (size_t)ex->stat_count * sizeof(float), "statistics", (void **)&ex->stats);
  if (st == CNNB_OK) st = alloc_arena(ex, ex->plan->arena_bytes, "activation", (void **)&ex->arena);
  if (st == CNNB_OK) st = alloc_resident(ex);
  if (st == CNNB_OK) st = wire_nodes(ex);
  if (st == CNNB_OK) st = make_buckets(ex);
  if (st == CNNB_OK) st = reserve_host_accumulate(ex);
  if (st == CNNB_OK) {
    cnnb_shape ls = cnnb_graph_node(g, ex->logits)->shape;
    ex->host_logits = malloc(sizeof(float) *
                             (size_t)(cnnb_shape_count(ls) ? cnnb_shape_count(ls) : 1));
    ex->reads_labels = calloc((size_t)ex->n, sizeof(bool));
    ex->fwd_time = calloc((size_t)ex->n, sizeof(double));
    ex->bwd_time = calloc((size_t)ex->n, sizeof(double));
    if (!ex->host_logits || !ex->reads_labels || !ex->fwd_time || !ex->bwd_time)
      st = cnnb_error(ctx, CNNB_ENOMEM, "executor: out of memory");
  }
  /* Node order is topological, so one pass sees every input before its readers. */
  for (int32_t i = 0; st == CNNB_OK && i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    ex->reads_labels[i] = node->op == CNNB_OP_LABELS;
    for (int32_t k = 0; k < node->num_inputs; ++k)
      ex->reads_labels[i] = ex->reads_labels[i] || ex->reads_labels[node->inputs[k]];
  }
  if (st == CNNB_OK && cfg->trace_track) st = make_trace_args(ex);
  for (int32_t i = 0; st == CNNB_OK && i < ex->n; ++i) {
    st = dv->prepare(device, g, i, &ex->state[i]);
    if (st != CNNB_OK) st = node_error(ex, st, "preparing", i);
  }
  if (st != CNNB_OK) {
    cnnb_executor_destroy(ex);
    return st;
  }
  use_step_graph(ex);
  const cnnb_plan *p = ex->plan;
  cnnb_log(ctx, CNNB_LOG_DEBUG,
           "executor: %d nodes, %s, activation arena %.1f MiB (at most %.1f MiB alive at "
           "once, %.1f MiB without reuse), %lld params in %d buckets",
           (int)ex->n, cfg->training ? "training" : "forward only",
           (double)p->arena_bytes / 1048576.0, (double)p->live_bytes / 1048576.0,
           (double)p->naive_bytes / 1048576.0, (long long)ex->param_count, (int)ex->num_buckets);
  *out = ex;
  return CNNB_OK;
}

void cnnb_executor_destroy(cnnb_executor *ex) {
  if (!ex) return;
  if (ex->state)
    for (int32_t i = 0; i < ex->n; ++i)
      if (ex->state[i]) ex->dv->release(ex->device, ex->state[i]);
  if (ex->arena) ex->dv->free(ex->device, ex->arena);
  for (int32_t i = 0; ex->resident && i < ex->n; ++i)
    if (ex->resident[i]) ex->dv->free(ex->device, ex->resident[i]);
  free(ex->resident);
  free(ex->uploaded);
  if (ex->params) ex->dv->free(ex->device, ex->params);
  if (ex->grads) ex->dv->free(ex->device, ex->grads);
  if (ex->stats) ex->dv->free(ex->device, ex->stats);
  cnnb_plan_destroy(ex->plan);
  free(ex->state);
  free(ex->io);
  free(ex->inputs);
  free(ex->input_grads);
  free(ex->buckets);
  free(ex->host_logits);
  free(ex->reads_labels);
  if (ex->trace_args)
    for (int32_t i = 0; i < ex->n; ++i) json_decref(ex->trace_args[i]);
  free(ex->trace_args);
  free(ex->fwd_time);
  free(ex->bwd_time);
  free(ex->host_accumulate);
  free(ex->uint8_scale);
  free(ex->uint8_offset);
  free(ex);
}

/* ---- parameters ---------------------------------------------------------------------- */

cnnb_status cnnb_executor_upload_params(cnnb_executor *ex, const float *params,
                                        const float *stats) {
  cnnb_status st;
  if (params && ex->param_count > 0) {
    st = ex->dv->copy_to_device(ex->device, ex->params, params,
                                (size_t)ex->param_count * sizeof(float));
    if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "uploading parameters");
  }
  if (stats && ex->stat_count > 0) {
    st = ex->dv->copy_to_device(ex->device, ex->stats, stats,
                                (size_t)ex->stat_count * sizeof(float));
    if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "uploading statistics");
  }
  return CNNB_OK;
}

cnnb_status cnnb_executor_download_params(cnnb_executor *ex, float *params, float *stats) {
  cnnb_status st;
  if (params && ex->param_count > 0) {
    st = ex->dv->copy_to_host(ex->device, params, ex->params,
                              (size_t)ex->param_count * sizeof(float));
    if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "downloading parameters");
  }
  if (stats && ex->stat_count > 0) {
    st = ex->dv->copy_to_host(ex->device, stats, ex->stats, (size_t)ex->stat_count * sizeof(float));
    if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "downloading statistics");
  }
  return CNNB_OK;
}

cnnb_status cnnb_executor_init_params(cnnb_executor *ex, uint64_t seed) {
  float *params = calloc((size_t)(ex->param_count ? ex->param_count : 1), sizeof(float));
  float *stats = calloc((size_t)(ex->stat_count ? ex->stat_count : 1), sizeof(float));
  cnnb_status st = CNNB_OK;
  if (!params || !stats)
    st = cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory initialising parameters");
  if (st == CNNB_OK) {
    st = cnnb_params_initialize(ex->g, seed, params, stats);
    if (st != CNNB_OK)
      st = cnnb_error(ex->ctx, st, "executor: initialising parameters (seed %llu)",
                      (unsigned long long)seed);
  }
  if (st == CNNB_OK) st = cnnb_executor_upload_params(ex, params, stats);
  free(params);
  free(stats);
  return st;
}

/* ---- one step -------------------------------------------------------------------------- */

/* Whether this step times each node: --profile (bench/cnnb_profile), or a traced step. */
static bool timing(const cnnb_executor *ex) { return ex->cfg.profile || ex->tracing; }

/* After node i's work of `pass` started at t0 (cnnb_trace_now_us): the device finishes
 * it, so the time is the node's own and not whatever it queued; added to *acc under
 * profile, recorded as an event on the replica's track in a traced step. */
static cnnb_status timed_sync(cnnb_executor *ex, int32_t i, const char *pass, double t0,
                              double *acc) {
  cnnb_status st = ex->dv->synchronize(ex->device);
  double t1 = cnnb_trace_now_us();
  if (ex->cfg.profile && acc) *acc += 1e-6 * (t1 - t0);
  if (ex->tracing)
    cnnb_trace_host_event(ex->ctx, ex->cfg.trace_track, cnnb_graph_node(ex->g, i)->name, pass, t0,
                          t1, json_incref(ex->trace_args[i]));
  return st;
}

/* Data nodes are filled when their turn comes in node order, not before the step: the
 * plan gives their buffers a lifetime starting at their own index, and the labels node
 * sits near the end of the graph, so its buffer may hold another activation until then. */
static cnnb_status upload(cnnb_executor *ex, int32_t i, const void *host) {
  cnnb_crash_enter(ex->cfg.crash_label, "tensor_from_host", cnnb_graph_node(ex->g, i)->name);
  cnnb_status st = ex->dv->tensor_from_host(ex->device, ex->g, i, ex->io[i].output, host);
  if (st != CNNB_OK) return node_error(ex, st, "the upload", i);
  return CNNB_OK;
}

/* The images as uint8 NHWC: the device normalizes them into the input's buffer. */
static cnnb_status upload_uint8(cnnb_executor *ex, int32_t i, const uint8_t *host) {
  cnnb_crash_enter(ex->cfg.crash_label, "input_from_host_uint8", cnnb_graph_node(ex->g, i)->name);
  cnnb_status st = ex->uint8_input->input_from_host_uint8(ex->device, ex->g, i, ex->io[i].output,
                                                          host, ex->uint8_scale, ex->uint8_offset);
  if (st != CNNB_OK) return node_error(ex, st, "the uint8 upload", i);
  return CNNB_OK;
}

/* images: fp32 NCHW, or uint8 NHWC when uint8 is set. */
static cnnb_status forward(cnnb_executor *ex, const void *images, bool uint8, const int32_t *labels,
                           uint64_t step) {
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; i < ex->n && st == CNNB_OK; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    if (!labels && ex->reads_labels[i]) continue; /* forward-only without labels: no loss */
    if (ex->plan->alias[i] >= 0) continue;        /* a ReLU its producer already applied */
    if (node->op == CNNB_OP_INPUT || node->op == CNNB_OP_LABELS) {
      double t0 = ex->tracing ? cnnb_trace_now_us() : 0.0;
      if (ex->uploaded && ex->uploaded[i]) {
        /* A constant batch, on the device since the first step: the trace still shows the
         * node, as a "resident" event of no work. */
        if (ex->tracing && (st = timed_sync(ex, i, "resident", t0, NULL)) != CNNB_OK)
          st = node_error(ex, st, "the resident batch", i);
        continue;
      }
      if (node->op == CNNB_OP_LABELS) st = upload(ex, i, labels);
      else st = uint8 ? upload_uint8(ex, i, images) : upload(ex, i, images);
      /* Traced, the upload is an event of its own (profile times kernels only). */
      if (st == CNNB_OK && ex->tracing && (st = timed_sync(ex, i, "upload", t0, NULL)) != CNNB_OK)
        st = node_error(ex, st, "the upload", i);
      if (st == CNNB_OK && ex->uploaded) ex->uploaded[i] = true;
      continue;
    }
    ex->io[i].step = step;
    double t0 = timing(ex) ? cnnb_trace_now_us() : 0.0;
    cnnb_crash_enter(ex->cfg.crash_label, "forward", node->name);
    st = ex->dv->forward(ex->device, ex->state[i], &ex->io[i]);
    if (st == CNNB_OK && timing(ex)) st = timed_sync(ex, i, "forward", t0, &ex->fwd_time[i]);
    if (st != CNNB_OK) st = node_error(ex, st, "forward", i);
  }
  return st;
}

static cnnb_status announce_ready(cnnb_executor *ex, int32_t *next, int32_t done_node) {
  while (*next < ex->num_buckets && (ex->buckets[*next].ready_after == INT_MAX ||
                                     done_node <= ex->buckets[*next].ready_after)) {
    /* A recorded step's buckets are announced after it runs (announce_all). */
    if (ex->cfg.on_bucket && !ex->recording)
      ex->cfg.on_bucket(ex->cfg.user, ex->buckets[*next].offset, ex->buckets[*next].count);
    ++*next;
  }
  return CNNB_OK;
}

/* dst += src for the gradient of t: the device's accumulate, or, for a device without
 * one (it is optional), the sum on the host through the device's own conversions. */
static cnnb_status accumulate(cnnb_executor *ex, cnnb_tensor t, void *dst, const void *src) {
  if (ex->dv->accumulate) return ex->dv->accumulate(ex->device, ex->g, t, dst, src);
  float *sum = ex->host_accumulate, *add = sum + ex->host_accumulate_count;
  size_t n = (size_t)cnnb_shape_count(cnnb_graph_node(ex->g, t)->shape);
  cnnb_status st = ex->dv->tensor_to_host(ex->device, ex->g, t, dst, sum);
  if (st == CNNB_OK) st = ex->dv->tensor_to_host(ex->device, ex->g, t, src, add);
  for (size_t i = 0; st == CNNB_OK && i < n; ++i) sum[i] += add[i];
  if (st == CNNB_OK) st = ex->dv->tensor_from_host(ex->device, ex->g, t, dst, sum);
  return st;
}

/* Every bucket, in order: after a replayed step, whose recording holds no host calls. */
static cnnb_status announce_all(cnnb_executor *ex) {
  int32_t next = 0;
  return announce_ready(ex, &next, INT_MIN);
}

static cnnb_status backward(cnnb_executor *ex, float loss_scale, uint64_t step) {
  const cnnb_plan *p = ex->plan;
  int32_t next = 0;
  for (int32_t i = ex->n - 1; i >= 0; --i) {
    if (p->has_backward[i]) {
      ex->io[i].step = step;
      ex->io[i].loss_scale = loss_scale;
      double t0 = timing(ex) ? cnnb_trace_now_us() : 0.0;
      const cnnb_node *node = cnnb_graph_node(ex->g, i);
      cnnb_crash_enter(ex->cfg.crash_label, "backward", node->name);
      cnnb_status st = ex->dv->backward(ex->device, ex->state[i], &ex->io[i]);
      if (st != CNNB_OK) return node_error(ex, st, "backward", i);
      for (int32_t k = 0; k < node->num_inputs; ++k) {
        int32_t slot = p->slot_base[i] + k;
        if (!p->accumulate[slot]) continue;
        cnnb_tensor t = cnnb_plan_resolve(p, node->inputs[k]);
        unsigned char *dst = ex->arena + p->buffers[p->gradient[t]].offset;
        st = accumulate(ex, t, dst, ex->input_grads[slot]);
        if (st != CNNB_OK)
          return cnnb_executor_device_error(ex, st,
                                            "accumulating the gradient of '%s' from node '%s' (%s)",
                                            cnnb_graph_node(ex->g, t)->name, node->name,
                                            cnnb_op_name(node->op));
      }
      if (timing(ex) && (st = timed_sync(ex, i, "backward", t0, &ex->bwd_time[i])) != CNNB_OK)
        return node_error(ex, st, "backward", i);
    }
    announce_ready(ex, &next, i);
  }
  return announce_ready(ex, &next, INT_MIN);
}

/* ---- step graphs (CNNB_EXT_STEP_GRAPH) --------------------------------------------- */

/* Why this executor cannot replay a recorded step, or NULL. A recording freezes every
 * argument of every call: the batch must be the device's own copy, uploaded once; a
 * dropout mask follows the step number; a timed node waits for the device. */
static const char *step_graph_obstacle(const cnnb_executor *ex, char *why, size_t size) {
  if (!ex->cfg.constant_batch)
    return "each step uploads a new batch (a datasource whose batch never changes, such as "
           "synthetic data, allows it)";
  if (ex->cfg.profile) return "profiling times every node";
  if (!ex->dv->accumulate) return "the device has no accumulate (the host's sum reads the device)";
  for (int32_t i = 0; ex->cfg.training && i < ex->n; ++i) {
    const cnnb_node *node = cnnb_graph_node(ex->g, i);
    if (node->op == CNNB_OP_DROPOUT) {
      snprintf(why, size,
               "node '%s' (dropout) draws a new mask each step from the step "
               "number, which a recording would freeze",
               node->name);
      return why;
    }
  }
  return NULL;
}

static void use_step_graph(cnnb_executor *ex) {
  if (!ex->cfg.step_graph) return;
  const cnnb_device_step_graph *sg = ex->dv->get_extension
                                         ? ex->dv->get_extension(ex->device, CNNB_EXT_STEP_GRAPH)
                                         : NULL;
  char buffer[256];
  const char *why = ex->cfg.step_graph_blocked;
  if (!why && !sg)
    why = "the device cannot record a step (it does not offer " CNNB_EXT_STEP_GRAPH ")";
  if (!why && sg->struct_size < sizeof *sg)
    why = "the device's " CNNB_EXT_STEP_GRAPH " is older than this host's";
  if (!why) why = step_graph_obstacle(ex, buffer, sizeof buffer);
  if (why) {
    cnnb_log(ex->ctx, CNNB_LOG_WARN, "--cuda_graphs: steps make their calls as usual: %s", why);
    return;
  }
  ex->step_graph = sg;
  cnnb_log(ex->ctx, CNNB_LOG_INFO,
           "--cuda_graphs: steps 1 and 2 make their calls, step 3 is "
           "recorded, later steps replay it");
}

void cnnb_executor_step_graph_counts(const cnnb_executor *ex, int64_t *recorded,
                                     int64_t *replayed) {
  *recorded = ex->recordings;
  *replayed = ex->replays;
}

static cnnb_status passes(cnnb_executor *ex, const void *images, bool uint8, const int32_t *labels,
                          float loss_scale, uint64_t step);

/* Whether the step's data nodes are on the device already: a recording holds no upload
 * (labels given for the first time make one more step of calls). */
static bool batch_resident(const cnnb_executor *ex, bool have_labels) {
  for (int32_t i = 0; i < ex->n; ++i) {
    uint32_t op = cnnb_graph_node(ex->g, i)->op;
    if ((op == CNNB_OP_INPUT || (op == CNNB_OP_LABELS && have_labels)) && !ex->uploaded[i])
      return false;
  }
  return true;
}

/* Records this step's calls (begin_capture, the passes, end_capture). Returns false when
 * it did not: the batch is not on the device yet (this step's calls upload it), or the
 * recording failed, which is not an error of the run: the step, and every later one,
 * makes its calls instead. */
static bool record_step(cnnb_executor *ex, const void *images, bool uint8, const int32_t *labels,
                        float loss_scale, uint64_t step) {
  const cnnb_device_step_graph *sg = ex->step_graph;
  bool have_labels = labels != NULL;
  ex->recorded = false;
  if (!batch_resident(ex, have_labels)) return false;
  cnnb_crash_enter(ex->cfg.crash_label, "step graph capture", NULL);
  cnnb_status st = sg->begin_capture(ex->device);
  if (st == CNNB_OK) {
    ex->recording = true;
    st = passes(ex, images, uint8, labels, loss_scale, step);
    ex->recording = false;
    cnnb_crash_enter(ex->cfg.crash_label, "step graph capture", NULL);
    cnnb_status ended = sg->end_capture(ex->device); /* after every begin, as device.h asks */
    if (st == CNNB_OK) st = ended;
  }
  if (st != CNNB_OK) {
    /* The first failure is a call's (node_error moved the device's message into ours) or
     * begin / end_capture's own (still in the device's ctx); end_capture's word after a
     * failed call comes second. */
    cnnb_ctx *dctx = ex->device_ctx ? ex->device_ctx : ex->ctx;
    const char *dmsg = cnnb_error_message(dctx), *msg = cnnb_error_message(ex->ctx);
    bool have_msg = msg && *msg && dctx != ex->ctx, have_dmsg = dmsg && *dmsg;
    cnnb_log(ex->ctx, CNNB_LOG_WARN,
             "--cuda_graphs: recording step %llu failed (%s%s%s); this "
             "and every later step make their calls instead",
             (unsigned long long)step + 1,
             have_msg    ? msg
             : have_dmsg ? dmsg
                         : cnnb_status_name(st),
             have_msg && have_dmsg ? "; then: " : "", have_msg && have_dmsg ? dmsg : "");
    cnnb_clear_error(dctx);
    cnnb_clear_error(ex->ctx);
    ex->step_graph = NULL;
    return false;
  }
  ex->recorded = true;
  ex->recorded_loss_scale = loss_scale;
  ex->recorded_labels = have_labels;
  ex->recordings++;
  cnnb_log(ex->ctx, CNNB_LOG_DEBUG, "--cuda_graphs: step %llu recorded (loss scale %g)",
           (unsigned long long)step + 1, (double)loss_scale);
  return true;
}

/* One step through the recording, recorded first unless it holds this step's calls
 * (recording runs nothing). *done: the step ran; else the caller makes its calls. */
static cnnb_status step_through_graph(cnnb_executor *ex, const void *images, bool uint8,
                                      const int32_t *labels, float loss_scale, uint64_t step,
                                      bool *done) {
  *done = false;
  bool current = ex->recorded && ex->recorded_loss_scale == loss_scale &&
                 ex->recorded_labels == (labels != NULL);
  if (!current && !record_step(ex, images, uint8, labels, loss_scale, step)) return CNNB_OK;
  cnnb_crash_enter(ex->cfg.crash_label, "step graph replay", NULL);
  cnnb_status st = ex->step_graph->replay(ex->device);
  if (st != CNNB_OK) return cnnb_executor_device_error(ex, st, "replaying the recorded step");
  ex->replays++;
  *done = true;
  return CNNB_OK;
}

/* ---- steps -------------------------------------------------------------------------- */

/* Forward, and backward when training: the step's calls. */
static cnnb_status passes(cnnb_executor *ex, const void *images, bool uint8, const int32_t *labels,
                          float loss_scale, uint64_t step) {
  double t0 = ex->tracing ? cnnb_trace_now_us() : 0.0;
  cnnb_status st = forward(ex, images, uint8, labels, step);
  double t1 = ex->tracing ? cnnb_trace_now_us() : 0.0;
  if (st == CNNB_OK && ex->tracing)
    cnnb_trace_host_event(ex->ctx, ex->cfg.trace_track, "forward", "pass", t0, t1, NULL);
  if (st == CNNB_OK && ex->cfg.training) st = backward(ex, loss_scale, step);
  if (st == CNNB_OK && ex->tracing && ex->cfg.training)
    cnnb_trace_host_event(ex->ctx, ex->cfg.trace_track, "backward", "pass", t1, cnnb_trace_now_us(),
                          NULL);
  return st;
}

static cnnb_status step(cnnb_executor *ex, const void *images, bool uint8, const int32_t *labels,
                        float loss_scale, uint64_t step) {
  if (!images) return cnnb_error(ex->ctx, CNNB_EINVAL, "executor step: no images");
  if (ex->cfg.training && !labels)
    return cnnb_error(ex->ctx, CNNB_EINVAL, "executor step: training needs labels");
  bool have_labels = labels && ex->labels != CNNB_NO_TENSOR;
  ex->have_labels = false;
  ex->stepped = false;
  /* Each kernel call marks the thread with its node (crash_guard.h); the mark the step
   * started with comes back at its end. */
  cnnb_crash_mark outer = cnnb_crash_enter(NULL, NULL, NULL);
  /* One flag read a step: an untraced step pays nothing more. The passes become spans
   * holding their nodes' events on the replica's track. */
  ex->tracing = ex->cfg.trace_track && cnnb_trace_active(ex->ctx);
  const int32_t *step_labels = have_labels ? labels : NULL;
  cnnb_status st = CNNB_OK;
  bool done = false;
  /* A traced step makes its calls, each timed; steps 1 and 2 allocate what the device
   * allocates on first use, which a recording must not. */
  if (ex->step_graph && !ex->tracing && ex->steps_run >= 2) {
    st = step_through_graph(ex, images, uint8, step_labels, loss_scale, step, &done);
    if (st == CNNB_OK && done && ex->cfg.training)
      st = announce_all(ex); /* the recording holds no host calls */
  }
  if (st == CNNB_OK && !done) {
    st = passes(ex, images, uint8, step_labels, loss_scale, step);
    ex->steps_run++;
  }
  ex->tracing = false;
  cnnb_crash_leave(outer);
  ex->have_labels = st == CNNB_OK && have_labels;
  ex->stepped = st == CNNB_OK;
  return st;
}

cnnb_status cnnb_executor_step(cnnb_executor *ex, const float *images, const int32_t *labels,
                               float loss_scale, uint64_t step_index) {
  return step(ex, images, false, labels, loss_scale, step_index);
}

cnnb_status cnnb_executor_step_uint8(cnnb_executor *ex, const uint8_t *images,
                                     const int32_t *labels, float loss_scale, uint64_t step_index) {
  if (!ex->uint8_input)
    return cnnb_error(ex->ctx, CNNB_EINVAL,
                      "executor step: uint8 images, but no uint8 input was set up");
  return step(ex, images, true, labels, loss_scale, step_index);
}

cnnb_status cnnb_executor_set_uint8_input(cnnb_executor *ex, const cnnb_device_uint8_input *ext,
                                          const float *scale, const float *offset) {
  if (!ext || !ext->input_from_host_uint8 || !scale || !offset)
    return cnnb_error(ex->ctx, CNNB_EINVAL,
                      "executor: uint8 input without the device's conversion or the normalization");
  int32_t channels = 0;
  for (int32_t i = 0; i < ex->n; ++i)
    if (cnnb_graph_node(ex->g, i)->op == CNNB_OP_INPUT)
      channels = cnnb_graph_node(ex->g, i)->shape.c;
  if (channels < 1)
    return cnnb_error(ex->ctx, CNNB_EINVAL, "executor: uint8 input for a graph without images");
  float *s = malloc((size_t)channels * sizeof *s), *o = malloc((size_t)channels * sizeof *o);
  if (!s || !o) {
    free(s);
    free(o);
    return cnnb_error(ex->ctx, CNNB_ENOMEM, "executor: out of memory");
  }
  memcpy(s, scale, (size_t)channels * sizeof *s);
  memcpy(o, offset, (size_t)channels * sizeof *o);
  free(ex->uint8_scale);
  free(ex->uint8_offset);
  ex->uint8_scale = s;
  ex->uint8_offset = o;
  ex->uint8_input = ext;
  return CNNB_OK;
}

/* ---- results ----------------------------------------------------------------------- */

cnnb_status cnnb_executor_loss(cnnb_executor *ex, float *loss) {
  if (ex->loss == CNNB_NO_TENSOR || !ex->have_labels)
    return cnnb_error(ex->ctx, CNNB_EINVAL,
                      "executor: no loss was computed (graph without loss, or no labels)");
  cnnb_status st = ex->dv->tensor_to_host(ex->device, ex->g, ex->loss, ex->io[ex->loss].output,
                                          loss);
  if (st != CNNB_OK) return node_error(ex, st, "reading the output", ex->loss);
  return CNNB_OK;
}

cnnb_status cnnb_executor_logits(cnnb_executor *ex, float *host) {
  if (!ex->stepped)
    return cnnb_error(ex->ctx, CNNB_EINVAL, "executor: logits read before any step");
  cnnb_status st = ex->dv->tensor_to_host(ex->device, ex->g,
                                          cnnb_plan_resolve(ex->plan, ex->logits),
                                          ex->io[ex->logits].output, host);
  if (st != CNNB_OK) return node_error(ex, st, "reading the output", ex->logits);
  return CNNB_OK;
}

cnnb_status cnnb_executor_accuracy(cnnb_executor *ex, const int32_t *labels, int *top1, int *top5) {
  return cnnb_executor_accuracy_first(ex, labels, INT32_MAX, top1, top5);
}

cnnb_status cnnb_executor_accuracy_first(cnnb_executor *ex, const int32_t *labels, int32_t count,
                                         int *top1, int *top5) {
  cnnb_status st = cnnb_executor_logits(ex, ex->host_logits);
  if (st != CNNB_OK) return st;
  cnnb_shape s = cnnb_graph_node(ex->g, ex->logits)->shape;
  int32_t classes = s.c * s.h * s.w;
  int32_t examples = count < s.n ? count : s.n;
  int hits1 = 0, hits5 = 0;
  for (int32_t b = 0; b < examples; ++b) {
    const float *row = ex->host_logits + (size_t)b * (size_t)classes;
    int32_t label = labels[b];
    if (label < 0 || label >= classes || row[label] != row[label])
      continue; /* an out-of-range label or a NaN logit is never a hit */
    int32_t above = 0;
    for (int32_t k = 0; k < classes; ++k) above += row[k] > row[label];
    hits1 += above < 1;
    hits5 += above < 5;
  }
  if (top1) *top1 = hits1;
  if (top5) *top5 = hits5;
  return CNNB_OK;
}

/* ---- accessors --------------------------------------------------------------------------- */

float *cnnb_executor_params(const cnnb_executor *ex) { return ex->params; }
float *cnnb_executor_grads(const cnnb_executor *ex) { return ex->grads; }
float *cnnb_executor_stats(const cnnb_executor *ex) { return ex->stats; }
int64_t cnnb_executor_param_count(const cnnb_executor *ex) { return ex->param_count; }
int64_t cnnb_executor_stat_count(const cnnb_executor *ex) { return ex->stat_count; }
size_t cnnb_executor_peak_bytes(const cnnb_executor *ex) { return ex->plan->arena_bytes; }
size_t cnnb_executor_naive_bytes(const cnnb_executor *ex) { return ex->plan->naive_bytes; }
const cnnb_plan *cnnb_executor_plan(const cnnb_executor *ex) { return ex->plan; }
int32_t cnnb_executor_num_buckets(const cnnb_executor *ex) { return ex->num_buckets; }
const cnnb_graph *cnnb_executor_graph(const cnnb_executor *ex) { return ex->g; }
const cnnb_device_vtable *cnnb_executor_device_vtable(const cnnb_executor *ex) { return ex->dv; }
void *cnnb_executor_device(const cnnb_executor *ex) { return ex->device; }
bool cnnb_executor_training(const cnnb_executor *ex) { return ex->cfg.training; }

void cnnb_executor_bucket(const cnnb_executor *ex, int32_t i, int64_t *offset, int64_t *count) {
  *offset = ex->buckets[i].offset;
  *count = ex->buckets[i].count;
}

void cnnb_executor_node_time(const cnnb_executor *ex, int32_t node, double *forward_s,
                             double *backward_s) {
  if (forward_s) *forward_s = ex->fwd_time[node];
  if (backward_s) *backward_s = ex->bwd_time[node];
}
