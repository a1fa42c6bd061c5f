/* resnet_blocks.c — the ResNet blocks of tf_cnn_benchmarks' resnet_model.py
 * (bottleneck_block_v1, _v1_5, _v2 and residual_block), one function per block kind.
 * Every convolution here is bias=None; use_batch_norm as each call in the source. */
#include "resnet.h"

#include <stdio.h>

/* "<block>.<leaf>" into out, or NULL (own names) when the block has no checkpoint name. */
static const char *ckpt_name(char *out, size_t size, const char *block, const char *leaf) {
  if (!block) return NULL;
  snprintf(out, size, "%s.%s", block, leaf);
  return out;
}

/* bottleneck_block_v1 and _v1_5: post-activation, ReLU after the sum. Checkpoint names
 * are torchvision's Bottleneck's: conv1..3 with bn1..3, downsample.0 and .1 for the
 * projection. */
static cnnb_tensor bottleneck_v1(convnet *cn, cnnb_tensor x, int32_t depth, int32_t bneck,
                                 int32_t stride, int v1_5, const char *ckpt) {
  char n[8][64];
  int32_t in_size = convnet_channels(cn, x);
  convnet_push_scope(cn, v1_5 ? "resnet_v1.5" : "resnet_v1");
  cnnb_tensor shortcut;
  if (depth == in_size)
    shortcut = stride == 1 ? x : convnet_apool(cn, x, 1, 1, stride, CONVNET_VALID);
  else
    shortcut = convnet_conv(cn, x, depth, 1, 1,
                            CONVNET_OPTS(.stride = stride, .linear = 1, .batch_norm = 1,
                                         .no_bias = 1,
                                         .ckpt = ckpt_name(n[0], 64, ckpt, "downsample.0"),
                                         .ckpt_bn = ckpt_name(n[1], 64, ckpt, "downsample.1")));
  cnnb_tensor y = convnet_conv(cn, x, bneck, 1, 1,
                               CONVNET_OPTS(.stride = v1_5 ? 1 : stride, .batch_norm = 1,
                                            .no_bias = 1,
                                            .ckpt = ckpt_name(n[2], 64, ckpt, "conv1"),
                                            .ckpt_bn = ckpt_name(n[3], 64, ckpt, "bn1")));
  y = convnet_conv(cn, y, bneck, 3, 3,
                   CONVNET_OPTS(.stride = v1_5 ? stride : 1, .mode = CONVNET_SAME_RESNET,
                                .batch_norm = 1, .no_bias = 1,
                                .ckpt = ckpt_name(n[4], 64, ckpt, "conv2"),
                                .ckpt_bn = ckpt_name(n[5], 64, ckpt, "bn2")));
  y = convnet_conv(cn, y, depth, 1, 1,
                   CONVNET_OPTS(.linear = 1, .batch_norm = 1, .no_bias = 1,
                                .ckpt = ckpt_name(n[6], 64, ckpt, "conv3"),
                                .ckpt_bn = ckpt_name(n[7], 64, ckpt, "bn3")));
  y = convnet_relu(cn, convnet_add(cn, shortcut, y));
  convnet_pop_scope(cn);
  return y;
}

/* bottleneck_block_v2: batch norm (batch_norm()'s defaults) and ReLU before the block,
 * no batch norm after its last convolution nor on the projection, no ReLU after the sum. */
static cnnb_tensor bottleneck_v2(convnet *cn, cnnb_tensor x, int32_t depth, int32_t bneck,
                                 int32_t stride) {
  int32_t in_size = convnet_channels(cn, x);
  cnnb_tensor preact = convnet_relu(cn, convnet_batch_norm(cn, x, NULL));
  convnet_push_scope(cn, "resnet_v2");
  cnnb_tensor shortcut;
  if (depth == in_size)
    shortcut = stride == 1 ? x : convnet_apool(cn, x, 1, 1, stride, CONVNET_VALID);
  else
    shortcut = convnet_conv(cn, preact, depth, 1, 1,
                            CONVNET_OPTS(.stride = stride, .linear = 1, .batch_norm = -1,
                                         .no_bias = 1));
  cnnb_tensor y = convnet_conv(cn, preact, bneck, 1, 1,
                               CONVNET_OPTS(.stride = stride, .batch_norm = 1, .no_bias = 1));
  y = convnet_conv(cn, y, bneck, 3, 3,
                   CONVNET_OPTS(.mode = CONVNET_SAME_RESNET, .batch_norm = 1, .no_bias = 1));
  y = convnet_conv(cn, y, depth, 1, 1, CONVNET_OPTS(.linear = 1, .batch_norm = -1, .no_bias = 1));
  y = convnet_add(cn, shortcut, y);
  convnet_pop_scope(cn);
  return y;
}

cnnb_tensor resnet_bottleneck_block(convnet *cn, cnnb_tensor x, int32_t depth,
                                    int32_t depth_bottleneck, int32_t stride, int version,
                                    const char *ckpt) {
  if (version == RESNET_V2) return bottleneck_v2(cn, x, depth, depth_bottleneck, stride);
  return bottleneck_v1(cn, x, depth, depth_bottleneck, stride, version == RESNET_V1_5, ckpt);
}

/* residual_block. When the depth grows, the shortcut is the source's "plan A": a strided
 * 1x1 average pool, then (depth - in_size) // 2 zero channels on each side (tf.pad). */
cnnb_tensor resnet_residual_block(convnet *cn, cnnb_tensor x, int32_t depth, int32_t stride,
                                  int version) {
  int v2 = version == RESNET_V2;
  int32_t in_size = convnet_channels(cn, x);
  cnnb_tensor shortcut = x;
  if (in_size != depth) {
    int32_t pad = (depth - in_size) / 2;
    shortcut = convnet_apool(cn, x, 1, 1, stride, CONVNET_VALID);
    shortcut = cnnb_pad_channels(cn->g, NULL, shortcut, pad, pad);
  }
  cnnb_tensor res = v2 ? convnet_relu(cn, convnet_batch_norm(cn, x, NULL)) : x;
  res = convnet_conv(cn, res, depth, 3, 3,
                     CONVNET_OPTS(.stride = stride, .batch_norm = 1, .no_bias = 1));
  res = convnet_conv(cn, res, depth, 3, 3,
                     CONVNET_OPTS(.linear = 1, .batch_norm = v2 ? -1 : 1, .no_bias = 1));
  cnnb_tensor out = convnet_add(cn, shortcut, res);
  return v2 ? out : convnet_relu(cn, out);
}
