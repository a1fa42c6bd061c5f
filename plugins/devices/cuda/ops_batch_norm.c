/* ops_batch_norm.c — batch normalization (per channel, over N, H and W) on cuDNN, with the
 * following ReLU when the graph fused one into the node.
 *
 * Training normalises with the batch's statistics and moves the running averages in the
 * stats arena as TF's fused batch norm and the cpu device do:
 *   running_mean = decay * running_mean + (1 - decay) * batch_mean
 *   running_var  = decay * running_var  + (1 - decay) * batch_var * m / (m - 1)
 * (m = N*H*W; the normalisation itself uses the biased batch variance). cuDNN's
 * cudnnBatchNormalizationForwardTraining does exactly this with exponentialAverageFactor
 * = 1 - decay: runningX = factor * batchX + (1 - factor) * runningX, and its running
 * variance takes the unbiased (Bessel-corrected, m / (m - 1)) batch variance while y uses
 * the biased one (MXNet measured it against its own kernels: apache/mxnet#21111, the
 * behaviour PyTorch's cuDNN path relies on for its unbiased running_var). For m = 1 the
 * correction is undefined (cuDNN would divide by zero); the cpu device then uses a
 * factor of 1, and the batch variance of a single value is 0, so here running_var =
 * decay * running_var and running_mean moves as above, both through cudnnScaleTensor /
 * cudnnAddTensor, while cuDNN's own running outputs go to discarded buffers.
 * Inference (--forward_only) normalises with the running statistics
 * (cudnnBatchNormalizationForwardInference).
 *
 * Parameters: offset only (tf_cnn_benchmarks' default): params[0] is the offset and
 * cuDNN, which always wants a scale, gets d->ones and writes the scale gradient into a
 * buffer of this node that nobody reads. With a learned scale: params[0] scale, params[1]
 * offset. Backward overwrites their gradients (alphaParamDiff 1, betaParamDiff 0). The
 * batch mean and inverse standard deviation cuDNN saves in the forward feed the backward.
 * Half-precision activations keep fp32 statistics and parameters (the derived BN
 * descriptor is fp32).
 *
 * Training on the fp16 or bf16 NHWC device with C % 4 == 0 runs cuDNN's
 * cudnnBatchNormalizationForwardTrainingEx / BackwardEx in CUDNN_BATCHNORM_SPATIAL_PERSISTENT
 * mode (its fast NHWC kernels, as PyTorch's channels-last batch norm), with
 * CUDNN_BATCHNORM_OPS_BN_ACTIVATION when the node has a fused ReLU (it runs inside) and
 * CUDNN_BATCHNORM_OPS_BN otherwise; prepare asks cuDNN for the workspace and reserve
 * sizes and takes the plain path where it answers NOT_SUPPORTED. Everywhere else: plain
 * batch norm, then gpu_k_relu in place for a fused ReLU; the backward masks dy with
 * gpu_k_relu_backward(dy, y) into transient slot 0 first. BN_CUDNN_EX below turns the
 * Ex path off.
 *
 * cuDNN may still refuse a call at run time (NOT_SUPPORTED: which configurations each
 * path takes differs between cuDNN versions and GPUs, bf16 above all). Nothing was
 * computed then, so the node moves to the other path and repeats the call, forward or
 * backward, in either direction where both were prepared, and says so once in the log;
 * refused on both, the step fails naming the node. prepare logs each node's path at
 * --log_level=debug. */
#include <stdlib.h>

#include "gpu_device.h"

/* 1: the Ex path where cuDNN offers it (see above). cudnn_ops.h says of
 * SPATIAL_PERSISTENT that it "may be faster than CUDNN_BATCHNORM_SPATIAL but imposes
 * some limits on the range of values" (the API reference: a scaled integer reduction that
 * can overflow into Inf / NaN on extreme inputs). If a run on the GPU shows that, set 0:
 * every batch norm then stays on CUDNN_BATCHNORM_SPATIAL with gpu_k_relu. */
#define BN_CUDNN_EX 1

typedef struct bn_node {
  gpu_node base;
  int use_scale; /* params[0] is a learned scale, params[1] the offset */
  int cudnn_ex;  /* training runs cuDNN's Ex functions (persistent NHWC kernels) */
  int ex_ready;  /* prepare sized the Ex path: a refused plain call may move there */
  int ex_refused, plain_refused; /* cuDNN answered NOT_SUPPORTED on that path at run time */
  cudnnBatchNormOps_t ex_ops; /* CUDNN_BATCHNORM_OPS_BN, or _BN_ACTIVATION: the fused ReLU inside */
  int dx_scratch;             /* transient slot 1 holds a dx nobody wants (see needs_dx_scratch) */
  int32_t channels;
  int64_t count; /* elements of x (and y) */
  size_t x_bytes;
  double m; /* elements per channel in the batch: N*H*W */
  double epsilon;
  float decay;
  cudnnBatchNormMode_t mode;
  cudnnTensorDescriptor_t x_desc;  /* x, y, dx, dy: [N, C, H, W], the device's type and layout */
  cudnnTensorDescriptor_t bn_desc; /* scale, offset, statistics: [1, C, 1, 1] fp32 */
  cudnnActivationDescriptor_t relu_desc;
  float *stat_buffer;                    /* one allocation of the five [C] buffers below */
  float *saved_mean, *saved_inv_std;     /* this step's batch statistics, forward -> backward */
  float *discarded_dscale;               /* offset only: the gradient of the fixed scale of ones */
  float *discarded_mean, *discarded_var; /* m = 1: cuDNN's running outputs, unused */
  void *reserve;                         /* cuDNN's fused-ReLU reserve space, forward -> backward */
  size_t reserve_bytes, forward_workspace_bytes, backward_workspace_bytes;
} bn_node;

static float *param(const gpu_node *n, float *base, int32_t which) {
  return gpu_param_ptr(n->g, base, n->node->params[which]);
}

/* m = 1: the running averages as the cpu device moves them (see the top of this file). */
static cnnb_status single_value_running_update(gpu_device *d, bn_node *s, float *run_mean,
                                               float *run_var) {
  const cnnb_node *node = s->base.node;
  const float decay = s->decay, rest = 1.0f - s->decay;
  cnnb_status st = gpu_cudnn(d,
                             cudnnAddTensor(d->cudnn, &rest, s->bn_desc, s->saved_mean, &decay,
                                            s->bn_desc, run_mean),
                             node, "batch norm running mean (one value per channel)");
  if (st != CNNB_OK) return st;
  return gpu_cudnn(d, cudnnScaleTensor(d->cudnn, s->bn_desc, run_var, &decay), node,
                   "batch norm running variance (one value per channel)");
}

static const char *path_name(int ex) {
  return ex ? "cuDNN's persistent Ex kernels" : "cuDNN's plain batch norm";
}

/* After a training call on s's current path answered cs: when cuDNN refused it
 * (NOT_SUPPORTED, nothing computed) and the other path is there and not refused too,
 * moves s to it, says so once, and returns 1 (repeat the call); else 0. */
static int refused_moves(gpu_device *d, bn_node *s, cudnnStatus_t cs, const char *direction) {
  if (CUDNN_STATUS_CATEGORY((int)cs) != CUDNN_STATUS_NOT_SUPPORTED) return 0;
  if (s->cudnn_ex) s->ex_refused = 1;
  else s->plain_refused = 1;
  const int to_ex = !s->cudnn_ex;
  if (to_ex ? !s->ex_ready || s->ex_refused : s->plain_refused) return 0;
  cnnb_log(d->ctx, CNNB_LOG_INFO,
           "cuda: node '%s': cuDNN refused %s in the %s (%s): %s from now on", s->base.node->name,
           path_name(!to_ex), direction, cudnnGetErrorString(cs), path_name(to_ex));
  s->cudnn_ex = to_ex;
  s->mode = to_ex ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
  return 1;
}

static cnnb_status bn_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  bn_node *s = (bn_node *)n;
  const cnnb_node *node = n->node;
  const float one = 1.0f, zero = 0.0f;
  const float *scale = s->use_scale ? param(n, io->params, 0) : d->ones;
  const float *offset = param(n, io->params, s->use_scale ? 1 : 0);
  float *run_mean = gpu_param_ptr(n->g, io->stats, node->stats[0]);
  float *run_var = gpu_param_ptr(n->g, io->stats, node->stats[1]);
  const void *x = io->inputs[0];
  void *y = io->output;
  cnnb_status st = CNNB_OK;

  if (!d->cfg.training) {
    st = gpu_cudnn(d,
                   cudnnBatchNormalizationForwardInference(d->cudnn, s->mode, &one, &zero,
                                                           s->x_desc, x, s->x_desc, y, s->bn_desc,
                                                           scale, offset, run_mean, run_var,
                                                           s->epsilon),
                   node, "batch norm forward (inference)");
    if (st != CNNB_OK || !node->fused_relu) return st;
    return gpu_cuda(d, gpu_k_relu(y, y, d->act, s->count, d->stream), node, "fused relu");
  }

  /* m = 1: cuDNN's running outputs are discarded, the update is made below. */
  const int single = s->m <= 1.0;
  float *cudnn_mean = single ? s->discarded_mean : run_mean;
  float *cudnn_var = single ? s->discarded_var : run_var;
  const double factor = single ? 1.0 : 1.0 - (double)s->decay;
  /* At most two tries: the node's path, then the other one if cuDNN refused the first. */
  for (int tries = 0; tries < 2; tries++) {
    const int ex = s->cudnn_ex;
    cudnnStatus_t cs;
    if (ex)
      cs = cudnnBatchNormalizationForwardTrainingEx(d->cudnn, s->mode, s->ex_ops, &one, &zero,
                                                    s->x_desc, x, NULL, NULL, s->x_desc, y,
                                                    s->bn_desc, scale, offset, factor, cudnn_mean,
                                                    cudnn_var, s->epsilon, s->saved_mean,
                                                    s->saved_inv_std, s->relu_desc, d->workspace,
                                                    s->forward_workspace_bytes, s->reserve,
                                                    s->reserve_bytes);
    else
      cs = cudnnBatchNormalizationForwardTraining(d->cudnn, s->mode, &one, &zero, s->x_desc, x,
                                                  s->x_desc, y, s->bn_desc, scale, offset, factor,
                                                  cudnn_mean, cudnn_var, s->epsilon, s->saved_mean,
                                                  s->saved_inv_std);
    if (refused_moves(d, s, cs, "forward")) continue;
    st = gpu_cudnn(d, cs, node,
                   ex ? "batch norm forward (training, Ex)" : "batch norm forward (training)");
    if (st == CNNB_OK && !ex && node->fused_relu)
      st = gpu_cuda(d, gpu_k_relu(y, y, d->act, s->count, d->stream), node, "fused relu");
    break;
  }
  if (st == CNNB_OK && single) st = single_value_running_update(d, s, run_mean, run_var);
  return st;
}

static cnnb_status bn_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  bn_node *s = (bn_node *)n;
  const cnnb_node *node = n->node;
  const float one = 1.0f, zero = 0.0f;
  const float *scale = s->use_scale ? param(n, io->params, 0) : d->ones;
  const float *offset = param(n, io->params, s->use_scale ? 1 : 0);
  float *dscale = s->use_scale ? param(n, io->grads, 0) : s->discarded_dscale;
  float *doffset = param(n, io->grads, s->use_scale ? 1 : 0);
  const void *x = io->inputs[0];
  const void *y = io->output;
  const void *dy = io->output_grad;
  void *dx = io->input_grads[0];
  if (!dx) {
    /* cuDNN computes the parameter gradients only together with dx: a batch norm with
     * nothing trainable upstream (on the images) writes it into scratch. */
    if (!s->dx_scratch || d->transient_bytes[1] < s->x_bytes)
      return cnnb_error(d->ctx, CNNB_EINTERNAL,
                        "cuda: node '%s': batch norm backward got no input gradient buffer, "
                        "but prepare saw trainable parameters upstream and reserved no scratch",
                        node->name);
    dx = gpu_transient(d, 1);
  }
  /* y only with the fused activation: the core keeps an unfused batch norm's output
   * only while something else needs it, so the pointer may hold another tensor by now. */
  /* The saved mean and inverse deviation mean the same on both paths, so a backward
   * refused on one may run on the other (the Ex reserve space only ever feeds Ex). */
  bool ex_reads_y = s->ex_ops != CUDNN_BATCHNORM_OPS_BN;
  for (int tries = 0; tries < 2; tries++) {
    cudnnStatus_t cs;
    if (s->cudnn_ex) {
      cs = cudnnBatchNormalizationBackwardEx(d->cudnn, s->mode, s->ex_ops, &one, &zero, &one, &zero,
                                             s->x_desc, x, ex_reads_y ? s->x_desc : NULL,
                                             ex_reads_y ? y : NULL, s->x_desc, dy, NULL, NULL,
                                             s->x_desc, dx, s->bn_desc, scale, offset, dscale,
                                             doffset, s->epsilon, s->saved_mean, s->saved_inv_std,
                                             s->relu_desc, d->workspace,
                                             s->backward_workspace_bytes, s->reserve,
                                             s->reserve_bytes);
      if (refused_moves(d, s, cs, "backward")) continue;
      return gpu_cudnn(d, cs, node, "batch norm backward (Ex)");
    }
    const void *plain_dy = dy;
    if (node->fused_relu) {
      void *masked = gpu_transient(d, 0); /* dy where y > 0, else 0 */
      cnnb_status st = gpu_cuda(d, gpu_k_relu_backward(masked, dy, y, d->act, s->count, d->stream),
                                node, "fused relu backward");
      if (st != CNNB_OK) return st;
      plain_dy = masked;
    }
    cs = cudnnBatchNormalizationBackward(d->cudnn, s->mode, &one, &zero, &one, &zero, s->x_desc, x,
                                         s->x_desc, plain_dy, s->x_desc, dx, s->bn_desc, scale,
                                         dscale, doffset, s->epsilon, s->saved_mean,
                                         s->saved_inv_std);
    if (refused_moves(d, s, cs, "backward")) continue;
    return gpu_cudnn(d, cs, node, "batch norm backward");
  }
  return CNNB_OK; /* not reached: the second try always returns */
}

static void bn_release(gpu_device *d, gpu_node *n) {
  bn_node *s = (bn_node *)n;
  if (s->x_desc) gpu_tensor_desc_free(&s->x_desc);
  if (s->bn_desc) cudnnDestroyTensorDescriptor(s->bn_desc);
  s->bn_desc = NULL;
  if (s->relu_desc) cudnnDestroyActivationDescriptor(s->relu_desc);
  s->relu_desc = NULL;
  if (s->stat_buffer) cudaFree(s->stat_buffer);
  s->stat_buffer = NULL;
  if (s->reserve) cudaFree(s->reserve);
  s->reserve = NULL;
}

static const gpu_node_ops bn_ops = {bn_forward, bn_backward, bn_release};

/* Whether tensor t has no parameter at or upstream of it: then the executor plans no
 * gradient for it (core/src/exec/plan.c: a node has a backward only with parameters
 * upstream), and this node's input_grads[0] is NULL. 1 also when out of host memory
 * (reserving scratch is always safe). */
static int needs_dx_scratch(const cnnb_graph *g, cnnb_tensor t) {
  const int32_t count = cnnb_graph_num_nodes(g);
  char *seen = calloc((size_t)count, 1);
  cnnb_tensor *stack = malloc((size_t)count * sizeof *stack);
  int found = 0, top = 0;
  if (!seen || !stack) {
    free(seen);
    free(stack);
    return 1;
  }
  stack[top++] = t;
  seen[t] = 1;
  while (top > 0 && !found) {
    const cnnb_node *node = cnnb_graph_node(g, stack[--top]);
    if (node->num_params > 0) found = 1;
    for (int32_t k = 0; k < node->num_inputs; k++) {
      cnnb_tensor in = node->inputs[k];
      if (in >= 0 && in < count && !seen[in]) {
        seen[in] = 1;
        stack[top++] = in;
      }
    }
  }
  free(seen);
  free(stack);
  return !found;
}

/* The Ex path (fp16 or bf16 NHWC training: cuDNN's persistent kernels, with the fused ReLU
 * inside when the node has one): its sizes; s->cudnn_ex stays 0 where cuDNN cannot. */
static cnnb_status prepare_ex(gpu_device *d, bn_node *s) {
  const cnnb_node *node = s->base.node;
  cnnb_status st = CNNB_OK;
  cudnnStatus_t cs;
  s->cudnn_ex = 0;
  if (!BN_CUDNN_EX || !d->bn_persistent || !d->cfg.training ||
      (d->act != GPU_F16 && d->act != GPU_BF16) || d->format != CUDNN_TENSOR_NHWC ||
      s->channels % 4 != 0)
    return CNNB_OK;
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t ops = node->fused_relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                                                   : CUDNN_BATCHNORM_OPS_BN;
  size_t forward_bytes = 0, backward_bytes = 0, reserve_bytes = 0;
  if (node->fused_relu) {
    GPU_TRY(st, gpu_cudnn(d, cudnnCreateActivationDescriptor(&s->relu_desc), node,
                          "creating the relu descriptor"));
    GPU_TRY(st, gpu_cudnn(d,
                          cudnnSetActivationDescriptor(s->relu_desc, CUDNN_ACTIVATION_RELU,
                                                       CUDNN_NOT_PROPAGATE_NAN, 0.0),
                          node, "setting the relu descriptor"));
  }
  cs = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(d->cudnn, mode, ops, s->x_desc,
                                                                NULL, s->x_desc, s->bn_desc,
                                                                s->relu_desc, &forward_bytes);
  if (cs == CUDNN_STATUS_SUCCESS)
    cs = cudnnGetBatchNormalizationBackwardExWorkspaceSize(d->cudnn, mode, ops, s->x_desc,
                                                           s->x_desc, s->x_desc, NULL, s->x_desc,
                                                           s->bn_desc, s->relu_desc,
                                                           &backward_bytes);
  if (cs == CUDNN_STATUS_SUCCESS)
    cs = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(d->cudnn, mode, ops, s->relu_desc,
                                                              s->x_desc, &reserve_bytes);
  if (CUDNN_STATUS_CATEGORY((int)cs) == CUDNN_STATUS_NOT_SUPPORTED ||
      CUDNN_STATUS_CATEGORY((int)cs) == CUDNN_STATUS_BAD_PARAM) {
    /* Not here after all: the plain path (with gpu_k_relu for a fused ReLU). */
    if (s->relu_desc) cudnnDestroyActivationDescriptor(s->relu_desc);
    s->relu_desc = NULL;
    return CNNB_OK;
  }
  GPU_TRY(st, gpu_cudnn(d, cs, node, "batch norm (Ex) workspace sizes"));
  GPU_TRY(st,
          gpu_workspace_reserve(d, forward_bytes > backward_bytes ? forward_bytes : backward_bytes,
                                node));
  if (reserve_bytes > 0)
    GPU_TRY(st, gpu_malloc(d, &s->reserve, reserve_bytes, node, "the batch norm reserve space"));
  s->forward_workspace_bytes = forward_bytes;
  s->backward_workspace_bytes = backward_bytes;
  s->reserve_bytes = reserve_bytes;
  s->mode = mode;
  s->ex_ops = ops;
  s->cudnn_ex = 1;
  s->ex_ready = 1;
done:
  return st;
}

cnnb_status gpu_prepare_batch_norm(gpu_device *d, const cnnb_graph *g, int32_t index,
                                   gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const int use_scale = node->num_params == 2;
  if (node->num_inputs != 1 || node->num_params < 1 || node->num_params > 2 ||
      node->num_stats != 2 || use_scale != (node->attr.batch_norm.scale != 0))
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': batch norm needs 1 input, %s and two statistics; it has "
                      "%d inputs, %d parameters, %d statistics",
                      node->name,
                      node->attr.batch_norm.scale ? "a scale and an offset" : "an offset",
                      node->num_inputs, node->num_params, node->num_stats);
  const double epsilon = node->attr.batch_norm.epsilon;
  if (!(epsilon >= CUDNN_BN_MIN_EPSILON))
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: node '%s': batch norm epsilon %g is below cuDNN's minimum %g",
                      node->name, epsilon, (double)CUDNN_BN_MIN_EPSILON);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape; /* [N, C, H, W] */
  const cnnb_shape ys = node->shape;
  if (xs.n != ys.n || xs.c != ys.c || xs.h != ys.h || xs.w != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': batch norm output [%d, %d, %d, %d] differs from its input "
                      "[%d, %d, %d, %d]",
                      node->name, ys.n, ys.c, ys.h, ys.w, xs.n, xs.c, xs.h, xs.w);

  bn_node *s = gpu_node_new(sizeof *s, &bn_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  cnnb_status st = CNNB_OK;
  s->use_scale = use_scale;
  s->channels = ys.c;
  s->count = cnnb_shape_count(ys);
  s->x_bytes = gpu_tensor_bytes(d, g, index);
  s->m = (double)ys.n * ys.h * ys.w;
  s->epsilon = epsilon;
  s->decay = node->attr.batch_norm.decay;
  s->mode = CUDNN_BATCHNORM_SPATIAL;

  GPU_TRY(st, gpu_tensor_desc(d, &s->x_desc, ys, node));
  GPU_TRY(st, gpu_cudnn(d, cudnnCreateTensorDescriptor(&s->bn_desc), node,
                        "creating the batch norm parameter descriptor"));
  /* SPATIAL and SPATIAL_PERSISTENT derive the same [1, C, 1, 1] fp32 descriptor. */
  GPU_TRY(st, gpu_cudnn(d, cudnnDeriveBNTensorDescriptor(s->bn_desc, s->x_desc, s->mode), node,
                        "deriving the batch norm parameter descriptor"));
  if (!use_scale) GPU_TRY(st, gpu_ones_reserve(d, ys.c, node));
  /* saved mean, saved inverse std, discarded scale gradient, discarded running mean and
   * variance: [C] each. */
  void *stat_buffer = NULL;
  GPU_TRY(st, gpu_malloc(d, &stat_buffer, 5 * (size_t)ys.c * sizeof(float), node,
                         "the batch statistics"));
  s->stat_buffer = stat_buffer;
  s->saved_mean = s->stat_buffer;
  s->saved_inv_std = s->stat_buffer + ys.c;
  s->discarded_dscale = s->stat_buffer + 2 * (size_t)ys.c;
  s->discarded_mean = s->stat_buffer + 3 * (size_t)ys.c;
  s->discarded_var = s->stat_buffer + 4 * (size_t)ys.c;

  if (d->cfg.training) {
    GPU_TRY(st, prepare_ex(d, s));
    cnnb_log(d->ctx, CNNB_LOG_DEBUG, "cuda: node '%s': batch norm on %s%s", node->name,
             path_name(s->cudnn_ex),
             s->cudnn_ex && s->ex_ops != CUDNN_BATCHNORM_OPS_BN ? " with the ReLU inside" : "");
    /* The masked dy of the plain path; reserved with the Ex path too, so a forward cuDNN
     * refuses at run time can fall back (bn_forward). */
    if (node->fused_relu) GPU_TRY(st, gpu_transient_reserve(d, 0, s->x_bytes, node));
    s->dx_scratch = needs_dx_scratch(g, node->inputs[0]);
    if (s->dx_scratch) GPU_TRY(st, gpu_transient_reserve(d, 1, s->x_bytes, node));
  }
done:
  if (st != CNNB_OK) {
    bn_release(d, &s->base);
    free(s);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
