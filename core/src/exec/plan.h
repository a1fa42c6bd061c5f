/* plan.h — the memory plan of one graph (core, never installed): where every activation,
 * gradient and accumulation scratch buffer lives inside one activation arena, and which
 * buffer each backward writes. Computed once per graph; the executor only adds offsets.
 *
 * Timeline: the forward of node i happens at time i, its backward at time 2n-1-i (n
 * nodes). A buffer lives over an inclusive interval of that timeline; two buffers whose
 * intervals overlap never overlap in memory (greedy best-fit by size, 64-byte aligned).
 *  - activation of t: from forward(t) to the last forward that reads it, extended to
 *    the last backward that reads it (each op's row in the op table says which inputs,
 *    and whether its output, its backward reads); the logits and the loss live to the
 *    end, so the host can read them after the step;
 *  - gradient of t (d loss / d t): from the backward of t's last consumer (which
 *    writes it) to t's own backward (which reads it);
 *  - scratch: when t has several consumers (residual add, inception branches), the first
 *    backward to run (the last consumer) writes the gradient buffer and every later one
 *    writes a scratch buffer that lives only at that backward; the executor adds it into
 *    the gradient with the device's accumulate().
 * Forward-only plans have no gradients, and activations die at their last consumer.
 * A ReLU that follows a node with fused_relu (cnnb_plan_fuse_relus) is an alias: it
 * shares that node's buffers and never runs, since its output would equal its input. */
#ifndef CNNB_PLAN_H
#define CNNB_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <cnnb/ctx.h>
#include <cnnb/graph.h>
#include "graph/op_table.h"

#define CNNB_PLAN_ALIGN 64

/* The device's tensor_bytes (or a fake in tests). */
typedef cnnb_status (*cnnb_plan_bytes_fn)(void *user, const cnnb_graph *g, cnnb_tensor t,
                                          size_t *bytes);

typedef enum cnnb_buffer_kind {
  CNNB_BUFFER_ACTIVATION = 1,
  CNNB_BUFFER_GRADIENT = 2,
  CNNB_BUFFER_SCRATCH = 3
} cnnb_buffer_kind;

typedef struct cnnb_plan_buffer {
  uint32_t kind;       /* cnnb_buffer_kind */
  cnnb_tensor tensor;  /* whose activation or gradient */
  int32_t first, last; /* lifetime, inclusive, in timeline steps */
  size_t bytes;        /* as the device asked */
  size_t offset;       /* in the activation arena; a multiple of CNNB_PLAN_ALIGN */
} cnnb_plan_buffer;

typedef struct cnnb_plan {
  int32_t num_nodes;
  bool training;
  int32_t timeline; /* steps: 2n training, n forward-only */
  int32_t num_buffers;
  cnnb_plan_buffer *buffers;
  int32_t *activation; /* [num_nodes] buffer of each node's output */
  int32_t *gradient;   /* [num_nodes] buffer of d loss / d output; -1: not needed */
  bool *has_backward;  /* [num_nodes] backward of this node runs */
  int32_t *slot_base;  /* [num_nodes + 1] first input slot of each node */
  int32_t *input_grad; /* [slots] buffer the backward writes for that input; -1: NULL */
  bool *accumulate;    /* [slots] input_grad is scratch: add it into gradient[input] */
  int32_t *alias;      /* [num_nodes] a ReLU after a fused node: that node, whose
                          activation and gradient it shares; it never runs. -1: none */
  size_t arena_bytes;  /* planned peak: the arena's size */
  size_t naive_bytes;  /* every buffer in its own allocation (aligned) */
  size_t live_bytes;   /* the most bytes alive at one moment: no placement beats it */
} cnnb_plan;

/* Plans `g` (which must have passed the builder's checks). Training plans need the loss
 * (cnnb_graph_add_loss); a graph without one is refused. Errors name the tensor. */
cnnb_status cnnb_plan_create(cnnb_ctx *ctx, const cnnb_graph *g, bool training,
                             cnnb_plan_bytes_fn bytes, void *user, cnnb_plan **out);
void cnnb_plan_destroy(cnnb_plan *plan);

/* Ops a device applies fused_relu to, as bits (1u << op). Which ops take a fused ReLU,
 * and which extension a device needs for each, are their op table rows (fuse_relu,
 * fuse_relu_ext): ABI_1_0 is what every device does (conv2d, batch norm), ALL adds the
 * ops behind an extension (add, CNNB_EXT_FUSED_RELU_ADD). For a real device,
 * cnnb_ops_device_relu_fusion (op_device.h) asks it. */
#define CNNB_FUSE_OP(op) (1u << (op))
#define CNNB_FUSE_ABI_1_0 (cnnb_ops_relu_fusion(NULL, NULL))
#define CNNB_FUSE_ALL (cnnb_ops_relu_fusion(cnnb_ops_every_ext, NULL))

/* The fusion pass: marks every node of a fusible op (its row's fuse_relu) in `ops`
 * (CNNB_FUSE_OP bits) whose only reader is a ReLU as fused_relu (the device applies the
 * ReLU inside it), so the ReLU node becomes an alias that never runs. Call it on the
 * built graph before planning (every replica shares the graph). The logits are never
 * fused. Returns how many nodes it fused. */
int32_t cnnb_plan_fuse_relus(cnnb_graph *g, uint32_t ops);

/* The tensor whose buffers hold t (t itself unless t is an alias). */
static inline cnnb_tensor cnnb_plan_resolve(const cnnb_plan *p, cnnb_tensor t) {
  return p->alias[t] >= 0 ? p->alias[t] : t;
}

/* When node's backward runs on the timeline above (its forward runs at time `node`). */
static inline int32_t cnnb_plan_backward_time(const cnnb_plan *p, int32_t node) {
  return 2 * p->num_nodes - 1 - node;
}

#endif
