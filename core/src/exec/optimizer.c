/* optimizer.c — the reference optimizer update (cnnb/optimizer.h): TensorFlow's
 * tf.train rules, one element at a time on host memory. Devices are tested against
 * this, and the CPU device may call it for tiny ranges; it is written for clarity, not
 * speed. Arithmetic is fp32 like TF's kernels; the Adam step size is formed in double
 * because TF forms beta^t once per step on the host as well, not per element. */
#include <math.h>
#include <cnnb/optimizer.h>

/* Clipping by value keeps NaN as NaN (both comparisons are false), so a broken step
 * still shows up as broken instead of being silently clamped to +-clip. */
static float gradient_at(const cnnb_update *u, int64_t i) {
  float g = u->grads[i] * u->grad_scale;
  if (u->clip > 0.0f) {
    if (g > u->clip) g = u->clip;
    else if (g < -u->clip) g = -u->clip;
  }
  return g + u->weight_decay * u->params[i];
}

static void apply_sgd(const cnnb_update *u) {
  for (int64_t i = 0; i < u->count; ++i) u->params[i] -= u->learning_rate * gradient_at(u, i);
}

/* TF ApplyMomentum: accum = accum * m + g; nesterov: var -= lr * (g + m * accum). */
static void apply_momentum(const cnnb_update *u) {
  for (int64_t i = 0; i < u->count; ++i) {
    float g = gradient_at(u, i);
    float a = u->slot1[i] * u->momentum + g;
    u->slot1[i] = a;
    u->params[i] -= u->nesterov ? u->learning_rate * (g + u->momentum * a) : u->learning_rate * a;
  }
}

/* TF ApplyRMSProp (slot1 = ms, slot2 = mom). TF initialises ms to ones, not zeros: that
 * is the trainer's business when it creates the slots, not this rule's. */
static void apply_rmsprop(const cnnb_update *u) {
  for (int64_t i = 0; i < u->count; ++i) {
    float g = gradient_at(u, i);
    float ms = u->rho * u->slot1[i] + (1.0f - u->rho) * g * g;
    float mom = u->momentum * u->slot2[i] + u->learning_rate * g / sqrtf(ms + u->epsilon);
    u->slot1[i] = ms;
    u->slot2[i] = mom;
    u->params[i] -= mom;
  }
}

/* TF ApplyAdam (slot1 = m, slot2 = v), bias correction folded into the step size. */
static void apply_adam(const cnnb_update *u) {
  double t = (double)u->step + 1.0;
  double lr_t = (double)u->learning_rate * sqrt(1.0 - pow((double)u->beta2, t)) /
                (1.0 - pow((double)u->beta1, t));
  float lrt = (float)lr_t;
  for (int64_t i = 0; i < u->count; ++i) {
    float g = gradient_at(u, i);
    float m = u->beta1 * u->slot1[i] + (1.0f - u->beta1) * g;
    float v = u->beta2 * u->slot2[i] + (1.0f - u->beta2) * g * g;
    u->slot1[i] = m;
    u->slot2[i] = v;
    u->params[i] -= lrt * m / (sqrtf(v) + u->epsilon);
  }
}

void cnnb_update_reference(const cnnb_update *update) {
  if (!update || update->count <= 0) return;
  switch (update->rule) {
    case CNNB_OPT_SGD: apply_sgd(update); break;
    case CNNB_OPT_MOMENTUM: apply_momentum(update); break;
    case CNNB_OPT_RMSPROP: apply_rmsprop(update); break;
    case CNNB_OPT_ADAM: apply_adam(update); break;
    default: break; /* unknown rule: nothing is a safer answer than a guess */
  }
}
