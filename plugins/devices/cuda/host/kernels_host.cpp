/* kernels_host.cpp — the cuda device's own kernels (../kernels_*.cu, the very files nvcc
 * compiles) built as host C++ in one translation unit, for the test-only fake CUDA build
 * (../fake/) and the host test of the kernels (../tests/). gpu_math.h brings
 * gpu_host.h, which gives the CUDA spellings host meanings and runs each launch's grid
 * on the CPU through the fake runtime.
 *
 * Each file gets a namespace of its own: the six were written as separate translation
 * units, so their file-local helpers share names (count_of, dims_valid). Their extern "C"
 * launchers are gpu_kernels.h's functions whatever namespace defines them. Every header
 * they include is included here first, at global scope, so that their own #includes,
 * inside the namespaces, find them already included.
 *
 * A few host-only probes of the files' internal index math follow, for the test: they
 * run the same functions the kernels run, on shapes too large to allocate. */
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gpu_kernels.h"
#include "gpu_math.h"

namespace cnnb_kernels_convert {
#include "../kernels_convert.cu"
}
namespace cnnb_kernels_eltwise {
#include "../kernels_eltwise.cu"
}
namespace cnnb_kernels_loss {
#include "../kernels_loss.cu"
}
namespace cnnb_kernels_update {
#include "../kernels_update.cu"
}
namespace cnnb_kernels_pool {
#include "../kernels_pool.cu"
}
namespace cnnb_kernels_concat {
#include "../kernels_concat.cu"
}

/* ---- probes for the test ---------------------------------------------------------------- */

extern "C" int gpu_host_pool_fits_int32(int64_t count) {
  return cnnb_kernels_pool::fits_int32(count);
}

extern "C" unsigned gpu_host_pool_blocks(int64_t count) {
  return cnnb_kernels_pool::blocks_for(count);
}

extern "C" int64_t gpu_host_pool_offset(gpu_dims d, int32_t n, int32_t c, int32_t h, int32_t w) {
  return cnnb_kernels_pool::offset_of<int64_t>(d, n, c, h, w);
}

extern "C" void gpu_host_pool_unravel(gpu_dims d, int64_t i, int32_t *n, int32_t *c, int32_t *h,
                                      int32_t *w) {
  cnnb_kernels_pool::unravel<int64_t>(d, i, n, c, h, w);
}

extern "C" void gpu_host_bias_grad_plan(gpu_dims d, int64_t *chunks, int64_t *per_chunk) {
  const auto p = cnnb_kernels_eltwise::bias_grad_plan(d);
  *chunks = p.chunks;
  *per_chunk = p.per_chunk;
}

/* kernels_concat.cu's source of channel_shuffle's element i of y (buffer order) in x, in
 * the kernel's 32-bit (wide 0) or 64-bit (wide 1) index type. For the test, which
 * declares it. */
extern "C" int64_t gpu_host_shuffle_source(gpu_dims d, int32_t groups, int64_t i, int wide) {
  return wide ? (int64_t)cnnb_kernels_concat::shuffle_source<uint64_t>(d, groups, (uint64_t)i)
              : (int64_t)cnnb_kernels_concat::shuffle_source<uint32_t>(d, groups, (uint32_t)i);
}

/* kernels_concat.cu's placement of element i of a launch over y's channels
 * [lo, lo + width) holding `parts` (at most GPU_CONCAT_MAX_INPUTS, none empty), in the
 * kernels' 32-bit (wide 0) or 64-bit (wide 1) index type: y's offset, the part holding
 * it (returned; -1: none) and the offset in that part. For the test, which declares it:
 * it checks the math on tensors too large to allocate. */
extern "C" int32_t gpu_host_concat_locate(gpu_dims d, const gpu_concat_part *parts, int32_t count,
                                          int32_t lo, int32_t width, int64_t i, int wide,
                                          int64_t *y_offset, int64_t *x_offset) {
  cnnb_kernels_concat::concat_args a = {};
  int32_t next = 0;
  cnnb_kernels_concat::take_parts(&a, parts, count, &next, true);
  a.lo = lo;
  a.width = width;
  if (wide) {
    const auto p = cnnb_kernels_concat::locate<uint64_t>(d, a, (uint64_t)i);
    *y_offset = (int64_t)p.y;
    *x_offset = (int64_t)p.x;
    return p.part;
  }
  const auto p = cnnb_kernels_concat::locate<uint32_t>(d, a, (uint32_t)i);
  *y_offset = (int64_t)p.y;
  *x_offset = (int64_t)p.x;
  return p.part;
}
