/* checkpoint_tensors.c — a graph's state as named tensors, and back (checkpoint_tensors.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "store/checkpoint_tensors.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cnnb/optimizer.h>

#include "graph/graph_internal.h"

#define OPTIMIZER_PREFIX "optimizer."

/* PyTorch's state name of optimizer slot 1 or 2 under `rule`; NULL when it has none. */
const char *cnnb_ckpt_slot_name(uint32_t rule, int slot) {
  switch (rule) {
    case CNNB_OPT_MOMENTUM: return slot == 1 ? "momentum_buffer" : NULL;
    case CNNB_OPT_RMSPROP: return slot == 1 ? "square_avg" : "momentum_buffer";
    case CNNB_OPT_ADAM: return slot == 1 ? "exp_avg" : "exp_avg_sq";
    default: return NULL;
  }
}

/* ---- the tensors of one checkpoint --------------------------------------------------- */

void cnnb_ckpt_tensors_free(cnnb_ckpt_tensors *l) {
  for (size_t i = 0; i < l->count; i++) free(l->owned[i]);
  free(l->items);
  free(l->owned);
  memset(l, 0, sizeof *l);
}

/* Appends a tensor named `name` (copied when `copy`) over `data`. */
static bool list_add(cnnb_ckpt_tensors *l, const char *name, bool copy, uint32_t dtype,
                     int32_t ndims, const int64_t *dims, const void *data) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    cnnb_st_tensor *items = realloc(l->items, cap * sizeof *items);
    if (!items) return false;
    l->items = items;
    char **owned = realloc(l->owned, cap * sizeof *owned);
    if (!owned) return false;
    l->owned = owned;
    l->cap = cap;
  }
  char *own = copy ? strdup(name) : NULL;
  if (copy && !own) return false;
  cnnb_st_tensor *t = &l->items[l->count];
  memset(t, 0, sizeof *t);
  t->name = copy ? own : name;
  t->dtype = dtype;
  t->ndims = ndims;
  size_t elements = 1;
  for (int32_t d = 0; d < ndims; d++) {
    t->dims[d] = dims[d];
    elements *= (size_t)dims[d];
  }
  t->data = data;
  t->bytes = elements * cnnb_st_dtype_size(dtype);
  l->owned[l->count++] = own;
  return true;
}

static void param_dims(const cnnb_param *p, int64_t dims[4]) {
  for (int32_t d = 0; d < p->ndims && d < 4; d++) dims[d] = p->dims[d];
}

/* The model's tensors (parameters, statistics, torchvision's extras) into l. */
bool cnnb_ckpt_add_model(cnnb_ckpt_tensors *l, const cnnb_graph *g, const cnnb_ckpt_arenas *h) {
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    int64_t dims[4];
    param_dims(p, dims);
    const float *base = p->is_stat ? h->stats : h->params;
    if (!list_add(l, cnnb_graph_param_key(g, i), false, CNNB_ST_F32, p->ndims, dims,
                  base + p->offset))
      return false;
  }
  char key[512];
  for (int32_t n = 0; n < cnnb_graph_num_nodes(g); n++) {
    const cnnb_node *node = cnnb_graph_node(g, n);
    const char *prefix = cnnb_graph_node_checkpoint_name(g, n);
    if (!prefix || node->op != CNNB_OP_BATCH_NORM) continue;
    snprintf(key, sizeof key, "%s.num_batches_tracked", prefix);
    if (!list_add(l, key, true, CNNB_ST_I64, 0, NULL, &h->step)) return false;
    if (node->attr.batch_norm.scale) continue;
    int64_t c = node->shape.c;
    snprintf(key, sizeof key, "%s.weight", prefix);
    if (!list_add(l, key, true, CNNB_ST_F32, 1, &c, h->ones)) return false;
  }
  return true;
}

bool cnnb_ckpt_add_slots(cnnb_ckpt_tensors *l, const cnnb_graph *g, uint32_t rule,
                         const cnnb_ckpt_arenas *h) {
  char key[512];
  for (int slot = 1; slot <= 2; slot++) {
    const char *name = cnnb_ckpt_slot_name(rule, slot);
    if (!name || !h->slot[slot - 1]) continue;
    for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
      const cnnb_param *p = cnnb_graph_param(g, i);
      if (p->is_stat) continue;
      int64_t dims[4];
      param_dims(p, dims);
      snprintf(key, sizeof key, OPTIMIZER_PREFIX "%s.%s", name, cnnb_graph_param_key(g, i));
      if (!list_add(l, key, true, CNNB_ST_F32, p->ndims, dims, h->slot[slot - 1] + p->offset))
        return false;
    }
  }
  return true;
}

static void shape_text(int32_t ndims, const int64_t *dims, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < ndims && len < size; d++)
    len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64, d ? ", " : "", dims[d]);
  if (len < size) snprintf(buf + len, size - len, "]");
}

/* Whether `name` is one of torchvision's batch-norm extras that the graph does not hold:
 * "<prefix>.num_batches_tracked", or "<prefix>.weight" of a batch norm without a scale
 * (then *scale_less is that node). */
static bool torchvision_extra(const cnnb_graph *g, const char *name, int32_t *scale_less) {
  *scale_less = -1;
  const char *dot = strrchr(name, '.');
  if (!dot) return false;
  size_t prefix_len = (size_t)(dot - name);
  for (int32_t n = 0; n < cnnb_graph_num_nodes(g); n++) {
    const char *prefix = cnnb_graph_node_checkpoint_name(g, n);
    const cnnb_node *node = cnnb_graph_node(g, n);
    if (!prefix || node->op != CNNB_OP_BATCH_NORM || strlen(prefix) != prefix_len ||
        strncmp(prefix, name, prefix_len) != 0)
      continue;
    if (strcmp(dot, ".num_batches_tracked") == 0) return true;
    if (strcmp(dot, ".weight") == 0 && !node->attr.batch_norm.scale) {
      *scale_less = n;
      return true;
    }
  }
  return false;
}

/* Every tensor of f is a parameter, a statistic, an optimizer slot or torchvision's extra
 * (a scale-less batch norm's weight then all ones): anything else means another model. */
static cnnb_status check_no_stranger(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                     const cnnb_graph *g) {
  for (size_t i = 0; i < cnnb_safetensors_count(f); i++) {
    const cnnb_st_tensor *t = cnnb_safetensors_tensor(f, i);
    if (strncmp(t->name, OPTIMIZER_PREFIX, strlen(OPTIMIZER_PREFIX)) == 0) continue;
    bool known = false;
    for (int32_t p = 0; p < cnnb_graph_num_params(g) && !known; p++)
      known = strcmp(cnnb_graph_param_key(g, p), t->name) == 0;
    if (known) continue;
    int32_t scale_less;
    if (!torchvision_extra(g, t->name, &scale_less))
      return cnnb_error(ctx, CNNB_EINVAL,
                        "checkpoint %s: tensor '%s' is no parameter of this "
                        "model (a checkpoint of another model?)",
                        path, t->name);
    if (scale_less < 0) continue;
    const float *w = t->data;
    size_t n = t->dtype == CNNB_ST_F32 ? t->bytes / sizeof(float) : 0;
    if (t->dtype != CNNB_ST_F32 || (int64_t)n != cnnb_graph_node(g, scale_less)->shape.c)
      return cnnb_error(ctx, CNNB_EINVAL, "checkpoint %s: '%s' is not %d F32 values", path, t->name,
                        (int)cnnb_graph_node(g, scale_less)->shape.c);
    for (size_t k = 0; k < n; k++) {
      float v;
      memcpy(&v, w + k, sizeof v);
      if (v != 1.0f)
        return cnnb_error(ctx, CNNB_EINVAL,
                          "checkpoint %s: '%s' holds a learned batch-norm "
                          "scale (element %zu is %g), but this model's batch norm '%s' learns none",
                          path, t->name, k, (double)v, cnnb_graph_node(g, scale_less)->name);
    }
  }
  return CNNB_OK;
}

/* Every value of F32 tensor t finite: a NaN or an infinity in a weight is a corrupt file
 * (or one saved after training diverged), and training from it would only say "diverged"
 * and blame the learning rate. */
static cnnb_status check_finite(cnnb_ctx *ctx, const char *path, const cnnb_st_tensor *t) {
  size_t n = t->bytes / sizeof(float), bad = 0, first = 0;
  float first_value = 0;
  const unsigned char *p = t->data;
  for (size_t i = 0; i < n; i++) {
    float v;
    memcpy(&v, p + i * sizeof v, sizeof v); /* the format does not promise alignment */
    if (isfinite(v)) continue;
    if (!bad++) {
      first = i;
      first_value = v;
    }
  }
  if (!bad) return CNNB_OK;
  return cnnb_error(ctx, CNNB_EDATA,
                    "checkpoint %s: tensor '%s' holds %zu value(s) that are not finite (the "
                    "first, element %zu of %zu, is %g): a corrupt file, or one saved after "
                    "training diverged; resume from an older checkpoint (move this one away)",
                    path, t->name, bad, first, n, (double)first_value);
}

/* The F32 tensor `name` with the shape of p, or an error naming both. */
cnnb_status cnnb_ckpt_find_like(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                const char *name, const cnnb_param *p, const cnnb_st_tensor **out) {
  const cnnb_st_tensor *t = cnnb_safetensors_find(f, name);
  *out = NULL;
  if (!t)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "checkpoint %s has no tensor '%s' (parameter %s of "
                      "this model: a checkpoint of another model?)",
                      path, name, p->name);
  int64_t dims[4];
  param_dims(p, dims);
  bool same = t->ndims == p->ndims;
  for (int32_t d = 0; same && d < p->ndims; d++) same = t->dims[d] == dims[d];
  if (!same || t->dtype != CNNB_ST_F32) {
    char have[96], want[96];
    shape_text(t->ndims, t->dims, have, sizeof have);
    shape_text(p->ndims, dims, want, sizeof want);
    return cnnb_error(ctx, CNNB_EINVAL,
                      "checkpoint %s: tensor '%s' is %s %s; this model's parameter %s is F32 %s",
                      path, name, t->dtype == CNNB_ST_F32 ? "F32" : "not F32", have, p->name, want);
  }
  cnnb_status st = check_finite(ctx, path, t);
  if (st != CNNB_OK) return st;
  *out = t;
  return CNNB_OK;
}

/* Parameters and statistics of f into host arenas (graph offsets). */
cnnb_status cnnb_ckpt_read_model(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                 const cnnb_graph *g, float *params, float *stats) {
  cnnb_status st = check_no_stranger(ctx, f, path, g);
  for (int32_t i = 0; st == CNNB_OK && i < cnnb_graph_num_params(g); i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    const cnnb_st_tensor *t;
    if ((st = cnnb_ckpt_find_like(ctx, f, path, cnnb_graph_param_key(g, i), p, &t)) != CNNB_OK)
      break;
    memcpy((p->is_stat ? stats : params) + p->offset, t->data, t->bytes);
  }
  return st;
}

cnnb_status cnnb_ckpt_read_slot(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                                const cnnb_graph *g, uint32_t rule, int slot, float *host,
                                bool *present) {
  const char *name = cnnb_ckpt_slot_name(rule, slot);
  *present = false;
  char key[512];
  int32_t found = 0, trainable = 0;
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (p->is_stat) continue;
    trainable++;
    snprintf(key, sizeof key, OPTIMIZER_PREFIX "%s.%s", name, cnnb_graph_param_key(g, i));
    if (!cnnb_safetensors_find(f, key)) continue;
    const cnnb_st_tensor *t;
    cnnb_status st = cnnb_ckpt_find_like(ctx, f, path, key, p, &t);
    if (st != CNNB_OK) return st;
    memcpy(host + p->offset, t->data, t->bytes);
    found++;
  }
  if (found > 0 && found < trainable)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "checkpoint %s holds the optimizer's %s for %d of "
                      "the %d parameters: a torn or edited file",
                      path, name, (int)found, (int)trainable);
  *present = found > 0;
  return CNNB_OK;
}
