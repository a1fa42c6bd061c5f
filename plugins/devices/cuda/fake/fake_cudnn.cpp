/* fake_cudnn.cpp — the checking fake's cuDNN: the handle, the tensor, filter,
 * convolution, pooling and activation descriptors, errors, cudnnAddTensor /
 * cudnnScaleTensor / cudnnTransformTensor, pooling, and what fake_dnn.h shares with the
 * convolutions (fake_cudnn_conv.cpp), batch norm (fake_cudnn_bn.cpp) and cuBLAS
 * (fake_cublas.cpp): the object registry, element conversions, tensor reads and writes
 * and the memory checks.
 *
 * Every compute call checks its arguments when it is called (descriptors live and set,
 * buffers inside live allocations for the bytes their descriptors imply, aligned,
 * outputs not overlapping inputs) and enqueues the work on the handle's stream with the
 * descriptors' contents copied into the closure. Pooling follows cuDNN's definitions:
 * max (NaN never wins unless CUDNN_PROPAGATE_NAN; the backward gives a window's gradient
 * to its first maximum in row-major order), average including or excluding the padding.
 * Padding is symmetric; the output is 1 + (H + 2 pad - window) / stride, and a window
 * larger than the padded input is BAD_PARAM (what cuDNN 9.19 answers). */
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fake_dnn.h"

namespace fake_dnn {

/* ---- element types ------------------------------------------------------------------ */

float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp((float)mant, -24); /* zero or subnormal: mant units of 2^-24 */
    return sign ? -out : out;
  }
  uint32_t bits = exp == 31 ? sign | 0x7f800000u | (mant << 13)
                            : sign | ((exp + 112u) << 23) | (mant << 13);
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN, quiet */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and up round to inf */
  if (a < 0x38800000u) {
    /* Below 2^-14: a half subnormal, in units of 2^-24, rounded to nearest even. */
    if (a < 0x33000000u) return sign; /* below 2^-25: zero */
    const uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t h = (a >> 13) - (112u << 10);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry moves the exponent */
  return (uint16_t)(sign | h);
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

size_t dtype_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return 4;
    case CUDNN_DATA_HALF: return 2;
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 0;
  }
}

/* Storage size of every type a descriptor may be set to (sizes and extents); the
 * compute calls take only dtype_size's types. */
static size_t storage_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 0;
  }
}

const char *dtype_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    case CUDNN_DATA_INT8: return "INT8";
    case CUDNN_DATA_UINT8: return "UINT8";
    case CUDNN_DATA_INT32: return "INT32";
    case CUDNN_DATA_INT64: return "INT64";
    case CUDNN_DATA_BOOLEAN: return "BOOLEAN";
    default: return "an unsupported type";
  }
}

/* ---- objects ------------------------------------------------------------------------ */

const char *kind_name(Kind k) {
  switch (k) {
    case Kind::cudnn_handle: return "cuDNN handle";
    case Kind::tensor: return "tensor descriptor";
    case Kind::filter: return "filter descriptor";
    case Kind::convolution: return "convolution descriptor";
    case Kind::pooling: return "pooling descriptor";
    case Kind::activation: return "activation descriptor";
    case Kind::cublas_handle: return "cuBLAS handle";
  }
  return "object";
}

namespace {
/* Every object created, live or dead. Dead ones stay (their memory is not reused, so a
 * stale pointer is recognised) up to kMaxDead, then the oldest are freed. Never
 * destroyed: a handle or descriptor may be used from another library's destructor, and
 * the leak checker sees the objects reachable at exit. */
struct Registry {
  std::mutex lock;
  std::unordered_map<const void *, Object *> objects;
  std::deque<Object *> dead;
};
Registry &registry() {
  static Registry *r = new Registry();
  return *r;
}
constexpr size_t kMaxDead = 1u << 16;

Object *find_locked(const void *p, Kind kind, const char *api, const char *what) {
  if (!p) fake_cuda_fail(api, "%s: NULL %s", what, kind_name(kind));
  auto it = registry().objects.find(p);
  if (it == registry().objects.end())
    fake_cuda_fail(api, "%s: %p is not a %s (never created, or destroyed long ago)", what, p,
                   kind_name(kind));
  Object *o = it->second;
  if (o->kind != kind)
    fake_cuda_fail(api, "%s: %p is a %s, not a %s", what, p, kind_name(o->kind), kind_name(kind));
  return o;
}
} // namespace

void register_object(Object *o) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.lock);
  r.objects[o] = o;
}

void destroy_object(const void *p, Kind kind, const char *api) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.lock);
  Object *o = find_locked(p, kind, api, "the argument");
  if (!o->alive) fake_cuda_fail(api, "%s %p destroyed twice", kind_name(kind), p);
  o->alive = false;
  r.dead.push_back(o);
  if (r.dead.size() > kMaxDead) {
    Object *oldest = r.dead.front();
    r.dead.pop_front();
    r.objects.erase(oldest);
    delete oldest;
  }
}

void with_object(const void *p, Kind kind, const char *api, const char *what,
                 const std::function<void(Object &)> &fn) {
  std::lock_guard<std::mutex> lock(registry().lock);
  Object *o = find_locked(p, kind, api, what);
  if (!o->alive) fake_cuda_fail(api, "%s: %s %p used after its destroy", what, kind_name(kind), p);
  fn(*o);
}

Tensor tensor_of(cudnnTensorDescriptor_t d, const char *api, const char *what) {
  Tensor t = copy_of<Tensor>(d, Kind::tensor, api, what);
  if (!t.set)
    fake_cuda_fail(api, "%s: tensor descriptor %p used before it was set", what, (void *)d);
  return t;
}

Filter filter_of(cudnnFilterDescriptor_t d, const char *api, const char *what) {
  Filter f = copy_of<Filter>(d, Kind::filter, api, what);
  if (!f.set)
    fake_cuda_fail(api, "%s: filter descriptor %p used before it was set", what, (void *)d);
  return f;
}

Convolution convolution_of(cudnnConvolutionDescriptor_t d, const char *api, const char *what) {
  Convolution c = copy_of<Convolution>(d, Kind::convolution, api, what);
  if (!c.set)
    fake_cuda_fail(api, "%s: convolution descriptor %p used before it was set", what, (void *)d);
  return c;
}

void check_current_device(int device, const char *api, const char *what) {
  const int current = fake_cuda_current_device();
  if (current != device)
    fake_cuda_fail(api, "%s was created on device %d, but device %d is current (cudaSetDevice)",
                   what, device, current);
}

Handle handle_of(cudnnHandle_t h, const char *api) {
  Handle out = copy_of<Handle>(h, Kind::cudnn_handle, api, "handle");
  check_current_device(out.device, api, "the cuDNN handle");
  fake_cuda_check_stream(out.stream, api);
  return out;
}

size_t Tensor::extent_bytes() const {
  if (count() <= 0) return 0;
  int64_t last = (n - 1) * sn + (c - 1) * sc + (h - 1) * sh + (w - 1) * sw;
  return (size_t)(last + 1) * storage_size(type);
}

/* Packed in an order: the stride of every dimension longer than 1 is the product of the
 * dimensions inside it (a dimension of 1 has no stride that matters). */
static bool packed(const int dims[4], const int64_t strides[4], const int order[4]) {
  int64_t expect = 1;
  for (int i = 3; i >= 0; i--) {
    const int d = order[i];
    if (dims[d] > 1 && strides[d] != expect) return false;
    expect *= dims[d];
  }
  return true;
}

bool Tensor::packed_nchw() const {
  const int dims[4] = {n, c, h, w}, order[4] = {0, 1, 2, 3};
  const int64_t strides[4] = {sn, sc, sh, sw};
  return packed(dims, strides, order);
}

bool Tensor::packed_nhwc() const {
  const int dims[4] = {n, c, h, w}, order[4] = {0, 2, 3, 1};
  const int64_t strides[4] = {sn, sc, sh, sw};
  return packed(dims, strides, order);
}

/* ---- statuses ----------------------------------------------------------------------- */

static thread_local std::string t_last_error;

cudnnStatus_t fail_status(cudnnStatus_t s, const char *api, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t_last_error = std::string(api) + ": " + buf + " (fake cuDNN)";
  return s;
}

/* ---- memory checks ------------------------------------------------------------------ */

void check_spans(const std::vector<Span> &spans, const char *api) {
  for (const Span &s : spans) {
    if (!s.p) fake_cuda_fail(api, "%s: NULL for %zu bytes", s.what, s.bytes);
    fake_cuda_check_device(s.p, s.bytes, s.align, api, s.what);
  }
}

void check_disjoint(const Span &a, const Span &b, const char *api) {
  if (!a.p || !b.p || !a.bytes || !b.bytes) return;
  const uintptr_t a0 = (uintptr_t)a.p, b0 = (uintptr_t)b.p;
  if (a0 < b0 + b.bytes && b0 < a0 + a.bytes)
    fake_cuda_fail(api, "%s [%p, +%zu) overlaps %s [%p, +%zu)", a.what, a.p, a.bytes, b.what, b.p,
                   b.bytes);
}

float host_scalar(const void *p, cudnnDataType_t data, const char *api, const char *what) {
  const size_t bytes = data == CUDNN_DATA_DOUBLE ? sizeof(double) : sizeof(float);
  if (!p) fake_cuda_fail(api, "%s: NULL scaling factor", what);
  if (fake_cuda_is_device(p, bytes, api, what))
    fake_cuda_fail(api, "%s: %p is device memory; scaling factors are read from host memory", what,
                   p);
  if (data == CUDNN_DATA_DOUBLE) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return (float)d;
  }
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

size_t data_alignment(cudnnDataType_t type, bool tensor_op) {
  if (tensor_op && is_half_type(type)) return 16;
  size_t s = storage_size(type);
  return s ? s : 1;
}

/* ---- tensor data -------------------------------------------------------------------- */

float load_element(cudnnDataType_t t, const void *base, int64_t i) {
  switch (t) {
    case CUDNN_DATA_HALF: return half_to_float(static_cast<const uint16_t *>(base)[i]);
    case CUDNN_DATA_BFLOAT16: return bf16_to_float(static_cast<const uint16_t *>(base)[i]);
    default: return static_cast<const float *>(base)[i];
  }
}

void store_element(cudnnDataType_t t, void *base, int64_t i, float v) {
  switch (t) {
    case CUDNN_DATA_HALF: static_cast<uint16_t *>(base)[i] = float_to_half(v); break;
    case CUDNN_DATA_BFLOAT16: static_cast<uint16_t *>(base)[i] = float_to_bf16(v); break;
    default: static_cast<float *>(base)[i] = v; break;
  }
}

namespace {
template <class Fn>
void for_each_nchw(const Tensor &t, Fn fn) {
  int64_t i = 0;
  for (int n = 0; n < t.n; n++)
    for (int c = 0; c < t.c; c++)
      for (int h = 0; h < t.h; h++) {
        const int64_t row = t.offset(n, c, h, 0);
        for (int w = 0; w < t.w; w++) fn(i++, row + w * t.sw);
      }
}

/* One conversion loop per element type: the switch stays out of the inner loop. */
template <class T, float (*Load)(T)>
void load_typed(const Tensor &t, const T *p, float *out) {
  for_each_nchw(t, [&](int64_t i, int64_t at) { out[i] = Load(p[at]); });
}
template <class T, T (*Store)(float), float (*Load)(T)>
void store_typed(const Tensor &t, T *p, const float *v, float alpha, float beta) {
  if (beta == 0.0f) for_each_nchw(t, [&](int64_t i, int64_t at) { p[at] = Store(alpha * v[i]); });
  else
    for_each_nchw(t,
                  [&](int64_t i, int64_t at) { p[at] = Store(alpha * v[i] + beta * Load(p[at])); });
}
float f32_load(float f) { return f; }
float f32_store(float f) { return f; }
} // namespace

void load_nchw(const Tensor &t, const void *p, float *out) {
  switch (t.type) {
    case CUDNN_DATA_HALF:
      load_typed<uint16_t, half_to_float>(t, static_cast<const uint16_t *>(p), out);
      break;
    case CUDNN_DATA_BFLOAT16:
      load_typed<uint16_t, bf16_to_float>(t, static_cast<const uint16_t *>(p), out);
      break;
    default: load_typed<float, f32_load>(t, static_cast<const float *>(p), out); break;
  }
}

void store_nchw(const Tensor &t, void *p, const float *v, float alpha, float beta) {
  switch (t.type) {
    case CUDNN_DATA_HALF:
      store_typed<uint16_t, float_to_half, half_to_float>(t, static_cast<uint16_t *>(p), v, alpha,
                                                          beta);
      break;
    case CUDNN_DATA_BFLOAT16:
      store_typed<uint16_t, float_to_bf16, bf16_to_float>(t, static_cast<uint16_t *>(p), v, alpha,
                                                          beta);
      break;
    default:
      store_typed<float, f32_store, f32_load>(t, static_cast<float *>(p), v, alpha, beta);
      break;
  }
}

void load_kcrs(const Filter &f, const void *p, float *out) {
  int64_t i = 0;
  for (int k = 0; k < f.k; k++)
    for (int c = 0; c < f.c; c++)
      for (int r = 0; r < f.r; r++)
        for (int s = 0; s < f.s; s++) out[i++] = load_element(f.type, p, f.offset(k, c, r, s));
}

void store_kcrs(const Filter &f, void *p, const float *v, float alpha, float beta) {
  int64_t i = 0;
  for (int k = 0; k < f.k; k++)
    for (int c = 0; c < f.c; c++)
      for (int r = 0; r < f.r; r++)
        for (int s = 0; s < f.s; s++, i++) {
          const int64_t at = f.offset(k, c, r, s);
          float out = alpha * v[i];
          if (beta != 0.0f) out += beta * load_element(f.type, p, at);
          store_element(f.type, p, at, out);
        }
}

void run_on(cudaStream_t stream, const char *api, std::vector<Span> spans,
            std::function<void()> work) {
  check_spans(spans, api);
  fake_cuda_enqueue_fn(stream, api, [spans = std::move(spans), api, work = std::move(work)]() {
    check_spans(spans, api);
    work();
  });
}

} // namespace fake_dnn

using namespace fake_dnn;

/* ---- handle, version, errors -------------------------------------------------------- */

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch ((int)status) {
#define NAME(s) \
  case s: return #s
    NAME(CUDNN_STATUS_SUCCESS);
    NAME(CUDNN_STATUS_NOT_INITIALIZED);
    NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH);
    NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH);
    NAME(CUDNN_STATUS_DEPRECATED);
    NAME(CUDNN_STATUS_LICENSE_ERROR);
    NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS);
    NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW);
    NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED);
    NAME(CUDNN_STATUS_BAD_PARAM);
    NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
    NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);
    NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND);
    NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
    NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH);
    NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES);
    NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
    NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH);
    NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE);
    NAME(CUDNN_STATUS_NOT_SUPPORTED);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API);
    NAME(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE);
    NAME(CUDNN_STATUS_INTERNAL_ERROR);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM);
    NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED);
    NAME(CUDNN_STATUS_EXECUTION_FAILED);
    NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER);
    NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS);
    NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART);
    NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND);
#undef NAME
  }
  return "CUDNN_STATUS_UNKNOWN";
}

/* cuDNN 9 keeps the last error's message per thread; reading it clears it. */
void cudnnGetLastErrorString(char *message, size_t max_size) {
  if (!message || !max_size) return;
  std::snprintf(message, max_size, "%s", t_last_error.c_str());
  t_last_error.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  if (!handle) fake_cuda_fail("cudnnCreate", "NULL handle pointer");
  Handle *h = new Handle();
  h->device = fake_cuda_current_device();
  register_object(h);
  *handle = reinterpret_cast<cudnnHandle_t>(h);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  destroy_object(handle, Kind::cudnn_handle, "cudnnDestroy");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  fake_cuda_check_stream(stream, "cudnnSetStream");
  modify<Handle>(handle, Kind::cudnn_handle, "cudnnSetStream", "handle",
                 [&](Handle &h) { h.stream = stream; });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *stream) {
  if (!stream) fake_cuda_fail("cudnnGetStream", "NULL stream pointer");
  *stream = copy_of<Handle>(handle, Kind::cudnn_handle, "cudnnGetStream", "handle").stream;
  return CUDNN_STATUS_SUCCESS;
}

/* ---- descriptors -------------------------------------------------------------------- */

#define CREATE_DESTROY(Type, kind, create, destroy, handle_t)     \
  cudnnStatus_t create(handle_t *out) {                           \
    if (!out) fake_cuda_fail(#create, "NULL descriptor pointer"); \
    Type *o = new Type();                                         \
    register_object(o);                                           \
    *out = reinterpret_cast<handle_t>(o);                         \
    return CUDNN_STATUS_SUCCESS;                                  \
  }                                                               \
  cudnnStatus_t destroy(handle_t d) {                             \
    /* cuDNN accepts destroying NULL */                           \
    if (d) destroy_object(d, kind, #destroy);                     \
    return CUDNN_STATUS_SUCCESS;                                  \
  }

CREATE_DESTROY(Tensor, Kind::tensor, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor,
               cudnnTensorDescriptor_t)
CREATE_DESTROY(Filter, Kind::filter, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor,
               cudnnFilterDescriptor_t)
CREATE_DESTROY(Convolution, Kind::convolution, cudnnCreateConvolutionDescriptor,
               cudnnDestroyConvolutionDescriptor, cudnnConvolutionDescriptor_t)
CREATE_DESTROY(Pooling, Kind::pooling, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor,
               cudnnPoolingDescriptor_t)
CREATE_DESTROY(Activation, Kind::activation, cudnnCreateActivationDescriptor,
               cudnnDestroyActivationDescriptor, cudnnActivationDescriptor_t)
#undef CREATE_DESTROY

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w) {
  static const char api[] = "cudnnSetTensor4dDescriptor";
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "format %d is neither NCHW nor NHWC",
                       (int)format);
  if (!storage_size(type))
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "data type %d", (int)type);
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "dimensions [%d, %d, %d, %d] must be positive",
                       n, c, h, w);
  if ((int64_t)n * c * h * w > std::numeric_limits<int32_t>::max())
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                       "[%d, %d, %d, %d] has 2^31 elements or more", n, c, h, w);
  modify<Tensor>(desc, Kind::tensor, api, "tensorDesc", [&](Tensor &t) {
    t.set = true;
    t.type = type;
    t.format = format;
    t.n = n;
    t.c = c;
    t.h = h;
    t.w = w;
    if (format == CUDNN_TENSOR_NCHW) {
      t.sw = 1;
      t.sh = w;
      t.sc = (int64_t)h * w;
      t.sn = (int64_t)c * h * w;
    } else {
      t.sc = 1;
      t.sw = c;
      t.sh = (int64_t)w * c;
      t.sn = (int64_t)h * w * c;
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorSizeInBytes(const cudnnTensorDescriptor_t desc, size_t *size) {
  static const char api[] = "cudnnGetTensorSizeInBytes";
  if (!size) fake_cuda_fail(api, "NULL size pointer");
  *size = tensor_of(desc, api, "tensorDesc").extent_bytes();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w) {
  static const char api[] = "cudnnSetFilter4dDescriptor";
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "format %d is neither NCHW nor NHWC",
                       (int)format);
  if (!storage_size(type))
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "data type %d", (int)type);
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "dimensions [%d, %d, %d, %d] must be positive",
                       k, c, h, w);
  modify<Filter>(desc, Kind::filter, api, "filterDesc", [&](Filter &f) {
    f.set = true;
    f.type = type;
    f.format = format;
    f.k = k;
    f.c = c;
    f.r = h;
    f.s = w;
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilterSizeInBytes(const cudnnFilterDescriptor_t desc, size_t *size) {
  static const char api[] = "cudnnGetFilterSizeInBytes";
  if (!size) fake_cuda_fail(api, "NULL size pointer");
  Filter f = filter_of(desc, api, "filterDesc");
  *size = (size_t)f.count() * storage_size(f.type);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  static const char api[] = "cudnnSetConvolution2dDescriptor";
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "pads %d, %d (>= 0), strides %d, %d and dilations %d, %d (> 0)", pad_h,
                       pad_w, u, v, dilation_h, dilation_w);
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  if (compute != CUDNN_DATA_FLOAT && compute != CUDNN_DATA_HALF && compute != CUDNN_DATA_DOUBLE &&
      compute != CUDNN_DATA_BFLOAT16)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "compute type %s", dtype_name(compute));
  modify<Convolution>(desc, Kind::convolution, api, "convDesc", [&](Convolution &c) {
    c.set = true;
    c.pad_h = pad_h;
    c.pad_w = pad_w;
    c.stride_h = u;
    c.stride_w = v;
    c.dilation_h = dilation_h;
    c.dilation_w = dilation_w;
    c.mode = mode;
    c.compute = compute;
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups) {
  static const char api[] = "cudnnSetConvolutionGroupCount";
  if (groups <= 0) return fail_status(CUDNN_STATUS_BAD_PARAM, api, "group count %d", groups);
  modify<Convolution>(desc, Kind::convolution, api, "convDesc",
                      [&](Convolution &c) { c.groups = groups; });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math) {
  static const char api[] = "cudnnSetConvolutionMathType";
  if (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH &&
      math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && math != CUDNN_FMA_MATH)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "math type %d", (int)math);
  modify<Convolution>(desc, Kind::convolution, api, "convDesc",
                      [&](Convolution &c) { c.math = math; });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t desc, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int kh, int kw, int pad_h,
                                          int pad_w, int stride_h, int stride_w) {
  static const char api[] = "cudnnSetPooling2dDescriptor";
  if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC &&
      mode != CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING &&
      mode != CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  if (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "NaN propagation %d", (int)nan);
  if (kh <= 0 || kw <= 0 || pad_h < 0 || pad_w < 0 || stride_h <= 0 || stride_w <= 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "window %dx%d pads %d, %d strides %d, %d", kh,
                       kw, pad_h, pad_w, stride_h, stride_w);
  modify<Pooling>(desc, Kind::pooling, api, "poolingDesc", [&](Pooling &p) {
    p.set = true;
    p.mode = mode;
    p.nan = nan;
    p.kh = kh;
    p.kw = kw;
    p.pad_h = pad_h;
    p.pad_w = pad_w;
    p.stride_h = stride_h;
    p.stride_w = stride_w;
  });
  return CUDNN_STATUS_SUCCESS;
}

static Pooling pooling_of(cudnnPoolingDescriptor_t d, const char *api) {
  Pooling p = copy_of<Pooling>(d, Kind::pooling, api, "poolingDesc");
  if (!p.set)
    fake_cuda_fail(api, "poolingDesc: pooling descriptor %p used before it was set", (void *)d);
  return p;
}

/* The pooled size of x, or BAD_PARAM. */
static cudnnStatus_t pool_output(const Pooling &p, const Tensor &x, const char *api, int *oh,
                                 int *ow) {
  const int64_t span_h = (int64_t)x.h + 2 * p.pad_h - p.kh,
                span_w = (int64_t)x.w + 2 * p.pad_w - p.kw;
  if (span_h < 0 || span_w < 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "window %dx%d larger than the padded input %lldx%lld", p.kh, p.kw,
                       (long long)x.h + 2 * p.pad_h, (long long)x.w + 2 * p.pad_w);
  *oh = (int)(1 + span_h / p.stride_h);
  *ow = (int)(1 + span_w / p.stride_w);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t desc,
                                                const cudnnTensorDescriptor_t in, int *n, int *c,
                                                int *h, int *w) {
  static const char api[] = "cudnnGetPooling2dForwardOutputDim";
  if (!n || !c || !h || !w) fake_cuda_fail(api, "NULL output pointer");
  Pooling p = pooling_of(desc, api);
  Tensor x = tensor_of(in, api, "inputTensorDesc");
  int oh = 0, ow = 0;
  cudnnStatus_t st = pool_output(p, x, api, &oh, &ow);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *n = x.n;
  *c = x.c;
  *h = oh;
  *w = ow;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc,
                                           cudnnActivationMode_t mode, cudnnNanPropagation_t nan,
                                           double coef) {
  static const char api[] = "cudnnSetActivationDescriptor";
  if ((int)mode < (int)CUDNN_ACTIVATION_SIGMOID || (int)mode > (int)CUDNN_ACTIVATION_SWISH)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  if (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "NaN propagation %d", (int)nan);
  modify<Activation>(desc, Kind::activation, api, "activationDesc", [&](Activation &a) {
    a.set = true;
    a.mode = mode;
    a.nan = nan;
    a.coef = coef;
  });
  return CUDNN_STATUS_SUCCESS;
}

/* ---- tensor arithmetic -------------------------------------------------------------- */

/* C = alpha * A + beta * C, A broadcast along every dimension where it has 1. */
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha_p,
                             const cudnnTensorDescriptor_t a_desc, const void *A,
                             const void *beta_p, const cudnnTensorDescriptor_t c_desc, void *C) {
  static const char api[] = "cudnnAddTensor";
  const Handle h = handle_of(handle, api);
  const Tensor a = tensor_of(a_desc, api, "aDesc"), c = tensor_of(c_desc, api, "cDesc");
  if (!dtype_size(a.type) || !dtype_size(c.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "types %s and %s", dtype_name(a.type),
                       dtype_name(c.type));
  const int ad[4] = {a.n, a.c, a.h, a.w}, cd[4] = {c.n, c.c, c.h, c.w};
  for (int i = 0; i < 4; i++)
    if (ad[i] != cd[i] && ad[i] != 1)
      return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                         "A [%d, %d, %d, %d] does not broadcast to C [%d, %d, %d, %d]", a.n, a.c,
                         a.h, a.w, c.n, c.c, c.h, c.w);
  const float alpha = host_scalar(alpha_p, c.type, api, "alpha");
  const float beta = host_scalar(beta_p, c.type, api, "beta");
  std::vector<Span> spans = {{A, a.extent_bytes(), data_alignment(a.type, false), "A"},
                             {C, c.extent_bytes(), data_alignment(c.type, false), "C"}};
  run_on(h.stream, api, spans, [=]() {
    for (int n = 0; n < c.n; n++)
      for (int ch = 0; ch < c.c; ch++)
        for (int y = 0; y < c.h; y++)
          for (int x = 0; x < c.w; x++) {
            const int64_t at = c.offset(n, ch, y, x);
            const float av = load_element(a.type, A,
                                          a.offset(a.n == 1 ? 0 : n, a.c == 1 ? 0 : ch,
                                                   a.h == 1 ? 0 : y, a.w == 1 ? 0 : x));
            float out = alpha * av;
            if (beta != 0.0f) out += beta * load_element(c.type, C, at);
            store_element(c.type, C, at, out);
          }
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnScaleTensor(cudnnHandle_t handle, const cudnnTensorDescriptor_t y_desc, void *y,
                               const void *alpha_p) {
  static const char api[] = "cudnnScaleTensor";
  const Handle h = handle_of(handle, api);
  const Tensor t = tensor_of(y_desc, api, "yDesc");
  if (!dtype_size(t.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "type %s", dtype_name(t.type));
  const float alpha = host_scalar(alpha_p, t.type, api, "alpha");
  run_on(h.stream, api, {{y, t.extent_bytes(), data_alignment(t.type, false), "y"}}, [=]() {
    for_each_nchw(t, [&](int64_t, int64_t at) {
      store_element(t.type, y, at, alpha * load_element(t.type, y, at));
    });
  });
  return CUDNN_STATUS_SUCCESS;
}

/* y = alpha * x + beta * y, between any layouts and types of the same shape. */
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha_p,
                                   const cudnnTensorDescriptor_t x_desc, const void *x,
                                   const void *beta_p, const cudnnTensorDescriptor_t y_desc,
                                   void *y) {
  static const char api[] = "cudnnTransformTensor";
  const Handle h = handle_of(handle, api);
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), yt = tensor_of(y_desc, api, "yDesc");
  if (!dtype_size(xt.type) || !dtype_size(yt.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "types %s and %s", dtype_name(xt.type),
                       dtype_name(yt.type));
  if (xt.n != yt.n || xt.c != yt.c || xt.h != yt.h || xt.w != yt.w)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "x [%d, %d, %d, %d] and y [%d, %d, %d, %d]",
                       xt.n, xt.c, xt.h, xt.w, yt.n, yt.c, yt.h, yt.w);
  const float alpha = host_scalar(alpha_p, yt.type, api, "alpha");
  const float beta = host_scalar(beta_p, yt.type, api, "beta");
  const Span xs = {x, xt.extent_bytes(), data_alignment(xt.type, false), "x"};
  const Span ys = {y, yt.extent_bytes(), data_alignment(yt.type, false), "y"};
  check_disjoint(ys, xs, api);
  run_on(h.stream, api, {xs, ys}, [=]() {
    std::vector<float> v((size_t)xt.count());
    load_nchw(xt, x, v.data());
    store_nchw(yt, y, v.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

/* ---- pooling ------------------------------------------------------------------------ */

namespace {

bool is_max(cudnnPoolingMode_t m) {
  return m == CUDNN_POOLING_MAX || m == CUDNN_POOLING_MAX_DETERMINISTIC;
}

/* The window of output (oy, ox), clipped to the input: rows [y0, y1), columns [x0, x1). */
struct Window {
  int y0, y1, x0, x1;
};
Window window_of(const Pooling &p, int H, int W, int oy, int ox) {
  const int ys = oy * p.stride_h - p.pad_h, xs = ox * p.stride_w - p.pad_w;
  Window w;
  w.y0 = ys < 0 ? 0 : ys;
  w.y1 = ys + p.kh > H ? H : ys + p.kh;
  w.x0 = xs < 0 ? 0 : xs;
  w.x1 = xs + p.kw > W ? W : xs + p.kw;
  return w;
}

/* The average's divisor: the whole window, or its part inside the input. */
float avg_count(const Pooling &p, const Window &w) {
  if (p.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING) return (float)(p.kh * p.kw);
  const int inside = (w.y1 - w.y0) * (w.x1 - w.x0);
  return inside > 0 ? (float)inside : 1.0f;
}

/* Index (in the plane) of the window's first maximum in row-major order; -1 when the
 * window is empty or holds only NaN. A NaN wins only under CUDNN_PROPAGATE_NAN (as the
 * reference's `v > best`, it never does otherwise). */
int64_t argmax(const Pooling &p, const float *plane, int W, const Window &w) {
  const bool nan_wins = p.nan == CUDNN_PROPAGATE_NAN;
  int64_t best_at = -1;
  float best = 0.0f;
  for (int y = w.y0; y < w.y1; y++)
    for (int x = w.x0; x < w.x1; x++) {
      const int64_t at = (int64_t)y * W + x;
      const float v = plane[at];
      if (std::isnan(v) && !nan_wins) continue;
      if (best_at >= 0 && (std::isnan(best) || !(std::isnan(v) || v > best))) continue;
      best = v;
      best_at = at;
    }
  return best_at;
}

cudnnStatus_t pool_shapes(const Pooling &p, const Tensor &x, const Tensor &y, const char *api) {
  if (!dtype_size(x.type) || x.type != y.type)
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "x %s, y %s", dtype_name(x.type),
                       dtype_name(y.type));
  int oh = 0, ow = 0;
  cudnnStatus_t st = pool_output(p, x, api, &oh, &ow);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (y.n != x.n || y.c != x.c || y.h != oh || y.w != ow)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "y [%d, %d, %d, %d] is not the pooled x [%d, %d, %d, %d]: [%d, %d, %d, %d]",
                       y.n, y.c, y.h, y.w, x.n, x.c, x.h, x.w, x.n, x.c, oh, ow);
  return CUDNN_STATUS_SUCCESS;
}

} // namespace

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pool_desc,
                                  const void *alpha_p, const cudnnTensorDescriptor_t x_desc,
                                  const void *x, const void *beta_p,
                                  const cudnnTensorDescriptor_t y_desc, void *y) {
  static const char api[] = "cudnnPoolingForward";
  const Handle h = handle_of(handle, api);
  const Pooling p = pooling_of(pool_desc, api);
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), yt = tensor_of(y_desc, api, "yDesc");
  cudnnStatus_t st = pool_shapes(p, xt, yt, api);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float alpha = host_scalar(alpha_p, yt.type, api, "alpha");
  const float beta = host_scalar(beta_p, yt.type, api, "beta");
  const Span xs = {x, xt.extent_bytes(), data_alignment(xt.type, false), "x"};
  const Span ys = {y, yt.extent_bytes(), data_alignment(yt.type, false), "y"};
  check_disjoint(ys, xs, api);
  run_on(h.stream, api, {xs, ys}, [=]() {
    std::vector<float> xv((size_t)xt.count()), yv((size_t)yt.count());
    load_nchw(xt, x, xv.data());
    const int64_t in_plane = (int64_t)xt.h * xt.w, out_plane = (int64_t)yt.h * yt.w;
    for (int64_t plane = 0; plane < (int64_t)xt.n * xt.c; plane++) {
      const float *src = xv.data() + plane * in_plane;
      float *dst = yv.data() + plane * out_plane;
      for (int oy = 0; oy < yt.h; oy++)
        for (int ox = 0; ox < yt.w; ox++) {
          const Window w = window_of(p, xt.h, xt.w, oy, ox);
          float v;
          if (is_max(p.mode)) {
            const int64_t at = argmax(p, src, xt.w, w);
            v = at < 0 ? -std::numeric_limits<float>::infinity() : src[at];
          } else {
            double sum = 0.0;
            for (int yy = w.y0; yy < w.y1; yy++)
              for (int xx = w.x0; xx < w.x1; xx++) sum += src[(int64_t)yy * xt.w + xx];
            v = (float)(sum / avg_count(p, w));
          }
          dst[(int64_t)oy * yt.w + ox] = v;
        }
    }
    store_nchw(yt, y, yv.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pool_desc,
                                   const void *alpha_p, const cudnnTensorDescriptor_t y_desc,
                                   const void *y, const cudnnTensorDescriptor_t dy_desc,
                                   const void *dy, const cudnnTensorDescriptor_t x_desc,
                                   const void *x, const void *beta_p,
                                   const cudnnTensorDescriptor_t dx_desc, void *dx) {
  static const char api[] = "cudnnPoolingBackward";
  const Handle h = handle_of(handle, api);
  const Pooling p = pooling_of(pool_desc, api);
  const Tensor yt = tensor_of(y_desc, api, "yDesc"), dyt = tensor_of(dy_desc, api, "dyDesc");
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), dxt = tensor_of(dx_desc, api, "dxDesc");
  cudnnStatus_t st = pool_shapes(p, xt, yt, api);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (dyt.type != yt.type || dyt.n != yt.n || dyt.c != yt.c || dyt.h != yt.h || dyt.w != yt.w ||
      dxt.type != xt.type || dxt.n != xt.n || dxt.c != xt.c || dxt.h != xt.h || dxt.w != xt.w)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "dy [%d, %d, %d, %d] must match y, dx [%d, %d, %d, %d] must match x", dyt.n,
                       dyt.c, dyt.h, dyt.w, dxt.n, dxt.c, dxt.h, dxt.w);
  const float alpha = host_scalar(alpha_p, dxt.type, api, "alpha");
  const float beta = host_scalar(beta_p, dxt.type, api, "beta");
  const bool max = is_max(p.mode);
  const Span dys = {dy, dyt.extent_bytes(), data_alignment(dyt.type, false), "dy"};
  const Span dxs = {dx, dxt.extent_bytes(), data_alignment(dxt.type, false), "dx"};
  std::vector<Span> spans = {dys, dxs};
  check_disjoint(dxs, dys, api);
  /* Only a max pool reads x and y (an average's gradient follows from the shapes). */
  if (max) {
    const Span xs = {x, xt.extent_bytes(), data_alignment(xt.type, false), "x"};
    const Span ys = {y, yt.extent_bytes(), data_alignment(yt.type, false), "y"};
    check_disjoint(dxs, xs, api);
    check_disjoint(dxs, ys, api);
    spans.push_back(xs);
    spans.push_back(ys);
  }
  run_on(h.stream, api, spans, [=]() {
    std::vector<float> xv(max ? (size_t)xt.count() : 0), dyv((size_t)dyt.count());
    std::vector<float> dxv((size_t)dxt.count(), 0.0f);
    if (max) load_nchw(xt, x, xv.data());
    load_nchw(dyt, dy, dyv.data());
    const int64_t in_plane = (int64_t)xt.h * xt.w, out_plane = (int64_t)yt.h * yt.w;
    for (int64_t plane = 0; plane < (int64_t)xt.n * xt.c; plane++) {
      const float *g = dyv.data() + plane * out_plane;
      float *d = dxv.data() + plane * in_plane;
      for (int oy = 0; oy < yt.h; oy++)
        for (int ox = 0; ox < yt.w; ox++) {
          const Window w = window_of(p, xt.h, xt.w, oy, ox);
          const float gv = g[(int64_t)oy * yt.w + ox];
          if (max) {
            const int64_t at = argmax(p, xv.data() + plane * in_plane, xt.w, w);
            if (at >= 0) d[at] += gv;
          } else {
            const float share = gv / avg_count(p, w);
            for (int yy = w.y0; yy < w.y1; yy++)
              for (int xx = w.x0; xx < w.x1; xx++) d[(int64_t)yy * xt.w + xx] += share;
          }
        }
    }
    store_nchw(dxt, dx, dxv.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
