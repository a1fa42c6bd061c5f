/* kernels_concat.cu — the channel concatenation kernels of gpu_kernels.h: concat
 * (Inception, NASNet, DenseNet) and pad_channels (one part with zero channels around
 * it), forward and backward. They replace one cudaMemcpy2DAsync per input, whose rows
 * (64 to 768 bytes: one pixel's channels in NHWC) are far too short for the copy engine
 * to run at anything near the memory's speed: here one launch moves every part.
 *
 * The forward gathers: one thread per element of y, walking y in buffer order (writes
 * coalesce in either layout), finds the part holding the element's channel by binary
 * search over the parts' first channels, and copies that part's element (zero where no
 * part is: pad_channels' padding). The backward scatters: one thread per element of dy,
 * in buffer order, writing the element into its part's gradient (nothing where the part
 * has none or there is no part). No element is computed: each is its 2 or 4 bytes,
 * copied as they are, so fp16 and bf16 share one instance and NaN payloads survive.
 *
 * A launch takes at most GPU_CONCAT_MAX_INPUTS parts, by value (kernel parameters: no
 * upload, nothing to free, and a CUDA graph captures them with the launch). A call with
 * more parts makes several launches, each over its own range of y's channels.
 *
 * Index math: in either layout a range of channels [c0, c0 + cn) of a [N, C, H, W]
 * tensor is a matrix of `outer` rows of cn * inner elements, row r at (r * C + c0) *
 * inner, where NCHW has outer = N, inner = H * W and NHWC outer = N * H * W, inner = 1.
 * So an element is (row, channel, position within the channel's run), and the same
 * element of a part with C' channels is at (row * C' + c - start) * inner + position.
 * The kernels compute this in an index type I: uint32_t where y's element count fits
 * (the launcher's choice), uint64_t otherwise, since 64-bit division is emulated on the
 * GPU and every element divides once (NHWC) or twice (NCHW).
 *
 * slice_channels (ABI 1.14) needs no kernel of its own: its forward is the backward of
 * one part (y is that part of x's channels), its backward the forward of one part (dy
 * placed back, zeros around). channel_shuffle (ABI 1.14) permutes the channels:
 * shuffle_kernel, one thread per element of y in buffer order, reading its element of x
 * in the source channel; the same index math (row, channel, position), the channel
 * found by one division by C (after one by H * W in NCHW). */
#include <stdint.h>

#include "gpu_kernels.h"
#include "gpu_math.h" /* GPU_LAUNCH, GPU_GRID_STRIDE, gpu_blocks */

namespace {

/* One launch's parts: y's channels [lo, lo + width) are what it covers (forward: every
 * one of them is written), parts in increasing start, none empty. */
struct concat_args {
  int32_t count;
  int32_t lo, width;
  int32_t start[GPU_CONCAT_MAX_INPUTS];
  int32_t channels[GPU_CONCAT_MAX_INPUTS];
  void *data[GPU_CONCAT_MAX_INPUTS];
};

/* The part holding y's channel c: the last whose start is <= c, if c lies within its
 * channels; -1 when none does (a gap: pad_channels' zeros, or a skipped gradient). */
__host__ __device__ __forceinline__ int32_t find_part(const concat_args &a, int32_t c) {
  int32_t lo = 0, hi = a.count; /* the first part starting after c is in [lo, hi] */
  while (lo < hi) {
    const int32_t mid = (lo + hi) >> 1;
    if (a.start[mid] <= c) lo = mid + 1;
    else hi = mid;
  }
  const int32_t k = lo - 1;
  return k >= 0 && c - a.start[k] < a.channels[k] ? k : -1;
}

/* Where the launch's element i (of y's channels [lo, lo + width), in y's buffer order)
 * lives: y's offset, its part (-1: none) and the offset in that part. */
template <typename I>
struct place {
  I y, x;
  int32_t part;
};
template <typename I>
__host__ __device__ __forceinline__ place<I> locate(const gpu_dims &d, const concat_args &a, I i) {
  /* i = (row * width + (c - lo)) * inner + pos, inner 1 in NHWC (no division). */
  const I inner = d.nhwc ? (I)1 : (I)d.h * (I)d.w;
  I pos = 0, q = i;
  if (!d.nhwc) {
    pos = i % inner;
    q = i / inner;
  }
  const I row = q / (I)a.width;
  const int32_t c = a.lo + (int32_t)(q % (I)a.width);
  place<I> p;
  p.y = (row * (I)d.c + (I)c) * inner + pos;
  p.part = find_part(a, c);
  p.x = p.part < 0 ? (I)0 : (row * (I)a.channels[p.part] + (I)(c - a.start[p.part])) * inner + pos;
  return p;
}

/* y[i] = its part's element, or zero bits (+0 in every float type) where there is none. */
template <typename T, typename I>
__global__ void concat_kernel(T *y, gpu_dims d, concat_args a, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    const place<I> p = locate<I>(d, a, (I)i);
    y[p.y] = p.part < 0 ? (T)0 : static_cast<const T *>(a.data[p.part])[p.x];
  }
}

/* Each element of dy into its part's gradient; none where the element has no part. */
template <typename T, typename I>
__global__ void concat_backward_kernel(const T *dy, gpu_dims d, concat_args a, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    const place<I> p = locate<I>(d, a, (I)i);
    if (p.part >= 0) static_cast<T *>(a.data[p.part])[p.x] = dy[p.y];
  }
}

int64_t count_of(gpu_dims d) { return (int64_t)d.n * d.c * d.h * d.w; }

/* Whether the parts fit y (in order, not overlapping, within its channels) and the
 * forward has every part's data. */
bool parts_valid(gpu_dims d, const gpu_concat_part *parts, int32_t count, bool forward) {
  if (d.n < 0 || d.c < 0 || d.h < 0 || d.w < 0 || count < 0 || (count > 0 && !parts)) return false;
  int64_t end = 0; /* the previous part's end */
  for (int32_t k = 0; k < count; k++) {
    const gpu_concat_part &p = parts[k];
    if (p.channels < 0 || p.start < end || (int64_t)p.start + p.channels > d.c) return false;
    if (forward && p.channels > 0 && !p.data) return false;
    end = (int64_t)p.start + p.channels;
  }
  return true;
}

/* Whether a part takes part in a launch: it has channels and, in the backward, a
 * gradient to write. */
bool part_used(const gpu_concat_part &p, bool forward) {
  return p.channels > 0 && (forward || p.data);
}

/* Fills `a` with the used parts from *next on, GPU_CONCAT_MAX_INPUTS at most, and moves
 * *next past them (and past unused ones). */
void take_parts(concat_args *a, const gpu_concat_part *parts, int32_t count, int32_t *next,
                bool forward) {
  a->count = 0;
  for (; *next < count && a->count < GPU_CONCAT_MAX_INPUTS; ++*next) {
    const gpu_concat_part &p = parts[*next];
    if (!part_used(p, forward)) continue;
    a->start[a->count] = p.start;
    a->channels[a->count] = p.channels;
    a->data[a->count] = p.data;
    a->count++;
  }
  while (*next < count && !part_used(parts[*next], forward)) ++*next;
}

/* The launches of one call. Forward: consecutive ranges of y's channels covering all
 * of them, each holding its launch's parts (the gaps between launches are zeros written
 * by one of them). Backward: each launch spans its parts, from the first's start to the
 * last's end, and gaps are not read at all. */
template <typename T, typename I>
cudaError_t launch_all(void *y, gpu_dims d, const gpu_concat_part *parts, int32_t count,
                       bool forward, cudaStream_t stream) {
  const int64_t plane = (int64_t)d.n * d.h * d.w; /* elements per channel */
  int32_t next = 0, lo = 0;
  while (next < count && !part_used(parts[next], forward)) next++;
  do {
    concat_args a = {}; /* unused entries zero: a launch copies all of it */
    take_parts(&a, parts, count, &next, forward);
    if (!forward && a.count == 0) break;
    int32_t hi;
    if (forward) hi = next < count ? parts[next].start : d.c;
    else {
      lo = a.start[0];
      hi = a.start[a.count - 1] + a.channels[a.count - 1];
    }
    a.lo = lo;
    a.width = hi - lo;
    const int64_t n = plane * a.width;
    if (n > 0) {
      if (forward)
        GPU_LAUNCH((concat_kernel<T, I>), gpu_blocks(n), GPU_THREADS, 0, stream,
                   static_cast<T *>(y), d, a, n);
      else
        GPU_LAUNCH((concat_backward_kernel<T, I>), gpu_blocks(n), GPU_THREADS, 0, stream,
                   static_cast<const T *>(y), d, a, n);
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return e;
    }
    lo = hi;
  } while (next < count);
  return cudaSuccess;
}

/* Checks the call, then launches in the element's size and the index type y needs. */
cudaError_t concat_call(void *y, gpu_dims d, const gpu_concat_part *parts, int32_t count,
                        gpu_dtype type, bool forward, cudaStream_t stream) {
  if ((type != GPU_F32 && type != GPU_F16 && type != GPU_BF16) ||
      !parts_valid(d, parts, count, forward))
    return cudaErrorInvalidValue;
  const int64_t total = count_of(d);
  if (total == 0) return cudaSuccess;
  const bool narrow = total <= (int64_t)UINT32_MAX;
  if (gpu_dtype_size(type) == 4)
    return narrow ? launch_all<uint32_t, uint32_t>(y, d, parts, count, forward, stream)
                  : launch_all<uint32_t, uint64_t>(y, d, parts, count, forward, stream);
  return narrow ? launch_all<uint16_t, uint32_t>(y, d, parts, count, forward, stream)
                : launch_all<uint16_t, uint64_t>(y, d, parts, count, forward, stream);
}

/* ---- channel_shuffle ---------------------------------------------------------------- */

/* Where y's element i (buffer order) comes from in x: y's channel c = k * g + i' is x's
 * channel i' * (C / g) + k, in the same row and position, (source - c) * inner elements
 * away. Offsets stay in I, never negative: i's row start i - c * inner plus the source
 * channel's run. */
template <typename I>
__host__ __device__ __forceinline__ I shuffle_source(const gpu_dims &d, int32_t groups, I i) {
  const I inner = d.nhwc ? (I)1 : (I)d.h * (I)d.w;
  const I q = d.nhwc ? i : i / inner;
  const int32_t c = (int32_t)(q % (I)d.c);
  const int32_t source = (c % groups) * (d.c / groups) + c / groups;
  return i - (I)c * inner + (I)source * inner;
}

/* Every element of y (buffer order: coalesced writes) copied from its element of x. */
template <typename T, typename I>
__global__ void shuffle_kernel(T *y, const T *x, gpu_dims d, int32_t groups, int64_t n) {
  GPU_GRID_STRIDE(i, n) { y[i] = x[shuffle_source<I>(d, groups, (I)i)]; }
}

template <typename T>
cudaError_t launch_shuffle(void *y, const void *x, gpu_dims d, int32_t groups, int64_t n,
                           cudaStream_t stream) {
  if (n <= (int64_t)UINT32_MAX)
    GPU_LAUNCH((shuffle_kernel<T, uint32_t>), gpu_blocks(n), GPU_THREADS, 0, stream,
               static_cast<T *>(y), static_cast<const T *>(x), d, groups, n);
  else
    GPU_LAUNCH((shuffle_kernel<T, uint64_t>), gpu_blocks(n), GPU_THREADS, 0, stream,
               static_cast<T *>(y), static_cast<const T *>(x), d, groups, n);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gpu_k_concat(void *y, gpu_dims y_dims, const gpu_concat_part *host_parts,
                                    int32_t count, gpu_dtype type, cudaStream_t stream) {
  return concat_call(y, y_dims, host_parts, count, type, true, stream);
}

extern "C" cudaError_t gpu_k_concat_backward(const void *dy, gpu_dims y_dims,
                                             const gpu_concat_part *host_parts, int32_t count,
                                             gpu_dtype type, cudaStream_t stream) {
  /* launch_all's y is dy here, only ever read (concat_backward_kernel's const T *). */
  return concat_call(const_cast<void *>(dy), y_dims, host_parts, count, type, false, stream);
}

extern "C" cudaError_t gpu_k_channel_shuffle(void *y, const void *x, gpu_dims dims, int32_t groups,
                                             gpu_dtype type, cudaStream_t stream) {
  if ((type != GPU_F32 && type != GPU_F16 && type != GPU_BF16) || dims.n < 0 || dims.c < 0 ||
      dims.h < 0 || dims.w < 0 || groups < 1 || dims.c % groups != 0)
    return cudaErrorInvalidValue;
  const int64_t n = count_of(dims);
  if (n == 0) return cudaSuccess;
  if (!y || !x || y == x) return cudaErrorInvalidValue;
  return gpu_dtype_size(type) == 4 ? launch_shuffle<uint32_t>(y, x, dims, groups, n, stream)
                                   : launch_shuffle<uint16_t>(y, x, dims, groups, n, stream);
}
