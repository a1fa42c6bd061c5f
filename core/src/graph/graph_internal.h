/* graph_internal.h — the host's extra view of a graph (never installed): what the run
 * loop, executor, planner, model report and tests need beyond the public IR in
 * cnnb/graph.h.
 *
 * Order: a builder call can only name tensors that already exist, so nodes are created in
 * topological order by construction. Node index order IS a valid topological order;
 * forward walks 0..n-1 and backward walks n-1..0, no sort needed.
 *
 * Pointers returned by cnnb_graph_node(), cnnb_graph_param() and cnnb_graph_consumers()
 * stay valid while the graph lives, except that a consumer list may move when a later
 * node consumes that tensor (re-read it after building). Not thread-safe while building;
 * read-only use from several threads is fine once building is over. */
#ifndef CNNB_GRAPH_INTERNAL_H
#define CNNB_GRAPH_INTERNAL_H

#include <cnnb/graph.h>

#include "graph/op_table.h" /* cnnb_op_name: what the graph's readers print ops by */

/* Appends the loss after the model's logits: a CNNB_OP_LABELS node "labels" [N, 1, 1, 1]
 * and a CNNB_OP_SOFTMAX_XENT node "loss" (inputs: logits, labels) [1, 1, 1, 1]; then
 * cnnb_graph_labels() / cnnb_graph_loss() return them. CNNB_EINVAL (recorded in the graph)
 * when no logits were set or the loss was already added; the sticky error when there is one. */
cnnb_status cnnb_graph_add_loss(cnnb_graph *g);

/* Label smoothing s for the loss (cnnb_graph_add_loss first): the loss's target becomes
 * (1 - s) onehot(label) + s / classes, as torch's CrossEntropyLoss(label_smoothing=s) and
 * tf_cnn_benchmarks' --label_smoothing. CNNB_EINVAL (recorded in the graph) for s outside
 * [0, 1) or no loss yet. */
cnnb_status cnnb_graph_set_label_smoothing(cnnb_graph *g, float s);

/* The nodes that read tensor t, in increasing node order; a node that reads t twice
 * (add(x, x)) appears twice, so gradient accumulation counts both uses. NULL with
 * *count = 0 when t has no consumer or does not exist. */
const int32_t *cnnb_graph_consumers(const cnnb_graph *g, cnnb_tensor t, int32_t *count);

/* The values of the graph's params (stats false) or statistics (true): an arena's
 * elements less the alignment gaps between them (the arena counts count those too).
 * cnnb_graph_trainable_count is the params' count, the model's trainable parameters. */
int64_t cnnb_graph_values_count(const cnnb_graph *g, bool stats);
int64_t cnnb_graph_trainable_count(const cnnb_graph *g);

/* The output shape of tensor t ({0,0,0,0} when t does not exist). */
cnnb_shape cnnb_graph_tensor_shape(const cnnb_graph *g, cnnb_tensor t);

/* Looks a node up by its full name ("block1/conv1"); -1 when absent. */
int32_t cnnb_graph_find_node(const cnnb_graph *g, const char *name);
/* Looks a param up by its full name ("block1/conv1/kernel"); -1 when absent. */
int32_t cnnb_graph_find_param(const cnnb_graph *g, const char *name);

/* The key param `index` is saved under in checkpoints: "<prefix>.<torch suffix>"
 * ("layer1.0.conv1.weight") once its node has a checkpoint name
 * (cnnb_graph_set_checkpoint_name), else the param's own name ("conv0/conv2d/kernel").
 * Unique in the graph: the builder refuses a prefix that would repeat a key. NULL for
 * an index that does not exist. */
const char *cnnb_graph_param_key(const cnnb_graph *g, int32_t index);

/* Node `node`'s checkpoint name ("layer1.0.bn1"); NULL when it has none or does not
 * exist. The checkpoint writer adds a named batch norm's torchvision extras under it. */
const char *cnnb_graph_node_checkpoint_name(const cnnb_graph *g, int32_t node);

/* Records an error in the graph (the first one wins, like the builder's own), so host
 * code that finds a graph unusable ("model 'x' returned OK without setting logits")
 * reports through the same cnnb_graph_status()/cnnb_graph_error(). Returns the graph's
 * status afterwards (the earlier one if an error was already recorded). */
cnnb_status cnnb_graph_fail(cnnb_graph *g, cnnb_status status, const char *fmt, ...)
    CNNB_PRINTF(3, 4);

/* Marks node `index` (an op whose row has fuse_relu: conv2d, batch_norm, add) as
 * followed by a ReLU inside it (cnnb_node.fused_relu). A planner pass may use it when the
 * ReLU's input has no other consumer; the graph itself does not rewrite nodes.
 * CNNB_EINVAL for another op. */
cnnb_status cnnb_graph_set_fused_relu(cnnb_graph *g, int32_t index, int32_t fused);

#endif
