/* alexnet.c — tf_cnn_benchmarks' AlexNet (alexnet_model.py), both variants:
 *  - ImageNet (227x227, batch 512, lr 0.005): the "one weird trick" layout,
 *    64/192/384/384/256 convolutions with biases, no LRN, two dropout 4096 affines;
 *  - CIFAR-10 (32x32, batch 128, lr 0.1 decayed 10x every 100 epochs): TF's cifar10
 *    tutorial network, two 5x5 convolutions with LRN, affines 384 and 192.
 * Checkpoints keep the params' own names: torchvision's alexnet has 384->256->256 where
 * this one has 384->384->256 in its last convolutions, so its keys cannot take them. */
#include "convnet.h"

#include <math.h>

static const convnet_model models[] = {
    {"alexnet", CONVNET_RESIZED, 224 + 3, 512, 0.005f,
     "AlexNet (64/192/384/384/256, no LRN), 227x227"},
    {"alexnet", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 128, 0.1f,
     "AlexNet for CIFAR-10 (TF cifar10 tutorial, with LRN), 32x32"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "alexnet", models, NUM_MODELS, name, dataset, info);
}

static cnnb_tensor imagenet(convnet *cn, cnnb_tensor x) {
  /* VALID needs the images padded by 3 (227 = 224 + 3), as the source notes. */
  x = convnet_conv(cn, x, 64, 11, 11, CONVNET_OPTS(.stride = 4, .mode = CONVNET_VALID)); /* 55 */
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_VALID);                                      /* 27 */
  x = convnet_conv(cn, x, 192, 5, 5, NULL);
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_VALID); /* 13 */
  x = convnet_conv(cn, x, 384, 3, 3, NULL);
  x = convnet_conv(cn, x, 384, 3, 3, NULL);
  x = convnet_conv(cn, x, 256, 3, 3, NULL);
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_VALID); /* 6 */
  x = convnet_reshape(cn, x, 256 * 6 * 6);
  x = convnet_affine(cn, x, 4096, NULL);
  x = convnet_dropout(cn, x, 0.5f);
  x = convnet_affine(cn, x, 4096, NULL);
  x = convnet_dropout(cn, x, 0.5f);
  return x;
}

static cnnb_tensor cifar10(convnet *cn, cnnb_tensor x) {
  const float alpha = 0.001f / 9.0f;
  x = convnet_conv(cn, x, 64, 5, 5, CONVNET_OPTS(.stddev = 5e-2f));
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_SAME); /* 16 */
  x = convnet_lrn(cn, x, 4, 1.0f, alpha, 0.75f);
  x = convnet_conv(cn, x, 64, 5, 5, CONVNET_OPTS(.bias = 0.1f, .stddev = 5e-2f));
  x = convnet_lrn(cn, x, 4, 1.0f, alpha, 0.75f);
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_SAME); /* 8 */
  cnnb_shape s = convnet_shape(cn, x);
  x = convnet_reshape(cn, x, s.c * s.h * s.w);
  x = convnet_affine(cn, x, 384, CONVNET_AFFINE(.stddev = 0.04f, .bias = 0.1f));
  x = convnet_affine(cn, x, 192, CONVNET_AFFINE(.stddev = 0.04f, .bias = 0.1f));
  return x;
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "alexnet", models, NUM_MODELS, name, dataset, &st)) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g);
  x = convnet_input_of(dataset) == CONVNET_SMALL_COLOR ? cifar10(&cn, x) : imagenet(&cn, x);
  return convnet_finish(&cn, ctx, name, x);
}

/* The CIFAR-10 variant's exponential decay (staircase): 0.1 * 0.1^floor(step /
 * decay_steps), decay_steps = 100 epochs (of CIFAR-10's 50000 images in the source; here
 * the datasource's epoch, or the dataset's when it does not know). The ImageNet variant
 * has no schedule of its own (a constant 0.005). */
static float learning_rate_at(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                              int64_t global_step, int32_t global_batch_size,
                              int64_t examples_per_epoch) {
  (void)ctx, (void)name;
  if (convnet_input_of(dataset) != CONVNET_SMALL_COLOR || global_batch_size <= 0)
    return models[0].default_learning_rate;
  if (examples_per_epoch <= 0) examples_per_epoch = convnet_train_examples(dataset);
  int64_t decay_steps = 100LL * examples_per_epoch / global_batch_size;
  if (decay_steps < 1) decay_steps = 1;
  return models[1].default_learning_rate * powf(0.1f, (float)(global_step / decay_steps));
}

static const cnnb_model_vtable vtable = {.struct_size = sizeof(cnnb_model_vtable),
                                         .describe = describe,
                                         .build = build,
                                         .learning_rate_at = learning_rate_at};

static const char *const offers[] = {"alexnet", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "alexnet", "1.0.0",
                     "tf_cnn_benchmarks' AlexNet (ImageNet and CIFAR-10 variants)"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}
