/* cnnb/optimizer.h — one optimizer update over a range of the fp32 arenas, and the
 * reference implementation of its math that every device must match.
 *
 * The rules are TensorFlow's (tf_cnn_benchmarks trains with tf.train optimizers):
 *   g  = clip(grad * grad_scale, -clip, clip) + weight_decay * w     (clip 0: none)
 *   sgd:      w -= lr * g
 *   momentum: a = m * a + g;  w -= lr * (nesterov ? g + m * a : a)
 *   rmsprop:  ms = rho * ms + (1 - rho) * g^2;  mom = m * mom + lr * g / sqrt(ms + eps);  w -= mom
 *   adam:     t = step + 1;  lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t)
 *             m1 = b1 m1 + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  w -= lr_t * m1 / (sqrt(v) + eps)
 */
#ifndef CNNB_OPTIMIZER_H
#define CNNB_OPTIMIZER_H

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cnnb_optimizer_rule {
  CNNB_OPT_SGD = 1,
  CNNB_OPT_MOMENTUM = 2,
  CNNB_OPT_RMSPROP = 3,
  CNNB_OPT_ADAM = 4
} cnnb_optimizer_rule;

typedef struct cnnb_update {
  uint32_t struct_size;
  uint32_t rule; /* cnnb_optimizer_rule */
  int64_t count; /* elements */
  float *params; /* device memory, fp32 master weights */
  const float *grads;
  float *slot1; /* momentum accumulator / rmsprop ms / adam m */
  float *slot2; /* rmsprop mom / adam v */
  float learning_rate;
  float weight_decay;
  float grad_scale; /* 1 / loss scale */
  float clip;       /* 0: no clipping */
  float momentum;
  float rho; /* rmsprop decay */
  float epsilon;
  float beta1, beta2;
  int32_t nesterov;
  int64_t step; /* completed updates before this one (adam bias correction) */
} cnnb_update;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_update) == 96, "ABI: grow cnnb_update only by appending");
#endif

/* The rules above on host memory, one element at a time: the definition of right. */
CNNB_EXPORT void cnnb_update_reference(const cnnb_update *update);

#ifdef __cplusplus
}
#endif
#endif
