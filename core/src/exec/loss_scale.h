/* loss_scale.h — fp16 loss scaling, shared by every device (core, never installed).
 *
 * tf_cnn_benchmarks' semantics (benchmark_cnn.py _maybe_initialize_fp16 and
 * variable_mgr_util.append_gradients_with_loss_scale):
 *  - the loss is multiplied by `scale` before backward and every gradient divided by it
 *    in the update (cnnb_update.grad_scale = 1 / scale);
 *  - static: the scale never changes and gradients are never checked;
 *  - dynamic (--fp16_enable_auto_loss_scale): when any gradient is inf/NaN the update is
 *    skipped, the scale halved and the clean-step counter reset; on a clean step the
 *    counter is incremented while it is below inc_every_n, and once it has reached
 *    inc_every_n the next clean step doubles the scale and resets the counter (so with
 *    N = --fp16_inc_loss_scale_every_n the scale doubles on the (N+1)-th clean step in a
 *    row, exactly as TF's tf.cond does). Doubling is skipped if it would overflow.
 * A plain value type: no allocation, no device. */
#ifndef CNNB_LOSS_SCALE_H
#define CNNB_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

/* tf_cnn_benchmarks' Model.get_fp16_loss_scale() default. */
#define CNNB_DEFAULT_FP16_LOSS_SCALE 128.0f
#define CNNB_DEFAULT_INC_LOSS_SCALE_EVERY_N 1000

typedef struct cnnb_loss_scale {
  float scale;          /* multiplies the loss; 1: no scaling */
  bool dynamic;         /* check gradients, halve / double */
  int64_t normal_steps; /* clean steps since the scale last changed */
  int64_t inc_every_n;
} cnnb_loss_scale;

/* initial <= 0 takes CNNB_DEFAULT_FP16_LOSS_SCALE; inc_every_n <= 0 the TF default. */
void cnnb_loss_scale_init(cnnb_loss_scale *ls, float initial, bool dynamic, int64_t inc_every_n);

/* Whether the step's gradients must be checked for inf/NaN before updating. */
bool cnnb_loss_scale_needs_check(const cnnb_loss_scale *ls);

/* Records one step's outcome (grads_finite from the device's all_finite; ignored when
 * static) and returns true when that step's update must be skipped. Call it after the
 * update's grad_scale was taken from ls->scale: the scale may change here. */
bool cnnb_loss_scale_after_step(cnnb_loss_scale *ls, bool grads_finite);

#endif
