/* ops.c — the cpu device's op table: every graph op it runs, forward and backward in
 * fp32 and bf16, with the layout rule of its output (plan.c, ops_*.c) and its prepare
 * (ops_*.c), which makes the node's forward / backward. supports_op answers from this
 * list, and the layout plan and prepare dispatch through it, so the device never says
 * it runs an op it cannot dispatch. Adding an op: its ops_<family>.c and one line here
 * (the whole list: docs/architecture.md, "Adding an op").
 *
 * A list, not an array indexed by op: graph.h's CNNB_OP_COUNT_ is the host's bound, not
 * ABI, and an op this device was built without must simply be absent. */
#include "cpu_device.h"

static const cpu_op ops[] = {
    {CNNB_OP_INPUT, cpu_layout_plain, cpu_prepare_source},
    {CNNB_OP_LABELS, cpu_layout_labels, cpu_prepare_source},
    {CNNB_OP_CONV2D, cpu_layout_conv, cpu_prepare_conv},
    {CNNB_OP_BATCH_NORM, cpu_layout_same, cpu_prepare_batch_norm},
    {CNNB_OP_RELU, cpu_layout_same, cpu_prepare_relu},
    {CNNB_OP_MAX_POOL, cpu_layout_pool, cpu_prepare_pool},
    {CNNB_OP_AVG_POOL, cpu_layout_pool, cpu_prepare_pool},
    {CNNB_OP_GLOBAL_AVG_POOL, cpu_layout_pool, cpu_prepare_pool},
    {CNNB_OP_LRN, cpu_layout_same, cpu_prepare_lrn},
    {CNNB_OP_DENSE, cpu_layout_plain, cpu_prepare_dense},
    {CNNB_OP_DROPOUT, cpu_layout_same, cpu_prepare_dropout},
    {CNNB_OP_CONCAT, cpu_layout_concat, cpu_prepare_concat},
    {CNNB_OP_ADD, cpu_layout_same, cpu_prepare_add},
    {CNNB_OP_RESHAPE, cpu_layout_plain, cpu_prepare_reshape},
    {CNNB_OP_SOFTMAX_XENT, cpu_layout_f32, cpu_prepare_softmax_xent},
    {CNNB_OP_RELU6, cpu_layout_same, cpu_prepare_relu6},                    /* ABI 1.1 */
    {CNNB_OP_PAD_CHANNELS, cpu_layout_pad, cpu_prepare_pad},                /* ABI 1.2 */
    {CNNB_OP_PAD_SPATIAL, cpu_layout_pad_spatial, cpu_prepare_pad_spatial}, /* ABI 1.10 */
    {CNNB_OP_SIGMOID, cpu_layout_same, cpu_prepare_activation},             /* ABI 1.14 */
    {CNNB_OP_SILU, cpu_layout_same, cpu_prepare_activation},
    {CNNB_OP_HARD_SIGMOID, cpu_layout_same, cpu_prepare_activation},
    {CNNB_OP_HARD_SWISH, cpu_layout_same, cpu_prepare_activation},
    {CNNB_OP_GELU, cpu_layout_same, cpu_prepare_activation},
    {CNNB_OP_STOCHASTIC_DEPTH, cpu_layout_same, cpu_prepare_dropout},
    {CNNB_OP_MULTIPLY, cpu_layout_same, cpu_prepare_multiply},
    {CNNB_OP_LAYER_NORM, cpu_layout_channels_last, cpu_prepare_layer_norm},
    {CNNB_OP_CHANNEL_SCALE, cpu_layout_same, cpu_prepare_channel_scale},
    {CNNB_OP_SLICE_CHANNELS, cpu_layout_plain, cpu_prepare_slice_channels},
    {CNNB_OP_CHANNEL_SHUFFLE, cpu_layout_same, cpu_prepare_channel_shuffle},
};

const cpu_op *cpu_op_find(uint32_t op) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i].op == op) return &ops[i];
  return NULL;
}
