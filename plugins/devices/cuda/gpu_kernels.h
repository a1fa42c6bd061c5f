/* gpu_kernels.h — the cuda device's own CUDA kernels, as C functions that launch them
 * on a stream (kernels_*.cu): what neither cuDNN nor cuBLAS covers.
 *
 * Every launcher is asynchronous (it only enqueues work on `stream`) and returns the
 * launch's cudaError_t (cudaSuccess, or what cudaGetLastError said right after the
 * launch); a zero-element call launches nothing. Pointers are device memory unless named
 * host_*. Element math is in fp32 whatever the storage type; storing into fp16 / bf16
 * rounds to nearest even (__float2half_rn, __float2bfloat16_rn), as the cpu device and
 * the reference ops do.
 *
 * Activations come as (dtype, gpu_dims): the logical [N, C, H, W] and whether the
 * buffer is NHWC; index math for either layout (and all per-element math) is
 * gpu_math.h's, checked on the host by tests/test_cuda_math.c. */
#ifndef CNNB_GPU_KERNELS_H
#define CNNB_GPU_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpu_dtype { GPU_F32 = 0, GPU_F16 = 1, GPU_BF16 = 2, GPU_I32 = 3 } gpu_dtype;

static inline size_t gpu_dtype_size(gpu_dtype t) { return t == GPU_F16 || t == GPU_BF16 ? 2 : 4; }

/* A 4-D activation: logical sizes and its buffer's layout. */
typedef struct gpu_dims {
  int32_t n, c, h, w;
  int32_t nhwc; /* 0: NCHW, 1: NHWC */
} gpu_dims;

/* Errors kernels find on data, read back by the host at synchronizing calls. */
typedef struct gpu_kernel_errors {
  int32_t bad_label_count; /* labels outside [0, classes) since the last check */
  int32_t first_bad_label; /* the value of one of them */
  int32_t first_bad_index; /* its example */
  int32_t classes;
} gpu_kernel_errors;

/* Whether this library holds code the current GPU can run (kernels_eltwise.cu): the
 * architectures it was built for (CMakeLists.txt) run natively or through their PTX only
 * on the same or newer GPUs; older ones answer cudaErrorNoKernelImageForDevice here,
 * instead of at the first kernel a step launches. */
cudaError_t gpu_k_image_check(void);

/* ---- conversions (kernels_convert.cu) ---------------------------------------------- */

/* dst[i] = src[i] converted, n elements (any float types; I32 only to I32). */
cudaError_t gpu_k_cast(void *dst, gpu_dtype dst_type, const void *src, gpu_dtype src_type,
                       int64_t n, cudaStream_t stream);
/* Logical NCHW fp32 -> the device's layout and type (dims), and back. */
cudaError_t gpu_k_from_nchw_f32(void *dst, gpu_dtype dst_type, gpu_dims dims, const float *src,
                                cudaStream_t stream);
cudaError_t gpu_k_to_nchw_f32(float *dst, const void *src, gpu_dtype src_type, gpu_dims dims,
                              cudaStream_t stream);
/* Host-style uint8 [N, H, W, C] pixels -> (float)v * scale[c] + offset[c] stored in the
 * device's layout and type. scale, offset: C fp32 values in device memory. */
cudaError_t gpu_k_from_uint8_nhwc(void *dst, gpu_dtype dst_type, gpu_dims dims, const uint8_t *src,
                                  const float *scale, const float *offset, cudaStream_t stream);
/* Convolution filters: the arena's fp32 [K, C, R, S] (OIHW) -> dst_type in OIHW
 * (nhwc 0) or OHWI (nhwc 1) with c_pad >= C channels, those beyond C zero; and a filter
 * gradient in that form (c_pad channels) back to fp32 OIHW of C channels. */
cudaError_t gpu_k_filter_to_compute(void *dst, gpu_dtype dst_type, int32_t nhwc, const float *src,
                                    int32_t k, int32_t c, int32_t c_pad, int32_t r, int32_t s,
                                    cudaStream_t stream);
cudaError_t gpu_k_filter_grad_to_arena(float *dst, const void *src, gpu_dtype src_type,
                                       int32_t nhwc, int32_t k, int32_t c, int32_t c_pad, int32_t r,
                                       int32_t s, cudaStream_t stream);
/* Spatial padding for cuDNN, which pads symmetrically only, and channel padding for
 * tensor cores: dst (dims of src grown by the pads, and as many channels or more) = src
 * placed at (top, left, channel 0), `fill` elsewhere; and the crop back (dst = the
 * window of src at (top, left) of dst's size, its first dst.c channels). Same type and
 * layout on both sides. */
cudaError_t gpu_k_pad_spatial(void *dst, gpu_dims dst_dims, const void *src, gpu_dims src_dims,
                              gpu_dtype type, int32_t top, int32_t left, float fill,
                              cudaStream_t stream);
cudaError_t gpu_k_crop_spatial(void *dst, gpu_dims dst_dims, const void *src, gpu_dims src_dims,
                               gpu_dtype type, int32_t top, int32_t left, cudaStream_t stream);
/* The pad_spatial op (NASNet's one-pixel shift): dst[n, c, h, w] = src[n, c, h - top,
 * w - left] where that lies inside src, else 0; top and left of either sign (a negative
 * one crops). Same batch, channels, type and layout on both sides. Its gradient is the
 * same call from dy to dx with -top, -left. */
cudaError_t gpu_k_shift_spatial(void *dst, gpu_dims dst_dims, const void *src, gpu_dims src_dims,
                                gpu_dtype type, int32_t top, int32_t left, cudaStream_t stream);

/* ---- concatenation along channels (kernels_concat.cu) ------------------------------ */

/* Tensors side by side along the channels of y [N, C, H, W] (concat; pad_channels is one
 * part with zeros around it): part k holds y's channels [start, start + channels), with
 * y's N, H, W, layout and type. Parts come in increasing start and do not overlap; gaps
 * between them are allowed. Elements are copied as they are (their 2 or 4 bytes).
 * host_parts is read during the call. One launch gathers or scatters at most
 * GPU_CONCAT_MAX_INPUTS parts, passed to the kernel by value; a call with more makes
 * several launches, each over its own range of y's channels, so any count works.
 * Parts out of order, overlapping or outside y, or a type other than F32 / F16 / BF16:
 * cudaErrorInvalidValue. */
#define GPU_CONCAT_MAX_INPUTS 32
typedef struct gpu_concat_part {
  void *data;       /* forward: the input, read; backward: its gradient, written (NULL: none
                       wanted, skipped) */
  int32_t start;    /* y's channel holding the part's channel 0 */
  int32_t channels; /* the part's C (0: no part) */
} gpu_concat_part;
/* y = every part at its channels, +0 in the channels no part holds. Every part with
 * channels needs its data. */
cudaError_t gpu_k_concat(void *y, gpu_dims y_dims, const gpu_concat_part *host_parts, int32_t count,
                         gpu_dtype type, cudaStream_t stream);
/* Each part's gradient (data) = its channels of dy (dims y_dims); dy's other channels
 * are not read. */
cudaError_t gpu_k_concat_backward(const void *dy, gpu_dims y_dims,
                                  const gpu_concat_part *host_parts, int32_t count, gpu_dtype type,
                                  cudaStream_t stream);

/* slice_channels (ABI 1.14) is these two with one part: its forward y = x[:, begin :
 * begin + count] is gpu_k_concat_backward from x (y_dims: x's dims) into the part
 * {y, begin, count}, its backward gpu_k_concat of the part {dy, begin, count} into dx
 * (zeros in x's other channels). */

/* channel_shuffle (ABI 1.14; kernels_concat.cu): y's channel k * groups + i is x's
 * channel i * (C / groups) + k, for i in [0, groups), k in [0, C / groups); x and y of
 * dims (same layout and type), elements copied as they are. The inverse permutation (the
 * gradient: dx from dy) is the same call with C / groups groups. groups < 1 or not
 * dividing C, y aliasing x, a type other than F32 / F16 / BF16: cudaErrorInvalidValue. */
cudaError_t gpu_k_channel_shuffle(void *y, const void *x, gpu_dims dims, int32_t groups,
                                  gpu_dtype type, cudaStream_t stream);

/* ---- elementwise (kernels_eltwise.cu) ---------------------------------------------- */

/* y = max(x, 0); y may alias x (batch norm and convolutions apply a fused ReLU in
 * place). */
cudaError_t gpu_k_relu(void *y, const void *x, gpu_dtype type, int64_t n, cudaStream_t stream);
/* dx = dy where y > 0, else 0 (the gradient of a ReLU, or of one fused into a producer,
 * from its output). dx may alias dy. */
cudaError_t gpu_k_relu_backward(void *dx, const void *dy, const void *y, gpu_dtype type, int64_t n,
                                cudaStream_t stream);
cudaError_t gpu_k_relu6(void *y, const void *x, gpu_dtype type, int64_t n, cudaStream_t stream);
/* y = gpu_act_value(act, x) (gpu_math.h: the activations of ABI 1.14); y may be x. */
cudaError_t gpu_k_act(void *y, const void *x, int32_t act, gpu_dtype type, int64_t n,
                      cudaStream_t stream);
/* dx = dy * gpu_act_slope(act, v), v the output y where gpu_act_slope_from_output(act),
 * else the input x; dx may be dy. */
cudaError_t gpu_k_act_backward(void *dx, const void *dy, const void *v, int32_t act, gpu_dtype type,
                               int64_t n, cudaStream_t stream);
/* dx = dy where 0 < y < 6, else 0 (TF's relu6 gradient, from the output). */
cudaError_t gpu_k_relu6_backward(void *dx, const void *dy, const void *y, gpu_dtype type, int64_t n,
                                 cudaStream_t stream);
/* The gradients of y = a + b (with a fused ReLU when y is given: dy where y > 0, else 0)
 * into both inputs' buffers in one pass: ga = gb = that. Either may be NULL (no
 * gradient wanted) and either may alias dy. */
cudaError_t gpu_k_add_backward(void *ga, void *gb, const void *dy, const void *y, gpu_dtype type,
                               int64_t n, cudaStream_t stream);
/* y = a + b, then max(y, 0) when relu. */
cudaError_t gpu_k_add(void *y, const void *a, const void *b, gpu_dtype type, int64_t n,
                      int32_t relu, cudaStream_t stream);
/* dst += src. */
cudaError_t gpu_k_accumulate(void *dst, const void *src, gpu_dtype type, int64_t n,
                             cudaStream_t stream);
/* y = x * keep_mask / keep_prob; the mask is a pure function of (seed, step, i), so the
 * backward recomputes it instead of storing it: dx = dy * keep_mask / keep_prob. */
cudaError_t gpu_k_dropout(void *y, const void *x, gpu_dtype type, int64_t n, float keep_prob,
                          uint32_t seed, uint64_t step, cudaStream_t stream);
cudaError_t gpu_k_dropout_backward(void *dx, const void *dy, gpu_dtype type, int64_t n,
                                   float keep_prob, uint32_t seed, uint64_t step,
                                   cudaStream_t stream);
/* Stochastic depth, forward (of x) and backward (of dy) alike: image i / per_sample kept
 * with keep_prob (in [0, 1]; 0 drops every image) and scaled by 1 / keep_prob, else 0;
 * the draw is dropout's, per image instead of per element. */
cudaError_t gpu_k_sample_dropout(void *y, const void *x, gpu_dtype type, int64_t n,
                                 int64_t per_sample, float keep_prob, uint32_t seed, uint64_t step,
                                 cudaStream_t stream);
/* y += bias[c] per channel, then max(y, 0) when relu (a convolution's bias and fused
 * ReLU). bias: C fp32 values. */
cudaError_t gpu_k_bias_relu(void *y, gpu_dims dims, gpu_dtype type, const float *bias, int32_t relu,
                            cudaStream_t stream);
/* db[c] = sum over n, h, w of dy (fp32 out, overwritten), deterministic: two passes
 * through `scratch` (fp32 partial sums per chunk of rows / images and channel), in an
 * order fixed by dims alone (kernels_eltwise.cu documents it), so the same dims and dy
 * give the same bits on every run. scratch: device memory of at least
 * gpu_k_bias_grad_scratch_bytes(dims) bytes, owned by the caller and not shared with
 * anything running meanwhile (the stream orders the passes); may be NULL when that is 0
 * (N, H or W zero). */
size_t gpu_k_bias_grad_scratch_bytes(gpu_dims dims);
cudaError_t gpu_k_bias_grad(float *db, const void *dy, gpu_dims dims, gpu_dtype type,
                            float *scratch, cudaStream_t stream);

/* ABI 1.14's products (kernels_eltwise.cu). y = x * gate, x and y of dims, gate of the
 * same dims (gate_per_channel 0) or [N, C, 1, 1] (1: gate[n * C + c] for every h, w; the
 * same bytes in either layout), all three in `type`; y may be x. The input gradient
 * dx = dy * gate is the same call on dy, and a gate of x's dims has dgate = dy * x, the
 * same call again. */
cudaError_t gpu_k_multiply(void *y, const void *x, const void *gate, int32_t gate_per_channel,
                           gpu_dims dims, gpu_dtype type, cudaStream_t stream);
/* A [N, C, 1, 1] gate's gradient: dgate[n * C + c] = sum over h, w of dy * x (x, dy of
 * dims), stored in `type`: the bias gradient's first pass with one chunk per image (its
 * fixed order: deterministic); no scratch. N above 65535: cudaErrorInvalidValue. */
cudaError_t gpu_k_multiply_gate_grad(void *dgate, const void *dy, const void *x, gpu_dims dims,
                                     gpu_dtype type, cudaStream_t stream);
/* y = x * scale[c] (channel_scale; scale: C fp32 values); dx = dy * scale[c] is the same
 * call on dy. y may be x. */
cudaError_t gpu_k_channel_scale(void *y, const void *x, const float *scale, gpu_dims dims,
                                gpu_dtype type, cudaStream_t stream);
/* dscale[c] = sum over n, h, w of dy * x (fp32 out, overwritten): gpu_k_bias_grad's two
 * passes and order on the products, the same scratch (gpu_k_bias_grad_scratch_bytes). */
cudaError_t gpu_k_channel_dot(float *dscale, const void *dy, const void *x, gpu_dims dims,
                              gpu_dtype type, float *scratch, cudaStream_t stream);

/* Layer norm over the C channels at each position (n, h, w) (ABI 1.14): y = (x - mean) *
 * inv_std * scale[c] + offset[c], inv_std = 1 / sqrt(var + epsilon), var biased, all in
 * fp32 (scale, offset: C fp32 values). mean and inv_std (both or neither): [N * H * W]
 * fp32 outputs, position (n * H + h) * W + w, for the backward. y may not alias x. */
cudaError_t gpu_k_layer_norm(void *y, const void *x, const float *scale, const float *offset,
                             float epsilon, float *mean, float *inv_std, gpu_dims dims,
                             gpu_dtype type, cudaStream_t stream);
/* Its gradients from the forward's mean and inv_std: dx (NULL: not wanted; may alias
 * dy), and dscale = sum of dy * x^, doffset = sum of dy over n, h, w (fp32, overwritten;
 * either may be NULL), each gpu_k_bias_grad's two passes through scratch (of
 * gpu_k_bias_grad_scratch_bytes(dims), used by one after the other). */
cudaError_t gpu_k_layer_norm_backward(void *dx, float *dscale, float *doffset, const void *dy,
                                      const void *x, const float *scale, const float *mean,
                                      const float *inv_std, gpu_dims dims, gpu_dtype type,
                                      float *scratch, cudaStream_t stream);

/* ---- loss (kernels_loss.cu) ------------------------------------------------------------ */

/* Softmax cross-entropy over logits [N, K] (type): probs [N, K] fp32 kept for the
 * backward, *loss = mean over the batch of -sum_j t_j log softmax[j], the target t the
 * label smoothed by `smoothing` s: (1 - s) onehot(label) + s / K. A label outside [0, K)
 * is counted in errors (and its row contributes nothing). */
cudaError_t gpu_k_xent_forward(float *loss, float *probs, const void *logits, gpu_dtype type,
                               const int32_t *labels, int32_t n, int32_t k, float smoothing,
                               gpu_kernel_errors *errors, cudaStream_t stream);
/* dlogits = scale * (probs - t) / N, stored in `type`. */
cudaError_t gpu_k_xent_backward(void *dlogits, gpu_dtype type, const float *probs,
                                const int32_t *labels, int32_t n, int32_t k, float smoothing,
                                float scale, cudaStream_t stream);

/* ---- optimizer and loss scaling (kernels_update.cu) -------------------------------- */

/* One optimizer step over count fp32 elements, exactly optimizer.h's rules (the same
 * float operations in the same order as cnnb_update_reference, so results agree to the
 * last bit where the compiler contracts alike; FMA contraction is disabled there). */
typedef struct gpu_update_args {
  int32_t rule; /* cnnb_optimizer_rule */
  int32_t nesterov;
  int64_t count;
  float *params;
  const float *grads;
  float *slot1, *slot2;
  float learning_rate, weight_decay, grad_scale, clip, momentum, rho, epsilon, beta1, beta2;
  float adam_lr_t; /* adam: lr * sqrt(1 - b2^t) / (1 - b1^t), computed on the host as the
                      reference computes it */
} gpu_update_args;
cudaError_t gpu_k_update(const gpu_update_args *args, cudaStream_t stream);
/* *all_finite (device int) = 1 when every grads[i] is finite, else 0. */
cudaError_t gpu_k_all_finite(int32_t *all_finite, const float *grads, int64_t count,
                             cudaStream_t stream);

/* ---- pooling and LRN where cuDNN cannot (kernels_pool.cu) -------------------------- */

/* Max / average pooling with any padding (cuDNN pads symmetrically only), TF
 * semantics: padding never wins a max, and is excluded from averages. win: kernel_h,
 * kernel_w, stride_h, stride_w, pad_top, pad_left. Backward: dx overwritten.
 *
 * argmax (max pooling only; NULL: not recorded / not used): one byte per element of y,
 * at y's offsets (same layout), holding where that output's window has its first
 * maximum, kh * kernel_w + kw (row-major within the window, padding included in the
 * numbering), or GPU_POOL_ARGMAX_NONE when the window has no element greater than -inf
 * (empty, all -inf or NaN: such a window passes no gradient). Recording needs
 * kernel_h * kernel_w <= GPU_POOL_ARGMAX_MAX_WINDOW (else cudaErrorInvalidValue).
 *  - gpu_k_pool: argmax non-NULL records it (a training forward); NULL for inference
 *    and always for average pooling (non-NULL there: cudaErrorInvalidValue).
 *  - gpu_k_pool_backward: argmax non-NULL (as the forward of this step recorded it, from
 *    the same x): dy goes where it points, x unread; NULL: each window's first maximum
 *    is found again from x. Both give the same bits. */
#define GPU_POOL_ARGMAX_NONE 255
#define GPU_POOL_ARGMAX_MAX_WINDOW 255
typedef struct gpu_pool_window {
  int32_t kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
  int32_t max; /* 1: max pool, 0: average */
} gpu_pool_window;
cudaError_t gpu_k_pool(void *y, gpu_dims y_dims, const void *x, gpu_dims x_dims, gpu_dtype type,
                       gpu_pool_window win, uint8_t *argmax, cudaStream_t stream);
cudaError_t gpu_k_pool_backward(void *dx, gpu_dims x_dims, const void *x, const void *y,
                                const void *dy, gpu_dims y_dims, gpu_dtype type,
                                gpu_pool_window win, const uint8_t *argmax, cudaStream_t stream);
/* TF's LRN: y = x / (bias + alpha * sum_{|c'-c| <= r} x^2)^beta, and its gradient. */
cudaError_t gpu_k_lrn(void *y, const void *x, gpu_dims dims, gpu_dtype type, int32_t radius,
                      float bias, float alpha, float beta, cudaStream_t stream);
cudaError_t gpu_k_lrn_backward(void *dx, const void *dy, const void *x, const void *y,
                               gpu_dims dims, gpu_dtype type, int32_t radius, float bias,
                               float alpha, float beta, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
