/* zoo.c — torchvision's building blocks (zoo.h). */
#include "zoo.h"

#include <math.h>
#include <stdio.h>

void zoo_init(zoo *z, cnnb_graph *g) {
  z->g = g;
  z->bn_eps = 1e-5f;
  z->bn_decay = 0.9f;
}

const char *zoo_key(char *buf, size_t size, const char *prefix, const char *suffix) {
  if (prefix && *prefix) snprintf(buf, size, "%s.%s", prefix, suffix);
  else snprintf(buf, size, "%s", suffix);
  return buf;
}

int32_t zoo_channels(const zoo *z, cnnb_tensor x) {
  const cnnb_node *n = cnnb_graph_node(z->g, x);
  return n ? n->shape.c : 0;
}

cnnb_tensor zoo_act_apply(zoo *z, cnnb_tensor x, zoo_act act) {
  switch (act) {
    case ZOO_RELU: return cnnb_relu(z->g, NULL, x);
    case ZOO_HARDSWISH: return cnnb_hard_swish(z->g, NULL, x);
    case ZOO_HARDSIGMOID: return cnnb_hard_sigmoid(z->g, NULL, x);
    case ZOO_SILU: return cnnb_silu(z->g, NULL, x);
    case ZOO_SIGMOID: return cnnb_sigmoid(z->g, NULL, x);
    default: return x;
  }
}

cnnb_tensor zoo_conv(zoo *z, const char *key, cnnb_tensor x, int32_t out, int32_t k, int32_t stride,
                     int32_t padding, int32_t groups, int bias, cnnb_init init) {
  if (init.kind == CNNB_INIT_DEFAULT) init = (cnnb_init){CNNB_INIT_HE_NORMAL, 0.0f};
  cnnb_tensor y =
      cnnb_conv2d(z->g, key, x,
                  CNNB_CONV2D(.filters = out, .kernel_h = k, .kernel_w = k, .stride_h = stride,
                              .stride_w = stride, .padding = CNNB_PAD_EXPLICIT, .pad_top = padding,
                              .pad_bottom = padding, .pad_left = padding, .pad_right = padding,
                              .groups = groups, .use_bias = bias, .kernel_init = init));
  cnnb_graph_set_checkpoint_name(z->g, y, key);
  return y;
}

cnnb_tensor zoo_batch_norm(zoo *z, const char *key, cnnb_tensor x) {
  cnnb_tensor y = cnnb_batch_norm(z->g, key, x,
                                  CNNB_BATCH_NORM(.epsilon = z->bn_eps, .decay = z->bn_decay,
                                                  .scale = 1));
  cnnb_graph_set_checkpoint_name(z->g, y, key);
  return y;
}

cnnb_tensor zoo_conv_norm_act(zoo *z, const char *prefix, cnnb_tensor x, int32_t out, int32_t k,
                              int32_t stride, int32_t groups, zoo_act act) {
  char key[256];
  x = zoo_conv(z, zoo_key(key, sizeof key, prefix, "0"), x, out, k, stride, (k - 1) / 2, groups, 0,
               (cnnb_init){0});
  x = zoo_batch_norm(z, zoo_key(key, sizeof key, prefix, "1"), x);
  return zoo_act_apply(z, x, act);
}

cnnb_tensor zoo_squeeze_excitation(zoo *z, const char *prefix, cnnb_tensor x, int32_t squeeze,
                                   zoo_act act, zoo_act scale_act) {
  char key[256];
  int32_t channels = zoo_channels(z, x);
  cnnb_tensor s = cnnb_global_avg_pool(z->g, NULL, x);
  s = zoo_conv(z, zoo_key(key, sizeof key, prefix, "fc1"), s, squeeze, 1, 1, 0, 1, 1,
               (cnnb_init){0});
  s = zoo_act_apply(z, s, act);
  s = zoo_conv(z, zoo_key(key, sizeof key, prefix, "fc2"), s, channels, 1, 1, 0, 1, 1,
               (cnnb_init){0});
  s = zoo_act_apply(z, s, scale_act);
  return cnnb_multiply(z->g, NULL, x, s);
}

cnnb_tensor zoo_linear(zoo *z, const char *key, cnnb_tensor x, int32_t units, cnnb_init init) {
  cnnb_tensor y = cnnb_dense(z->g, key, x,
                             CNNB_DENSE(.units = units, .use_bias = 1, .weight_init = init));
  cnnb_graph_set_checkpoint_name(z->g, y, key);
  return y;
}

int32_t zoo_make_divisible(double v, int32_t divisor) {
  int32_t rounded = (int32_t)(v + divisor / 2.0) / divisor * divisor;
  if (rounded < divisor) rounded = divisor;
  if (rounded < 0.9 * v) rounded += divisor;
  return rounded;
}

cnnb_status zoo_describe(cnnb_ctx *ctx, const char *model, uint32_t dataset, cnnb_model_info *info,
                         int32_t min_size, const zoo_recipe *recipe, const char *description) {
  const cnnb_dataset_info *facts = cnnb_dataset_lookup(dataset);
  if (!facts)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED, "%s: dataset kind %u is not one this host knows",
                      model, (unsigned)dataset);
  if (facts->height > 0 && (facts->height < min_size || facts->width < min_size))
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "%s: %s's %dx%d images are too small: its strides need at least %dx%d", model,
                      facts->name, facts->height, facts->width, min_size, min_size);
  info->image_size = facts->height > 0 ? facts->height : 224;
  info->default_batch_size = 32;
  info->default_learning_rate = recipe->learning_rate * 32 / (float)recipe->batch;
  info->description = description;
  info->optimizer = recipe->optimizer;
  info->momentum = recipe->momentum;
  info->nesterov = recipe->nesterov;
  info->weight_decay = recipe->weight_decay;
  info->label_smoothing = recipe->label_smoothing;
  info->epsilon = recipe->epsilon;
  info->recipe = recipe->text;
  return CNNB_OK;
}

cnnb_status zoo_finish(cnnb_ctx *ctx, zoo *z, cnnb_tensor logits) {
  cnnb_graph_set_logits(z->g, logits);
  if (cnnb_graph_status(z->g) != CNNB_OK)
    return cnnb_error(ctx, cnnb_graph_status(z->g), "%s", cnnb_graph_error(z->g));
  return CNNB_OK;
}

float zoo_learning_rate(const zoo_recipe *r, int64_t step, int32_t global_batch_size,
                        int64_t examples_per_epoch) {
  const double rate = (double)r->learning_rate * global_batch_size / r->batch;
  if (examples_per_epoch <= 0) return (float)rate;
  double epoch = (double)step * global_batch_size / (double)examples_per_epoch;
  if (!r->per_step) epoch = floor(epoch);
  if (epoch < r->warmup_epochs)
    return (float)(rate * (r->warmup_start + (1.0 - r->warmup_start) * epoch / r->warmup_epochs));
  const double since = epoch - r->warmup_epochs, length = r->epochs - r->warmup_epochs;
  const double pi = 3.14159265358979323846;
  switch (r->schedule) {
    /* From epoch 0, warm-up or not: TF's exponential_decay counts the global step, and
     * torchvision's recipes that step have no warm-up. */
    case ZOO_STEP: return (float)(rate * pow(r->factor, floor(epoch / r->every)));
    case ZOO_COSINE:
      return since >= length ? 0.0f : (float)(rate * 0.5 * (1.0 + cos(pi * since / length)));
    case ZOO_LINEAR: return since >= length ? 0.0f : (float)(rate * (1.0 - since / length));
    default: return (float)rate;
  }
}
