/* update.c — the optimizer step over a range of the fp32 arenas, and the finiteness
 * check the core's loss scaling asks for.
 *
 * The math is optimizer.h's, element by element in fp32 exactly as cnnb_update_reference
 * does it (the tests hold the two together, bit for bit up to 1e-6); only the per-call
 * constant of Adam (the bias-corrected rate) is formed once, in double, as TF does. The
 * range is split across the device's threads; each rule is its own loop so the compiler
 * can vectorise it. */
#include <math.h>
#include <stdatomic.h>

#include "cpu_device.h"

typedef struct update_job {
  const cnnb_update *u;
  float lr_t; /* adam */
} update_job;

static inline float effective_grad(const cnnb_update *u, int64_t i) {
  float g = u->grads[i] * u->grad_scale;
  /* NaN stays NaN: both comparisons are false (as in the reference). */
  if (u->clip > 0.0f) g = g > u->clip ? u->clip : g < -u->clip ? -u->clip : g;
  return g + u->weight_decay * u->params[i];
}

static void sgd(void *ctx, int64_t begin, int64_t end) {
  const cnnb_update *u = ((update_job *)ctx)->u;
  for (int64_t i = begin; i < end; i++) u->params[i] -= u->learning_rate * effective_grad(u, i);
}

static void momentum(void *ctx, int64_t begin, int64_t end) {
  const cnnb_update *u = ((update_job *)ctx)->u;
  float *w = u->params, *a = u->slot1;
  const float lr = u->learning_rate, m = u->momentum;
  if (u->nesterov) {
    for (int64_t i = begin; i < end; i++) {
      float g = effective_grad(u, i);
      a[i] = a[i] * m + g;
      w[i] -= lr * (g + m * a[i]);
    }
  } else {
    for (int64_t i = begin; i < end; i++) {
      a[i] = a[i] * m + effective_grad(u, i);
      w[i] -= lr * a[i];
    }
  }
}

static void rmsprop(void *ctx, int64_t begin, int64_t end) {
  const cnnb_update *u = ((update_job *)ctx)->u;
  float *w = u->params, *ms = u->slot1, *mom = u->slot2;
  const float lr = u->learning_rate, m = u->momentum, rho = u->rho, eps = u->epsilon;
  for (int64_t i = begin; i < end; i++) {
    float g = effective_grad(u, i);
    ms[i] = rho * ms[i] + (1.0f - rho) * g * g;
    mom[i] = m * mom[i] + lr * g / sqrtf(ms[i] + eps);
    w[i] -= mom[i];
  }
}

static void adam(void *ctx, int64_t begin, int64_t end) {
  const update_job *job = ctx;
  const cnnb_update *u = job->u;
  float *w = u->params, *m1 = u->slot1, *v = u->slot2;
  const float b1 = u->beta1, b2 = u->beta2, eps = u->epsilon, lr_t = job->lr_t;
  for (int64_t i = begin; i < end; i++) {
    float g = effective_grad(u, i);
    m1[i] = b1 * m1[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    w[i] -= lr_t * m1[i] / (sqrtf(v[i]) + eps);
  }
}

cnnb_status cpu_update(cpu_device *d, const cnnb_update *u) {
  if (!u) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: update without a description");
  if (u->count <= 0) {
    if (u->rule < CNNB_OPT_SGD || u->rule > CNNB_OPT_ADAM)
      return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: unknown optimizer rule %u", u->rule);
    return CNNB_OK;
  }
  if (!u->params || !u->grads)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cpu: update of %lld elements without parameters or gradients",
                      (long long)u->count);
  update_job job = {u, 0.0f};
  switch (u->rule) {
    case CNNB_OPT_SGD: cpu_parallel_for(d, u->count, sgd, &job); return CNNB_OK;
    case CNNB_OPT_MOMENTUM:
      if (!u->slot1)
        return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: momentum update without its accumulator");
      cpu_parallel_for(d, u->count, momentum, &job);
      return CNNB_OK;
    case CNNB_OPT_RMSPROP:
      if (!u->slot1 || !u->slot2)
        return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: rmsprop update without its two slots");
      cpu_parallel_for(d, u->count, rmsprop, &job);
      return CNNB_OK;
    case CNNB_OPT_ADAM: {
      if (!u->slot1 || !u->slot2)
        return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: adam update without its two slots");
      double t = (double)u->step + 1.0;
      job.lr_t = (float)((double)u->learning_rate * sqrt(1.0 - pow((double)u->beta2, t)) /
                         (1.0 - pow((double)u->beta1, t)));
      cpu_parallel_for(d, u->count, adam, &job);
      return CNNB_OK;
    }
    default: return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: unknown optimizer rule %u", u->rule);
  }
}

typedef struct finite_job {
  const float *x;
  atomic_int bad;
} finite_job;

static void check_finite(void *ctx, int64_t begin, int64_t end) {
  finite_job *job = ctx;
  /* x - x is 0 for finite x and NaN for inf or NaN: a branch-free loop. */
  float acc = 0.0f;
  for (int64_t i = begin; i < end; i++) acc += job->x[i] - job->x[i];
  if (acc != 0.0f) atomic_store_explicit(&job->bad, 1, memory_order_relaxed);
}

cnnb_status cpu_all_finite(cpu_device *d, const float *grads, int64_t count, int32_t *finite) {
  if (!finite) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: all_finite without a result");
  if (count > 0 && !grads)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: all_finite without gradients");
  finite_job job = {grads, 0};
  cpu_parallel_for(d, count, check_finite, &job);
  *finite = atomic_load(&job.bad) == 0;
  return CNNB_OK;
}
