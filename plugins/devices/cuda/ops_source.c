/* ops_source.c — the graph's sources: the input images (CNNB_OP_INPUT) and the labels
 * (CNNB_OP_LABELS). The executor fills their buffers itself through tensor_from_host
 * (or the uint8 input extension), both in transfer.c, so their nodes compute nothing:
 * forward and backward return at once, as the cpu device's source nodes do. */
#include "gpu_device.h"

static cnnb_status source_pass(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  (void)d;
  (void)n;
  (void)io;
  return CNNB_OK;
}

/* A source adds nothing to its head: device.c frees the struct itself. */
static void source_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

static const gpu_node_ops source_ops = {source_pass, source_pass, source_release};

cnnb_status gpu_prepare_source(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->op != CNNB_OP_INPUT && node->op != CNNB_OP_LABELS)
    return cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: node '%s': op %u is not a source", node->name,
                      node->op);
  gpu_node *n = gpu_node_new(sizeof *n, &source_ops, g, index);
  if (!n) return gpu_oom(d, node, sizeof *n, "its state");
  *out = n;
  return CNNB_OK;
}
