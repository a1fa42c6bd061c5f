/* loss_scale.c — static and dynamic fp16 loss scaling with tf_cnn_benchmarks' rules
 * (see loss_scale.h for the exact state machine and where it comes from). */
#include "exec/loss_scale.h"

#include <math.h>

void cnnb_loss_scale_init(cnnb_loss_scale *ls, float initial, bool dynamic, int64_t inc_every_n) {
  ls->scale = initial > 0.0f ? initial : CNNB_DEFAULT_FP16_LOSS_SCALE;
  ls->dynamic = dynamic;
  ls->normal_steps = 0;
  ls->inc_every_n = inc_every_n > 0 ? inc_every_n : CNNB_DEFAULT_INC_LOSS_SCALE_EVERY_N;
}

bool cnnb_loss_scale_needs_check(const cnnb_loss_scale *ls) { return ls->dynamic; }

bool cnnb_loss_scale_after_step(cnnb_loss_scale *ls, bool grads_finite) {
  if (!ls->dynamic) return false;
  if (!grads_finite) {
    ls->scale *= 0.5f;
    ls->normal_steps = 0;
    return true;
  }
  if (ls->normal_steps < ls->inc_every_n) {
    ls->normal_steps += 1;
  } else {
    /* Newer tf_cnn_benchmarks keep the old scale when doubling overflows to inf: an
     * infinite scale would make every later step non-finite and skipped. */
    float doubled = ls->scale * 2.0f;
    if (isfinite(doubled)) ls->scale = doubled;
    ls->normal_steps = 0;
  }
  return false;
}
