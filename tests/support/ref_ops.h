/* ref_ops.h — the plain C reference of every graph op (forward, backward-data,
 * backward-weights) on logical NCHW fp32, accumulating in double: slow, obvious, and the
 * definition devices are tested against (docs/architecture.md, "Numbers that define
 * right").
 *
 * Semantics are TensorFlow's: explicit pads (the graph resolves SAME/VALID), dilation
 * counted as TF does (1 = none), max pool ignores padding, average pool excludes it, LRN
 * sums x^2 over 2r+1 channels, batch norm normalises with the biased batch variance. */
#ifndef CNNB_TEST_REF_OPS_H
#define CNNB_TEST_REF_OPS_H

#include <stdint.h>
#include <cnnb/graph.h>

typedef struct ref_window {
  int kh, kw, sh, sw;
  int pt, pb, pl, pr;
  int dh, dw; /* 1 = no dilation */
  int groups;
} ref_window;

/* The window of a conv2d / pool node as the graph resolved it. */
ref_window ref_window_of(const cnnb_node *n);

/* conv2d; w is [O, I/groups, KH, KW], b [O] or NULL. */
void ref_conv2d_forward(const float *x, cnnb_shape xs, const float *w, const float *b,
                        const ref_window *win, float *y, cnnb_shape ys);
void ref_conv2d_backward_data(const float *dy, cnnb_shape ys, const float *w, const ref_window *win,
                              float *dx, cnnb_shape xs);
/* db may be NULL. */
void ref_conv2d_backward_weights(const float *x, cnnb_shape xs, const float *dy, cnnb_shape ys,
                                 const ref_window *win, float *dw, float *db);

void ref_relu_forward(const float *x, int64_t n, float *y);
/* From the output, as devices do: dx = dy * (y > 0). */
void ref_relu_backward(const float *y, const float *dy, int64_t n, float *dx);

/* min(max(x, 0), 6). */
void ref_relu6_forward(const float *x, int64_t n, float *y);
/* From the input, as TF's Relu6Grad: dx = dy * (0 < x < 6); zero at both bounds. */
void ref_relu6_backward(const float *x, const float *dy, int64_t n, float *dx);
/* The activations of ABI 1.14 (op: CNNB_OP_SIGMOID ... CNNB_OP_GELU; tanh: gelu's form),
 * in double as torch.nn defines them, gradients from the input. */
void ref_activation_forward(uint32_t op, int32_t tanh, const float *x, int64_t n, float *y);
void ref_activation_backward(uint32_t op, int32_t tanh, const float *x, const float *dy, int64_t n,
                             float *dx);

/* scale NULL: 1. mean/var [C] outputs (biased variance). */
void ref_batch_norm_forward_training(const float *x, cnnb_shape s, const float *scale,
                                     const float *offset, float eps, float *y, float *mean,
                                     float *var);
void ref_batch_norm_forward_inference(const float *x, cnnb_shape s, const float *scale,
                                      const float *offset, const float *mean, const float *var,
                                      float eps, float *y);
/* Training-mode backward; dscale may be NULL (offset-only). */
void ref_batch_norm_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                             const float *mean, const float *var, float eps, float *dx,
                             float *dscale, float *doffset);

/* multiply (ABI 1.14): y = x * gate, gate of x's shape or [N, C, 1, 1] (gs says which);
 * backward dx = dy * gate and dgate = dy * x, summed over H, W for a per-channel gate.
 * dx or dgate may be NULL. */
void ref_multiply_forward(const float *x, cnnb_shape s, const float *gate, cnnb_shape gs, float *y);
void ref_multiply_backward(const float *x, cnnb_shape s, const float *gate, cnnb_shape gs,
                           const float *dy, float *dx, float *dgate);

/* layer norm over channels at each position (ABI 1.14): mean / var [N * H * W] outputs
 * (biased variance, index n * H * W + h * W + w); backward from them. */
void ref_layer_norm_forward(const float *x, cnnb_shape s, const float *scale, const float *offset,
                            float eps, float *y, float *mean, float *var);
void ref_layer_norm_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                             const float *mean, const float *var, float eps, float *dx,
                             float *dscale, float *doffset);

/* channel scale (ABI 1.14): y = x * scale[c]; dx = dy * scale[c], dscale = sum dy * x.
 * dx may be NULL. */
void ref_channel_scale_forward(const float *x, cnnb_shape s, const float *scale, float *y);
void ref_channel_scale_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                                float *dx, float *dscale);

/* slice_channels (ABI 1.14): y = x[:, begin : begin + ys.c]; dx = dy placed back, 0 around. */
void ref_slice_channels_forward(const float *x, cnnb_shape xs, int begin, int count, float *y);
void ref_slice_channels_backward(const float *dy, cnnb_shape xs, int begin, int count, float *dx);
/* channel_shuffle (ABI 1.14): y[:, k * g + i] = x[:, i * (C / g) + k]; dx the inverse. */
void ref_channel_shuffle_forward(const float *x, cnnb_shape s, int groups, float *y);
void ref_channel_shuffle_backward(const float *dy, cnnb_shape s, int groups, float *dx);

void ref_max_pool_forward(const float *x, cnnb_shape xs, const ref_window *win, float *y,
                          cnnb_shape ys);
void ref_max_pool_backward(const float *x, cnnb_shape xs, const float *dy, cnnb_shape ys,
                           const ref_window *win, float *dx);
void ref_avg_pool_forward(const float *x, cnnb_shape xs, const ref_window *win, float *y,
                          cnnb_shape ys);
void ref_avg_pool_backward(const float *dy, cnnb_shape ys, const ref_window *win, float *dx,
                           cnnb_shape xs);

void ref_lrn_forward(const float *x, cnnb_shape s, int radius, float bias, float alpha, float beta,
                     float *y);
void ref_lrn_backward(const float *x, cnnb_shape s, const float *dy, int radius, float bias,
                      float alpha, float beta, float *dx);

/* x [N, K], w [units, K], b [units] or NULL, y [N, units]. */
void ref_dense_forward(const float *x, int n, int k, const float *w, const float *b, int units,
                       float *y);
void ref_dense_backward_data(const float *dy, int n, int units, const float *w, int k, float *dx);
void ref_dense_backward_weights(const float *x, const float *dy, int n, int k, int units, float *dw,
                                float *db);

/* Along channels. */
void ref_concat_forward(const float *const *xs, const cnnb_shape *shapes, int count, float *y);
void ref_concat_backward(const float *dy, const cnnb_shape *shapes, int count, float *const *dxs);

/* Zeros before and after x along channels: y is [N, before + C + after, H, W]. */
void ref_pad_channels_forward(const float *x, cnnb_shape xs, int before, int after, float *y);
/* dx is dy's channels [before, before + C). */
void ref_pad_channels_backward(const float *dy, cnnb_shape xs, int before, int after, float *dx);
/* pad_spatial: y (xs grown by top + bottom rows and left + right columns, each amount
 * possibly negative: a cut) holds x shifted by (top, left), zeros elsewhere; dx is the
 * part of dy over x, zero where x was cut. */
void ref_pad_spatial_forward(const float *x, cnnb_shape xs, int top, int bottom, int left,
                             int right, float *y);
void ref_pad_spatial_backward(const float *dy, cnnb_shape xs, int top, int bottom, int left,
                              int right, float *dx);

void ref_add_forward(const float *a, const float *b, int64_t n, float *y);

/* Mean over the batch of -sum_j t_j log softmax(logits)[j], the target t the one-hot
 * label smoothed by `smoothing` s: (1 - s) onehot + s / K; probs [N, K] may be NULL. */
double ref_softmax_xent_forward(const float *logits, int n, int k, const int32_t *labels,
                                float smoothing, float *probs);
/* d (scale * loss) / d logits. */
void ref_softmax_xent_backward(const float *logits, int n, int k, const int32_t *labels,
                               float smoothing, float scale, float *dlogits);

#endif
