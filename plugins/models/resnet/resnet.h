/* resnet.h — the residual blocks of tf_cnn_benchmarks' resnet_model.py, shared by the
 * ImageNet and CIFAR-10 builders of resnet.c. */
#ifndef CNNB_MODELS_RESNET_H
#define CNNB_MODELS_RESNET_H

#include "convnet.h"

enum { RESNET_V1 = 1, RESNET_V1_5 = 2, RESNET_V2 = 3 };

/* bottleneck_block(): 1x1 depth_bottleneck, 3x3 depth_bottleneck, 1x1 depth, plus the
 * shortcut (identity, or a strided 1x1 projection when the depth changes). The stride
 * sits on the first 1x1 (v1, v2) or on the 3x3 (v1.5). [N, C, H, W] -> [N, depth, H/s, W/s]
 * ckpt: the block's torchvision prefix ("layer1.0"), under which a v1/v1.5 block's
 * params are saved (torchvision's Bottleneck: conv1..3, bn1..3, downsample.0/.1); NULL,
 * and always for v2 (torchvision has no pre-activation ResNet): their own names. */
cnnb_tensor resnet_bottleneck_block(convnet *cn, cnnb_tensor x, int32_t depth,
                                    int32_t depth_bottleneck, int32_t stride, int version,
                                    const char *ckpt);

/* residual_block(): two 3x3 convolutions plus the parameter-free shortcut (a strided
 * 1x1 average pool, zero-padded in channels when the depth grows). v1 or v2. */
cnnb_tensor resnet_residual_block(convnet *cn, cnnb_tensor x, int32_t depth, int32_t stride,
                                  int version);

#endif
