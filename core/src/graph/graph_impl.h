/* graph_impl.h — the graph's storage, shared only by graph.c (lifetime, names, errors,
 * reading) and graph_build.c (the op builders and the one path into the graph). Nothing
 * else includes it: the executor and tests read graphs through graph.h and
 * graph_internal.h, and the op table's rules read them the same way.
 *
 * Nodes and params are allocated one by one and reached through pointer arrays, so the
 * pointers cnnb_graph_node()/cnnb_graph_param() hand out never move while building. */
#ifndef CNNB_GRAPH_IMPL_H
#define CNNB_GRAPH_IMPL_H

#include <stdbool.h>
#include "graph/graph_internal.h"
#include "graph/op_table.h"

#define CNNB_GRAPH_NAME_MAX 512
#define CNNB_GRAPH_ERROR_MAX 1024

typedef struct cnnb_node_rec {
  cnnb_node node;      /* first: &rec->node is what readers get */
  char *name;          /* owned; node.name points here */
  cnnb_tensor *inputs; /* owned; node.inputs points here */
  int32_t *consumers;  /* nodes reading this tensor, increasing */
  int32_t num_consumers, cap_consumers;
  char *checkpoint_name; /* owned; NULL until cnnb_graph_set_checkpoint_name */
} cnnb_node_rec;

typedef struct cnnb_param_rec {
  cnnb_param param;         /* first */
  char *name;               /* owned; param.name points here */
  const char *torch_suffix; /* the op row's ("weight"); static */
  char *key;                /* owned; "<checkpoint name>.<torch_suffix>", NULL until the
                               node has a checkpoint name */
} cnnb_param_rec;

struct cnnb_graph {
  int32_t batch, channels, height, width, num_classes;
  cnnb_node_rec **nodes;
  int32_t num_nodes, cap_nodes;
  cnnb_param_rec **params;
  int32_t num_params, cap_params;
  int64_t param_count; /* trainable arena elements, alignment gaps included */
  int64_t stat_count;  /* stats arena elements, the same */
  char **scopes;
  int32_t num_scopes, cap_scopes;
  cnnb_tensor logits, labels, loss;
  cnnb_status status;
  char error[CNNB_GRAPH_ERROR_MAX];
};

/* A node being built: its op and resolved full name, so every error can name it. */
typedef struct cnnb_node_start {
  cnnb_graph *g;
  uint32_t op;
  char name[CNNB_GRAPH_NAME_MAX];
} cnnb_node_start;

/* Begins a node of `op`. `name` NULL takes an automatic one from `auto_base` ("conv2d",
 * then "conv2d_1", ...) inside the current scope. Checks the name is free and every
 * input exists, and that none is an output no layer may read (a hidden row: labels,
 * loss) unless `by_host` (the loss reads the labels). Returns false when the node must
 * not be built: the graph already failed (nothing new is recorded: the first error
 * stays) or this call recorded an error. */
bool cnnb_graph_start(cnnb_node_start *s, cnnb_graph *g, uint32_t op, const char *auto_base,
                      const char *name, int32_t num_inputs, const cnnb_tensor *inputs,
                      bool by_host);

/* Records "<op> '<name>': <message>" as the graph's error; returns CNNB_NO_TENSOR. */
cnnb_tensor cnnb_graph_reject(const cnnb_node_start *s, cnnb_status status, const char *fmt, ...)
    CNNB_PRINTF(3, 4);

/* Appends the node described by `proto` (op, shape, attr; the rest is filled here) with
 * the started name and these inputs. Returns its tensor, or CNNB_NO_TENSOR when out of
 * memory (recorded). */
cnnb_tensor cnnb_graph_finish(cnnb_node_start *s, const cnnb_node *proto, int32_t num_inputs,
                              const cnnb_tensor *inputs);

/* Adds the parameter p declares to node t (the last one built), named "<node
 * name>/<p->suffix>": into the stats arena when p->is_stat, else the trainable arena, at
 * the arena's running end. Returns false when out of memory (recorded). */
bool cnnb_graph_add_param(cnnb_graph *g, cnnb_tensor t, const cnnb_op_param *p);

/* graph.c: a graph of these dimensions with no node yet (cnnb_graph_create, in
 * graph_build.c, adds the input node); NULL when out of memory. */
cnnb_graph *cnnb_graph_alloc(int32_t batch, int32_t channels, int32_t height, int32_t width,
                             int32_t num_classes);

/* The one way a node enters the graph (graph_build.c): starts it (name, inputs, the
 * op's arity), runs its row's shape rule on r, appends it, then adds the parameters the
 * row declares. Returns its tensor, or CNNB_NO_TENSOR with the error recorded ("<op>
 * '<name>': <why>") or the graph already failed. */
cnnb_tensor cnnb_graph_add_op(cnnb_graph *g, cnnb_op_request *r);

#endif
