/* update.c — the optimizer step over a range of the fp32 arenas, and the finiteness
 * check the core's loss scaling asks for.
 *
 * The math is optimizer.h's, element by element in fp32 as cnnb_update_reference does it
 * (the tests hold the two together); only the per-call constants (Adam's bias-corrected
 * rate) are computed once, in double. Each rule is its own loop so the compiler can
 * vectorise it. */
#include <math.h>

#include "cpu_device.h"

static inline float effective_grad(const cnnb_update *u, int64_t i) {
  float g = u->grads[i] * u->grad_scale;
  if (u->clip > 0.0f) g = g < -u->clip ? -u->clip : g > u->clip ? u->clip : g;
  return g + u->weight_decay * u->params[i];
}

cnnb_status cpu_update(cpu_device *d, const cnnb_update *u) {
  if (!u || u->count < 0 || (u->count > 0 && (!u->params || !u->grads)))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: update without parameters or gradients");
  const int64_t n = u->count;
  float *w = u->params;
  const float lr = u->learning_rate, m = u->momentum;
  switch (u->rule) {
  case CNNB_OPT_SGD:
    for (int64_t i = 0; i < n; i++) w[i] -= lr * effective_grad(u, i);
    return CNNB_OK;
  case CNNB_OPT_MOMENTUM: {
    float *a = u->slot1;
    if (!a && n) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: momentum update without its accumulator");
    if (u->nesterov) {
      for (int64_t i = 0; i < n; i++) {
        float g = effective_grad(u, i);
        a[i] = m * a[i] + g;
        w[i] -= lr * (g + m * a[i]);
      }
    } else {
      for (int64_t i = 0; i < n; i++) {
        float g = effective_grad(u, i);
        a[i] = m * a[i] + g;
        w[i] -= lr * a[i];
      }
    }
    return CNNB_OK;
  }
  case CNNB_OPT_RMSPROP: {
    float *ms = u->slot1, *mom = u->slot2;
    if ((!ms || !mom) && n)
      return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: rmsprop update without its two slots");
    const float rho = u->rho, eps = u->epsilon;
    for (int64_t i = 0; i < n; i++) {
      float g = effective_grad(u, i);
      ms[i] = rho * ms[i] + (1.0f - rho) * g * g;
      mom[i] = m * mom[i] + lr * g / sqrtf(ms[i] + eps);
      w[i] -= mom[i];
    }
    return CNNB_OK;
  }
  case CNNB_OPT_ADAM: {
    float *m1 = u->slot1, *v = u->slot2;
    if ((!m1 || !v) && n)
      return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: adam update without its two slots");
    const float b1 = u->beta1, b2 = u->beta2, eps = u->epsilon;
    double t = (double)(u->step + 1);
    const float lr_t = (float)(lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t)));
    for (int64_t i = 0; i < n; i++) {
      float g = effective_grad(u, i);
      m1[i] = b1 * m1[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      w[i] -= lr_t * m1[i] / (sqrtf(v[i]) + eps);
    }
    return CNNB_OK;
  }
  default:
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: unknown optimizer rule %u", u->rule);
  }
}

cnnb_status cpu_all_finite(cpu_device *d, const float *grads, int64_t count, int32_t *finite) {
  if (count > 0 && !grads) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: all_finite without gradients");
  /* x - x is 0 for finite x and NaN for inf or NaN; summing keeps the loop branch-free. */
  float acc = 0.0f;
  for (int64_t i = 0; i < count; i++) acc += grads[i] - grads[i];
  *finite = acc == 0.0f;
  return CNNB_OK;
}
