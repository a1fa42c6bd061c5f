/* checkpoint_tensors.h — a graph's state as the named tensors of a checkpoint, and back
 * (the file's contents as checkpoint.h describes them; no run, no device, no file I/O).
 * Host-internal.
 *
 * Names: cnnb_graph_param_key for parameters and statistics; "<prefix>.num_batches_tracked"
 * and, for a batch norm without a learned scale, "<prefix>.weight" (ones) for the batch
 * norms named the torchvision way; "optimizer.<state>.<key>" for the optimizer's slots,
 * <state> being PyTorch's name for the rule's slot (cnnb_ckpt_slot_name). */
#ifndef CNNB_CHECKPOINT_TENSORS_H
#define CNNB_CHECKPOINT_TENSORS_H

#include <stdbool.h>
#include <cnnb/graph.h>

#include "store/safetensors.h"

/* PyTorch's state name of optimizer slot 1 or 2 under `rule` (cnnb_optimizer_rule):
 * momentum_buffer; square_avg and momentum_buffer; exp_avg and exp_avg_sq. NULL when the
 * rule has no such slot. */
const char *cnnb_ckpt_slot_name(uint32_t rule, int slot);

/* Host copies of one replica's state: the arenas at the graph's offsets, the optimizer's
 * slots over the parameter arena (NULL: none), a run of ones as wide as the widest batch
 * norm, and the global step (torchvision's num_batches_tracked). */
typedef struct cnnb_ckpt_arenas {
  float *params, *stats, *slot[2];
  float *ones;
  int64_t step;
} cnnb_ckpt_arenas;

/* Tensors to write, pointing into the arenas; names it made are its own. */
typedef struct cnnb_ckpt_tensors {
  cnnb_st_tensor *items;
  char **owned;
  size_t count, cap;
} cnnb_ckpt_tensors;

/* Appends the model's tensors (parameters, statistics, torchvision's batch-norm extras),
 * then the slots that `rule` has and h holds. false: out of memory. */
bool cnnb_ckpt_add_model(cnnb_ckpt_tensors *l, const cnnb_graph *g, const cnnb_ckpt_arenas *h);
bool cnnb_ckpt_add_slots(cnnb_ckpt_tensors *l, const cnnb_graph *g, uint32_t rule,
                         const cnnb_ckpt_arenas *h);
void cnnb_ckpt_tensors_free(cnnb_ckpt_tensors *l);

/* The F32 tensor `name` of f with the shape of p (*out), or CNNB_EINVAL naming the file,
 * the tensor and both shapes, or its absence; CNNB_EDATA naming the file, the tensor and
 * the first bad element when a value is NaN or infinite. */
cnnb_status cnnb_ckpt_find_like(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                const char *name, const cnnb_param *p, const cnnb_st_tensor **out);

/* Every parameter and statistic of g from f into host arenas (graph offsets). Refuses, naming
 * file and tensor, a missing tensor, a wrong shape or dtype, and a tensor that is none of
 * g's, of its optimizer or torchvision's batch-norm extras (another model's), or a
 * scale-less batch norm's "weight" that is not all ones (a learned scale it cannot hold). */
cnnb_status cnnb_ckpt_read_model(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                 const cnnb_graph *g, float *params, float *stats);

/* Optimizer slot `slot` of `rule` from f into host (the parameter arena's layout):
 * *present = true when f holds it for every trainable parameter, false when for none;
 * CNNB_EINVAL for some but not all (a torn or edited file). */
cnnb_status cnnb_ckpt_read_slot(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                const cnnb_graph *g, uint32_t rule, int slot, float *host,
                                bool *present);

#endif
