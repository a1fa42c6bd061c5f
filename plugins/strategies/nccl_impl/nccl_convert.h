/* nccl_convert.h — the one kernel of the NCCL implementation (nccl_convert.cu): fp32
 * gradients to and from 16-bit copies for --compact_gradient_transfer, with a scale
 * folded in, on a stream. C linkage so nccl_impl.c (C) calls the nvcc-built code. */
#ifndef CNNB_NCCL_CONVERT_H
#define CNNB_NCCL_CONVERT_H

#include <stdint.h>
#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = (to) ((float) src[i] * scale) for i < count; types are NCCL_API_FLOAT32,
 * _FLOAT16, _BFLOAT16 (one side FLOAT32). Launches and returns the launch's error. */
cudaError_t nccl_convert_launch(cudaStream_t stream, const void *src, int32_t from, void *dst,
                                int32_t to, int64_t count, float scale);

/* `value` as the 16-bit type's bits (NCCL_API_FLOAT16 or _BFLOAT16), rounded to nearest
 * even: the scalar of a 16-bit premultiplied sum. */
uint16_t nccl_convert_scalar(float value, int32_t type);

#ifdef __cplusplus
}
#endif
#endif
