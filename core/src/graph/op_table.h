/* op_table.h — everything the core knows about each graph op, in one row per cnnb_op:
 * its name, the ABI minor that added it, how many inputs it takes, its shape rule and
 * checks, the parameters it owns, its forward FLOPs, what its backward reads, and
 * whether a ReLU may be fused into it. The builder (graph_build.c), the graph's names
 * (graph.c), the model report (model_info.c), the planner (plan.c) and the device check
 * (op_device.c) read the rows; none of them switches on an op.
 *
 * Adding an op: docs/architecture.md, "Adding an op" (its row here, and its rules where
 * they need code, in a section above the rows). test_op_table checks every op has a
 * whole row.
 *
 * The table is read while building and planning a graph, never per step. Rows are
 * constant; every function here is pure and safe from any thread. */
#ifndef CNNB_OP_TABLE_H
#define CNNB_OP_TABLE_H

#include <stdbool.h>
#include <cnnb/graph.h>

#define CNNB_OP_ERROR_MAX 1024
#define CNNB_OP_MAX_PARAMS 4 /* batch norm: gamma, beta, moving mean, moving variance */

/* A node a builder asks for: what it read from its caller. The generic path
 * (cnnb_graph_add_op, graph_build.c) names the node, checks its inputs and then hands
 * the request to the op's rules. */
typedef struct cnnb_op_request {
  uint32_t op;
  const char *name;      /* NULL or "": automatic, from auto_base */
  const char *auto_base; /* NULL: the op's name ("flatten" names a flattening reshape) */
  int32_t num_inputs;
  const cnnb_tensor *inputs;
  cnnb_node node;        /* attr as asked, defaults filled; the rule sets shape (a
                            reshape's target C, H, W come in node.shape, a source's
                            whole shape is the host's) */
  uint32_t padding;      /* window ops: CNNB_PAD_SAME / VALID / EXPLICIT, the explicit
                            pads in node.attr.window; the rule resolves them */
  int32_t flatten;       /* reshape: the target is the input flattened */
  int32_t ceil_mode;     /* max / avg pool: the output size rounded up (cnnb_pool_desc) */
  int32_t linear_kernel; /* conv2d: a 1x1 kernel declared [O, I] (cnnb_conv2d_desc) */
  cnnb_init init[2];     /* conv2d, dense: weights (CNNB_INIT_DEFAULT: the op's), bias */
  int32_t no_desc;       /* the caller passed a NULL desc the op needs */
  int32_t by_host;       /* input, labels, loss: the host's own nodes, which may read
                            outputs no layer may (the labels) */
  /* Filled by the generic path for the rules: each input's shape and name, so the rules
   * read nothing of the graph's storage. */
  const cnnb_shape *input_shapes; /* [num_inputs] */
  const char *const *input_names; /* [num_inputs] */
  char error[CNNB_OP_ERROR_MAX];  /* a rule's refusal; the path prefixes "<op> '<name>': " */
} cnnb_op_request;

/* A parameter an op owns, as its params rule declares it; the graph places it at its
 * arena's running end, in the order declared (checkpoints depend on that order). */
typedef struct cnnb_op_param {
  const char *suffix;       /* "kernel": the param is "<node name>/kernel" */
  const char *torch_suffix; /* "weight": its checkpoint key is "<prefix>.weight" once the
                               node has a checkpoint name (PyTorch's state_dict suffix;
                               cnnb_graph_set_checkpoint_name) */
  int32_t is_stat;          /* 1: the stats arena (never trained) */
  uint32_t flags;           /* CNNB_PARAM_NO_DECAY */
  int32_t ndims;
  int32_t dims[4];
  cnnb_init init;
} cnnb_op_param;

/* Which of its own output the backward of an op reads. Zero is no value: a row that
 * leaves it zero is incomplete (test_op_table). */
typedef enum cnnb_op_reads_output {
  CNNB_OP_OUTPUT_UNREAD = 1,
  CNNB_OP_OUTPUT_READ = 2,
  CNNB_OP_OUTPUT_READ_IF_FUSED = 3 /* only to mask dy by a fused ReLU's output */
} cnnb_op_reads_output;

typedef struct cnnb_op_row {
  uint32_t op;          /* the row's own index */
  const char *name;     /* "conv2d": messages, the model report, automatic names */
  uint32_t since_minor; /* the ABI 1.x minor that added it (graph.h) */
  int32_t min_inputs, max_inputs;
  /* The shape rule: checks r->node's attributes against the inputs (r->input_shapes),
   * sets r->node.shape and resolves attributes (window pads). On a refusal it says why
   * with cnnb_op_refuse, naming shapes, and returns false. Required. */
  bool (*infer)(cnnb_op_request *r);
  /* The parameters of an inferred node, in arena order: fills out[] and returns their
   * number. NULL: the op owns none. */
  int32_t (*params)(const cnnb_op_request *r, cnnb_op_param out[CNNB_OP_MAX_PARAMS]);
  /* Forward FLOPs per image (model_info.h states the counting rules), and the conv2d /
   * dense matmul part of them, from the node and its first input's shape (zero for a
   * source). A fused ReLU is counted by cnnb_op_flops, not here. Required. */
  void (*flops)(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul);
  /* What backward reads beyond its output gradient: bit k for input k (inputs past 31
   * share bit 31), and its own output (cnnb_op_reads_output). */
  uint32_t backward_inputs;
  uint32_t backward_output;
  /* A ReLU that follows it may run inside it (cnnb_node.fused_relu); a device must
   * offer fuse_relu_ext for that, or apply fused_relu to this op since ABI 1.0 (NULL). */
  bool fuse_relu;
  const char *fuse_relu_ext;
  bool hidden;        /* its output is the host's alone (labels, loss): no layer
                         reads it */
  bool scalar_output; /* one value for the whole batch (the loss): no activation
                         per image */
} cnnb_op_row;

/* Lowercase op name ("conv2d", "batch_norm", "softmax_xent"); "unknown" for a code the
 * table has no row for. */
const char *cnnb_op_name(uint32_t op);

/* The row of `op`; NULL for a code this host does not know. */
const cnnb_op_row *cnnb_op_row_of(uint32_t op);

/* For rules: records why the request is refused (printf-style) and returns false. */
bool cnnb_op_refuse(cnnb_op_request *r, const char *fmt, ...) CNNB_PRINTF(2, 3);

/* Forward FLOPs of node n per image with its fused ReLU (1 per output element), `in`
 * being the shape of its first input (zero for a source); zero for an op this host does
 * not know. */
void cnnb_op_flops(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul);

/* Which activations the backward of node n reads (bit k of *inputs for input k, bits of
 * inputs it lacks clear; *output for its own), after its fused_relu. An op this host
 * does not know keeps everything: every input bit and the output. */
void cnnb_op_backward_reads(const cnnb_node *n, uint32_t *inputs, bool *output);

/* The ops a ReLU may be fused into on a device, as 1u << op bits (cnnb_plan_fuse_relus):
 * every fusible row that needs no extension, and those whose extension has_ext(user, id)
 * answers with non-zero. has_ext NULL: a device with no extension (the ABI 1.0 set). */
uint32_t cnnb_ops_relu_fusion(int (*has_ext)(void *user, const char *id), void *user);
/* A has_ext that says yes to everything: every fusible op (tests, CNNB_FUSE_ALL). */
int cnnb_ops_every_ext(void *user, const char *id);

#endif
