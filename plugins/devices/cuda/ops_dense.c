/* ops_dense.c — the fully connected layer on cuBLAS: y[N, U] = x[N, K] W^T + b, with x
 * the input flattened in logical NCHW order and W the arena's fp32 [U, K] (row-major),
 * and its backward dX = dY W, dW = dY^T X, db = column sums of dY.
 *
 * cuBLAS is column-major: a row-major [r, c] matrix is, in the same bytes, a
 * column-major c x r matrix (its transpose) with leading dimension c. Every call below
 * is derived from that in the comment above it.
 *
 * Precision: fp32 runs fp32 GEMMs (TF32 tensor cores unless --cuda_allow_tf32 is off:
 * then CUBLAS_COMPUTE_32F_PEDANTIC, which never down-converts whatever the handle's math
 * mode says). fp16 / bf16 convert W each forward into a half buffer the node owns
 * (backward-data of the same step reuses it) and compute in fp32
 * (CUBLAS_COMPUTE_32F) with half A and B; y and dx are stored in half, dW in fp32
 * straight into the gradient arena (cublasGemmEx takes 16F / 16BF inputs with a 32F
 * output under CUBLAS_COMPUTE_32F).
 *
 * Layout: an input with H = W = 1 is [N, K] in either layout. On the NHWC (half) device
 * an input with H * W > 1 is not in logical order: it is converted with our kernels,
 * gpu_k_to_nchw_f32 into transient slot 0 (fp32, logical NCHW) and gpu_k_cast into
 * slot 1 (the device's type), both exact; backward recomputes that for dW, writes dx in
 * logical order into slot 1 (after dW has read x there: one stream), and converts it
 * back the same way into the input's gradient. Bias add and bias gradient are the
 * convolution's kernels on dims [N, U, 1, 1]; the bias gradient's partial sums go to a
 * buffer the node owns (bias_scratch), not a transient slot. Dense nodes never carry a
 * fused ReLU (the core's op table does not fuse one into them); one that did is
 * refused. */
#include <stdlib.h>

#include "gpu_device.h"

typedef struct dense_node {
  gpu_node base;
  int has_bias;
  int32_t n, k, units;
  int to_logical; /* NHWC input with H * W > 1: reordered first */
  gpu_dims in_dims, out_dims;
  void *w_half;           /* [U, K] in d->act on half devices, else NULL */
  void *bias_scratch;     /* training with a bias: gpu_k_bias_grad's partial sums */
  cudaDataType_t ab_type; /* x, W, y, dy, dx */
  cublasComputeType_t compute;
} dense_node;

static const float one = 1.0f, zero = 0.0f;

/* x in logical [N, K] order: the input itself, or reordered into transient slot 1. */
static cnnb_status logical_input(gpu_device *d, dense_node *s, const void *x, const void **out) {
  if (!s->to_logical) {
    *out = x;
    return CNNB_OK;
  }
  const cnnb_node *node = s->base.node;
  float *nchw = gpu_transient(d, 0);
  void *logical = gpu_transient(d, 1);
  cnnb_status st;
  if ((st = gpu_cuda(d, gpu_k_to_nchw_f32(nchw, x, d->act, s->in_dims, d->stream), node,
                     "dense input to logical order")))
    return st;
  if ((st = gpu_cuda(d, gpu_k_cast(logical, d->act, nchw, GPU_F32, (int64_t)s->n * s->k, d->stream),
                     node, "dense input to logical order")))
    return st;
  *out = logical;
  return CNNB_OK;
}

static cnnb_status dense_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  dense_node *s = (dense_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *x;
  if ((st = logical_input(d, s, io->inputs[0], &x))) return st;
  const float *arena_w = gpu_param_ptr(n->g, io->params, node->params[0]);
  const void *w = arena_w;
  if (s->w_half) {
    if ((st = gpu_cuda(d,
                       gpu_k_cast(s->w_half, d->act, arena_w, GPU_F32, (int64_t)s->units * s->k,
                                  d->stream),
                       node, "dense weights to compute precision")))
      return st;
    w = s->w_half;
  }
  /* Y[N, U] = X[N, K] W[U, K]^T. Column-major: Y is U x N (ld U), W is K x U (ld K), X is
   * K x N (ld K). Y(UxN) = op(W)(UxK) X(KxN) with op = transpose:
   * m = U, n = N, k = K, A = W (T, lda K), B = X (N, ldb K), C = Y (ldc U). */
  if ((st = gpu_cublas(d,
                       cublasGemmEx(d->cublas, CUBLAS_OP_T, CUBLAS_OP_N, s->units, s->n, s->k, &one,
                                    w, s->ab_type, s->k, x, s->ab_type, s->k, &zero, io->output,
                                    s->ab_type, s->units, s->compute, CUBLAS_GEMM_DEFAULT),
                       node, "dense forward GEMM")))
    return st;
  if (!s->has_bias) return CNNB_OK;
  return gpu_cuda(d,
                  gpu_k_bias_relu(io->output, s->out_dims, d->act,
                                  gpu_param_ptr(n->g, io->params, node->params[1]), 0, d->stream),
                  node, "dense bias");
}

static cnnb_status dense_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  dense_node *s = (dense_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *dy = io->output_grad; /* [N, U] */

  /* db[u] = sum over n of dY[n, u], overwritten. */
  if (s->has_bias &&
      (st = gpu_cuda(d,
                     gpu_k_bias_grad(gpu_param_ptr(n->g, io->grads, node->params[1]), dy,
                                     s->out_dims, d->act, s->bias_scratch, d->stream),
                     node, "dense bias gradient")))
    return st;

  const void *x;
  if ((st = logical_input(d, s, io->inputs[0], &x))) return st;
  /* dW[U, K] = dY[N, U]^T X[N, K], fp32 into the arena. Column-major: dW is K x U (ld K),
   * X is K x N (ld K), dY is U x N (ld U). dW(KxU) = X(KxN) op(dY)(NxU) with op =
   * transpose: m = K, n = U, k = N, A = X (N, lda K), B = dY (T, ldb U), C = dW (ldc K). */
  if ((st = gpu_cublas(d,
                       cublasGemmEx(d->cublas, CUBLAS_OP_N, CUBLAS_OP_T, s->k, s->units, s->n, &one,
                                    x, s->ab_type, s->k, dy, s->ab_type, s->units, &zero,
                                    gpu_param_ptr(n->g, io->grads, node->params[0]), CUDA_R_32F,
                                    s->k, s->compute, CUBLAS_GEMM_DEFAULT),
                       node, "dense weight gradient GEMM")))
    return st;

  void *dx_out = io->input_grads[0];
  if (!dx_out) return CNNB_OK;
  /* W as this step's forward used it. */
  const void *w = s->w_half ? (const void *)s->w_half
                            : (const void *)gpu_param_ptr(n->g, io->params, node->params[0]);
  void *dx = s->to_logical ? gpu_transient(d, 1) : dx_out;
  /* dX[N, K] = dY[N, U] W[U, K]. Column-major: dX is K x N (ld K), W is K x U (ld K), dY
   * is U x N (ld U). dX(KxN) = W(KxU) dY(UxN), no transposes: m = K, n = N, k = U,
   * A = W (N, lda K), B = dY (N, ldb U), C = dX (ldc K). */
  if ((st = gpu_cublas(d,
                       cublasGemmEx(d->cublas, CUBLAS_OP_N, CUBLAS_OP_N, s->k, s->n, s->units, &one,
                                    w, s->ab_type, s->k, dy, s->ab_type, s->units, &zero, dx,
                                    s->ab_type, s->k, s->compute, CUBLAS_GEMM_DEFAULT),
                       node, "dense input gradient GEMM")))
    return st;
  if (!s->to_logical) return CNNB_OK;
  /* Logical [N, C, H, W] in the device's type -> fp32 (exact) -> the input's layout. */
  float *nchw = gpu_transient(d, 0);
  if ((st = gpu_cuda(d, gpu_k_cast(nchw, GPU_F32, dx, d->act, (int64_t)s->n * s->k, d->stream),
                     node, "dense input gradient to the input's layout")))
    return st;
  return gpu_cuda(d, gpu_k_from_nchw_f32(dx_out, d->act, s->in_dims, nchw, d->stream), node,
                  "dense input gradient to the input's layout");
}

static void dense_release(gpu_device *d, gpu_node *n) {
  dense_node *s = (dense_node *)n;
  if (s->w_half) cudaFree(s->w_half);
  s->w_half = NULL;
  if (s->bias_scratch) cudaFree(s->bias_scratch);
  s->bias_scratch = NULL;
}

static const gpu_node_ops dense_ops = {dense_forward, dense_backward, dense_release};

cnnb_status gpu_prepare_dense(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1 || node->num_params < 1)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: dense '%s': %d inputs and %d parameters "
                      "(expected one input, weights and an optional bias)",
                      node->name, node->num_inputs, node->num_params);
  if (node->fused_relu)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: dense '%s': a fused ReLU on a dense layer is not supported (the op "
                      "table never fuses one into dense)",
                      node->name);
  const cnnb_shape in = cnnb_graph_node(g, node->inputs[0])->shape;
  const int64_t k = (int64_t)in.c * in.h * in.w, units = node->shape.c;
  if (k > INT32_MAX)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: dense '%s': input [%d, %d, %d, %d] flattens to %lld features, more "
                      "than cuBLAS's int dimensions take",
                      node->name, in.n, in.c, in.h, in.w, (long long)k);
  if (cnnb_graph_param(g, node->params[0])->count != units * k)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: dense '%s': weights have %lld elements, expected [%lld, %lld]",
                      node->name, (long long)cnnb_graph_param(g, node->params[0])->count,
                      (long long)units, (long long)k);
  if (node->num_params > 1 && cnnb_graph_param(g, node->params[1])->count != units)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: dense '%s': bias has %lld elements, expected %lld", node->name,
                      (long long)cnnb_graph_param(g, node->params[1])->count, (long long)units);
  if (node->shape.n != in.n || node->shape.h != 1 || node->shape.w != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: dense '%s': output [%d, %d, %d, %d] is not [%d, units, 1, 1]",
                      node->name, node->shape.n, node->shape.c, node->shape.h, node->shape.w, in.n);

  dense_node *s = gpu_node_new(sizeof *s, &dense_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  cnnb_status st = CNNB_OK;
  s->has_bias = node->num_params > 1;
  s->n = in.n;
  s->k = (int32_t)k;
  s->units = (int32_t)units;
  s->in_dims = gpu_dims_of(d, in);
  s->out_dims = gpu_dims_of(d, node->shape); /* [N, U, 1, 1]: the same in both layouts */
  s->to_logical = d->format == CUDNN_TENSOR_NHWC && (int64_t)in.h * in.w > 1;
  switch (d->act) {
    case GPU_F32:
      s->ab_type = CUDA_R_32F;
      s->compute = d->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
      break;
    case GPU_F16:
      s->ab_type = CUDA_R_16F;
      s->compute = CUBLAS_COMPUTE_32F;
      break;
    case GPU_BF16:
      s->ab_type = CUDA_R_16BF;
      s->compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      st = cnnb_error(d->ctx, CNNB_EINTERNAL, "cuda: dense '%s': activation type %d", node->name,
                      (int)d->act);
      goto done;
  }

  const size_t elt = gpu_dtype_size(d->act);
  const size_t features = (size_t)s->n * (size_t)s->k;
  if (s->to_logical) {
    GPU_TRY(st, gpu_transient_reserve(d, 0, features * sizeof(float), node));
    GPU_TRY(st, gpu_transient_reserve(d, 1, features * elt, node));
  }
  if (d->act != GPU_F32)
    GPU_TRY(st, gpu_malloc(d, &s->w_half, (size_t)s->units * (size_t)s->k * elt, node,
                           "the weights in compute precision"));
  if (d->cfg.training && s->has_bias) {
    const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(s->out_dims);
    if (scratch_bytes)
      GPU_TRY(st, gpu_malloc(d, &s->bias_scratch, scratch_bytes, node,
                             "the bias gradient's partial sums"));
  }
done:
  if (st) {
    dense_release(d, &s->base);
    free(s);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
