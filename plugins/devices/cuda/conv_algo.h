/* conv_algo.h — a convolution as cuDNN sees it (the key: every parameter that decides
 * which algorithm runs), its cuDNN descriptors, and the algorithm chosen for each
 * direction, once per distinct key for the whole run (d->algos).
 *
 * Choosing: cuDNN's heuristics (cudnnGet*Algorithm_v7), or under --cudnn_autotune its
 * measurements (cudnnFind*AlgorithmEx on scratch buffers allocated for the search and
 * freed after it); either way the first candidate that succeeded, fits
 * d->workspace_limit and uses a math type the device allows. The shared workspace is
 * grown to the choice (gpu_workspace_reserve). Everything here runs at prepare time.
 *
 * Under --cudnn_autotune, timed choices are also kept in the autotune cache file
 * (--cudnn_autotune_cache, algo_cache_file.h), read at the first choice: a later process
 * on the same GPU takes them from there instead of timing again. */
#ifndef CNNB_GPU_CONV_ALGO_H
#define CNNB_GPU_CONV_ALGO_H

#include "algo_cache_file.h"
#include "gpu_device.h"

typedef enum gpu_conv_dir {
  GPU_CONV_FORWARD = 0,
  GPU_CONV_BACKWARD_DATA = 1,
  GPU_CONV_BACKWARD_FILTER = 2,
  GPU_CONV_DIRS = 3
} gpu_conv_dir;

/* gpu_conv_key, every parameter of one convolution, is algo_cache_file.h's: the
 * autotune cache file's columns follow its fields. */

/* The key's descriptors. One convolution descriptor per direction, because the chosen
 * algorithm comes with its own math type and cuDNN reads it from the descriptor. */
typedef struct gpu_conv_descs {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv[GPU_CONV_DIRS];
  cnnb_shape y_shape; /* logical [N, K, H, W] cuDNN computes from the key */
} gpu_conv_descs;

typedef struct gpu_conv_algo {
  int32_t algo;         /* cudnnConvolutionFwdAlgo_t, BwdDataAlgo_t or
                           BwdFilterAlgo_t, by direction */
  cudnnMathType_t math; /* the math type it runs with (set on descs->conv[dir]) */
  size_t workspace;     /* bytes it needs of d->workspace */
} gpu_conv_algo;

/* The math type this device lets convolutions use: tensor ops for fp16 / bf16; for
 * fp32 the default (TF32 tensor cores on Ampere and later) unless --cuda_allow_tf32 is
 * off, then plain FMA. */
cudnnMathType_t gpu_conv_math(const gpu_device *d);

/* Creates the descriptors of `key` (*descs zeroed first, so a failure leaves only
 * NULLs or created descriptors that gpu_conv_descs_destroy frees). */
cnnb_status gpu_conv_descs_create(gpu_device *d, const gpu_conv_key *key, gpu_conv_descs *descs,
                                  const cnnb_node *node);
void gpu_conv_descs_destroy(gpu_conv_descs *descs);

/* The algorithm for direction `dir` of `key` (descs its descriptors): from this run's
 * choices, from the autotune cache file (checked again: cuDNN must offer it for the
 * descriptors, within the workspace limit), or chosen now and kept in both. Sets descs->conv[dir]'s
 * math type to the choice's and grows the shared workspace to fit it. node names the convolution in
 * messages and logs. */
cnnb_status gpu_conv_algo_choose(gpu_device *d, const cnnb_node *node, const gpu_conv_key *key,
                                 gpu_conv_descs *descs, gpu_conv_dir dir, gpu_conv_algo *out);

/* Logs how many choices came from the cache file (info), closes it and frees d->algos
 * (device.c, at destroy); d->algos is NULL after. */
void gpu_algo_cache_free(gpu_device *d);

#endif
