/* convnet.c — tf_cnn_benchmarks' ConvNetBuilder over the SDK's graph builder (see
 * convnet.h for the defaults it keeps), plus the small table helpers every model
 * family's describe() and build() share. */
#include "convnet.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------------------ */

/* The Python builder counts per kind ("conv", "mpool", ...) and per inception module
 * name. Keys are string literals from the model files, so comparing their text (not
 * their address) is enough; the table lives in the convnet, so concurrent builds of
 * separate graphs share nothing. */
static int next_count(convnet *cn, const char *key) {
  for (int i = 0; i < CONVNET_MAX_KINDS; i++) {
    if (!cn->keys[i]) cn->keys[i] = key;
    if (strcmp(cn->keys[i], key) == 0) return cn->counts[i]++;
  }
  return 0; /* more kinds than the table holds: the builder still makes names unique */
}

static void numbered(char *out, size_t size, convnet *cn, const char *key) {
  snprintf(out, size, "%s%d", key, next_count(cn, key));
}

void convnet_push_scope(convnet *cn, const char *key) {
  char scope[48];
  numbered(scope, sizeof scope, cn, key);
  cnnb_graph_push_scope(cn->g, scope);
}

void convnet_pop_scope(convnet *cn) { cnnb_graph_pop_scope(cn->g); }

void convnet_init(convnet *cn, cnnb_graph *g) {
  memset(cn, 0, sizeof *cn);
  cn->g = g;
  cn->bn_config.struct_size = sizeof cn->bn_config; /* zeros: batch_norm()'s defaults */
}

/* ---- shapes ------------------------------------------------------------------------------ */

cnnb_shape convnet_shape(const convnet *cn, cnnb_tensor x) {
  const cnnb_node *n = x == CNNB_NO_TENSOR ? NULL : cnnb_graph_node(cn->g, x);
  return n ? n->shape : (cnnb_shape){0, 0, 0, 0};
}

int32_t convnet_channels(const convnet *cn, cnnb_tensor x) { return convnet_shape(cn, x).c; }

/* ---- layers ------------------------------------------------------------------------------ */

cnnb_tensor convnet_batch_norm(convnet *cn, cnnb_tensor x, const cnnb_batch_norm_desc *desc) {
  char name[32];
  numbered(name, sizeof name, cn, "batchnorm");
  return cnnb_batch_norm(cn->g, name, x, desc ? desc : CNNB_BATCH_NORM(.scale = 0));
}

cnnb_tensor convnet_relu(convnet *cn, cnnb_tensor x) { return cnnb_relu(cn->g, NULL, x); }

cnnb_tensor convnet_conv(convnet *cn, cnnb_tensor x, int32_t filters, int32_t kh, int32_t kw,
                         const convnet_conv_opts *opts) {
  static const convnet_conv_opts none;
  const convnet_conv_opts *o = opts ? opts : &none;
  int32_t stride = o->stride ? o->stride : 1;
  int use_bn = o->batch_norm == 0 ? cn->use_batch_norm : o->batch_norm > 0;

  cnnb_conv2d_desc d = {.struct_size = sizeof d,
                        .filters = filters,
                        .kernel_h = kh,
                        .kernel_w = kw,
                        .stride_h = stride,
                        .stride_w = stride,
                        .groups = o->groups};
  switch (o->mode) {
    case CONVNET_VALID: d.padding = CNNB_PAD_VALID; break;
    case CONVNET_SAME_RESNET:
      if (stride == 1) {
        d.padding = CNNB_PAD_SAME;
      } else {
        /* tf.pad by the kernel alone (not the input size), then VALID: the output
         * differs from SAME's for even inputs, so this stays explicit. */
        d.padding = CNNB_PAD_EXPLICIT;
        d.pad_top = (kh - 1) / 2;
        d.pad_bottom = kh - 1 - d.pad_top;
        d.pad_left = (kw - 1) / 2;
        d.pad_right = kw - 1 - d.pad_left;
      }
      break;
    default: d.padding = CNNB_PAD_SAME; break;
  }
  if (o->init.kind != CNNB_INIT_DEFAULT) d.kernel_init = o->init;
  else if (o->stddev > 0.0f) d.kernel_init = (cnnb_init){CNNB_INIT_TRUNCATED_NORMAL, o->stddev};
  /* A bias only without batch norm, and not when the caller passed bias=None. */
  d.use_bias = !use_bn && !o->no_bias;
  d.bias_init = o->bias;

  char scope[32];
  numbered(scope, sizeof scope, cn, "conv");
  cnnb_graph_push_scope(cn->g, scope);
  cnnb_tensor y = cnnb_conv2d(cn->g, "conv2d", x, &d);
  if (o->ckpt) cnnb_graph_set_checkpoint_name(cn->g, y, o->ckpt);
  if (use_bn) {
    y = convnet_batch_norm(cn, y, &cn->bn_config);
    if (o->ckpt_bn) cnnb_graph_set_checkpoint_name(cn->g, y, o->ckpt_bn);
  }
  if (!o->linear) y = cnnb_relu(cn->g, "relu", y);
  cnnb_graph_pop_scope(cn->g);
  return y;
}

static cnnb_tensor pool(convnet *cn, int max, cnnb_tensor x, int32_t kh, int32_t kw, int32_t stride,
                        int mode) {
  char name[32];
  numbered(name, sizeof name, cn, max ? "mpool" : "apool");
  if (stride == 0) stride = 2;
  cnnb_pool_desc d = {.struct_size = sizeof d,
                      .kernel_h = kh,
                      .kernel_w = kw,
                      .stride_h = stride,
                      .stride_w = stride,
                      .padding = mode == CONVNET_SAME ? CNNB_PAD_SAME : CNNB_PAD_VALID};
  return max ? cnnb_max_pool(cn->g, name, x, &d) : cnnb_avg_pool(cn->g, name, x, &d);
}

cnnb_tensor convnet_mpool(convnet *cn, cnnb_tensor x, int32_t kh, int32_t kw, int32_t stride,
                          int mode) {
  return pool(cn, 1, x, kh, kw, stride, mode);
}

cnnb_tensor convnet_apool(convnet *cn, cnnb_tensor x, int32_t kh, int32_t kw, int32_t stride,
                          int mode) {
  return pool(cn, 0, x, kh, kw, stride, mode);
}

cnnb_tensor convnet_affine(convnet *cn, cnnb_tensor x, int32_t units,
                           const convnet_affine_opts *opts) {
  static const convnet_affine_opts none;
  const convnet_affine_opts *o = opts ? opts : &none;
  cnnb_shape in = convnet_shape(cn, x);
  double k = (double)in.c * in.h * in.w;
  /* He-style factor 2 before a ReLU, 1 for the linear classifier (convnet_builder). */
  double init_factor = o->linear ? 1.0 : 2.0;
  float stddev = o->stddev > 0.0f ? o->stddev : (k > 0 ? (float)sqrt(init_factor / k) : 0.0f);

  char scope[32];
  numbered(scope, sizeof scope, cn, "affine");
  cnnb_graph_push_scope(cn->g, scope);
  cnnb_tensor y = cnnb_dense(cn->g, "xw_plus_b", x,
                             CNNB_DENSE(.units = units, .use_bias = 1,
                                        .weight_init = {CNNB_INIT_TRUNCATED_NORMAL, stddev},
                                        .bias_init = o->bias));
  if (o->ckpt) cnnb_graph_set_checkpoint_name(cn->g, y, o->ckpt);
  if (!o->linear) y = cnnb_relu(cn->g, "relu", y);
  cnnb_graph_pop_scope(cn->g);
  return y;
}

cnnb_tensor convnet_dropout(convnet *cn, cnnb_tensor x, float keep_prob) {
  char name[32];
  numbered(name, sizeof name, cn, "dropout");
  return cnnb_dropout(cn->g, name, x, keep_prob);
}

cnnb_tensor convnet_lrn(convnet *cn, cnnb_tensor x, int32_t depth_radius, float bias, float alpha,
                        float beta) {
  char name[32];
  numbered(name, sizeof name, cn, "lrn");
  return cnnb_lrn(cn->g, name, x,
                  CNNB_LRN(.depth_radius = depth_radius, .bias = bias, .alpha = alpha,
                           .beta = beta));
}

cnnb_tensor convnet_add(convnet *cn, cnnb_tensor a, cnnb_tensor b) {
  return cnnb_add(cn->g, NULL, a, b);
}

cnnb_tensor convnet_concat(convnet *cn, int32_t count, const cnnb_tensor *xs) {
  return cnnb_concat(cn->g, NULL, count, xs);
}

cnnb_tensor convnet_reshape(convnet *cn, cnnb_tensor x, int32_t units) {
  return cnnb_reshape(cn->g, NULL, x, units, 1, 1);
}

cnnb_tensor convnet_spatial_mean(convnet *cn, cnnb_tensor x) {
  char name[32];
  numbered(name, sizeof name, cn, "spatial_mean");
  return cnnb_global_avg_pool(cn->g, name, x);
}

/* ---- inception_module ------------------------------------------------------------------- */

cnnb_tensor convnet_inception_module(convnet *cn, const char *name, cnnb_tensor x, int ncols,
                                     const convnet_layer cols[][CONVNET_MAX_COL_LAYERS]) {
  return convnet_inception_module_named(cn, name, x, ncols, cols, NULL, NULL);
}

cnnb_tensor convnet_inception_module_named(convnet *cn, const char *name, cnnb_tensor x, int ncols,
                                           const convnet_layer cols[][CONVNET_MAX_COL_LAYERS],
                                           const char *ckpt,
                                           const char *const names[][CONVNET_MAX_COL_LAYERS]) {
  char scope[48];
  numbered(scope, sizeof scope, cn, name);
  if (ncols > CONVNET_MAX_COLS) ncols = CONVNET_MAX_COLS;
  cnnb_tensor outs[CONVNET_MAX_COLS][CONVNET_MAX_COL_LAYERS];
  cnnb_tensor last[CONVNET_MAX_COLS];
  cnnb_graph_push_scope(cn->g, scope);
  for (int c = 0; c < ncols; c++) {
    cnnb_tensor top = x;
    for (int l = 0; l < CONVNET_MAX_COL_LAYERS && cols[c][l].type != CONVNET_LAYER_END; l++) {
      const convnet_layer *L = &cols[c][l];
      switch (L->type) {
        case CONVNET_LAYER_CONV: {
          char conv[128], bn[128];
          const char *leaf = ckpt && names ? names[c][l] : NULL;
          if (leaf) {
            snprintf(conv, sizeof conv, "%s.%s.conv", ckpt, leaf);
            snprintf(bn, sizeof bn, "%s.%s.bn", ckpt, leaf);
          }
          top = convnet_conv(cn, top, L->filters, L->kh, L->kw,
                             CONVNET_OPTS(.stride = L->stride, .mode = L->mode,
                                          .ckpt = leaf ? conv : NULL, .ckpt_bn = leaf ? bn : NULL));
          break;
        }
        case CONVNET_LAYER_MPOOL:
          top = convnet_mpool(cn, top, L->kh, L->kw, L->stride, L->mode);
          break;
        case CONVNET_LAYER_APOOL:
          top = convnet_apool(cn, top, L->kh, L->kw, L->stride, L->mode);
          break;
        default: /* share: the previous column's layer at this depth */
          top = c > 0 ? outs[c - 1][l] : CNNB_NO_TENSOR;
          break;
      }
      outs[c][l] = top;
    }
    last[c] = top;
  }
  cnnb_tensor y = cnnb_concat(cn->g, "concat", ncols, last);
  cnnb_graph_pop_scope(cn->g);
  return y;
}

/* ---- status --------------------------------------------------------------------------------- */

cnnb_status convnet_status(convnet *cn, cnnb_ctx *ctx, const char *model) {
  cnnb_status st = cnnb_graph_status(cn->g);
  if (st != CNNB_OK) return cnnb_error(ctx, st, "model %s: %s", model, cnnb_graph_error(cn->g));
  return CNNB_OK;
}

cnnb_status convnet_finish_named(convnet *cn, cnnb_ctx *ctx, const char *model, cnnb_tensor top,
                                 const char *ckpt) {
  cnnb_tensor logits = convnet_affine(cn, top, cnnb_graph_num_classes(cn->g),
                                      CONVNET_AFFINE(.linear = 1, .ckpt = ckpt));
  if (cnnb_graph_status(cn->g) == CNNB_OK) cnnb_graph_set_logits(cn->g, logits);
  return convnet_status(cn, ctx, model);
}

cnnb_status convnet_finish(convnet *cn, cnnb_ctx *ctx, const char *model, cnnb_tensor top) {
  return convnet_finish_named(cn, ctx, model, top, NULL);
}

/* ---- model tables ------------------------------------------------------------------------ */

convnet_input convnet_input_of(uint32_t kind) {
  const cnnb_dataset_info *d = cnnb_dataset_lookup(kind);
  if (!d) return 0;
  if (d->height == 0) return CONVNET_RESIZED;
  if (d->height != d->width) return 0;
  return d->channels == 3 ? CONVNET_SMALL_COLOR : d->channels == 1 ? CONVNET_SMALL_GRAY : 0;
}

int64_t convnet_train_examples(uint32_t dataset) {
  const cnnb_dataset_info *d = cnnb_dataset_lookup(dataset);
  return d ? d->train_examples : 0;
}

const convnet_model *convnet_find(const convnet_model *models, int count, const char *name,
                                  uint32_t kind) {
  uint32_t input = convnet_input_of(kind);
  for (int i = 0; i < count && input; i++)
    if ((models[i].inputs & input) && strcmp(models[i].name, name) == 0) return &models[i];
  return NULL;
}

static cnnb_status lookup(cnnb_ctx *ctx, const char *family, const convnet_model *models, int count,
                          const char *name, uint32_t dataset, const convnet_model **out) {
  *out = NULL;
  if (!name) return cnnb_error(ctx, CNNB_EINVAL, "%s: model name is NULL", family);
  const cnnb_dataset_info *named = cnnb_dataset_lookup(dataset);
  if (!named)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: unknown dataset kind %u for model '%s'", family,
                      (unsigned)dataset, name);
  *out = convnet_find(models, count, name, dataset);
  if (*out) return CNNB_OK;
  /* Offered, but for other datasets: say which have it, as tf_cnn_benchmarks' "Invalid
   * model name for dataset" would, with the fix. */
  char others[128] = "";
  const cnnb_dataset_info *first = NULL, *d;
  size_t len = 0;
  for (uint32_t i = 0; (d = cnnb_dataset_at(i)) && len < sizeof others; i++) {
    if (d->kind == dataset || !convnet_find(models, count, name, d->kind)) continue;
    len += (size_t)snprintf(others + len, sizeof others - len, "%s%s", first ? ", " : "", d->name);
    if (!first) first = d;
  }
  if (first)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "model '%s' has no %s variant (it is defined for %s only): use "
                      "--data_name=%s or another model",
                      name, named->name, others, first->name);
  for (int i = 0; i < count; i++)
    if (strcmp(models[i].name, name) == 0)
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "model '%s' has no variant for %s's %dx%d images with %d channels", name,
                        named->name, (int)named->height, (int)named->width, (int)named->channels);
  return cnnb_error(ctx, CNNB_ENOTFOUND, "%s: model '%s' is not offered by this plugin", family,
                    name);
}

cnnb_status convnet_describe(cnnb_ctx *ctx, const char *family, const convnet_model *models,
                             int count, const char *name, uint32_t dataset, cnnb_model_info *info) {
  const convnet_model *m;
  cnnb_status st = lookup(ctx, family, models, count, name, dataset, &m);
  if (st != CNNB_OK) return st;
  if (!info)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: describe(%s) without an info struct", family, name);
  /* Fill only what the caller's struct holds (it may be an older, smaller one). */
  cnnb_model_info full = {.struct_size = sizeof full,
                          .image_size = m->image_size != CONVNET_STORED_SIZE
                                            ? m->image_size
                                            : cnnb_dataset_lookup(dataset)->height,
                          .default_batch_size = m->default_batch_size,
                          .default_learning_rate = m->default_learning_rate,
                          .description = m->description};
  size_t size = info->struct_size < sizeof full ? info->struct_size : sizeof full;
  if (size > sizeof(uint32_t))
    memcpy((char *)info + sizeof(uint32_t), (const char *)&full + sizeof(uint32_t),
           size - sizeof(uint32_t));
  return CNNB_OK;
}

const convnet_model *convnet_begin(cnnb_ctx *ctx, const char *family, const convnet_model *models,
                                   int count, const char *name, uint32_t dataset,
                                   cnnb_status *status) {
  const convnet_model *m;
  *status = lookup(ctx, family, models, count, name, dataset, &m);
  return m;
}

float convnet_piecewise(int64_t step, int n, const int64_t *boundaries, const float *values) {
  for (int i = 0; i < n; i++)
    if (step <= boundaries[i]) return values[i];
  return values[n];
}
