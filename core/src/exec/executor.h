/* executor.h — runs one graph on one device instance (one replica), shared by every
 * device (core, never installed). It plans memory once (plan.h), allocates the
 * parameter, gradient, stats and activation arenas on the device, prepares every node,
 * then per step uploads the batch, runs forward in node order and, when training,
 * backward in reverse order, accumulating gradients of tensors with several consumers
 * and announcing gradient buckets as soon as they are final.
 *
 * Buckets: trainable parameters sit in node order in the parameter arena; buckets are
 * contiguous ranges of about bucket_bytes cut from the END of the arena backwards, and
 * together cover [0, param_count) exactly once. A bucket is announced (on_bucket) right
 * after the backward of the earliest node owning a parameter in it, so buckets arrive
 * in decreasing offset order while the rest of backward goes on.
 *
 * INPUT and LABELS nodes are prepared like every node but never run: their activations
 * are filled by tensor_from_host (or, for uint8 images, the device's uint8 input). Errors name the
 * node: "forward of node 'conv3' (conv2d): <the device's message>". One thread at a time per
 * executor. */
#ifndef CNNB_EXECUTOR_H
#define CNNB_EXECUTOR_H

#include <stdbool.h>
#include <cnnb/device.h>
#include "exec/plan.h"

#define CNNB_DEFAULT_BUCKET_BYTES ((int64_t)25 << 20)

/* Gradients [offset, offset + count) (elements of the gradient arena) are final. */
typedef void (*cnnb_bucket_fn)(void *user, int64_t offset, int64_t count);

typedef struct cnnb_executor_config {
  bool training;            /* false: --forward_only (no gradients, no backward) */
  int64_t bucket_bytes;     /* <= 0: CNNB_DEFAULT_BUCKET_BYTES */
  cnnb_bucket_fn on_bucket; /* may be NULL */
  void *user;               /* for on_bucket */
  /* The ctx the device was created with, so its error messages end up in ours after
   * "forward of node ...". NULL: the device shares `ctx`. */
  cnnb_ctx *device_ctx;
  bool profile; /* synchronize after every node and time it */
  /* Names the device plugin if a kernel crashes the process (crash_guard.h): kept, not
   * copied, so it must outlive the executor. NULL: no mark. */
  const char *crash_label;
  /* --trace_file: the track this executor's nodes go on ("replica 0"); kept, not copied.
   * During a traced step (cnnb_trace_active) every node is synchronized after and
   * recorded there, as profile times it. NULL: never traced. */
  const char *trace_track;
  /* Every step's batch is the same images and labels (a datasource answering
   * CNNB_EXT_DATASOURCE_CONSTANT: synthetic data): they get buffers of their own outside
   * the activation arena, uploaded at the first step and never again, as
   * tf_cnn_benchmarks keeps its synthetic batch on the GPU. */
  bool constant_batch;
  /* --cuda_graphs: use the device's CNNB_EXT_STEP_GRAPH. The first two steps make their
   * calls, the third is recorded, later steps replay it (recorded again when the loss
   * scale or the labels' presence changes). The executor checks what it knows (the
   * device offers it, a constant batch, no dropout, nothing profiled);
   * `step_graph_blocked` is what the caller knows against it (several replicas or
   * processes). Whatever stops it is logged as a warning, and steps make their calls. */
  bool step_graph;
  const char *step_graph_blocked;
} cnnb_executor_config;

typedef struct cnnb_executor cnnb_executor;

/* Plans, allocates and prepares. A training graph needs its loss (cnnb_graph_add_loss).
 * `g` and `device` must outlive the executor. Parameters start at zero until
 * cnnb_executor_init_params or an upload. */
cnnb_status cnnb_executor_create(cnnb_ctx *ctx, const cnnb_device_vtable *dv, void *device,
                                 const cnnb_graph *g, const cnnb_executor_config *cfg,
                                 cnnb_executor **out);
void cnnb_executor_destroy(cnnb_executor *ex);
/* How many steps were recorded (CNNB_EXT_STEP_GRAPH) and replayed so far. */
void cnnb_executor_step_graph_counts(const cnnb_executor *ex, int64_t *recorded, int64_t *replayed);

/* The graph's initializers on the host (init.h), seeded, uploaded to the device. */
cnnb_status cnnb_executor_init_params(cnnb_executor *ex, uint64_t seed);
/* Uploads host copies (logical fp32); either may be NULL to leave that arena alone. */
cnnb_status cnnb_executor_upload_params(cnnb_executor *ex, const float *params, const float *stats);
/* Downloads the arenas; either may be NULL. */
cnnb_status cnnb_executor_download_params(cnnb_executor *ex, float *params, float *stats);

/* One step: images [N, C, H, W] fp32, labels [N] (may be NULL when forward-only: the
 * loss is then not computed). Training runs backward with the loss multiplied by
 * loss_scale and leaves d loss / d params (times loss_scale) in the gradient arena.
 * `step` seeds dropout masks. */
cnnb_status cnnb_executor_step(cnnb_executor *ex, const float *images, const int32_t *labels,
                               float loss_scale, uint64_t step);

/* Lets the executor take uint8 batches: `ext` is the device's CNNB_EXT_DEVICE_UINT8_INPUT
 * (kept: it must outlive the executor), scale and offset the datasource's normalization,
 * one value per channel of the graph's input (copied). */
cnnb_status cnnb_executor_set_uint8_input(cnnb_executor *ex, const cnnb_device_uint8_input *ext,
                                          const float *scale, const float *offset);
/* cnnb_executor_step with images [N, H, W, C] uint8, which the device normalizes (after
 * cnnb_executor_set_uint8_input; CNNB_EINVAL before it). */
cnnb_status cnnb_executor_step_uint8(cnnb_executor *ex, const uint8_t *images,
                                     const int32_t *labels, float loss_scale, uint64_t step);

/* After a step: the mean cross-entropy (unscaled), the logits [N, num_classes] and
 * top-1 / top-5 hits over the batch (TF in_top_k: ties at the boundary count as in). */
cnnb_status cnnb_executor_loss(cnnb_executor *ex, float *loss);
cnnb_status cnnb_executor_logits(cnnb_executor *ex, float *host);
cnnb_status cnnb_executor_accuracy(cnnb_executor *ex, const int32_t *labels, int *top1, int *top5);
/* The same over the batch's first `count` examples only (count >= N: all of them), for
 * an evaluation whose last batch runs past the end of its split. */
cnnb_status cnnb_executor_accuracy_first(cnnb_executor *ex, const int32_t *labels, int32_t count,
                                         int *top1, int *top5);

/* Device pointers of the arenas (NULL when empty) and their element counts. */
float *cnnb_executor_params(const cnnb_executor *ex);
float *cnnb_executor_grads(const cnnb_executor *ex); /* NULL when forward-only */
float *cnnb_executor_stats(const cnnb_executor *ex);
int64_t cnnb_executor_param_count(const cnnb_executor *ex);
int64_t cnnb_executor_stat_count(const cnnb_executor *ex);

/* The plan's activation arena: planned peak bytes, and the sum without reuse. */
size_t cnnb_executor_peak_bytes(const cnnb_executor *ex);
size_t cnnb_executor_naive_bytes(const cnnb_executor *ex);
const cnnb_plan *cnnb_executor_plan(const cnnb_executor *ex);

int32_t cnnb_executor_num_buckets(const cnnb_executor *ex);
/* Bucket i in announcement order (i = 0 is the end of the arena). */
void cnnb_executor_bucket(const cnnb_executor *ex, int32_t i, int64_t *offset, int64_t *count);

const cnnb_graph *cnnb_executor_graph(const cnnb_executor *ex);
const cnnb_device_vtable *cnnb_executor_device_vtable(const cnnb_executor *ex);
void *cnnb_executor_device(const cnnb_executor *ex);
bool cnnb_executor_training(const cnnb_executor *ex);

/* Records "<what>: <the device's message>" in the executor's ctx and returns status:
 * for code that calls the device on the executor's behalf (the trainer's updates). */
cnnb_status cnnb_executor_device_error(cnnb_executor *ex, cnnb_status status, const char *fmt, ...)
    CNNB_PRINTF(3, 4);

/* With cfg.profile: seconds spent in node i's forward and backward, summed over steps. */
void cnnb_executor_node_time(const cnnb_executor *ex, int32_t node, double *forward_s,
                             double *backward_s);

#endif
