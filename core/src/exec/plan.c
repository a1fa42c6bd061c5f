/* plan.c — the memory plan (plan.h): which buffers exist, when each is alive, and where
 * it sits in the one activation arena. Offsets come from a greedy best-fit by size over
 * lifetime intervals (as TFLite's arena planner): largest buffer first, placed in the
 * tightest gap between the buffers already placed that are alive at the same time.
 * O(buffers^2) and run once per graph, which is cheap next to one training step. */
#include "exec/plan.h"

#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/op_table.h"

static bool reads_input(uint32_t mask, int32_t k) { return (mask >> (k < 31 ? k : 31)) & 1u; }

static size_t align_up(size_t x) {
  return (x + CNNB_PLAN_ALIGN - 1) / CNNB_PLAN_ALIGN * CNNB_PLAN_ALIGN;
}

void cnnb_plan_destroy(cnnb_plan *p) {
  if (!p) return;
  free(p->buffers);
  free(p->activation);
  free(p->gradient);
  free(p->has_backward);
  free(p->slot_base);
  free(p->input_grad);
  free(p->accumulate);
  free(p->alias);
  free(p);
}

static int32_t add_buffer(cnnb_plan *p, uint32_t kind, cnnb_tensor t, int32_t first, int32_t last,
                          size_t bytes) {
  cnnb_plan_buffer *b = &p->buffers[p->num_buffers];
  *b = (cnnb_plan_buffer){.kind = kind, .tensor = t, .first = first, .last = last, .bytes = bytes};
  return p->num_buffers++;
}

/* ---- offsets: greedy best-fit by size ---------------------------------------------- */

/* qsort (C11: no user pointer) sorts these, so each entry carries its own keys. */
typedef struct sort_entry {
  size_t key;    /* bytes (placement order) or offset (gaps) */
  int32_t first; /* among equal sizes, the buffer alive first is placed first */
  int32_t index; /* the buffer; the last tie-break, so the order is total */
} sort_entry;

static int by_size_desc(const void *a, const void *b) {
  const sort_entry *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->index - y->index;
}

static int by_offset(const void *a, const void *b) {
  const sort_entry *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->index - y->index;
}

static cnnb_status assign_offsets(cnnb_ctx *ctx, cnnb_plan *p) {
  int32_t nb = p->num_buffers;
  sort_entry *order = malloc(sizeof *order * (size_t)(nb ? nb : 1));
  int32_t *placed = malloc(sizeof *placed * (size_t)(nb ? nb : 1));
  sort_entry *live = malloc(sizeof *live * (size_t)(nb ? nb : 1));
  if (!order || !placed || !live) {
    free(order);
    free(placed);
    free(live);
    return cnnb_error(ctx, CNNB_ENOMEM, "memory plan: out of memory");
  }
  for (int32_t i = 0; i < nb; ++i)
    order[i] = (sort_entry){.key = p->buffers[i].bytes, .first = p->buffers[i].first, .index = i};
  qsort(order, (size_t)nb, sizeof *order, by_size_desc);
  int32_t num_placed = 0;
  size_t arena = 0;
  for (int32_t i = 0; i < nb; ++i) {
    cnnb_plan_buffer *b = &p->buffers[order[i].index];
    int32_t num_live = 0;
    for (int32_t j = 0; j < num_placed; ++j) {
      const cnnb_plan_buffer *o = &p->buffers[placed[j]];
      if (o->first <= b->last && b->first <= o->last)
        live[num_live++] = (sort_entry){.key = o->offset, .index = placed[j]};
    }
    qsort(live, (size_t)num_live, sizeof *live, by_offset);
    size_t need = align_up(b->bytes), cursor = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (int32_t j = 0; j < num_live; ++j) {
      const cnnb_plan_buffer *o = &p->buffers[live[j].index];
      if (o->offset > cursor) {
        size_t gap = o->offset - cursor;
        if (gap >= need && gap < best_gap) {
          best_gap = gap;
          best = cursor;
        }
      }
      size_t end = o->offset + align_up(o->bytes);
      if (end > cursor) cursor = end;
    }
    b->offset = best != SIZE_MAX ? best : cursor;
    if (b->offset + need > arena) arena = b->offset + need;
    placed[num_placed++] = order[i].index;
  }
  p->arena_bytes = arena;
  free(order);
  free(placed);
  free(live);
  return CNNB_OK;
}

/* ---- ReLU fusion -------------------------------------------------------------------- */

int32_t cnnb_plan_fuse_relus(cnnb_graph *g, uint32_t ops) {
  int32_t fused = 0;
  cnnb_tensor logits = cnnb_graph_logits(g);
  for (int32_t r = 0; r < cnnb_graph_num_nodes(g); ++r) {
    const cnnb_node *relu = cnnb_graph_node(g, r);
    /* Plain ReLU only: fused_relu means max(x, 0), and a relu6's bound has no place in
     * the node (nor in oneDNN's fused batch-norm ReLU). */
    if (relu->op != CNNB_OP_RELU) continue;
    cnnb_tensor b = relu->inputs[0];
    const cnnb_node *prod = cnnb_graph_node(g, b);
    const cnnb_op_row *row = cnnb_op_row_of(prod->op);
    int32_t count = 0;
    cnnb_graph_consumers(g, b, &count);
    /* Fusing changes what every reader of b sees, so only b's sole reader may be the
     * ReLU; the logits stay as the model wrote them. */
    bool fusable = row && row->fuse_relu && prod->op < 32 && (ops & CNNB_FUSE_OP(prod->op));
    if (!fusable || prod->fused_relu || count != 1 || b == logits) continue;
    if (cnnb_graph_set_fused_relu(g, b, 1) == CNNB_OK) fused++;
  }
  return fused;
}

/* A ReLU whose input (through earlier aliases) already ends in a ReLU is the identity:
 * relu(relu(x)) = relu(x), and its mask is the producer's. Share the producer's buffers. */
static void find_aliases(const cnnb_graph *g, cnnb_plan *p) {
  for (int32_t i = 0; i < p->num_nodes; ++i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    p->alias[i] = -1;
    if (node->op != CNNB_OP_RELU || node->num_inputs != 1) continue;
    cnnb_tensor b = cnnb_plan_resolve(p, node->inputs[0]);
    if (cnnb_graph_node(g, b)->fused_relu) p->alias[i] = b;
  }
}

/* Every (reader, input slot) of each resolved tensor, readers in increasing order: the
 * graph's consumer lists, with aliases looked through and alias nodes left out. */
typedef struct uses {
  int32_t *start; /* [n + 1] */
  int32_t *node;  /* [slots] */
  int32_t *slot;  /* [slots] input index within the reader */
} uses;

static bool make_uses(const cnnb_graph *g, const cnnb_plan *p, uses *u) {
  int32_t n = p->num_nodes, slots = p->slot_base[n];
  u->start = calloc((size_t)n + 1, sizeof *u->start);
  u->node = calloc((size_t)(slots ? slots : 1), sizeof *u->node);
  u->slot = calloc((size_t)(slots ? slots : 1), sizeof *u->slot);
  int32_t *fill = calloc((size_t)n + 1, sizeof *fill);
  if (!u->start || !u->node || !u->slot || !fill) {
    free(fill);
    return false;
  }
  for (int32_t c = 0; c < n; ++c) {
    const cnnb_node *cn = cnnb_graph_node(g, c);
    if (p->alias[c] >= 0) continue;
    for (int32_t k = 0; k < cn->num_inputs; ++k)
      u->start[cnnb_plan_resolve(p, cn->inputs[k]) + 1]++;
  }
  for (int32_t t = 0; t < n; ++t) u->start[t + 1] += u->start[t];
  for (int32_t c = 0; c < n; ++c) {
    const cnnb_node *cn = cnnb_graph_node(g, c);
    if (p->alias[c] >= 0) continue;
    for (int32_t k = 0; k < cn->num_inputs; ++k) {
      cnnb_tensor t = cnnb_plan_resolve(p, cn->inputs[k]);
      int32_t at = u->start[t] + fill[t]++;
      u->node[at] = c;
      u->slot[at] = k;
    }
  }
  free(fill);
  return true;
}

static void free_uses(uses *u) {
  free(u->start);
  free(u->node);
  free(u->slot);
}

/* ---- which nodes run backward ----------------------------------------------------- */

typedef struct marks {
  bool *upstream; /* a trainable parameter at or above this node */
  bool *reaches;  /* this node's output flows into the loss */
  bool *needs_grad;
} marks;

static void mark(const cnnb_graph *g, cnnb_plan *p, cnnb_tensor loss, marks *m) {
  int32_t n = p->num_nodes;
  for (int32_t i = 0; i < n; ++i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    m->upstream[i] = node->num_params > 0;
    for (int32_t k = 0; k < node->num_inputs; ++k)
      m->upstream[i] = m->upstream[i] || m->upstream[node->inputs[k]];
  }
  if (loss != CNNB_NO_TENSOR) m->reaches[loss] = true;
  for (int32_t i = n - 1; i >= 0; --i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    if (!m->reaches[i]) continue;
    for (int32_t k = 0; k < node->num_inputs; ++k) m->reaches[node->inputs[k]] = true;
  }
  for (int32_t i = 0; i < n; ++i) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    bool data = node->op != CNNB_OP_INPUT && node->op != CNNB_OP_LABELS;
    p->has_backward[i] = p->training && data && p->alias[i] < 0 && m->reaches[i] && m->upstream[i];
    m->needs_grad[i] = p->has_backward[i] && i != loss;
  }
}

/* ---- the plan ------------------------------------------------------------------------- */

static cnnb_status plan_buffers(cnnb_ctx *ctx, const cnnb_graph *g, cnnb_plan *p,
                                cnnb_plan_bytes_fn bytes_fn, void *user, const marks *m,
                                const uses *u) {
  int32_t n = p->num_nodes;
  int32_t end = p->timeline - 1;
  cnnb_tensor logits = cnnb_graph_logits(g), loss = cnnb_graph_loss(g);
  if (logits != CNNB_NO_TENSOR) logits = cnnb_plan_resolve(p, logits);
  size_t *bytes = calloc(n > 0 ? (size_t)n : 1, sizeof *bytes);
  if (!bytes) return cnnb_error(ctx, CNNB_ENOMEM, "memory plan: out of memory");
  for (int32_t t = 0; t < n; ++t) {
    const cnnb_node *node = cnnb_graph_node(g, t);
    if (p->alias[t] >= 0) continue;
    cnnb_status st = bytes_fn(user, g, t, &bytes[t]);
    if (st != CNNB_OK) {
      free(bytes);
      return cnnb_error(ctx, st, "memory plan: size of tensor '%s' (%s)", node->name,
                        cnnb_op_name(node->op));
    }
  }

  /* Activations. */
  for (int32_t t = 0; t < n; ++t) {
    if (p->alias[t] >= 0) continue;
    int32_t last = t;
    for (int32_t j = u->start[t]; j < u->start[t + 1]; ++j) {
      int32_t c = u->node[j];
      if (c > last) last = c;
      if (!p->has_backward[c]) continue;
      uint32_t mask;
      bool out;
      cnnb_op_backward_reads(cnnb_graph_node(g, c), &mask, &out);
      if (reads_input(mask, u->slot[j]) && cnnb_plan_backward_time(p, c) > last)
        last = cnnb_plan_backward_time(p, c);
    }
    if (p->has_backward[t]) {
      uint32_t mask;
      bool out;
      cnnb_op_backward_reads(cnnb_graph_node(g, t), &mask, &out);
      if (out && cnnb_plan_backward_time(p, t) > last) last = cnnb_plan_backward_time(p, t);
    }
    if (t == logits || t == loss) last = end; /* read by the host after the step */
    p->activation[t] = add_buffer(p, CNNB_BUFFER_ACTIVATION, t, t, last, bytes[t]);
  }

  /* Gradients and accumulation scratch, contributions in backward order: readers from
   * the last one down, each reader's slots in order (add(x, x) reads x twice). */
  for (int32_t t = 0; t < n; ++t) {
    p->gradient[t] = -1;
    if (p->alias[t] >= 0 || !m->needs_grad[t]) continue;
    int32_t j = u->start[t + 1] - 1;
    while (j >= u->start[t]) {
      int32_t c = u->node[j], first = j;
      while (first > u->start[t] && u->node[first - 1] == c) --first;
      if (p->has_backward[c]) {
        int32_t when = cnnb_plan_backward_time(p, c);
        for (int32_t q = first; q <= j; ++q) {
          int32_t slot = p->slot_base[c] + u->slot[q];
          if (p->gradient[t] < 0) {
            p->gradient[t] = add_buffer(p, CNNB_BUFFER_GRADIENT, t, when,
                                        cnnb_plan_backward_time(p, t), bytes[t]);
            p->input_grad[slot] = p->gradient[t];
          } else {
            p->input_grad[slot] = add_buffer(p, CNNB_BUFFER_SCRATCH, t, when, when, bytes[t]);
            p->accumulate[slot] = true;
          }
        }
      }
      j = first - 1;
    }
    if (p->gradient[t] < 0) {
      free(bytes);
      return cnnb_error(ctx, CNNB_EINTERNAL,
                        "memory plan: tensor '%s' needs a gradient but no consumer's "
                        "backward writes one",
                        cnnb_graph_node(g, t)->name);
    }
  }
  /* Aliases read and write through their producer's buffers. */
  for (int32_t t = 0; t < n; ++t) {
    if (p->alias[t] < 0) continue;
    p->activation[t] = p->activation[p->alias[t]];
    p->gradient[t] = p->gradient[p->alias[t]];
  }
  free(bytes);
  return CNNB_OK;
}

/* Sum of aligned sizes alive at each moment, maximised: a difference array over the
 * timeline keeps it linear in buffers plus steps. */
static size_t live_peak(const cnnb_plan *p) {
  int64_t *delta = calloc((size_t)p->timeline + 1, sizeof *delta);
  if (!delta) return 0;
  for (int32_t b = 0; b < p->num_buffers; ++b) {
    delta[p->buffers[b].first] += (int64_t)align_up(p->buffers[b].bytes);
    delta[p->buffers[b].last + 1] -= (int64_t)align_up(p->buffers[b].bytes);
  }
  int64_t live = 0, peak = 0;
  for (int32_t t = 0; t < p->timeline; ++t) {
    live += delta[t];
    if (live > peak) peak = live;
  }
  free(delta);
  return (size_t)peak;
}

/* Greedy placement is a heuristic: on a smaller problem it can land on a worse layout.
 * Every forward-only lifetime lies inside the same activation's training lifetime, so
 * the training plan's activation offsets are valid here too; take them when tighter, so
 * a forward-only run never plans more memory than training the same graph would. */
static cnnb_status no_worse_than_training(cnnb_ctx *ctx, const cnnb_graph *g, cnnb_plan *p,
                                          cnnb_plan_bytes_fn bytes, void *user) {
  cnnb_plan *train = NULL;
  cnnb_status st = cnnb_plan_create(ctx, g, true, bytes, user, &train);
  if (st != CNNB_OK) return st;
  size_t end = 0;
  for (int32_t t = 0; t < p->num_nodes; ++t) {
    const cnnb_plan_buffer *b = &train->buffers[train->activation[t]];
    if (b->offset + align_up(b->bytes) > end) end = b->offset + align_up(b->bytes);
  }
  if (end < p->arena_bytes) {
    for (int32_t t = 0; t < p->num_nodes; ++t)
      p->buffers[p->activation[t]].offset = train->buffers[train->activation[t]].offset;
    p->arena_bytes = end;
  }
  cnnb_plan_destroy(train);
  return CNNB_OK;
}

cnnb_status cnnb_plan_create(cnnb_ctx *ctx, const cnnb_graph *g, bool training,
                             cnnb_plan_bytes_fn bytes, void *user, cnnb_plan **out) {
  *out = NULL;
  if (!g || cnnb_graph_status(g) != CNNB_OK)
    return cnnb_error(ctx, CNNB_EINVAL, "memory plan: the graph has an error: %s",
                      g ? cnnb_graph_error(g) : "no graph");
  cnnb_tensor loss = cnnb_graph_loss(g);
  if (training && loss == CNNB_NO_TENSOR)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "memory plan: training needs the loss (cnnb_graph_add_loss) first");
  int32_t n = cnnb_graph_num_nodes(g);
  cnnb_plan *p = calloc(1, sizeof *p);
  if (!p) return cnnb_error(ctx, CNNB_ENOMEM, "memory plan: out of memory");
  p->num_nodes = n;
  p->training = training;
  p->timeline = training ? 2 * n : n;
  int32_t slots = 0;
  for (int32_t i = 0; i < n; ++i) slots += cnnb_graph_node(g, i)->num_inputs;
  size_t nn = (size_t)(n ? n : 1), ns = (size_t)(slots ? slots : 1);
  p->buffers = calloc(2 * nn + ns, sizeof *p->buffers);
  p->activation = calloc(nn, sizeof *p->activation);
  p->gradient = calloc(nn, sizeof *p->gradient);
  p->has_backward = calloc(nn, sizeof *p->has_backward);
  p->slot_base = calloc(nn + 1, sizeof *p->slot_base);
  p->input_grad = calloc(ns, sizeof *p->input_grad);
  p->accumulate = calloc(ns, sizeof *p->accumulate);
  p->alias = calloc(nn, sizeof *p->alias);
  marks m = {calloc(nn, sizeof(bool)), calloc(nn, sizeof(bool)), calloc(nn, sizeof(bool))};
  uses u = {0};
  cnnb_status st = CNNB_OK;
  if (!p->buffers || !p->activation || !p->gradient || !p->has_backward || !p->slot_base ||
      !p->input_grad || !p->accumulate || !p->alias || !m.upstream || !m.reaches || !m.needs_grad) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "memory plan: out of memory");
    goto done;
  }
  for (int32_t i = 0; i < n; ++i)
    p->slot_base[i + 1] = p->slot_base[i] + cnnb_graph_node(g, i)->num_inputs;
  for (int32_t s = 0; s < slots; ++s) p->input_grad[s] = -1;
  find_aliases(g, p);
  mark(g, p, loss, &m);
  if (!make_uses(g, p, &u)) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "memory plan: out of memory");
    goto done;
  }
  st = plan_buffers(ctx, g, p, bytes, user, &m, &u);
  if (st == CNNB_OK) st = assign_offsets(ctx, p);
  if (st == CNNB_OK && !training && loss != CNNB_NO_TENSOR)
    st = no_worse_than_training(ctx, g, p, bytes, user);
  if (st == CNNB_OK) {
    for (int32_t b = 0; b < p->num_buffers; ++b) p->naive_bytes += align_up(p->buffers[b].bytes);
    p->live_bytes = live_peak(p);
  }
done:
  free_uses(&u);
  free(m.upstream);
  free(m.reaches);
  free(m.needs_grad);
  if (st != CNNB_OK) {
    cnnb_plan_destroy(p);
    return st;
  }
  *out = p;
  return CNNB_OK;
}
