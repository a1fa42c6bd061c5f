/* graph.c — the graph's lifetime, names and scopes, its sticky first error, node and
 * parameter storage, checkpoint names, and the read side of the IR (graph.h,
 * graph_internal.h). The op builders and the host's own nodes (the images, the labels,
 * the loss) live in graph_build.c; what each op is (name,
 * shape rule, params and their checkpoint suffixes) is its row in the op table
 * (op_table.c).
 *
 * The first error wins: once the graph has failed, no node is added any more, so a model
 * written as straight-line builder calls reports the real cause, not its consequences. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_impl.h"

int64_t cnnb_shape_count(cnnb_shape s) { return (int64_t)s.n * s.c * s.h * s.w; }

/* ---- errors ------------------------------------------------------------------------ */

static cnnb_status vfail(cnnb_graph *g, cnnb_status status, const char *fmt, va_list ap) {
  if (g->status != CNNB_OK) return g->status;
  g->status = status;
  vsnprintf(g->error, sizeof g->error, fmt, ap);
  return status;
}

cnnb_status cnnb_graph_fail(cnnb_graph *g, cnnb_status status, const char *fmt, ...) {
  if (!g) return CNNB_EINVAL;
  va_list ap;
  va_start(ap, fmt);
  cnnb_status st = vfail(g, status, fmt, ap);
  va_end(ap);
  return st;
}

cnnb_tensor cnnb_graph_reject(const cnnb_node_start *s, cnnb_status status, const char *fmt, ...) {
  char msg[CNNB_GRAPH_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cnnb_graph_fail(s->g, status, "%s '%s': %s", cnnb_op_name(s->op), s->name, msg);
  return CNNB_NO_TENSOR;
}

static cnnb_tensor oom(cnnb_graph *g, const char *what) {
  cnnb_graph_fail(g, CNNB_ENOMEM, "graph: out of memory adding %s", what);
  return CNNB_NO_TENSOR;
}

cnnb_status cnnb_graph_status(const cnnb_graph *g) { return g ? g->status : CNNB_EINVAL; }

const char *cnnb_graph_error(const cnnb_graph *g) { return g ? g->error : "graph: NULL graph"; }

/* ---- growth helpers ------------------------------------------------------------------ */

static bool grow(void **items, int32_t *cap, int32_t need, size_t item_size) {
  if (need <= *cap) return true;
  int32_t ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*items, (size_t)ncap * item_size);
  if (!p) return false;
  *items = p;
  *cap = ncap;
  return true;
}

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* ---- lifetime ------------------------------------------------------------------------ */

cnnb_graph *cnnb_graph_alloc(int32_t batch, int32_t channels, int32_t height, int32_t width,
                             int32_t num_classes) {
  cnnb_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->batch = batch;
  g->channels = channels;
  g->height = height;
  g->width = width;
  g->num_classes = num_classes;
  g->logits = g->labels = g->loss = CNNB_NO_TENSOR;
  return g;
}

void cnnb_graph_destroy(cnnb_graph *g) {
  if (!g) return;
  for (int32_t i = 0; i < g->num_nodes; i++) {
    free(g->nodes[i]->name);
    free(g->nodes[i]->inputs);
    free(g->nodes[i]->consumers);
    free(g->nodes[i]->checkpoint_name);
    free(g->nodes[i]);
  }
  free(g->nodes);
  for (int32_t i = 0; i < g->num_params; i++) {
    free(g->params[i]->name);
    free(g->params[i]->key);
    free(g->params[i]);
  }
  free(g->params);
  for (int32_t i = 0; i < g->num_scopes; i++) free(g->scopes[i]);
  free(g->scopes);
  free(g);
}

/* ---- names and scopes ------------------------------------------------------------------ */

void cnnb_graph_push_scope(cnnb_graph *g, const char *scope) {
  if (!g) return;
  /* Pushed even after an error, so push/pop stay balanced in the caller's eyes. */
  char *copy = dup_string(scope ? scope : "");
  if (!copy || !grow((void **)&g->scopes, &g->cap_scopes, g->num_scopes + 1, sizeof(char *))) {
    free(copy);
    oom(g, "a scope");
    return;
  }
  g->scopes[g->num_scopes++] = copy;
}

void cnnb_graph_pop_scope(cnnb_graph *g) {
  if (!g) return;
  if (g->num_scopes == 0) {
    cnnb_graph_fail(g, CNNB_EINVAL, "graph: pop_scope without a matching push_scope");
    return;
  }
  free(g->scopes[--g->num_scopes]);
}

/* The current scope prefix followed by `leaf`; false when it does not fit. */
static bool scoped_name(const cnnb_graph *g, const char *leaf, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int32_t i = 0; i < g->num_scopes; i++) {
    if (!g->scopes[i][0]) continue;
    int n = snprintf(out + len, size - len, "%s/", g->scopes[i]);
    if (n < 0 || (size_t)n >= size - len) return false;
    len += (size_t)n;
  }
  int n = snprintf(out + len, size - len, "%s", leaf);
  return n >= 0 && (size_t)n < size - len;
}

int32_t cnnb_graph_find_node(const cnnb_graph *g, const char *name) {
  if (!g || !name) return -1;
  for (int32_t i = 0; i < g->num_nodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0) return i;
  return -1;
}

int32_t cnnb_graph_find_param(const cnnb_graph *g, const char *name) {
  if (!g || !name) return -1;
  for (int32_t i = 0; i < g->num_params; i++)
    if (strcmp(g->params[i]->name, name) == 0) return i;
  return -1;
}

bool cnnb_graph_start(cnnb_node_start *s, cnnb_graph *g, uint32_t op, const char *auto_base,
                      const char *name, int32_t num_inputs, const cnnb_tensor *inputs,
                      bool by_host) {
  s->g = g;
  s->op = op;
  s->name[0] = '\0';
  if (!g) return false;
  /* After the first error nothing is added; calls fed CNNB_NO_TENSOR land here too. */
  if (g->status != CNNB_OK) return false;

  if (name && name[0]) {
    if (!scoped_name(g, name, s->name, sizeof s->name)) {
      snprintf(s->name, sizeof s->name, "%.64s...", name);
      cnnb_graph_reject(s, CNNB_EINVAL, "full name longer than %d characters",
                        CNNB_GRAPH_NAME_MAX - 1);
      return false;
    }
    int32_t other = cnnb_graph_find_node(g, s->name);
    if (other >= 0) {
      cnnb_graph_reject(s, CNNB_EINVAL, "name already used by node %d (%s)", other,
                        cnnb_op_name(g->nodes[other]->node.op));
      return false;
    }
  } else {
    /* TF layers' habit: "conv2d", then "conv2d_1", "conv2d_2", ... within the scope. */
    char leaf[96];
    for (int32_t k = 0;; k++) {
      if (k == 0) snprintf(leaf, sizeof leaf, "%s", auto_base);
      else snprintf(leaf, sizeof leaf, "%s_%d", auto_base, (int)k);
      if (!scoped_name(g, leaf, s->name, sizeof s->name)) {
        snprintf(s->name, sizeof s->name, "%s", leaf);
        cnnb_graph_reject(s, CNNB_EINVAL, "scope prefix longer than %d characters",
                          CNNB_GRAPH_NAME_MAX - 1);
        return false;
      }
      if (cnnb_graph_find_node(g, s->name) < 0) break;
    }
  }

  if (num_inputs > 0 && !inputs) {
    cnnb_graph_reject(s, CNNB_EINVAL, "inputs array is NULL");
    return false;
  }
  for (int32_t i = 0; i < num_inputs; i++) {
    cnnb_tensor t = inputs[i];
    if (t == CNNB_NO_TENSOR) {
      /* Only reachable with no earlier error: the caller passed NO_TENSOR by itself. */
      cnnb_graph_reject(s, CNNB_EINVAL, "input %d is CNNB_NO_TENSOR", (int)i);
      return false;
    }
    if (t < 0 || t >= g->num_nodes) {
      cnnb_graph_reject(s, CNNB_EINVAL,
                        "input %d is tensor %d, which does not exist (graph has %d nodes)", (int)i,
                        (int)t, (int)g->num_nodes);
      return false;
    }
    const cnnb_op_row *src = cnnb_op_row_of(g->nodes[t]->node.op);
    if (src && src->hidden && !by_host) {
      cnnb_graph_reject(s, CNNB_EINVAL, "input %d is the %s node '%s', which no layer may read",
                        (int)i, cnnb_op_name(g->nodes[t]->node.op), g->nodes[t]->name);
      return false;
    }
  }
  return true;
}

cnnb_tensor cnnb_graph_finish(cnnb_node_start *s, const cnnb_node *proto, int32_t num_inputs,
                              const cnnb_tensor *inputs) {
  cnnb_graph *g = s->g;
  if (!grow((void **)&g->nodes, &g->cap_nodes, g->num_nodes + 1, sizeof(cnnb_node_rec *)))
    return oom(g, "a node");
  cnnb_node_rec *rec = calloc(1, sizeof *rec);
  if (!rec) return oom(g, "a node");
  rec->name = dup_string(s->name);
  rec->inputs = num_inputs > 0 ? malloc((size_t)num_inputs * sizeof(cnnb_tensor)) : NULL;
  if (!rec->name || (num_inputs > 0 && !rec->inputs)) {
    free(rec->name);
    free(rec->inputs);
    free(rec);
    return oom(g, "a node");
  }
  cnnb_tensor t = g->num_nodes;
  /* Reserve every consumer slot first, so a failure leaves no half-linked node. */
  for (int32_t i = 0; i < num_inputs; i++) {
    cnnb_node_rec *src = g->nodes[inputs[i]];
    if (!grow((void **)&src->consumers, &src->cap_consumers, src->num_consumers + num_inputs,
              sizeof(int32_t))) {
      free(rec->name);
      free(rec->inputs);
      free(rec);
      return oom(g, "a node");
    }
  }
  for (int32_t i = 0; i < num_inputs; i++) {
    rec->inputs[i] = inputs[i];
    cnnb_node_rec *src = g->nodes[inputs[i]];
    src->consumers[src->num_consumers++] = t;
  }
  rec->node = *proto;
  rec->node.struct_size = (uint32_t)sizeof(cnnb_node);
  rec->node.op = s->op;
  rec->node.name = rec->name;
  rec->node.num_inputs = num_inputs;
  rec->node.inputs = rec->inputs;
  rec->node.num_params = 0;
  rec->node.num_stats = 0;
  rec->node.params[0] = rec->node.params[1] = -1;
  rec->node.stats[0] = rec->node.stats[1] = -1;
  g->nodes[g->num_nodes++] = rec;
  return t;
}

/* Where the next param starts in an arena that holds `used` elements: on the next
 * CNNB_PARAM_ALIGN boundary (graph.h says why). */
static int64_t aligned_offset(int64_t used) {
  return (used + CNNB_PARAM_ALIGN - 1) / CNNB_PARAM_ALIGN * CNNB_PARAM_ALIGN;
}

bool cnnb_graph_add_param(cnnb_graph *g, cnnb_tensor t, const cnnb_op_param *p) {
  const char *suffix = p->suffix;
  const int32_t is_stat = p->is_stat, ndims = p->ndims;
  const int32_t *dims = p->dims;
  cnnb_node_rec *node = g->nodes[t];
  if (!grow((void **)&g->params, &g->cap_params, g->num_params + 1, sizeof(cnnb_param_rec *))) {
    oom(g, "a parameter");
    return false;
  }
  cnnb_param_rec *rec = calloc(1, sizeof *rec);
  size_t len = strlen(node->name) + 1 + strlen(suffix) + 1;
  char *name = malloc(len);
  if (!rec || !name) {
    free(rec);
    free(name);
    oom(g, "a parameter");
    return false;
  }
  snprintf(name, len, "%s/%s", node->name, suffix);
  int64_t count = 1;
  for (int32_t i = 0; i < ndims; i++) count *= dims[i];
  int32_t index = g->num_params;
  rec->name = name;
  rec->torch_suffix = p->torch_suffix;
  rec->param = (cnnb_param){
      .struct_size = (uint32_t)sizeof(cnnb_param),
      .flags = p->flags,
      .name = name,
      .ndims = ndims,
      .count = count,
      .offset = aligned_offset(is_stat ? g->stat_count : g->param_count),
      .node = t,
      .is_stat = is_stat,
      .init = p->init,
  };
  for (int32_t i = 0; i < ndims && i < 4; i++) rec->param.dims[i] = dims[i];
  if (is_stat) {
    g->stat_count = rec->param.offset + count;
    node->node.stats[node->node.num_stats++] = index;
  } else {
    g->param_count = rec->param.offset + count;
    node->node.params[node->node.num_params++] = index;
  }
  g->params[g->num_params++] = rec;
  return true;
}

/* ---- checkpoint names ---------------------------------------------------------------- */

/* The key a param is saved under: its torch key once its node has a checkpoint name. */
static const char *param_key(const cnnb_param_rec *p) { return p->key ? p->key : p->name; }

/* Frees the keys of node n's params (a failed naming leaves none half-set). */
static void drop_keys(cnnb_graph *g, const cnnb_node *n) {
  for (int32_t i = 0; i < n->num_params + n->num_stats; i++) {
    cnnb_param_rec *p = g->params[i < n->num_params ? n->params[i] : n->stats[i - n->num_params]];
    free(p->key);
    p->key = NULL;
  }
}

cnnb_status cnnb_graph_set_checkpoint_name(cnnb_graph *g, cnnb_tensor x, const char *prefix) {
  if (!g) return CNNB_EINVAL;
  if (g->status != CNNB_OK) return g->status;
  if (x < 0 || x >= g->num_nodes)
    return cnnb_graph_fail(
        g, CNNB_EINVAL, "set_checkpoint_name: tensor %d does not exist (graph has %d nodes)%s%s%s",
        (int)x, (int)g->num_nodes, prefix ? ", prefix '" : "", prefix ? prefix : "",
        prefix ? "'" : "");
  cnnb_node_rec *rec = g->nodes[x];
  const cnnb_node *n = &rec->node;
  const char *what = cnnb_op_name(n->op);
  if (!prefix || !prefix[0])
    return cnnb_graph_fail(g, CNNB_EINVAL, "set_checkpoint_name: %s '%s': the prefix is %s", what,
                           rec->name, prefix ? "empty" : "NULL");
  if (n->num_params + n->num_stats == 0)
    return cnnb_graph_fail(g, CNNB_EINVAL,
                           "set_checkpoint_name: %s '%s' owns no parameters, so prefix '%s' "
                           "would name nothing",
                           what, rec->name, prefix);
  if (rec->checkpoint_name)
    return cnnb_graph_fail(g, CNNB_EINVAL,
                           "set_checkpoint_name: %s '%s' already has checkpoint name '%s' "
                           "(asked for '%s')",
                           what, rec->name, rec->checkpoint_name, prefix);
  for (int32_t i = 0; i < g->num_nodes; i++)
    if (g->nodes[i]->checkpoint_name && strcmp(g->nodes[i]->checkpoint_name, prefix) == 0)
      return cnnb_graph_fail(g, CNNB_EINVAL,
                             "set_checkpoint_name: %s '%s': prefix '%s' is already the "
                             "checkpoint name of %s '%s'",
                             what, rec->name, prefix, cnnb_op_name(g->nodes[i]->node.op),
                             g->nodes[i]->name);

  char *copy = dup_string(prefix);
  if (!copy) return cnnb_graph_fail(g, CNNB_ENOMEM, "graph: out of memory naming '%s'", rec->name);
  for (int32_t i = 0; i < n->num_params + n->num_stats; i++) {
    int32_t index = i < n->num_params ? n->params[i] : n->stats[i - n->num_params];
    cnnb_param_rec *p = g->params[index];
    if (!p->torch_suffix) {
      drop_keys(g, n);
      free(copy);
      return cnnb_graph_fail(g, CNNB_EINTERNAL,
                             "set_checkpoint_name: %s '%s': param '%s' has no torch suffix in "
                             "the op table",
                             what, rec->name, p->name);
    }
    size_t len = strlen(prefix) + 1 + strlen(p->torch_suffix) + 1;
    p->key = malloc(len);
    if (!p->key) {
      drop_keys(g, n);
      free(copy);
      return cnnb_graph_fail(g, CNNB_ENOMEM, "graph: out of memory naming '%s'", rec->name);
    }
    /* Unique prefixes make unique keys: a torch suffix has no '.', so a key splits
     * back into one prefix and one suffix; and no key equals a param's own name, which
     * ends in "/<suffix>". */
    snprintf(p->key, len, "%s.%s", prefix, p->torch_suffix);
  }
  rec->checkpoint_name = copy;
  return CNNB_OK;
}

const char *cnnb_graph_param_key(const cnnb_graph *g, int32_t index) {
  if (!g || index < 0 || index >= g->num_params) return NULL;
  return param_key(g->params[index]);
}

const char *cnnb_graph_node_checkpoint_name(const cnnb_graph *g, int32_t node) {
  if (!g || node < 0 || node >= g->num_nodes) return NULL;
  return g->nodes[node]->checkpoint_name;
}

/* ---- the whole graph ------------------------------------------------------------------ */

cnnb_tensor cnnb_graph_input(cnnb_graph *g) { return g && g->num_nodes > 0 ? 0 : CNNB_NO_TENSOR; }

int32_t cnnb_graph_num_classes(const cnnb_graph *g) { return g ? g->num_classes : 0; }

cnnb_status cnnb_graph_set_logits(cnnb_graph *g, cnnb_tensor logits) {
  if (!g) return CNNB_EINVAL;
  if (g->status != CNNB_OK) return g->status;
  if (logits == CNNB_NO_TENSOR || logits < 0 || logits >= g->num_nodes)
    return cnnb_graph_fail(g, CNNB_EINVAL, "set_logits: tensor %d does not exist", (int)logits);
  if (g->logits != CNNB_NO_TENSOR)
    return cnnb_graph_fail(g, CNNB_EINVAL, "set_logits: logits already set to '%s'",
                           g->nodes[g->logits]->name);
  const cnnb_node *n = &g->nodes[logits]->node;
  if (n->shape.n != g->batch || n->shape.c != g->num_classes || n->shape.h != 1 || n->shape.w != 1)
    return cnnb_graph_fail(g, CNNB_EINVAL,
                           "set_logits: %s '%s' is [%d, %d, %d, %d], logits must be [%d, %d, 1, 1] "
                           "(batch, num_classes)",
                           cnnb_op_name(n->op), n->name, n->shape.n, n->shape.c, n->shape.h,
                           n->shape.w, g->batch, g->num_classes);
  g->logits = logits;
  return CNNB_OK;
}

cnnb_status cnnb_graph_set_fused_relu(cnnb_graph *g, int32_t index, int32_t fused) {
  if (!g || index < 0 || index >= g->num_nodes) return CNNB_EINVAL;
  cnnb_node *n = &g->nodes[index]->node;
  const cnnb_op_row *row = cnnb_op_row_of(n->op);
  if (!row || !row->fuse_relu) return CNNB_EINVAL;
  n->fused_relu = fused ? 1 : 0;
  return CNNB_OK;
}

/* ---- reading --------------------------------------------------------------------------- */

int32_t cnnb_graph_num_nodes(const cnnb_graph *g) { return g ? g->num_nodes : 0; }

const cnnb_node *cnnb_graph_node(const cnnb_graph *g, int32_t index) {
  if (!g || index < 0 || index >= g->num_nodes) return NULL;
  return &g->nodes[index]->node;
}

int32_t cnnb_graph_num_params(const cnnb_graph *g) { return g ? g->num_params : 0; }

const cnnb_param *cnnb_graph_param(const cnnb_graph *g, int32_t index) {
  if (!g || index < 0 || index >= g->num_params) return NULL;
  return &g->params[index]->param;
}

int64_t cnnb_graph_param_arena_count(const cnnb_graph *g) { return g ? g->param_count : 0; }

int64_t cnnb_graph_stat_arena_count(const cnnb_graph *g) { return g ? g->stat_count : 0; }

int64_t cnnb_graph_values_count(const cnnb_graph *g, bool stats) {
  int64_t total = 0;
  for (int32_t i = 0; g && i < g->num_params; i++)
    if ((g->params[i]->param.is_stat != 0) == stats) total += g->params[i]->param.count;
  return total;
}

int64_t cnnb_graph_trainable_count(const cnnb_graph *g) {
  return cnnb_graph_values_count(g, false);
}

cnnb_tensor cnnb_graph_logits(const cnnb_graph *g) { return g ? g->logits : CNNB_NO_TENSOR; }

cnnb_tensor cnnb_graph_labels(const cnnb_graph *g) { return g ? g->labels : CNNB_NO_TENSOR; }

cnnb_tensor cnnb_graph_loss(const cnnb_graph *g) { return g ? g->loss : CNNB_NO_TENSOR; }

cnnb_shape cnnb_graph_tensor_shape(const cnnb_graph *g, cnnb_tensor t) {
  if (!g || t < 0 || t >= g->num_nodes) return (cnnb_shape){0, 0, 0, 0};
  return g->nodes[t]->node.shape;
}

const int32_t *cnnb_graph_consumers(const cnnb_graph *g, cnnb_tensor t, int32_t *count) {
  if (!g || t < 0 || t >= g->num_nodes || g->nodes[t]->num_consumers == 0) {
    if (count) *count = 0;
    return NULL;
  }
  if (count) *count = g->nodes[t]->num_consumers;
  return g->nodes[t]->consumers;
}
