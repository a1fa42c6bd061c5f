/* model_info.h — the per-layer model report behind `cnnbench --model_info`: output
 * shapes, parameter counts, forward FLOPs and activation memory, per layer and in total.
 *
 * Counting rules (per image, forward pass, training mode), each op's implemented by its
 * row's FLOPs rule in the op table (op_table.c):
 *  - a multiply-add counts 2 FLOPs;
 *  - conv2d: 2*KH*KW*(C_in/groups)*C_out*H_out*W_out, + C_out*H_out*W_out with a bias;
 *  - dense: 2*K*units, + units with a bias;
 *  - elementwise ops count their arithmetic per output element: relu 1 (max); relu6 2
 *    (max, min); add 1; dropout 2 (mask compare, scale); batch norm 3 for the batch mean
 *    and variance (sum, square, sum), 2 to normalise ((x - mean) * inv_std), 1 for the offset and 1
 *    more with a scale; max pool KH*KW comparisons and avg pool KH*KW adds + 1 divide per
 *    output element, global avg pool H*W adds + 1 divide per channel; LRN 2*(2r+1) for
 *    the window's squares and sums + 4 (alpha, bias, pow, divide); softmax cross-entropy
 *    4 per logit (max, subtract, exp, sum) + 1 (log); a conv or batch norm with a fused
 *    ReLU adds 1 per output element; input, labels, concat, pad_channels and
 *    pad_spatial (their zeros are written, not computed) and reshape move data, 0.
 *  - `flops` counts every op; `flops_matmul` only conv2d and dense, which is what
 *    published figures count (ResNet-50 ~7.7-8.2 GFLOPs), so the report's
 *    "Forward GFLOPs per image" line uses it.
 *  - activation memory per image (training) is the sum, over every node whose output
 *    has the batch dimension (all but the loss scalar), of its output's fp32 bytes for
 *    one image: what training keeps when every forward output lives until backward
 *    needs it. A planner that runs reshape/relu in place needs less; gradients, params
 *    and the device's workspaces are not counted. */
#ifndef CNNB_MODEL_INFO_H
#define CNNB_MODEL_INFO_H

#include <stdio.h>
#include <cnnb/graph.h>

typedef struct cnnb_model_layer {
  const char *name;         /* the node's full name; valid while the graph lives */
  const char *op;           /* "conv2d", ... */
  int32_t node;             /* node index */
  cnnb_shape shape;         /* output shape, with the graph's batch */
  int64_t params;           /* trainable elements this node owns (stats not counted) */
  int64_t flops;            /* forward FLOPs per image, every op */
  int64_t flops_matmul;     /* the conv2d / dense part of flops (0 for other ops) */
  int64_t activation_bytes; /* fp32 bytes of the output per image (0 for the loss) */
} cnnb_model_layer;

typedef struct cnnb_model_report {
  int32_t num_layers;
  cnnb_model_layer *layers; /* one per node, in node order; owned (cnnb_model_report_free) */
  int64_t trainable_params; /* the trainable arena's element count */
  int64_t stat_count;       /* the stats arena's (batch-norm moving mean / variance) */
  int64_t flops;            /* forward FLOPs per image, every op */
  int64_t flops_matmul;     /* forward FLOPs per image, conv2d + dense */
  int64_t activation_bytes; /* per image, training (see above) */
} cnnb_model_report;

/* Fills *out for a built graph (the loss nodes are counted when present). CNNB_EINVAL
 * for a failed graph; CNNB_ENOMEM. Free with cnnb_model_report_free. */
cnnb_status cnnb_model_info_compute(const cnnb_graph *g, cnnb_model_report *out);
void cnnb_model_report_free(cnnb_model_report *r);

/* The table (one row per layer: name, op, output shape [C, H, W] per image, params,
 * forward MFLOPs) and then exactly:
 *   Trainable parameters: N
 *   Forward GFLOPs per image: X.XXX        (conv2d + dense)
 *   Activation memory per image (training): X.X MiB */
void cnnb_model_info_print(const cnnb_graph *g, const cnnb_model_report *r, FILE *out);

#endif
