/* nasnet.c — tf_cnn_benchmarks' NASNet-A (models/tf1_only/nasnet_model.py and
 * nasnet_utils.py): `nasnet` (mobile, ImageNet 224x224; the CIFAR-10 model on cifar10,
 * 32x32) and `nasnetlarge` (ImageNet 331x331).
 *
 * As tf_cnn_benchmarks runs the source — which is not the source's own arg scopes:
 * NasnetModel.add_inference calls build_nasnet_mobile/large/cifar without
 * nasnet_*_arg_scope(), so TF-slim's own defaults hold:
 *  - every slim.conv2d and slim.separable_conv2d has a bias (zeros) and a ReLU after it
 *    (activation_fn=tf.nn.relu), Glorot-uniform weights (xavier_initializer), SAME
 *    padding unless told otherwise; a separable conv is a depthwise conv (multiplier 1,
 *    no bias, the stride) and a 1x1 pointwise conv carrying the bias;
 *  - every slim.batch_norm has an offset and no scale, decay 0.999, epsilon 0.001;
 *  - num_classes=None: the network ends at final_layer's ReLU and spatial mean, so
 *    neither the auxiliary head, nor the dense dropout, nor the source's own logits are
 *    built; tf_cnn_benchmarks adds its usual affine to num_classes on the 1056 (mobile),
 *    4032 (large) or 768 (CIFAR) features, and so does this plugin.
 * The trainable parameters come out as many as with the arg scopes (a conv's bias for
 * the batch-norm scale it lacks, one for one), which is why Keras' NASNetMobile agrees.
 *
 * The structure, hyperparameters as _mobile_imagenet_config / _large_imagenet_config /
 * _cifar_config: 12 / 18 / 18 normal cells of 44 / 168 / 32 filters, reduction cells
 * before cells num_cells/3 and 2*num_cells/3 (filters doubling at each), the ImageNet stem
 * (a 3x3/2 VALID conv of 32 * stem_multiplier, batch norm, two reduction cells at 1/4
 * and 1/2 of the filters) or the CIFAR stem (a 3x3 conv of 96 and batch norm);
 * skip_reduction_layer_input on the large model only. Each cell: the previous cell's
 * output matched to this one (factorized reduction when the size differs, a 1x1 conv when
 * the depth does), the input's ReLU, 1x1 conv and batch norm, five pairwise combinations
 * (NasNetANormalCell / NasNetAReductionCell: operations, hidden-state indices, used
 * states), the unused states concatenated.
 *
 * Drop path (the source's _apply_drop_path, keep probability 0.7 large, 0.6 CIFAR, 1.0
 * mobile) is not built: tf scales it by the cell's depth and by global_step /
 * total_training_steps (250,000 large, 937,500 CIFAR), so it is the identity at step 0
 * and drops fewer than 1 example in 800 (large; 1 in 2,300 CIFAR) through step 1,000. It
 * owns no parameters. */
#include <stdio.h>
#include <string.h>

#include "convnet.h"

static const convnet_model models[] = {
    {"nasnet", CONVNET_RESIZED, 224, 32, 0.005f, "NASNet-A mobile (4 @ 1056), 224x224"},
    {"nasnetlarge", CONVNET_RESIZED, 331, 16, 0.005f, "NASNet-A large (6 @ 4032), 331x331"},
    {"nasnet", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 32, 0.025f,
     "NASNet-A CIFAR-10 (6 @ 768), 32x32"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* The HParams of one model. */
typedef struct nasnet_config {
  double stem_multiplier;
  int num_cells;
  int num_conv_filters;
  int skip_reduction_layer_input;
  int imagenet_stem;
} nasnet_config;

static const nasnet_config mobile = {1.0, 12, 44, 0, 1};
static const nasnet_config large = {3.0, 18, 168, 1, 1};
static const nasnet_config cifar = {3.0, 18, 32, 0, 0};

/* A cell operation: separable_KxK_2, avg_pool_KxK, max_pool_KxK or none. */
enum { OP_SEPARABLE, OP_AVG_POOL, OP_MAX_POOL, OP_NONE };

typedef struct cell_op {
  int kind;
  int32_t k;
} cell_op;

#define SEP(k) \
  { OP_SEPARABLE, (k) }
#define AVGP(k) \
  { OP_AVG_POOL, (k) }
#define MAXP(k) \
  { OP_MAX_POOL, (k) }
#define IDENT \
  { OP_NONE, 0 }

/* NasNetABaseCell's operations, hidden-state indices and used states. */
typedef struct cell_def {
  cell_op ops[10];
  int hiddenstate_indices[10];
  int used_hiddenstates[7];
} cell_def;

static const cell_def normal_cell = {
    {SEP(5), SEP(3), SEP(5), SEP(3), AVGP(3), IDENT, AVGP(3), AVGP(3), SEP(3), IDENT},
    {0, 1, 1, 1, 0, 1, 1, 1, 0, 0},
    {1, 0, 0, 0, 0, 0, 0}};

static const cell_def reduction_cell = {
    {SEP(5), SEP(7), MAXP(3), SEP(7), AVGP(3), SEP(5), IDENT, AVGP(3), SEP(3), MAXP(3)},
    {0, 1, 0, 1, 0, 1, 3, 2, 2, 0},
    {1, 1, 1, 0, 0, 0, 0}};

/* The separable operations of NASNet-A are all stacks of two (separable_KxK_2). */
enum { SEPARABLE_LAYERS = 2 };

typedef struct nasnet {
  convnet cn;
  cnnb_graph *g;
  const nasnet_config *cfg;
} nasnet;

static cnnb_shape shape(const nasnet *s, cnnb_tensor x) { return convnet_shape(&s->cn, x); }

static cnnb_tensor relu(nasnet *s, cnnb_tensor x) { return cnnb_relu(s->g, NULL, x); }

/* slim.conv2d under TF-slim's defaults: a bias, then ReLU. */
static cnnb_tensor conv(nasnet *s, const char *name, cnnb_tensor x, int32_t filters, int32_t k,
                        int32_t stride, uint32_t padding) {
  cnnb_tensor y = cnnb_conv2d(s->g, name, x,
                              CNNB_CONV2D(.filters = filters, .kernel_h = k, .kernel_w = k,
                                          .stride_h = stride, .stride_w = stride,
                                          .padding = padding, .use_bias = 1,
                                          .kernel_init = {CNNB_INIT_GLOROT_UNIFORM, 0.0f}));
  return relu(s, y);
}

/* slim.batch_norm's defaults: offset only, decay 0.999, epsilon 0.001. */
static cnnb_tensor bn(nasnet *s, const char *name, cnnb_tensor x) {
  return cnnb_batch_norm(s->g, name, x, CNNB_BATCH_NORM(.decay = 0.999f, .epsilon = 0.001f));
}

/* slim.separable_conv2d(x, filters, k, depth_multiplier=1, stride), scope `name`: the
 * depthwise conv (no bias), the pointwise 1x1 with the bias, ReLU. */
static cnnb_tensor separable(nasnet *s, const char *name, cnnb_tensor x, int32_t filters, int32_t k,
                             int32_t stride) {
  const int32_t c = shape(s, x).c;
  cnnb_graph_push_scope(s->g, name);
  cnnb_tensor y = cnnb_conv2d(s->g, "depthwise", x,
                              CNNB_CONV2D(.filters = c, .kernel_h = k, .kernel_w = k,
                                          .stride_h = stride, .stride_w = stride,
                                          .padding = CNNB_PAD_SAME, .groups = c,
                                          .kernel_init = {CNNB_INIT_GLOROT_UNIFORM, 0.0f}));
  y = cnnb_conv2d(s->g, "pointwise", y,
                  CNNB_CONV2D(.filters = filters, .kernel_h = 1, .kernel_w = 1, .use_bias = 1,
                              .kernel_init = {CNNB_INIT_GLOROT_UNIFORM, 0.0f}));
  y = relu(s, y);
  cnnb_graph_pop_scope(s->g);
  return y;
}

static cnnb_tensor pool(nasnet *s, int kind, cnnb_tensor x, int32_t k, int32_t stride,
                        uint32_t padding) {
  const cnnb_pool_desc *d = CNNB_POOL(.kernel_h = k, .kernel_w = k, .stride_h = stride,
                                      .stride_w = stride, .padding = padding);
  return kind == OP_MAX_POOL ? cnnb_max_pool(s->g, NULL, x, d) : cnnb_avg_pool(s->g, NULL, x, d);
}

/* factorized_reduction: stride 1 is a 1x1 conv and batch norm; stride 2 halves the size
 * through two paths of half the filters each, the second shifted by one pixel (padded at
 * the bottom and right, its first row and column cut), so together they see every pixel. */
static cnnb_tensor factorized_reduction(nasnet *s, cnnb_tensor x, int32_t filters, int32_t stride) {
  if (stride == 1) return bn(s, "path_bn", conv(s, "path_conv", x, filters, 1, 1, CNNB_PAD_SAME));
  cnnb_tensor path[2];
  path[0] = pool(s, OP_AVG_POOL, x, 1, stride, CNNB_PAD_VALID);
  path[0] = conv(s, "path1_conv", path[0], filters / 2, 1, 1, CNNB_PAD_SAME);
  path[1] = cnnb_pad_spatial(s->g, NULL, x, -1, 1, -1, 1);
  path[1] = pool(s, OP_AVG_POOL, path[1], 1, stride, CNNB_PAD_VALID);
  path[1] = conv(s, "path2_conv", path[1], filters / 2, 1, 1, CNNB_PAD_SAME);
  return bn(s, "final_path_bn", cnnb_concat(s->g, NULL, 2, path));
}

/* _apply_conv_operation: a stride only for the cell's original inputs (0 and 1). */
static cnnb_tensor apply_op(nasnet *s, cnnb_tensor x, cell_op op, int32_t stride, int original,
                            int32_t filters) {
  if (stride > 1 && !original) stride = 1;
  const int32_t in = shape(s, x).c;
  char name[32];
  switch (op.kind) {
    case OP_SEPARABLE: /* _stacked_separable_conv */
      for (int layer = 1; layer <= SEPARABLE_LAYERS; layer++) {
        snprintf(name, sizeof name, "separable_%dx%d_%d", op.k, op.k, layer);
        x = separable(s, name, relu(s, x), filters, op.k, stride);
        snprintf(name, sizeof name, "bn_sep_%dx%d_%d", op.k, op.k, layer);
        x = bn(s, name, x);
        stride = 1;
      }
      return x;
    case OP_NONE:
      if (stride > 1 || in != filters)
        x = bn(s, "bn_1", conv(s, "1x1", relu(s, x), filters, 1, stride, CNNB_PAD_SAME));
      return x;
    default: /* pools */
      x = pool(s, op.kind, x, op.k, stride, CNNB_PAD_SAME);
      if (in != filters) x = bn(s, "bn_1", conv(s, "1x1", x, filters, 1, 1, CNNB_PAD_SAME));
      return x;
  }
}

/* NasNetABaseCell.__call__ under scope `scope`. prev is CNNB_NO_TENSOR for the first
 * cell (the source's None). */
static cnnb_tensor cell(nasnet *s, const cell_def *def, const char *scope, cnnb_tensor net,
                        double filter_scaling, int32_t stride, cnnb_tensor prev) {
  const int32_t filters = (int32_t)(s->cfg->num_conv_filters * filter_scaling);
  cnnb_graph_push_scope(s->g, scope);
  /* _reduce_prev_layer */
  if (prev == CNNB_NO_TENSOR) {
    prev = net;
  } else if (shape(s, net).h != shape(s, prev).h) {
    prev = factorized_reduction(s, relu(s, prev), filters, 2);
  } else if (shape(s, prev).c != filters) {
    prev = bn(s, "prev_bn", conv(s, "prev_1x1", relu(s, prev), filters, 1, 1, CNNB_PAD_SAME));
  }
  /* _cell_base */
  cnnb_tensor states[7];
  states[0] = bn(s, "beginning_bn", conv(s, "1x1", relu(s, net), filters, 1, 1, CNNB_PAD_SAME));
  states[1] = prev;
  for (int it = 0; it < 5; it++) {
    char name[32];
    snprintf(name, sizeof name, "comb_iter_%d", it);
    cnnb_graph_push_scope(s->g, name);
    cnnb_tensor h[2];
    for (int side = 0; side < 2; side++) {
      const int idx = def->hiddenstate_indices[2 * it + side];
      cnnb_graph_push_scope(s->g, side ? "right" : "left");
      h[side] = apply_op(s, states[idx], def->ops[2 * it + side], stride, idx < 2, filters);
      cnnb_graph_pop_scope(s->g);
    }
    states[2 + it] = cnnb_add(s->g, "combine", h[0], h[1]);
    cnnb_graph_pop_scope(s->g);
  }
  /* _combine_unused_states */
  cnnb_graph_push_scope(s->g, "cell_output");
  const cnnb_shape last = shape(s, states[6]);
  cnnb_tensor unused[7];
  int32_t count = 0;
  for (int idx = 0; idx < 7; idx++) {
    if (def->used_hiddenstates[idx]) continue;
    const cnnb_shape at = shape(s, states[idx]);
    if (at.c != last.c || at.h != last.h) {
      char name[32];
      snprintf(name, sizeof name, "reduction_%d", idx);
      cnnb_graph_push_scope(s->g, name);
      states[idx] = factorized_reduction(s, states[idx], last.c, at.h != last.h ? 2 : 1);
      cnnb_graph_pop_scope(s->g);
    }
    unused[count++] = states[idx];
  }
  cnnb_tensor out = cnnb_concat(s->g, NULL, count, unused);
  cnnb_graph_pop_scope(s->g);
  cnnb_graph_pop_scope(s->g);
  return out;
}

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "nasnet", models, NUM_MODELS, name, dataset, info);
}

/* calc_reduction_layers(num_cells, 2): int(k / 3 * num_cells) for k = 1, 2. */
static int is_reduction(int num_cells, int cell_num) {
  return cell_num == (int)(1.0 / 3 * num_cells) || cell_num == (int)(2.0 / 3 * num_cells);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "nasnet", models, NUM_MODELS, name, dataset, &st)) return st;
  nasnet s = {.g = g,
              .cfg = convnet_input_of(dataset) == CONVNET_SMALL_COLOR ? &cifar
                     : strcmp(name, "nasnetlarge") == 0               ? &large
                                                                      : &mobile};
  convnet_init(&s.cn, g);
  const nasnet_config *cfg = s.cfg;

  /* cell_outputs, as the source keeps them: [None, stem, ...]. */
  enum { MAX_OUTPUTS = 32 };
  cnnb_tensor outputs[MAX_OUTPUTS];
  int n = 0;
  outputs[n++] = CNNB_NO_TENSOR;
  cnnb_tensor net = cnnb_graph_input(g);
  if (cfg->imagenet_stem) { /* _imagenet_stem */
    const int32_t stem_filters = (int32_t)(32 * cfg->stem_multiplier);
    net = bn(&s, "conv0_bn", conv(&s, "conv0", net, stem_filters, 3, 2, CNNB_PAD_VALID));
    outputs[n++] = net;
    double scaling = 1.0 / 4; /* 1 / filter_scaling_rate ** num_stem_cells */
    for (int i = 0; i < 2; i++, scaling *= 2) {
      char scope[32];
      snprintf(scope, sizeof scope, "cell_stem_%d", i);
      net = cell(&s, &reduction_cell, scope, net, scaling, 2, outputs[n - 2]);
      outputs[n++] = net;
    }
  } else { /* _cifar_stem */
    const int32_t stem_filters = (int32_t)(cfg->num_conv_filters * cfg->stem_multiplier);
    net = bn(&s, "l1_stem_bn", conv(&s, "l1_stem_3x3", net, stem_filters, 3, 1, CNNB_PAD_SAME));
    outputs[n++] = net;
  }

  double scaling = 1.0;
  int reductions = 0;
  for (int cell_num = 0; cell_num < cfg->num_cells; cell_num++) {
    char scope[32];
    cnnb_tensor prev = CNNB_NO_TENSOR;
    if (cfg->skip_reduction_layer_input) prev = outputs[n - 2];
    if (is_reduction(cfg->num_cells, cell_num)) {
      scaling *= 2;
      snprintf(scope, sizeof scope, "reduction_cell_%d", reductions++);
      net = cell(&s, &reduction_cell, scope, net, scaling, 2, outputs[n - 2]);
      outputs[n++] = net;
    }
    if (!cfg->skip_reduction_layer_input) prev = outputs[n - 2];
    snprintf(scope, sizeof scope, "cell_%d", cell_num);
    net = cell(&s, &normal_cell, scope, net, scaling, 1, prev);
    outputs[n++] = net;
  }

  cnnb_graph_push_scope(g, "final_layer");
  net = cnnb_global_avg_pool(g, NULL, relu(&s, net));
  cnnb_graph_pop_scope(g);
  return convnet_finish(&s.cn, ctx, name, net);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"nasnet", "nasnetlarge", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "nasnet", "1.0.0",
                     "tf_cnn_benchmarks' NASNet-A: mobile (ImageNet, CIFAR-10) and large"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}
