/* ops.c — the cuda device's op table: every graph op it runs, forward and backward in
 * fp32, fp16 and bf16, with its prepare (ops_*.c). supports_op, tensor_bytes and
 * prepare all look ops up here, so the device never says it runs an op it cannot
 * dispatch. Adding an op: its ops_<family>.c and one line here (the whole list:
 * docs/architecture.md, "Adding an op").
 *
 * A list, not an array indexed by op: graph.h's CNNB_OP_COUNT_ is the host's bound, not
 * ABI, and an op this device was built without must simply be absent. */
#include "gpu_device.h"

static const gpu_op ops[] = {
    {CNNB_OP_INPUT, gpu_prepare_source},
    {CNNB_OP_LABELS, gpu_prepare_source},
    {CNNB_OP_CONV2D, gpu_prepare_conv},
    {CNNB_OP_BATCH_NORM, gpu_prepare_batch_norm},
    {CNNB_OP_RELU, gpu_prepare_relu},
    {CNNB_OP_MAX_POOL, gpu_prepare_pool},
    {CNNB_OP_AVG_POOL, gpu_prepare_pool},
    {CNNB_OP_GLOBAL_AVG_POOL, gpu_prepare_pool},
    {CNNB_OP_LRN, gpu_prepare_lrn},
    {CNNB_OP_DENSE, gpu_prepare_dense},
    {CNNB_OP_DROPOUT, gpu_prepare_dropout},
    {CNNB_OP_CONCAT, gpu_prepare_concat},
    {CNNB_OP_ADD, gpu_prepare_add},
    {CNNB_OP_RESHAPE, gpu_prepare_reshape},
    {CNNB_OP_SOFTMAX_XENT, gpu_prepare_softmax_xent},
    {CNNB_OP_RELU6, gpu_prepare_relu6},             /* ABI 1.1 */
    {CNNB_OP_PAD_CHANNELS, gpu_prepare_pad},        /* ABI 1.2 */
    {CNNB_OP_PAD_SPATIAL, gpu_prepare_pad_spatial}, /* ABI 1.10 */
    {CNNB_OP_SIGMOID, gpu_prepare_act},             /* ABI 1.14 */
    {CNNB_OP_SILU, gpu_prepare_act},
    {CNNB_OP_HARD_SIGMOID, gpu_prepare_act},
    {CNNB_OP_HARD_SWISH, gpu_prepare_act},
    {CNNB_OP_GELU, gpu_prepare_act},
    {CNNB_OP_STOCHASTIC_DEPTH, gpu_prepare_dropout},
    {CNNB_OP_MULTIPLY, gpu_prepare_multiply},
    {CNNB_OP_LAYER_NORM, gpu_prepare_layer_norm},
    {CNNB_OP_CHANNEL_SCALE, gpu_prepare_channel_scale},
    {CNNB_OP_SLICE_CHANNELS, gpu_prepare_slice_channels},
    {CNNB_OP_CHANNEL_SHUFFLE, gpu_prepare_channel_shuffle},
};

const gpu_op *gpu_op_find(uint32_t op) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i].op == op) return &ops[i];
  return NULL;
}
