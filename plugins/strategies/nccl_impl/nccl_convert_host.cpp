/* nccl_convert_host.cpp — the NCCL implementation's one kernel (nccl_convert.cu, the very
 * file nvcc compiles) built as host C++ for the test-only fake tree (CNNB_CUDA_FAKE): its
 * launch runs the grid on the CPU through the fake runtime (../../devices/cuda/host/
 * gpu_host.h, by way of gpu_math.h).
 *
 * The fake checks what a GPU would leave undefined: the launcher here is the kernel's own,
 * behind checks that both buffers lie inside live device allocations of the current GPU
 * (nccl_impl.c made the ordinal current), that the types are ones it converts, and that
 * source and destination do not partly overlap (the kernel reads and writes element i in
 * different widths). */
#include <stddef.h>
#include <stdint.h>

#include "fake_cuda.h"

#define nccl_convert_launch nccl_convert_launch_unchecked
#include "nccl_convert.cu"
#undef nccl_convert_launch

namespace {

size_t width_of(int32_t type, const char *api, const char *what) {
  if (type == NCCL_API_FLOAT32) return 4;
  if (type == NCCL_API_FLOAT16 || type == NCCL_API_BFLOAT16) return 2;
  fake_cuda_fail(api, "%s type %d is not fp32, fp16 or bf16", what, (int)type);
}

} // namespace

extern "C" cudaError_t nccl_convert_launch(cudaStream_t stream, const void *src, int32_t from,
                                           void *dst, int32_t to, int64_t count, float scale) {
  const char *api = "nccl_convert_launch";
  size_t in = width_of(from, api, "the source"), out = width_of(to, api, "the destination");
  if (from != NCCL_API_FLOAT32 && to != NCCL_API_FLOAT32)
    fake_cuda_fail(api, "from type %d to type %d: one side must be fp32", (int)from, (int)to);
  if (count > 0) {
    fake_cuda_check_device(src, (size_t)count * in, in, api, "src");
    fake_cuda_check_device(dst, (size_t)count * out, out, api, "dst");
    const char *a = static_cast<const char *>(src), *b = static_cast<const char *>(dst);
    if (a != b && a < b + (size_t)count * out && b < a + (size_t)count * in)
      fake_cuda_fail(api, "src %p and dst %p overlap by part", src, (void *)dst);
    if (a == b && in != out)
      fake_cuda_fail(api, "in place from %zu-byte to %zu-byte elements", in, out);
  }
  return nccl_convert_launch_unchecked(stream, src, from, dst, to, count, scale);
}
