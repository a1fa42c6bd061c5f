/* update.c — the optimizer step over a range of the fp32 arenas, and the finiteness check
 * the core's dynamic loss scaling asks for: a check of the request, then one kernel on
 * the device's stream (kernels_update.cu).
 *
 * The math is optimizer.h's, element by element in fp32 exactly as cnnb_update_reference
 * does it (gpu_math.h's gpu_update_element); only Adam's bias-corrected step size, a
 * per-call constant, is formed here on the host, in double, by the same expression the
 * reference uses (gpu_adam_lr_t). The update is asynchronous; all_finite waits for its
 * one word to come back. */
#include <string.h>

#include "gpu_device.h"
#include "gpu_math.h"

_Static_assert(GPU_OPT_SGD == CNNB_OPT_SGD && GPU_OPT_MOMENTUM == CNNB_OPT_MOMENTUM &&
                   GPU_OPT_RMSPROP == CNNB_OPT_RMSPROP && GPU_OPT_ADAM == CNNB_OPT_ADAM,
               "gpu_math.h's rule numbers are cnnb_optimizer_rule's");

static const char *rule_name(uint32_t rule) {
  switch (rule) {
    case CNNB_OPT_SGD: return "sgd";
    case CNNB_OPT_MOMENTUM: return "momentum";
    case CNNB_OPT_RMSPROP: return "rmsprop";
    case CNNB_OPT_ADAM: return "adam";
    default: return "?";
  }
}

cnnb_status gpu_update(gpu_device *d, const cnnb_update *u) {
  if (!u) return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: update without a description");
  if (u->rule < CNNB_OPT_SGD || u->rule > CNNB_OPT_ADAM)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: unknown optimizer rule %u", u->rule);
  if (u->count <= 0) return CNNB_OK;
  if (!u->params || !u->grads)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: %s update of %lld elements without parameters or gradients",
                      rule_name(u->rule), (long long)u->count);
  if (gpu_update_uses_slot1((int32_t)u->rule) && !u->slot1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: %s update without its %s", rule_name(u->rule),
                      u->rule == CNNB_OPT_MOMENTUM ? "accumulator" : "first slot");
  if (gpu_update_uses_slot2((int32_t)u->rule) && !u->slot2)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: %s update without its second slot",
                      rule_name(u->rule));

  gpu_update_args a;
  memset(&a, 0, sizeof a);
  a.rule = (int32_t)u->rule;
  a.nesterov = u->nesterov;
  a.count = u->count;
  a.params = u->params;
  a.grads = u->grads;
  a.slot1 = gpu_update_uses_slot1(a.rule) ? u->slot1 : NULL;
  a.slot2 = gpu_update_uses_slot2(a.rule) ? u->slot2 : NULL;
  a.learning_rate = u->learning_rate;
  a.weight_decay = u->weight_decay;
  a.grad_scale = u->grad_scale;
  a.clip = u->clip;
  a.momentum = u->momentum;
  a.rho = u->rho;
  a.epsilon = u->epsilon;
  a.beta1 = u->beta1;
  a.beta2 = u->beta2;
  if (a.rule == CNNB_OPT_ADAM)
    a.adam_lr_t = gpu_adam_lr_t(u->learning_rate, u->beta1, u->beta2, u->step);
  return gpu_cuda(d, gpu_k_update(&a, d->stream), NULL, "optimizer update");
}

cnnb_status gpu_all_finite(gpu_device *d, const float *grads, int64_t count, int32_t *finite) {
  if (!finite) return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: all_finite without a result");
  if (count > 0 && !grads)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: all_finite without gradients");
  if (count <= 0) {
    *finite = 1;
    return CNNB_OK;
  }
  /* The result word: the staging buffers' first int32 on each side, so nothing is
   * allocated per step. Stream order keeps the kernel and the copy after any transfer
   * still using the buffers, and this call waits for them before it returns. */
  cnnb_status st = gpu_staging_reserve(d, sizeof(int32_t));
  if (st || (st = gpu_pinned_reserve(d, sizeof(int32_t)))) return st;
  int32_t *device_flag = d->staging;
  int32_t *host_flag = d->pinned;
  if ((st = gpu_cuda(d, gpu_k_all_finite(device_flag, grads, count, d->stream), NULL,
                     "all_finite check")))
    return st;
  if ((st = gpu_cuda(d,
                     cudaMemcpyAsync(host_flag, device_flag, sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, d->stream),
                     NULL, "all_finite result copy")))
    return st;
  if ((st = gpu_cuda(d, cudaStreamSynchronize(d->stream), NULL, "all_finite wait"))) return st;
  *finite = *host_flag != 0;
  return CNNB_OK;
}
