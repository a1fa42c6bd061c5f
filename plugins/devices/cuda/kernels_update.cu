/* kernels_update.cu — the optimizer step over a range of the fp32 arenas, and the
 * finiteness check dynamic loss scaling asks for (gpu_kernels.h).
 *
 * The element math is gpu_math.h's gpu_update_element: cnnb_update_reference's float
 * operations in its order, each an explicitly rounded intrinsic, so the step agrees with
 * the reference to the last bit (tests/test_cuda_math.c holds the host build of the
 * same function to the reference). This file is also compiled with --fmad=false
 * (CMakeLists.txt), a second guard against a contracted multiply-add. */
#include "gpu_kernels.h"
#include "gpu_math.h"

namespace {

/* One kernel per rule: with the rule a constant, gpu_update_element's switch folds away
 * and a rule's missing slots are never touched. */
template <int Rule>
__global__ void update_kernel(gpu_update_hyper h, float *params, const float *grads, float *slot1,
                              float *slot2, int64_t n) {
  h.rule = Rule;
  const bool has1 = gpu_update_uses_slot1(Rule), has2 = gpu_update_uses_slot2(Rule);
  GPU_GRID_STRIDE(i, n) {
    float w = params[i];
    float s1 = has1 ? slot1[i] : 0.0f;
    float s2 = has2 ? slot2[i] : 0.0f;
    gpu_update_element(&h, grads[i], &w, &s1, &s2);
    params[i] = w;
    if (has1) slot1[i] = s1;
    if (has2) slot2[i] = s2;
  }
}

__global__ void set_flag_kernel(int32_t *flag, int32_t value) { *flag = value; }

/* Clears *flag when any element is inf or NaN (every writer writes the same 0). */
__global__ void finite_kernel(int32_t *flag, const float *x, int64_t n) {
  bool bad = false;
  GPU_GRID_STRIDE(i, n) bad |= !isfinite(x[i]);
  if (bad) *flag = 0;
}

template <int Rule>
cudaError_t launch_update(const gpu_update_args *a, const gpu_update_hyper &h,
                          cudaStream_t stream) {
  GPU_LAUNCH(update_kernel<Rule>, gpu_blocks(a->count), GPU_THREADS, 0, stream, h, a->params,
             a->grads, a->slot1, a->slot2, a->count);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gpu_k_update(const gpu_update_args *args, cudaStream_t stream) {
  if (!args) return cudaErrorInvalidValue;
  gpu_update_hyper h;
  h.rule = args->rule;
  h.nesterov = args->nesterov;
  h.learning_rate = args->learning_rate;
  h.weight_decay = args->weight_decay;
  h.grad_scale = args->grad_scale;
  h.clip = args->clip;
  h.momentum = args->momentum;
  h.rho = args->rho;
  h.epsilon = args->epsilon;
  h.beta1 = args->beta1;
  h.beta2 = args->beta2;
  h.adam_lr_t = args->adam_lr_t;
  if (h.rule < GPU_OPT_SGD || h.rule > GPU_OPT_ADAM) return cudaErrorInvalidValue;
  if (args->count <= 0) return cudaSuccess;
  if (!args->params || !args->grads || (gpu_update_uses_slot1(h.rule) && !args->slot1) ||
      (gpu_update_uses_slot2(h.rule) && !args->slot2))
    return cudaErrorInvalidValue;
  switch (h.rule) {
    case GPU_OPT_SGD: return launch_update<GPU_OPT_SGD>(args, h, stream);
    case GPU_OPT_MOMENTUM: return launch_update<GPU_OPT_MOMENTUM>(args, h, stream);
    case GPU_OPT_RMSPROP: return launch_update<GPU_OPT_RMSPROP>(args, h, stream);
    default: return launch_update<GPU_OPT_ADAM>(args, h, stream);
  }
}

/* *all_finite = 1, then cleared by any non-finite element; count 0 leaves the 1 (every
 * element of an empty range is finite). */
extern "C" cudaError_t gpu_k_all_finite(int32_t *all_finite, const float *grads, int64_t count,
                                        cudaStream_t stream) {
  if (!all_finite || (count > 0 && !grads)) return cudaErrorInvalidValue;
  GPU_LAUNCH(set_flag_kernel, 1, 1, 0, stream, all_finite, 1);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || count <= 0) return e;
  GPU_LAUNCH(finite_kernel, gpu_blocks(count), GPU_THREADS, 0, stream, all_finite, grads, count);
  return cudaGetLastError();
}
