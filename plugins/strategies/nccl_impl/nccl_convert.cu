/* nccl_convert.cu — fp32 <-> fp16 / bf16 with a scale (nccl_convert.h). The product is
 * taken in fp32 and rounded once to the 16-bit type, to nearest even (__float2half_rn,
 * __float2bfloat16_rn), as the host's compact16.h rounds for MPI.
 *
 * nvcc compiles it; the test-only fake tree (CNNB_CUDA_FAKE) compiles it as host C++
 * (nccl_convert_host.cpp), as the cuda device's kernels: hence GPU_LAUNCH and gpu_fmul
 * from the device's gpu_math.h, which are nvcc's launch and __fmul_rn under nvcc and the
 * host shim's (../../devices/cuda/host/gpu_host.h) elsewhere. */
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../../devices/cuda/gpu_math.h"
#include "../common/nccl_api.h"
#include "nccl_convert.h"

namespace {

__device__ float load(const void *p, int32_t type, int64_t i) {
  if (type == NCCL_API_FLOAT16) return __half2float(static_cast<const __half *>(p)[i]);
  if (type == NCCL_API_BFLOAT16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

__device__ void store(void *p, int32_t type, int64_t i, float v) {
  if (type == NCCL_API_FLOAT16) static_cast<__half *>(p)[i] = __float2half_rn(v);
  else if (type == NCCL_API_BFLOAT16) static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else static_cast<float *>(p)[i] = v;
}

__global__ void convert(const void *src, int32_t from, void *dst, int32_t to, int64_t count,
                        float scale) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    store(dst, to, i, gpu_fmul(load(src, from, i), scale));
}

} // namespace

extern "C" cudaError_t nccl_convert_launch(cudaStream_t stream, const void *src, int32_t from,
                                           void *dst, int32_t to, int64_t count, float scale) {
  if (count <= 0) return cudaSuccess;
  const int threads = 256;
  int64_t blocks = (count + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096; /* a grid-stride loop does the rest */
  GPU_LAUNCH(convert, (unsigned)blocks, threads, 0, stream, src, from, dst, to, count, scale);
  return cudaGetLastError();
}

extern "C" uint16_t nccl_convert_scalar(float value, int32_t type) {
  uint16_t bits;
  if (type == NCCL_API_BFLOAT16) {
    __nv_bfloat16 b = __float2bfloat16_rn(value);
    memcpy(&bits, &b, sizeof bits);
  } else {
    __half h = __float2half_rn(value);
    memcpy(&bits, &h, sizeof bits);
  }
  return bits;
}
