/* kernels_convert.cu — the conversion kernels of gpu_kernels.h: between element types,
 * between the logical NCHW fp32 the host speaks and the device's own layout and type,
 * uint8 NHWC pixels into the input, convolution filters between the fp32 OIHW arena and
 * the compute type / layout, and the spatial padding and cropping cuDNN's symmetric
 * padding needs.
 *
 * Each kernel walks its destination in buffer order (writes coalesce), finds the
 * element's logical coordinates with gpu_coord_of and reads the source at gpu_offset of
 * them: gpu_math.h's index math, which tests/test_cuda_math.c checks on the host.
 * Values pass through fp32 and are stored rounded to nearest even. */
#include "gpu_kernels.h"
#include "gpu_math.h"

namespace {

template <typename D, typename S>
__global__ void cast_kernel(D *dst, const S *src, int64_t n) {
  GPU_GRID_STRIDE(i, n) gpu_store(&dst[i], gpu_load(&src[i]));
}

/* dst (dims' layout) <- src logical NCHW fp32. */
template <typename D>
__global__ void from_nchw_kernel(D *dst, gpu_dims dims, const float *src, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(dims.nhwc, dims.c, dims.h, dims.w, i);
    gpu_store(&dst[i], src[gpu_offset_nchw(dims.c, dims.h, dims.w, p.n, p.c, p.h, p.w)]);
  }
}

/* dst logical NCHW fp32 <- src (dims' layout). */
template <typename S>
__global__ void to_nchw_kernel(float *dst, const S *src, gpu_dims dims, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(0, dims.c, dims.h, dims.w, i);
    dst[i] = gpu_load(&src[gpu_offset(dims.nhwc, dims.c, dims.h, dims.w, p.n, p.c, p.h, p.w)]);
  }
}

/* dst (dims' layout) <- (float)src * scale[c] + offset[c], src uint8 [N, H, W, C]; one
 * multiply and one add, each rounded, as the cpu device computes it. */
template <typename D>
__global__ void from_uint8_kernel(D *dst, gpu_dims dims, const uint8_t *src, const float *scale,
                                  const float *offset, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(dims.nhwc, dims.c, dims.h, dims.w, i);
    float v = (float)src[gpu_offset_nhwc(dims.c, dims.h, dims.w, p.n, p.c, p.h, p.w)];
    gpu_store(&dst[i], gpu_fadd(gpu_fmul(v, scale[p.c]), offset[p.c]));
  }
}

/* dst [K, C, R, S] in OIHW (nhwc 0) or OHWI (nhwc 1) <- src fp32 OIHW. */
template <typename D>
__global__ void filter_to_compute_kernel(D *dst, int32_t nhwc, const float *src, int32_t c,
                                         int32_t c_pad, int32_t r, int32_t s, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(nhwc, c_pad, r, s, i); /* (k, c, r, s) as (n, c, h, w) */
    gpu_store(&dst[i], p.c < c ? src[gpu_filter_offset_oihw(c, r, s, p.n, p.c, p.h, p.w)] : 0.0f);
  }
}

/* dst fp32 OIHW <- src in OIHW (nhwc 0) or OHWI (nhwc 1). */
template <typename S>
__global__ void filter_grad_to_arena_kernel(float *dst, const S *src, int32_t nhwc, int32_t c,
                                            int32_t c_pad, int32_t r, int32_t s, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(0, c, r, s, i);
    int64_t at = nhwc ? gpu_filter_offset_ohwi(c_pad, r, s, p.n, p.c, p.h, p.w)
                      : gpu_filter_offset_oihw(c_pad, r, s, p.n, p.c, p.h, p.w);
    dst[i] = gpu_load(&src[at]);
  }
}

/* dst = src placed at (top, left) and channel 0, fill elsewhere (also in the channels
 * dst has beyond src's); the elements copy unchanged. */
template <typename T>
__global__ void pad_kernel(T *dst, gpu_dims dd, const T *src, gpu_dims sd, int32_t top,
                           int32_t left, float fill, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(dd.nhwc, dd.c, dd.h, dd.w, i);
    int64_t h = p.h - top, w = p.w - left;
    if (h >= 0 && h < sd.h && w >= 0 && w < sd.w && p.c < sd.c)
      dst[i] = src[gpu_offset(sd.nhwc, sd.c, sd.h, sd.w, p.n, p.c, h, w)];
    else gpu_store(&dst[i], fill);
  }
}

/* dst = the window of src at (top, left), of dst's size. */
template <typename T>
__global__ void crop_kernel(T *dst, gpu_dims dd, const T *src, gpu_dims sd, int32_t top,
                            int32_t left, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    gpu_coord p = gpu_coord_of(dd.nhwc, dd.c, dd.h, dd.w, i);
    dst[i] = src[gpu_offset(sd.nhwc, sd.c, sd.h, sd.w, p.n, p.c, p.h + top, p.w + left)];
  }
}

int64_t count_of(gpu_dims d) { return (int64_t)d.n * d.c * d.h * d.w; }

bool dims_valid(gpu_dims d) { return d.n >= 0 && d.c >= 0 && d.h >= 0 && d.w >= 0; }

} // namespace

extern "C" cudaError_t gpu_k_cast(void *dst, gpu_dtype dst_type, const void *src,
                                  gpu_dtype src_type, int64_t n, cudaStream_t stream) {
  if ((dst_type == GPU_I32) != (src_type == GPU_I32)) return cudaErrorInvalidValue;
  if (dst_type == GPU_I32) { /* int32 to int32: a copy */
    if (n <= 0 || dst == src) return cudaSuccess;
    return cudaMemcpyAsync(dst, src, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToDevice, stream);
  }
  return gpu_dispatch_float(dst_type, [&](auto dst_tag) {
    return gpu_dispatch_float(src_type, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      if (n <= 0) return cudaSuccess;
      GPU_LAUNCH((cast_kernel<D, S>), gpu_blocks(n), GPU_THREADS, 0, stream, (D *)dst,
                 (const S *)src, n);
      return cudaGetLastError();
    });
  });
}

extern "C" cudaError_t gpu_k_from_nchw_f32(void *dst, gpu_dtype dst_type, gpu_dims dims,
                                           const float *src, cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t n = count_of(dims);
  return gpu_dispatch_float(dst_type, [&](auto tag) {
    using D = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(from_nchw_kernel<D>, gpu_blocks(n), GPU_THREADS, 0, stream, (D *)dst, dims, src, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_to_nchw_f32(float *dst, const void *src, gpu_dtype src_type,
                                         gpu_dims dims, cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t n = count_of(dims);
  return gpu_dispatch_float(src_type, [&](auto tag) {
    using S = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(to_nchw_kernel<S>, gpu_blocks(n), GPU_THREADS, 0, stream, dst, (const S *)src, dims,
               n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_from_uint8_nhwc(void *dst, gpu_dtype dst_type, gpu_dims dims,
                                             const uint8_t *src, const float *scale,
                                             const float *offset, cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t n = count_of(dims);
  return gpu_dispatch_float(dst_type, [&](auto tag) {
    using D = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(from_uint8_kernel<D>, gpu_blocks(n), GPU_THREADS, 0, stream, (D *)dst, dims, src,
               scale, offset, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_filter_to_compute(void *dst, gpu_dtype dst_type, int32_t nhwc,
                                               const float *src, int32_t k, int32_t c,
                                               int32_t c_pad, int32_t r, int32_t s,
                                               cudaStream_t stream) {
  if (k < 0 || c < 0 || c_pad < c || r < 0 || s < 0) return cudaErrorInvalidValue;
  const int64_t n = (int64_t)k * c_pad * r * s;
  return gpu_dispatch_float(dst_type, [&](auto tag) {
    using D = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(filter_to_compute_kernel<D>, gpu_blocks(n), GPU_THREADS, 0, stream, (D *)dst, nhwc,
               src, c, c_pad, r, s, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_filter_grad_to_arena(float *dst, const void *src, gpu_dtype src_type,
                                                  int32_t nhwc, int32_t k, int32_t c, int32_t c_pad,
                                                  int32_t r, int32_t s, cudaStream_t stream) {
  if (k < 0 || c < 0 || c_pad < c || r < 0 || s < 0) return cudaErrorInvalidValue;
  const int64_t n = (int64_t)k * c * r * s;
  return gpu_dispatch_float(src_type, [&](auto tag) {
    using S = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(filter_grad_to_arena_kernel<S>, gpu_blocks(n), GPU_THREADS, 0, stream, dst,
               (const S *)src, nhwc, c, c_pad, r, s, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_pad_spatial(void *dst, gpu_dims dst_dims, const void *src,
                                         gpu_dims src_dims, gpu_dtype type, int32_t top,
                                         int32_t left, float fill, cudaStream_t stream) {
  /* src must fit inside dst at (top, left), batch, channels and layout alike. */
  if (!dims_valid(dst_dims) || !dims_valid(src_dims) || dst_dims.n != src_dims.n ||
      dst_dims.c < src_dims.c || dst_dims.nhwc != src_dims.nhwc || top < 0 || left < 0 ||
      (int64_t)src_dims.h + top > dst_dims.h || (int64_t)src_dims.w + left > dst_dims.w)
    return cudaErrorInvalidValue;
  const int64_t n = count_of(dst_dims);
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(pad_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dst, dst_dims,
               (const T *)src, src_dims, top, left, fill, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_shift_spatial(void *dst, gpu_dims dst_dims, const void *src,
                                           gpu_dims src_dims, gpu_dtype type, int32_t top,
                                           int32_t left, cudaStream_t stream) {
  if (!dims_valid(dst_dims) || !dims_valid(src_dims) || dst_dims.n != src_dims.n ||
      dst_dims.c != src_dims.c || dst_dims.nhwc != src_dims.nhwc)
    return cudaErrorInvalidValue;
  const int64_t n = count_of(dst_dims);
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(pad_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dst, dst_dims,
               (const T *)src, src_dims, top, left, 0.0f, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_crop_spatial(void *dst, gpu_dims dst_dims, const void *src,
                                          gpu_dims src_dims, gpu_dtype type, int32_t top,
                                          int32_t left, cudaStream_t stream) {
  /* dst's window at (top, left) must lie inside src. */
  if (!dims_valid(dst_dims) || !dims_valid(src_dims) || dst_dims.n != src_dims.n ||
      dst_dims.c > src_dims.c || dst_dims.nhwc != src_dims.nhwc || top < 0 || left < 0 ||
      (int64_t)dst_dims.h + top > src_dims.h || (int64_t)dst_dims.w + left > src_dims.w)
    return cudaErrorInvalidValue;
  const int64_t n = count_of(dst_dims);
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n <= 0) return cudaSuccess;
    GPU_LAUNCH(crop_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dst, dst_dims,
               (const T *)src, src_dims, top, left, n);
    return cudaGetLastError();
  });
}
