/* test_models.c — the model zoo plugins (plugins/models/<family>): each is loaded from
 * $CNNB_PLUGIN_DIR the way the host loads it (dlopen + cnnb_plugin_entry), every model
 * it offers is described and built into a graph at batch 2, and the graph is checked
 * against tf_cnn_benchmarks' structure: trainable parameter count, logits shape,
 * per-op node counts (a fingerprint that catches wiring a count misses), the
 * variant-specific details (v1 / v1.5 stride placement, LRN only in the CIFAR AlexNet,
 * dropout where the source has it, batch-norm settings), the MNIST-layout variants
 * (1 input channel), the refusals (no variant for
 * this dataset, unknown name, wrong image size) and the models' own learning-rate
 * schedules. */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "test_datasets.h"

/* The datasets' kinds as their datasources pin them for plugins built before ABI 1.13
 * (cnnb/dataset.h): main() loads the datasources, so the host's dataset table holds them,
 * and checks the pins before any test runs. */
enum { IMAGENET = 1, CIFAR = 2, MNIST = 3 };

/* Expected trainable parameters, with 1001 classes for ImageNet models and 10 for
 * CIFAR-10 ones, derived layer by layer from tf_cnn_benchmarks' model files
 * (the .py files under scripts/tf_cnn_benchmarks/models/, and convnet_builder.py):
 *  - conv(): kh*kw*in*out, plus `out` biases when batch norm is off, or the batch
 *    norm's offset (and scale when batch_norm_config says scale=True) when on;
 *  - affine(): in*out + out; the classifier is affine(num_classes) on the last layer;
 *  - batch_norm() bare: offset only (scale=False), C parameters.
 * Anchors (docs/architecture.md, "Numbers that define right"): alexnet 61,842,345; vgg16
 * 138,361,641 (the published 138,357,544 with 1000 classes + 4,097); resnet50 25,559,081
 * (torchvision's 25,557,032 with 1000 classes + 2,049); inception3 23,819,401 (Keras InceptionV3's
 * trainable 23,817,352 with 1000 classes + 2,049).
 * Published counts that cross-check the derivation:
 *  - vgg19: 143,667,240 with 1000 classes (Simonyan & Zisserman; torchvision) + 4,097;
 *  - resnet101: 44,549,160 with 1000 classes (torchvision) + 2,049 = 44,551,209;
 *  - resnet152: 60,192,808 with 1000 classes (torchvision) + 2,049 = 60,194,857;
 *  - resnet20 (CIFAR): 0.27M (He et al. 2015, table 6); 269,722 here;
 *  - densenet40_k12: 1.0M (Huang et al. 2017, table 2); 1,020,634 here;
 *  - mobilenet: slim's MobileNet v2 1.0/224 is 3,504,872 with 1000 classes (Keras'
 *    trainable count) + 1,281 = 3,506,153 with its 1001-way logits conv; then
 *    tf_cnn_benchmarks adds its affine 1001 -> 1001 (+1,003,002) = 4,509,155.
 * official_resnet* (TensorFlow's own count, not a derivation): TensorFlow 2.21 (PyPI
 * tensorflow-cpu with tf-keras, TF_USE_LEGACY_KERAS=1) building tensorflow/models'
 * official/r1/resnet/resnet_model.py (commit fc5d645) with imagenet_main.py's
 * ImagenetModel, as tf_cnn_benchmarks' official_resnet_model.py calls it:
 *     tf.compat.v1.disable_eager_execution()
 *     images = tf.compat.v1.placeholder(tf.float32, [2, 224, 224, 3])
 *     ImagenetModel(size, resnet_version=version)(images, True)
 *     sum(int(np.prod(v.shape)) for v in tf.compat.v1.trainable_variables())
 *   for size in 18, 34, 50, 101, 152, 200 and version 1, 2. Nothing differs: the same
 *   1001 classes (ImagenetModel's NUM_CLASSES), no head but the dense layer. Cross-check:
 *   torchvision's resnet50/101/152 (1000 classes) + 2,049; its resnet18 11,689,512 and
 *   resnet34 21,797,672 + 513, + the 64 -> 64 projection of stage 1 and its batch norm
 *   (4,096 + 128), which torchvision's BasicBlock stages do not have; ResNet-200 v2's
 *   64.7M (He et al. 2016, table 5). The conv and batch-norm counts below are TF's too
 *   (its 4-d trainable variables, and its gamma variables).
 * Derived only (no published figure for tf_cnn_benchmarks' exact variant):
 *  - v1.5 = v1 (same layers, stride moved); v2: the pre-activation and final batch
 *    norms are offset only, the last conv of each block and the projection carry no
 *    batch norm; googlenet and overfeat with conv biases and no batch norm;
 *    inception4 with offset-only batch norm; the CIFAR resnets' "plan A" shortcuts
 *    have no parameters. */
typedef struct model_case {
  const char *family;
  const char *name;
  uint32_t dataset;
  int32_t image_size;
  int32_t batch_size;
  float learning_rate;
  int64_t params;
  /* Node counts by op: conv2d, batch_norm, dropout, lrn, concat, add. */
  int32_t convs, bns, dropouts, lrns, concats, adds;
} model_case;

static const model_case cases[] = {
    {"trivial", "trivial", IMAGENET, 227, 32, 0.005f, 4263877, 0, 0, 0, 0, 0, 0},
    {"trivial", "trivial", CIFAR, 32, 32, 0.005f, 52235, 0, 0, 0, 0, 0, 0},
    {"lenet", "lenet", IMAGENET, 28, 32, 0.005f, 2173353, 2, 0, 0, 0, 0, 0},
    {"alexnet", "alexnet", IMAGENET, 227, 512, 0.005f, 61842345, 5, 0, 2, 0, 0, 0},
    {"alexnet", "alexnet", CIFAR, 32, 128, 0.1f, 1756426, 2, 0, 0, 2, 0, 0},
    {"overfeat", "overfeat", IMAGENET, 231, 32, 0.005f, 145924969, 5, 0, 2, 0, 0, 0},
    /* 3 stem convs + 9 modules of 6 */
    {"googlenet", "googlenet", IMAGENET, 224, 32, 0.005f, 6999577, 57, 0, 0, 0, 9, 0},
    {"vgg", "vgg11", IMAGENET, 224, 64, 0.005f, 132867433, 8, 0, 2, 0, 0, 0},
    {"vgg", "vgg16", IMAGENET, 224, 64, 0.005f, 138361641, 13, 0, 2, 0, 0, 0},
    {"vgg", "vgg19", IMAGENET, 224, 64, 0.005f, 143671337, 16, 0, 2, 0, 0, 0},
    /* 5 stem + 3*7 (a) + 4 (b) + 4*10 (c) + 6 (d) + 2*9 (e) = 94, one batch norm each */
    {"inception", "inception3", IMAGENET, 299, 32, 0.005f, 23819401, 94, 94, 0, 0, 11, 0},
    /* 3 + 1 + 6 + 1 + 4*7 + 4 + 7*10 + 6 + 3*10 = 149 */
    {"inception", "inception4", IMAGENET, 299, 32, 0.005f, 42649769, 149, 149, 1, 0, 19, 0},
    /* v1: stem + 16 blocks * 3 + 4 projections = 53; a batch norm after each */
    {"resnet", "resnet50", IMAGENET, 224, 64, 0.128f, 25559081, 53, 53, 0, 0, 0, 16},
    {"resnet", "resnet50_v1.5", IMAGENET, 224, 64, 0.128f, 25559081, 53, 53, 0, 0, 0, 16},
    /* v2: stem bn + 16 * (preact + 2 conv bns) + final = 50 */
    {"resnet", "resnet50_v2", IMAGENET, 224, 64, 0.128f, 25536361, 53, 50, 0, 0, 0, 16},
    {"resnet", "resnet101", IMAGENET, 224, 32, 0.128f, 44551209, 104, 104, 0, 0, 0, 33},
    {"resnet", "resnet101_v2", IMAGENET, 224, 32, 0.128f, 44511081, 104, 101, 0, 0, 0, 33},
    {"resnet", "resnet152", IMAGENET, 224, 32, 0.128f, 60194857, 155, 155, 0, 0, 0, 50},
    {"resnet", "resnet152_v2", IMAGENET, 224, 32, 0.128f, 60139369, 155, 152, 0, 0, 0, 50},
    /* CIFAR: stem + 2 per block (3n blocks); v1 a batch norm after each conv, v2 none
     * after a block's last conv but a pre-activation one per block and a final one; the
     * 2 channel-growing blocks' shortcuts are pad_channels (test_resnet_cifar_shortcut) */
    {"resnet", "resnet20", CIFAR, 32, 128, 0.1f, 269722, 19, 19, 0, 0, 0, 9},
    {"resnet", "resnet20_v2", CIFAR, 32, 128, 0.1f, 269402, 19, 20, 0, 0, 0, 9},
    {"resnet", "resnet32", CIFAR, 32, 128, 0.1f, 464154, 31, 31, 0, 0, 0, 15},
    {"resnet", "resnet32_v2", CIFAR, 32, 128, 0.1f, 463610, 31, 32, 0, 0, 0, 15},
    {"resnet", "resnet44", CIFAR, 32, 128, 0.1f, 658586, 43, 43, 0, 0, 0, 21},
    {"resnet", "resnet44_v2", CIFAR, 32, 128, 0.1f, 657818, 43, 44, 0, 0, 0, 21},
    {"resnet", "resnet56", CIFAR, 32, 128, 0.1f, 853018, 55, 55, 0, 0, 0, 27},
    {"resnet", "resnet56_v2", CIFAR, 32, 128, 0.1f, 852026, 55, 56, 0, 0, 0, 27},
    {"resnet", "resnet110", CIFAR, 32, 128, 0.1f, 1727962, 109, 109, 0, 0, 0, 54},
    {"resnet", "resnet110_v2", CIFAR, 32, 128, 0.1f, 1725962, 109, 110, 0, 0, 0, 54},
    /* stem + 17 depthwise + 17 projections + 16 expansions + 1280 conv + logits conv;
     * residual adds in the 10 blocks that keep stride 1 and depth */
    {"mobilenet", "mobilenet", IMAGENET, 224, 32, 0.005f, 4509155, 53, 52, 1, 0, 0, 10},
    /* stem + 2 (basic) or 3 (bottleneck) convs per block + 4 projections (stage 1's too);
     * v1: a batch norm after each; v2: none after the stem, the projections and each
     * block's last conv, one pre-activation per block and one at the end; one add per block */
    {"official_resnet", "official_resnet18", IMAGENET, 224, 32, 0.0125f, 11694249, 21, 21, 0, 0, 0,
     8},
    {"official_resnet", "official_resnet34", IMAGENET, 224, 32, 0.0125f, 21802409, 37, 37, 0, 0, 0,
     16},
    {"official_resnet", "official_resnet50", IMAGENET, 224, 128, 0.05f, 25559081, 53, 53, 0, 0, 0,
     16},
    {"official_resnet", "official_resnet101", IMAGENET, 224, 32, 0.0125f, 44551209, 104, 104, 0, 0,
     0, 33},
    {"official_resnet", "official_resnet152", IMAGENET, 224, 32, 0.0125f, 60194857, 155, 155, 0, 0,
     0, 50},
    {"official_resnet", "official_resnet200", IMAGENET, 224, 32, 0.0125f, 64675881, 203, 203, 0, 0,
     0, 66},
    {"official_resnet", "official_resnet18_v2", IMAGENET, 224, 32, 0.0125f, 11692329, 21, 17, 0, 0,
     0, 8},
    {"official_resnet", "official_resnet34_v2", IMAGENET, 224, 32, 0.0125f, 21800489, 37, 33, 0, 0,
     0, 16},
    {"official_resnet", "official_resnet50_v2", IMAGENET, 224, 128, 0.05f, 25551401, 53, 49, 0, 0,
     0, 16},
    {"official_resnet", "official_resnet101_v2", IMAGENET, 224, 32, 0.0125f, 44543529, 104, 100, 0,
     0, 0, 33},
    {"official_resnet", "official_resnet152_v2", IMAGENET, 224, 32, 0.0125f, 60187177, 155, 151, 0,
     0, 0, 50},
    {"official_resnet", "official_resnet200_v2", IMAGENET, 224, 32, 0.0125f, 64668201, 203, 199, 0,
     0, 0, 66},
    /* stem + 3L blocks + 2 transitions; a batch norm per block, transition and at the end */
    {"densenet", "densenet40_k12", CIFAR, 32, 64, 0.1f, 1020634, 39, 39, 0, 0, 36, 0},
    {"densenet", "densenet100_k12", CIFAR, 32, 64, 0.1f, 6981994, 99, 99, 0, 0, 96, 0},
    {"densenet", "densenet100_k24", CIFAR, 32, 64, 0.1f, 27253738, 99, 99, 0, 0, 96, 0},
};
enum { NUM_CASES = sizeof cases / sizeof cases[0] };

static const char *const families[] = {"trivial",   "lenet",    "alexnet",        "overfeat",
                                       "googlenet", "vgg",      "inception",      "resnet",
                                       "mobilenet", "densenet", "official_resnet"};
enum { NUM_FAMILIES = sizeof families / sizeof families[0] };

/* ---- loading ------------------------------------------------------------------------- */

typedef struct loaded {
  void *handle;
  const cnnb_plugin *plugin;
  const cnnb_model_vtable *vt;
} loaded;

static loaded load_family(const char *family) {
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  ck_assert_msg(dir != NULL, "CNNB_PLUGIN_DIR is not set");
  char path[4096];
  snprintf(path, sizeof path, "%s/libcnnb_model_%s.so", dir, family);
  loaded l = {0};
  l.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(l.handle != NULL, "dlopen %s: %s", path, dlerror());
  cnnb_plugin_entry_fn entry = (cnnb_plugin_entry_fn)dlsym(l.handle, CNNB_PLUGIN_ENTRY_SYMBOL);
  ck_assert_msg(entry != NULL, "%s: no %s", path, CNNB_PLUGIN_ENTRY_SYMBOL);
  const cnnb_host host = {.struct_size = sizeof host,
                          .abi_major = CNNB_ABI_MAJOR,
                          .abi_minor = CNNB_ABI_MINOR,
                          .host_version = "test"};
  l.plugin = entry(&host);
  ck_assert_ptr_nonnull(l.plugin);
  ck_assert_uint_eq(l.plugin->abi_major, CNNB_ABI_MAJOR);
  ck_assert_uint_eq(l.plugin->kind, CNNB_KIND_MODEL);
  ck_assert_str_eq(l.plugin->name, family);
  l.vt = l.plugin->vtable;
  ck_assert_ptr_nonnull(l.vt);
  ck_assert_uint_ge(l.vt->struct_size, sizeof(cnnb_model_vtable));
  ck_assert_ptr_nonnull(l.vt->describe);
  ck_assert_ptr_nonnull(l.vt->build);
  return l;
}

static int32_t classes_for(uint32_t dataset) { return dataset == CIFAR ? 10 : 1001; }

/* Builds `name` into a fresh graph [2, 3, image, image] with `classes` outputs; returns
 * the graph (caller destroys) and the build's status in *st, its message in ctx. */
static cnnb_graph *build(const loaded *l, cnnb_ctx *ctx, const char *name, uint32_t dataset,
                         int32_t image, int32_t classes, cnnb_status *st) {
  cnnb_graph *g = cnnb_graph_create(2, 3, image, image, classes);
  ck_assert_ptr_nonnull(g);
  *st = l->vt->build(ctx, name, dataset, g);
  return g;
}

/* slim's V2_DEF: ReLU6 after the stem, the 16 expansions, the 17 depthwise convs and the
 * 1280 conv; none after the projections or the logits. */
enum { MOBILENET_RELU6S = 1 + 16 + 17 + 1 };

static int32_t count_op(const cnnb_graph *g, uint32_t op) {
  int32_t n = 0;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++)
    if (cnnb_graph_node(g, i)->op == op) n++;
  return n;
}

/* ---- every model: describe, build, count ------------------------------------------------ */

START_TEST(test_model_structure) {
  const model_case *c = &cases[_i];
  loaded l = load_family(c->family);
  cnnb_ctx *ctx = cnnb_ctx_create(c->family, NULL);

  cnnb_model_info info = {.struct_size = sizeof info};
  ck_assert_int_eq(l.vt->describe(ctx, c->name, c->dataset, &info), CNNB_OK);
  ck_assert_int_eq(info.image_size, c->image_size);
  ck_assert_int_eq(info.default_batch_size, c->batch_size);
  ck_assert_float_eq_tol(info.default_learning_rate, c->learning_rate, 1e-9);
  ck_assert_ptr_nonnull(info.description);

  int32_t classes = classes_for(c->dataset);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, c->name, c->dataset, c->image_size, classes, &st);
  ck_assert_msg(st == CNNB_OK, "%s (%s): %s", c->name, c->dataset == CIFAR ? "cifar10" : "imagenet",
                cnnb_error_message(ctx));
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_msg(cnnb_graph_trainable_count(g) == c->params,
                "%s: %lld trainable parameters, want %lld", c->name,
                (long long)cnnb_graph_trainable_count(g), (long long)c->params);

  cnnb_tensor logits = cnnb_graph_logits(g);
  ck_assert_int_ge(logits, 0);
  cnnb_shape s = cnnb_graph_node(g, logits)->shape;
  ck_assert_int_eq(s.n, 2);
  ck_assert_int_eq(s.c, classes);
  ck_assert_int_eq(s.h, 1);
  ck_assert_int_eq(s.w, 1);
  ck_assert_uint_eq(cnnb_graph_node(g, logits)->op, CNNB_OP_DENSE);

  ck_assert_msg(count_op(g, CNNB_OP_CONV2D) == c->convs, "%s: %d convs, want %d", c->name,
                count_op(g, CNNB_OP_CONV2D), c->convs);
  ck_assert_msg(count_op(g, CNNB_OP_BATCH_NORM) == c->bns, "%s: %d batch norms, want %d", c->name,
                count_op(g, CNNB_OP_BATCH_NORM), c->bns);
  ck_assert_int_eq(count_op(g, CNNB_OP_DROPOUT), c->dropouts);
  ck_assert_int_eq(count_op(g, CNNB_OP_LRN), c->lrns);
  ck_assert_msg(count_op(g, CNNB_OP_CONCAT) == c->concats, "%s: %d concats, want %d", c->name,
                count_op(g, CNNB_OP_CONCAT), c->concats);
  ck_assert_msg(count_op(g, CNNB_OP_ADD) == c->adds, "%s: %d adds, want %d", c->name,
                count_op(g, CNNB_OP_ADD), c->adds);
  /* Only MobileNet v2 uses ReLU6 (test_mobilenet_relu6 says where). */
  int relu6s = strcmp(c->family, "mobilenet") == 0 ? MOBILENET_RELU6S : 0;
  ck_assert_msg(count_op(g, CNNB_OP_RELU6) == relu6s, "%s: %d relu6s, want %d", c->name,
                count_op(g, CNNB_OP_RELU6), relu6s);
  /* Only the CIFAR ResNets pad channels: one shortcut per channel-growing block. */
  int pads = strcmp(c->family, "resnet") == 0 && c->dataset == CIFAR ? 2 : 0;
  ck_assert_msg(count_op(g, CNNB_OP_PAD_CHANNELS) == pads, "%s: %d pad_channels, want %d", c->name,
                count_op(g, CNNB_OP_PAD_CHANNELS), pads);
  /* The loss goes on after the model, as the host does it. */
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);

  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* Each family offers exactly the names the table above expects of it, so no model goes
 * untested and none is offered by two families. */
START_TEST(test_offers_match_cases) {
  loaded l = load_family(families[_i]);
  ck_assert_ptr_nonnull(l.plugin->offers);
  int offered = 0;
  for (const char *const *o = l.plugin->offers; *o; o++, offered++) {
    int found = 0;
    for (int i = 0; i < NUM_CASES; i++)
      if (strcmp(cases[i].name, *o) == 0) {
        ck_assert_str_eq(cases[i].family, families[_i]);
        found = 1;
      }
    ck_assert_msg(found, "%s offers '%s', which this test does not know", families[_i], *o);
  }
  int want = 0;
  for (int i = 0; i < NUM_CASES; i++) {
    if (strcmp(cases[i].family, families[_i]) != 0) continue;
    int dup = 0; /* a name with two dataset variants is offered once */
    for (int j = 0; j < i; j++) dup |= strcmp(cases[j].name, cases[i].name) == 0;
    want += !dup;
  }
  ck_assert_int_eq(offered, want);
  dlclose(l.handle);
}
END_TEST

/* Every CIFAR-10 model builds at 32x32 with 10 classes, and gets the CIFAR defaults. */
START_TEST(test_cifar_models_build_at_32) {
  int n = 0;
  for (int i = 0; i < NUM_CASES; i++) {
    if (cases[i].dataset != CIFAR) continue;
    loaded l = load_family(cases[i].family);
    cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
    cnnb_status st;
    cnnb_graph *g = build(&l, ctx, cases[i].name, CIFAR, 32, 10, &st);
    ck_assert_msg(st == CNNB_OK, "%s: %s", cases[i].name, cnnb_error_message(ctx));
    ck_assert_int_eq(cnnb_graph_node(g, cnnb_graph_logits(g))->shape.c, 10);
    cnnb_graph_destroy(g);
    cnnb_ctx_destroy(ctx);
    dlclose(l.handle);
    n++;
  }
  ck_assert_int_eq(n, 15); /* trivial, alexnet, 10 resnets, 3 densenets */
}
END_TEST

/* ---- variant details ------------------------------------------------------------------- */

/* Counts conv nodes with the given kernel and stride. */
static int count_convs(const cnnb_graph *g, int32_t k, int32_t stride) {
  int n = 0;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_CONV2D && nd->attr.window.kernel_h == k &&
        nd->attr.window.stride_h == stride)
      n++;
  }
  return n;
}

START_TEST(test_resnet_stride_placement) {
  loaded l = load_family("resnet");
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", NULL);
  cnnb_status st;
  /* v1: stride 2 on the first 1x1 of stages 2-4 and on their projections. */
  cnnb_graph *g = build(&l, ctx, "resnet50", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_int_eq(count_convs(g, 1, 2), 6);
  ck_assert_int_eq(count_convs(g, 3, 2), 0);
  /* The stem: explicit pad 3/3 then VALID, 224 -> 112 (not SAME's 2/3 split). */
  const cnnb_node *stem = NULL;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g) && !stem; i++)
    if (cnnb_graph_node(g, i)->op == CNNB_OP_CONV2D) stem = cnnb_graph_node(g, i);
  ck_assert_ptr_nonnull(stem);
  ck_assert_int_eq(stem->attr.window.kernel_h, 7);
  ck_assert_int_eq(stem->attr.window.pad_top, 3);
  ck_assert_int_eq(stem->attr.window.pad_bottom, 3);
  ck_assert_int_eq(stem->attr.window.pad_left, 3);
  ck_assert_int_eq(stem->attr.window.pad_right, 3);
  ck_assert_int_eq(stem->shape.h, 112);
  /* v1 batch norm: decay 0.9, epsilon 1e-5, with scale. */
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op != CNNB_OP_BATCH_NORM) continue;
    ck_assert_float_eq_tol(nd->attr.batch_norm.decay, 0.9f, 1e-7);
    ck_assert_float_eq_tol(nd->attr.batch_norm.epsilon, 1e-5f, 1e-10);
    ck_assert_int_eq(nd->attr.batch_norm.scale, 1);
  }
  /* No biases anywhere but the classifier. */
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_CONV2D) ck_assert_int_eq(nd->attr.window.use_bias, 0);
  }
  ck_assert_int_eq(cnnb_graph_node(g, cnnb_graph_logits(g))->shape.c, 1001);
  cnnb_graph_destroy(g);

  /* v1.5: the stride moves to the 3x3 (explicit pad 0/1 then VALID: 56 -> 28). */
  g = build(&l, ctx, "resnet50_v1.5", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_int_eq(count_convs(g, 1, 2), 3);
  ck_assert_int_eq(count_convs(g, 3, 2), 3);
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_CONV2D && nd->attr.window.kernel_h == 3 &&
        nd->attr.window.stride_h == 2) {
      ck_assert_int_eq(nd->attr.window.pad_top, 1);
      ck_assert_int_eq(nd->attr.window.pad_bottom, 1);
    }
  }
  cnnb_graph_destroy(g);

  /* v2: offset-only, decay-0.999 batch norms for the pre-activations and the end. */
  g = build(&l, ctx, "resnet50_v2", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  int bare = 0;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_BATCH_NORM && !nd->attr.batch_norm.scale) {
      ck_assert_float_eq_tol(nd->attr.batch_norm.decay, 0.999f, 1e-7);
      bare++;
    }
  }
  ck_assert_int_eq(bare, 17);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* The index of the only reader of node i (asserts there is exactly one). */
static int32_t only_consumer(const cnnb_graph *g, int32_t i) {
  int32_t readers = 0;
  const int32_t *r = cnnb_graph_consumers(g, i, &readers);
  ck_assert_msg(readers == 1, "'%s' has %d readers, want 1", cnnb_graph_node(g, i)->name, readers);
  return r[0];
}

/* Whether an official ResNet conv reads its block's input — the stem's max pool or the
 * previous block's sum (v1: after its ReLU) — or, in v2, that input's pre-activation
 * (ReLU of batch norm of it). */
static int reads_block_input(const cnnb_graph *g, const cnnb_node *conv, int v2) {
  const cnnb_node *t = cnnb_graph_node(g, conv->inputs[0]);
  if (v2) {
    if (t->op != CNNB_OP_RELU) return 0;
    t = cnnb_graph_node(g, t->inputs[0]);
    if (t->op != CNNB_OP_BATCH_NORM) return 0;
    t = cnnb_graph_node(g, t->inputs[0]);
  } else if (t->op == CNNB_OP_RELU) {
    t = cnnb_graph_node(g, t->inputs[0]);
  }
  return t->op == CNNB_OP_MAX_POOL || t->op == CNNB_OP_ADD;
}

/* The official ResNets as official/r1/resnet/resnet_model.py builds them: the stride on
 * the 3x3 (v1 too), a projection opening every stage (stage 1's of the 18 and 34 with
 * stride 1), the module's batch norm everywhere (decay 0.997, epsilon 1e-5, scale),
 * v2's stem without batch norm or ReLU and its projections reading the pre-activation,
 * no conv bias, and one Glorot-initialized dense layer on the spatial mean as the
 * classifier (no tf_cnn_benchmarks affine). */
START_TEST(test_official_resnet_details) {
  loaded l = load_family("official_resnet");
  cnnb_ctx *ctx = cnnb_ctx_create("official_resnet", NULL);
  static const char *const names[] = {"official_resnet18", "official_resnet50",
                                      "official_resnet18_v2", "official_resnet50_v2"};
  for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
    const char *name = names[m];
    const int v2 = strstr(name, "_v2") != NULL, basic = strstr(name, "resnet18") != NULL;
    cnnb_status st;
    cnnb_graph *g = build(&l, ctx, name, IMAGENET, 224, 1001, &st);
    ck_assert_msg(st == CNNB_OK, "%s: %s", name, cnnb_error_message(ctx));
    /* Strided: three 3x3 (explicit pad 1/1, then VALID: 56 -> 28) and three projections;
     * stage 1's projection keeps stride 1. No strided 1x1 but the projections. */
    ck_assert_int_eq(count_convs(g, 3, 2), 3);
    ck_assert_int_eq(count_convs(g, 1, 2), 3);
    ck_assert_int_eq(count_convs(g, 1, 1), (basic ? 1 : 1 + 16 * 2));
    const cnnb_node *stem = NULL;
    int projections = 0;
    for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
      const cnnb_node *nd = cnnb_graph_node(g, i);
      if (nd->op == CNNB_OP_CONV2D) {
        ck_assert_int_eq(nd->attr.window.use_bias, 0);
        if (!stem) {
          stem = nd;
          /* conv2d_fixed_padding: 3 before and after, then VALID: 224 -> 112. */
          ck_assert_int_eq(nd->attr.window.kernel_h, 7);
          ck_assert_int_eq(nd->attr.window.pad_top, 3);
          ck_assert_int_eq(nd->attr.window.pad_bottom, 3);
          ck_assert_int_eq(nd->shape.h, 112);
          /* v1: batch norm then ReLU; v2: straight into the max pool. */
          ck_assert_uint_eq(cnnb_graph_node(g, only_consumer(g, i))->op,
                            v2 ? CNNB_OP_MAX_POOL : CNNB_OP_BATCH_NORM);
        }
        if (nd->attr.window.kernel_h == 3 && nd->attr.window.stride_h == 2) {
          ck_assert_int_eq(nd->attr.window.pad_top, 1);
          ck_assert_int_eq(nd->attr.window.pad_bottom, 1);
        }
        /* v2: every conv but the stem reads a ReLU (a pre-activation or the one inside
         * the block). A projection: a 1x1 reading the block's input that goes to the
         * sum (v1: through its batch norm). */
        if (v2 && nd != stem)
          ck_assert_uint_eq(cnnb_graph_node(g, nd->inputs[0])->op, CNNB_OP_RELU);
        int32_t out = only_consumer(g, i);
        if (!v2 && cnnb_graph_node(g, out)->op == CNNB_OP_BATCH_NORM) out = only_consumer(g, out);
        if (nd->attr.window.kernel_h == 1 && cnnb_graph_node(g, out)->op == CNNB_OP_ADD &&
            reads_block_input(g, nd, v2))
          projections++;
      }
      if (nd->op == CNNB_OP_BATCH_NORM) {
        ck_assert_float_eq_tol(nd->attr.batch_norm.decay, 0.997f, 1e-7);
        ck_assert_float_eq_tol(nd->attr.batch_norm.epsilon, 1e-5f, 1e-10);
        ck_assert_int_eq(nd->attr.batch_norm.scale, 1);
      }
    }
    ck_assert_msg(projections == 4, "%s: %d projections, want 4", name, projections);
    /* The classifier: the dense layer on the spatial mean, Glorot uniform, with a bias. */
    const cnnb_node *logits = cnnb_graph_node(g, cnnb_graph_logits(g));
    ck_assert_uint_eq(cnnb_graph_node(g, logits->inputs[0])->op, CNNB_OP_GLOBAL_AVG_POOL);
    ck_assert_int_eq(cnnb_graph_node(g, logits->inputs[0])->shape.c, basic ? 512 : 2048);
    ck_assert_int_eq(count_op(g, CNNB_OP_DENSE), 1);
    ck_assert_int_eq(logits->num_params, 2);
    ck_assert_uint_eq(cnnb_graph_param(g, logits->params[0])->init.kind, CNNB_INIT_GLOROT_UNIFORM);
    cnnb_graph_destroy(g);
  }
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* Offset-only batch norm in Inception v3 and the CIFAR AlexNet's LRN settings. */
START_TEST(test_inception3_and_alexnet_details) {
  loaded l = load_family("inception");
  cnnb_ctx *ctx = cnnb_ctx_create("inception", NULL);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "inception3", IMAGENET, 299, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op != CNNB_OP_BATCH_NORM) continue;
    ck_assert_int_eq(nd->attr.batch_norm.scale, 0);
    ck_assert_float_eq_tol(nd->attr.batch_norm.decay, 0.999f, 1e-7);
    ck_assert_float_eq_tol(nd->attr.batch_norm.epsilon, 0.001f, 1e-9);
  }
  /* 35x35x288 -> 17x17x768 -> 8x8x2048 before the final pool. */
  const cnnb_node *last_concat = NULL;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++)
    if (cnnb_graph_node(g, i)->op == CNNB_OP_CONCAT) last_concat = cnnb_graph_node(g, i);
  ck_assert_int_eq(last_concat->shape.c, 2048);
  ck_assert_int_eq(last_concat->shape.h, 8);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);

  l = load_family("alexnet");
  ctx = cnnb_ctx_create("alexnet", NULL);
  g = build(&l, ctx, "alexnet", CIFAR, 32, 10, &st);
  ck_assert_int_eq(st, CNNB_OK);
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op != CNNB_OP_LRN) continue;
    ck_assert_int_eq(nd->attr.lrn.depth_radius, 4);
    ck_assert_float_eq_tol(nd->attr.lrn.bias, 1.0f, 1e-7);
    ck_assert_float_eq_tol(nd->attr.lrn.alpha, 0.001f / 9.0f, 1e-10);
    ck_assert_float_eq_tol(nd->attr.lrn.beta, 0.75f, 1e-7);
  }
  cnnb_graph_destroy(g);
  /* ImageNet AlexNet: biases on every conv, dropout keep 0.5. */
  g = build(&l, ctx, "alexnet", IMAGENET, 227, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_CONV2D) ck_assert_int_eq(nd->attr.window.use_bias, 1);
    if (nd->op == CNNB_OP_DROPOUT) ck_assert_float_eq_tol(nd->attr.dropout.keep_prob, 0.5f, 1e-7);
  }
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* MobileNet's depthwise convolutions are groups == channels, one per block. */
START_TEST(test_mobilenet_depthwise) {
  loaded l = load_family("mobilenet");
  cnnb_ctx *ctx = cnnb_ctx_create("mobilenet", NULL);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "mobilenet", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  int depthwise = 0;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op != CNNB_OP_CONV2D || nd->attr.window.groups == 1) continue;
    ck_assert_int_eq(nd->attr.window.groups, nd->attr.window.filters);
    ck_assert_int_eq(nd->attr.window.kernel_h, 3);
    depthwise++;
  }
  ck_assert_int_eq(depthwise, 17);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* MobileNet's activations are ReLU6, each right after a batch norm (slim's conv2d with
 * normalizer_fn then activation_fn), and never after a projection: a projection's batch
 * norm feeds the residual add, the next block or the 1280 conv directly. No plain ReLU. */
START_TEST(test_mobilenet_relu6) {
  loaded l = load_family("mobilenet");
  cnnb_ctx *ctx = cnnb_ctx_create("mobilenet", NULL);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "mobilenet", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_int_eq(count_op(g, CNNB_OP_RELU), 0);
  int relu6s = 0, after_depthwise = 0, after_expansion = 0;
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *nd = cnnb_graph_node(g, i);
    if (nd->op == CNNB_OP_BATCH_NORM) {
      const cnnb_node *conv = cnnb_graph_node(g, nd->inputs[0]);
      ck_assert_uint_eq(conv->op, CNNB_OP_CONV2D);
      int32_t readers = 0;
      const int32_t *r = cnnb_graph_consumers(g, i, &readers);
      int activated = readers == 1 && cnnb_graph_node(g, r[0])->op == CNNB_OP_RELU6;
      /* A projection: a 1x1 conv whose input is an activated depthwise conv. */
      const cnnb_node *src = cnnb_graph_node(g, conv->inputs[0]);
      int projection =
          conv->attr.window.kernel_h == 1 && src->op == CNNB_OP_RELU6 &&
          cnnb_graph_node(g, cnnb_graph_node(g, src->inputs[0])->inputs[0])->attr.window.groups > 1;
      ck_assert_msg(activated == !projection, "batch norm '%s': relu6 %s", nd->name,
                    projection ? "after a projection" : "missing");
    }
    if (nd->op != CNNB_OP_RELU6) continue;
    relu6s++;
    const cnnb_node *bn = cnnb_graph_node(g, nd->inputs[0]);
    ck_assert_uint_eq(bn->op, CNNB_OP_BATCH_NORM);
    ck_assert_int_eq(bn->fused_relu, 0);
    const cnnb_node *conv = cnnb_graph_node(g, bn->inputs[0]);
    if (conv->attr.window.groups > 1) after_depthwise++;
    else if (conv->attr.window.kernel_h == 1 && conv->attr.window.filters != 1280)
      after_expansion++;
  }
  ck_assert_int_eq(relu6s, MOBILENET_RELU6S);
  ck_assert_int_eq(after_depthwise, 17);
  ck_assert_int_eq(after_expansion, 16);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* The CIFAR ResNets' channel-growing blocks as residual_block() writes them: the
 * shortcut is a strided 1x1 average pool then tf.pad of (depth - in) / 2 zero channels
 * on each side, added (v1: then ReLU) to the block's second 3x3 conv of `depth` filters
 * (v1: through its batch norm; v2: no batch norm), whose first conv has the stride. */
START_TEST(test_resnet_cifar_shortcut) {
  loaded l = load_family("resnet");
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", NULL);
  const char *const names[] = {"resnet20", "resnet20_v2", "resnet110"};
  for (int v = 0; v < 3; v++) {
    int v2 = strstr(names[v], "_v2") != NULL;
    cnnb_status st;
    cnnb_graph *g = build(&l, ctx, names[v], CIFAR, 32, 10, &st);
    ck_assert_int_eq(st, CNNB_OK);
    int seen = 0;
    for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
      const cnnb_node *pad = cnnb_graph_node(g, i);
      if (pad->op != CNNB_OP_PAD_CHANNELS) continue;
      const int32_t in_c = seen == 0 ? 16 : 32, h = seen == 0 ? 16 : 8;
      seen++;
      const cnnb_node *pool = cnnb_graph_node(g, pad->inputs[0]);
      ck_assert_uint_eq(pool->op, CNNB_OP_AVG_POOL);
      ck_assert_int_eq(pool->attr.window.kernel_h, 1);
      ck_assert_int_eq(pool->attr.window.stride_h, 2);
      ck_assert_int_eq(pool->shape.c, in_c);
      ck_assert_int_eq(pad->attr.pad.before, in_c / 2);
      ck_assert_int_eq(pad->attr.pad.after, in_c / 2);
      ck_assert_int_eq(pad->shape.c, 2 * in_c);
      ck_assert_int_eq(pad->shape.h, h);
      int32_t readers = 0;
      const int32_t *r = cnnb_graph_consumers(g, i, &readers);
      ck_assert_int_eq(readers, 1);
      const cnnb_node *add = cnnb_graph_node(g, r[0]);
      ck_assert_uint_eq(add->op, CNNB_OP_ADD);
      ck_assert_int_eq(add->inputs[0], i);
      const cnnb_node *res = cnnb_graph_node(g, add->inputs[1]);
      if (!v2) {
        ck_assert_uint_eq(res->op, CNNB_OP_BATCH_NORM);
        res = cnnb_graph_node(g, res->inputs[0]);
      }
      ck_assert_uint_eq(res->op, CNNB_OP_CONV2D);
      ck_assert_int_eq(res->attr.window.filters, 2 * in_c);
      ck_assert_int_eq(res->attr.window.kernel_h, 3);
      ck_assert_int_eq(res->attr.window.stride_h, 1);
      /* conv -> batch norm -> relu -> this conv; the first conv has the stride. */
      const cnnb_node *first = cnnb_graph_node(
          g, cnnb_graph_node(g, cnnb_graph_node(g, res->inputs[0])->inputs[0])->inputs[0]);
      ck_assert_uint_eq(first->op, CNNB_OP_CONV2D);
      ck_assert_int_eq(first->attr.window.stride_h, 2);
      ck_assert_int_eq(first->attr.window.filters, 2 * in_c);
      readers = 0;
      r = cnnb_graph_consumers(g, r[0], &readers);
      ck_assert_int_ge(readers, 1);
      if (!v2) {
        ck_assert_int_eq(readers, 1);
        ck_assert_uint_eq(cnnb_graph_node(g, r[0])->op, CNNB_OP_RELU);
      }
    }
    ck_assert_int_eq(seen, 2);
    cnnb_graph_destroy(g);
  }
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* --num_classes: the classifier follows the graph's class count. */
START_TEST(test_num_classes_override) {
  loaded l = load_family("resnet");
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", NULL);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "resnet50", IMAGENET, 224, 100, &st);
  ck_assert_int_eq(st, CNNB_OK);
  ck_assert_int_eq(cnnb_graph_trainable_count(g), 25559081 - 2049LL * (1001 - 100));
  ck_assert_int_eq(cnnb_graph_node(g, cnnb_graph_logits(g))->shape.c, 100);
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* ---- refusals ----------------------------------------------------------------------------- */

START_TEST(test_no_variant_for_dataset) {
  loaded l = load_family("vgg");
  cnnb_ctx *ctx = cnnb_ctx_create("vgg", NULL);
  cnnb_model_info info = {.struct_size = sizeof info};
  ck_assert_int_eq(l.vt->describe(ctx, "vgg16", CIFAR, &info), CNNB_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "vgg16"));
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "cifar10"));
  cnnb_clear_error(ctx);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "vgg16", CIFAR, 32, 10, &st);
  ck_assert_int_eq(st, CNNB_EUNSUPPORTED);
  ck_assert_int_eq(cnnb_graph_num_nodes(g) <= 1, 1); /* nothing built beyond the input */
  cnnb_graph_destroy(g);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(l.vt->describe(ctx, "vgg17", IMAGENET, &info), CNNB_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "vgg17"));
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);

  l = load_family("resnet");
  ctx = cnnb_ctx_create("resnet", NULL);
  ck_assert_int_eq(l.vt->describe(ctx, "resnet20", IMAGENET, &info), CNNB_EUNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "--data_name=cifar10"));
  cnnb_clear_error(ctx);
  ck_assert_int_eq(l.vt->describe(ctx, "resnet50", CIFAR, &info), CNNB_EUNSUPPORTED);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* The MNIST layout (--data_name=mnist): 28x28 with 1 channel, 10 classes. lenet and
 * trivial have rows of their own, the CIFAR-10 ResNets build as they are (28 native, 32
 * for --image_size=32). Every model's first layer reads the one channel: a model that
 * assumed 3 would count other parameters, or fail to build. Counts: lenet 5*5*1*32 + 32
 * + 5*5*32*64 + 64 + 3136*512 + 512 + 512*10 + 10; trivial 784 + 1 + 2 * 4096 + 40970;
 * the ResNets their CIFAR-10 count less the stem's 3x3x(3 - 1)x16 = 288 kernel weights. */
START_TEST(test_mnist_models_build_for_one_channel) {
  static const struct {
    const char *family, *name;
    int32_t batch;
    int64_t params;
  } mnist_cases[] = {
      {"lenet", "lenet", 32, 1663370},           {"trivial", "trivial", 32, 49947},
      {"resnet", "resnet20", 128, 269722 - 288}, {"resnet", "resnet20_v2", 128, 269402 - 288},
      {"resnet", "resnet56", 128, 853018 - 288},
  };
  for (size_t i = 0; i < sizeof mnist_cases / sizeof mnist_cases[0]; i++) {
    loaded l = load_family(mnist_cases[i].family);
    cnnb_ctx *ctx = cnnb_ctx_create("test", NULL);
    cnnb_model_info info = {.struct_size = sizeof info};
    ck_assert_msg(l.vt->describe(ctx, mnist_cases[i].name, MNIST, &info) == CNNB_OK, "%s: %s",
                  mnist_cases[i].name, cnnb_error_message(ctx));
    ck_assert_int_eq(info.image_size, 28);
    ck_assert_int_eq(info.default_batch_size, mnist_cases[i].batch);
    /* A dataset of the same shape that the model never names gets the same variant: the
     * model reads the description, not the name. */
    const cnnb_dataset_info *fashion = cnnb_dataset_find("fashion_mnist");
    ck_assert_ptr_nonnull(fashion);
    cnnb_model_info same = {.struct_size = sizeof same};
    ck_assert_int_eq(l.vt->describe(ctx, mnist_cases[i].name, fashion->kind, &same), CNNB_OK);
    ck_assert_mem_eq(&same, &info, sizeof info);
    for (int32_t size = 28; size <= 32; size += 4) {
      if (size == 32 && strcmp(mnist_cases[i].family, "resnet") != 0) continue;
      cnnb_graph *g = cnnb_graph_create(2, 1, size, size, 10);
      cnnb_status st = l.vt->build(ctx, mnist_cases[i].name, MNIST, g);
      ck_assert_msg(st == CNNB_OK, "%s at %d: %s", mnist_cases[i].name, size,
                    cnnb_error_message(ctx));
      ck_assert_msg(cnnb_graph_trainable_count(g) == mnist_cases[i].params,
                    "%s at %d: %lld trainable parameters, want %lld", mnist_cases[i].name, size,
                    (long long)cnnb_graph_trainable_count(g), (long long)mnist_cases[i].params);
      ck_assert_int_eq(cnnb_graph_node(g, cnnb_graph_logits(g))->shape.c, 10);
      for (int32_t n = 0; n < cnnb_graph_num_nodes(g); n++) {
        const cnnb_node *node = cnnb_graph_node(g, n);
        if (node->op != CNNB_OP_CONV2D) continue;
        ck_assert_int_eq(cnnb_graph_node(g, node->inputs[0])->shape.c, 1); /* the input */
        break;
      }
      cnnb_graph_destroy(g);
    }
    cnnb_ctx_destroy(ctx);
    dlclose(l.handle);
  }
  /* Models without an MNIST variant say so, and which datasets they have. */
  loaded l = load_family("vgg");
  cnnb_ctx *ctx = cnnb_ctx_create("vgg", NULL);
  cnnb_model_info info = {.struct_size = sizeof info};
  ck_assert_int_eq(l.vt->describe(ctx, "vgg16", MNIST, &info), CNNB_EUNSUPPORTED);
  ck_assert_msg(strstr(cnnb_error_message(ctx),
                       "no mnist variant (it is defined for imagenet only)"),
                "%s", cnnb_error_message(ctx));
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
  l = load_family("lenet");
  ctx = cnnb_ctx_create("lenet", NULL);
  ck_assert_int_eq(l.vt->describe(ctx, "lenet", CIFAR, &info), CNNB_EUNSUPPORTED);
  ck_assert_msg(strstr(cnnb_error_message(ctx), "defined for imagenet, mnist, fashion_mnist, "
                                                "kmnist only): use --data_name=imagenet"),
                "%s", cnnb_error_message(ctx));
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* A fixed-arithmetic model (reshape([-1, 256 * 6 * 6])) at the wrong image size fails
 * with the builder's message naming the node, not a crash or a silent graph. */
START_TEST(test_wrong_image_size) {
  loaded l = load_family("alexnet");
  cnnb_ctx *ctx = cnnb_ctx_create("alexnet", NULL);
  cnnb_status st;
  cnnb_graph *g = build(&l, ctx, "alexnet", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_EINVAL);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "alexnet"));
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "reshape"));
  cnnb_graph_destroy(g);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* An older host's smaller cnnb_model_info is filled only as far as it reaches. */
START_TEST(test_describe_respects_struct_size) {
  loaded l = load_family("vgg");
  cnnb_ctx *ctx = cnnb_ctx_create("vgg", NULL);
  cnnb_model_info info;
  memset(&info, 0xAB, sizeof info);
  info.struct_size = (uint32_t)offsetof(cnnb_model_info, default_batch_size);
  ck_assert_int_eq(l.vt->describe(ctx, "vgg16", IMAGENET, &info), CNNB_OK);
  ck_assert_int_eq(info.image_size, 224);
  int32_t untouched;
  memset(&untouched, 0xAB, sizeof untouched);
  ck_assert_int_eq(info.default_batch_size, untouched);
  cnnb_ctx_destroy(ctx);
  dlclose(l.handle);
}
END_TEST

/* ---- learning-rate schedules ------------------------------------------------------------ */

/* The hook as the host calls it: the model's ctx (NULL: no flags), its dataset, the
 * datasource's epoch. */
typedef float (*lr_fn)(cnnb_ctx *, const char *, uint32_t, int64_t, int32_t, int64_t);

START_TEST(test_learning_rates) {
  loaded l = load_family("resnet");
  ck_assert_ptr_null(l.vt->learning_rate); /* ABI 1.3's hook only */
  ck_assert_ptr_nonnull(l.vt->learning_rate_at);
  lr_fn lr = l.vt->learning_rate_at;
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", NULL); /* no flags: --resnet_base_lr reads 0 */
  /* ImageNet, batch 256: 0.128; 1281167 / 256 = 5004.56 batches per epoch, so the
   * warm-up is int(5 * 5004.56) = 25022 steps and epoch 30 ends at step 150136. */
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 0, 256, 1281167), 0.0f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 12511, 256, 1281167), 0.128f * 12511 / 25022,
                         1e-6);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 25022, 256, 1281167), 0.128f, 1e-6);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 150136, 256, 1281167), 0.128f, 1e-6);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 150137, 256, 1281167), 0.0128f, 1e-7);
  ck_assert_float_eq_tol(lr(ctx, "resnet152_v2", IMAGENET, 500000, 256, 1281167), 0.0000128f,
                         1e-10);
  /* An unknown epoch (0) is the dataset's own: the same numbers. */
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 150137, 256, 0), 0.0128f, 1e-7);
  /* The datasource's epoch counts: half the examples, the drop comes twice as early. */
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 75100, 256, 1281167 / 2), 0.0128f, 1e-7);
  /* Scaled by batch: 1024 -> 0.512 after its 6255 warm-up steps. */
  ck_assert_float_eq_tol(lr(ctx, "resnet50_v1.5", IMAGENET, 6254, 1024, 1281167),
                         0.512f * 6254 / 6255, 1e-6);
  ck_assert_float_eq_tol(lr(ctx, "resnet50_v1.5", IMAGENET, 10000, 1024, 1281167), 0.512f, 1e-6);
  /* CIFAR, batch 128: 390 batches per epoch; 0.1 until step 31980 (epoch 82). */
  ck_assert_float_eq_tol(lr(ctx, "resnet20", CIFAR, 0, 128, 50000), 0.1f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "resnet20", CIFAR, 31980, 128, 50000), 0.1f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "resnet56_v2", CIFAR, 31981, 128, 50000), 0.01f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "resnet44", CIFAR, 47971, 128, 50000), 0.001f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "resnet110", CIFAR, 117001, 128, 0), 0.0002f, 1e-9);
  dlclose(l.handle);

  l = load_family("densenet");
  lr = l.vt->learning_rate_at;
  ck_assert_ptr_nonnull(lr);
  /* batch 64: 781 batches per epoch; boundaries 117150, 175725, 234300. */
  ck_assert_float_eq_tol(lr(ctx, "densenet40_k12", CIFAR, 117150, 64, 50000), 0.1f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "densenet40_k12", CIFAR, 117151, 64, 50000), 0.01f, 1e-9);
  ck_assert_float_eq_tol(lr(ctx, "densenet100_k24", CIFAR, 234301, 64, 0), 0.0001f, 1e-10);
  dlclose(l.handle);

  l = load_family("alexnet");
  lr = l.vt->learning_rate_at;
  ck_assert_ptr_nonnull(lr);
  /* CIFAR, batch 128: decay 10x every 39062 steps (100 epochs). */
  ck_assert_float_eq_tol(lr(ctx, "alexnet", CIFAR, 39061, 128, 50000), 0.1f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "alexnet", CIFAR, 39062, 128, 50000), 0.01f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "alexnet", CIFAR, 78124, 128, 0), 0.001f, 1e-9);
  /* ImageNet: the constant default. */
  ck_assert_float_eq_tol(lr(ctx, "alexnet", IMAGENET, 1000000, 512, 1281167), 0.005f, 1e-9);
  dlclose(l.handle);

  /* The official ResNets: 0.0125 / 32 per example of the batch (0.05 at official_resnet50's
   * default 128, 0.0125 at the others' 32), from step 0 (no warm-up), 10x drops after
   * epochs 30, 60, 80, 90. Batch 256: 5004.56 batches per epoch, epoch 30 ends at step
   * 150136, epoch 90 at 450410. */
  l = load_family("official_resnet");
  ck_assert_ptr_null(l.vt->learning_rate);
  lr = l.vt->learning_rate_at;
  ck_assert_ptr_nonnull(lr);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet50", IMAGENET, 0, 128, 1281167), 0.05f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet18", IMAGENET, 0, 32, 1281167), 0.0125f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet50_v2", IMAGENET, 0, 256, 1281167), 0.1f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet200", IMAGENET, 150136, 256, 1281167), 0.1f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet200", IMAGENET, 150137, 256, 1281167), 0.01f,
                         1e-9);
  ck_assert_float_eq_tol(lr(ctx, "official_resnet34_v2", IMAGENET, 450411, 256, 0), 0.00001f,
                         1e-12);
  /* The datasource's epoch: half the examples, the first drop twice as early. */
  ck_assert_float_eq_tol(lr(ctx, "official_resnet101", IMAGENET, 75100, 256, 1281167 / 2), 0.01f,
                         1e-9);
  dlclose(l.handle);
  cnnb_ctx_destroy(ctx);

  /* Models without a schedule of their own leave it to the host. */
  const char *constant[] = {"trivial", "lenet",     "overfeat", "googlenet",
                            "vgg",     "inception", "mobilenet"};
  for (size_t i = 0; i < sizeof constant / sizeof constant[0]; i++) {
    l = load_family(constant[i]);
    ck_assert_ptr_null(l.vt->learning_rate);
    ck_assert_ptr_null(l.vt->learning_rate_at);
    dlclose(l.handle);
  }
}
END_TEST

/* --resnet_base_lr (the resnet plugin's own flag) replaces 0.128 in the ImageNet
 * schedule, read through the ctx the schedule is given (no state in the plugin); the
 * CIFAR schedule ignores it; a negative value is refused at build, naming the flag. */
START_TEST(test_resnet_base_lr_flag) {
  loaded l = load_family("resnet");
  ck_assert_ptr_nonnull(l.plugin->register_flags);
  cnnb_flags *flags = cnnb_flags_create();
  ck_assert_ptr_nonnull(flags);
  ck_assert_int_eq(l.plugin->register_flags(cnnb_flags_registry(flags, "resnet")), CNNB_OK);
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", flags);
  lr_fn lr = l.vt->learning_rate_at;
  char err[256];
  cnnb_status st;

  ck_assert_int_eq(cnnb_flags_set(flags, "resnet_base_lr", "0.05", err, sizeof err), CNNB_OK);
  cnnb_graph *g = build(&l, ctx, "resnet50", IMAGENET, 224, 1001, &st);
  ck_assert_msg(st == CNNB_OK, "%s", cnnb_error_message(ctx));
  cnnb_graph_destroy(g);
  /* Batch 256 after warm-up: the base itself; batch 512: twice it; epoch 30 drops 10x. */
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 30000, 256, 1281167), 0.05f, 1e-7);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 20000, 512, 1281167), 0.1f, 1e-7);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 150137, 256, 1281167), 0.005f, 1e-8);
  ck_assert_float_eq_tol(lr(ctx, "resnet20", CIFAR, 0, 128, 50000), 0.1f, 1e-9);
  /* Another ctx (another run) with its own value is not affected: no state is shared. */
  cnnb_ctx *plain = cnnb_ctx_create("resnet", NULL);
  ck_assert_float_eq_tol(lr(plain, "resnet50", IMAGENET, 30000, 256, 1281167), 0.128f, 1e-7);
  cnnb_ctx_destroy(plain);

  ck_assert_int_eq(cnnb_flags_set(flags, "resnet_base_lr", "-1", err, sizeof err), CNNB_OK);
  g = build(&l, ctx, "resnet50", IMAGENET, 224, 1001, &st);
  ck_assert_int_eq(st, CNNB_EINVAL);
  ck_assert_msg(strstr(cnnb_error_message(ctx), "--resnet_base_lr=-1"), "%s",
                cnnb_error_message(ctx));
  cnnb_graph_destroy(g);
  cnnb_clear_error(ctx);

  /* Back to 0: the model's 0.128. */
  ck_assert_int_eq(cnnb_flags_set(flags, "resnet_base_lr", "0", err, sizeof err), CNNB_OK);
  ck_assert_float_eq_tol(lr(ctx, "resnet50", IMAGENET, 30000, 256, 1281167), 0.128f, 1e-7);
  cnnb_ctx_destroy(ctx);
  cnnb_flags_destroy(flags);
  dlclose(l.handle);
}
END_TEST

static Suite *models_suite(void) {
  Suite *s = suite_create("models");
  TCase *tc = tcase_create("structure");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_model_structure, 0, NUM_CASES);
  tcase_add_loop_test(tc, test_offers_match_cases, 0, NUM_FAMILIES);
  tcase_add_test(tc, test_cifar_models_build_at_32);
  tcase_add_test(tc, test_mnist_models_build_for_one_channel);
  tcase_add_test(tc, test_resnet_stride_placement);
  tcase_add_test(tc, test_official_resnet_details);
  tcase_add_test(tc, test_inception3_and_alexnet_details);
  tcase_add_test(tc, test_mobilenet_depthwise);
  tcase_add_test(tc, test_mobilenet_relu6);
  tcase_add_test(tc, test_resnet_cifar_shortcut);
  tcase_add_test(tc, test_num_classes_override);
  suite_add_tcase(s, tc);
  TCase *errors = tcase_create("errors");
  tcase_add_test(errors, test_no_variant_for_dataset);
  tcase_add_test(errors, test_wrong_image_size);
  tcase_add_test(errors, test_describe_respects_struct_size);
  suite_add_tcase(s, errors);
  TCase *lr = tcase_create("learning_rate");
  tcase_add_test(lr, test_learning_rates);
  tcase_add_test(lr, test_resnet_base_lr_flag);
  suite_add_tcase(s, lr);
  return s;
}

/* The kinds the datasources pin (cnnb/dataset.h) are those older plugins compare with. */
static void check_pinned_kinds(void) {
  static const struct {
    const char *name;
    uint32_t kind;
  } pinned[] = {{"imagenet", IMAGENET}, {"cifar10", CIFAR}, {"mnist", MNIST}};
  for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
    const cnnb_dataset_info *d = cnnb_dataset_find(pinned[i].name);
    if (!d || d->kind != pinned[i].kind) {
      fprintf(stderr, "test_models: dataset %s: want kind %u, the datasources give %s %u\n",
              pinned[i].name, (unsigned)pinned[i].kind, d ? "kind" : "none",
              d ? (unsigned)d->kind : 0u);
      exit(1);
    }
  }
}

int main(void) {
  cnnb_loader *loader = test_datasets_load();
  check_pinned_kinds();
  SRunner *sr = srunner_create(models_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cnnb_loader_destroy(loader);
  return failed != 0;
}
