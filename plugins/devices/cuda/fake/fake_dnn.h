/* fake_dnn.h — what the fake's cuDNN and cuBLAS parts share (fake_cudnn.cpp,
 * fake_cudnn_conv.cpp, fake_cudnn_bn.cpp, fake_cublas.cpp); private to the fake library.
 *
 *  - the registry of handles and descriptors: every object stays known after its destroy
 *    (marked dead), so a use after destroy fails loudly instead of reading freed memory;
 *    lookups return COPIES, the values a call captures for its stream work (under stream
 *    capture the work runs again at each graph launch, after the descriptor may be gone);
 *  - the element types cuDNN and cuBLAS take here (fp32, fp16, bf16): fp32 compute,
 *    round to nearest even on store;
 *  - tensors read into and written from logical NCHW fp32 through their strides, with
 *    cuDNN's alpha / beta blend (beta 0: the destination is not read, as cuDNN says);
 *  - the memory checks every call makes on the buffers its descriptors describe.
 *
 * What fails loudly (fake_cuda_fail) and what returns a status: misuse that is undefined
 * behaviour on a GPU (memory outside an allocation, misalignment, a dead descriptor or
 * stream, a workspace or reserve space smaller than asked, overlapping in- and outputs)
 * aborts; a parameter combination the real library answers with BAD_PARAM /
 * NOT_SUPPORTED / INVALID_VALUE gets that status, with cuDNN's last-error message. */
#ifndef CNNB_FAKE_DNN_H
#define CNNB_FAKE_DNN_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <cudnn.h>

#include "fake_cuda.h"

namespace fake_dnn {

/* ---- element types ------------------------------------------------------------------ */

float half_to_float(uint16_t h);
uint16_t float_to_half(float f); /* round to nearest even, overflow to infinity */
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f); /* round to nearest even, NaN stays NaN */

/* Bytes of one element of the types the fake computes in (FLOAT, HALF, BFLOAT16); 0 for
 * every other type (the calls answer NOT_SUPPORTED for them). */
size_t dtype_size(cudnnDataType_t t);
const char *dtype_name(cudnnDataType_t t);
inline bool is_half_type(cudnnDataType_t t) {
  return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16;
}

/* ---- objects ------------------------------------------------------------------------ */

enum class Kind : uint32_t {
  cudnn_handle,
  tensor,
  filter,
  convolution,
  pooling,
  activation,
  cublas_handle
};
const char *kind_name(Kind k);

struct Object {
  Kind kind;
  bool alive = true;
  explicit Object(Kind k) : kind(k) {}
};

struct Handle : Object {
  cudaStream_t stream = nullptr;
  int device = 0; /* current at cudnnCreate: the handle works on that GPU only */
  Handle() : Object(Kind::cudnn_handle) {}
};

/* A 4-d tensor: logical [n, c, h, w] and element strides. */
struct Tensor : Object {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int n = 0, c = 0, h = 0, w = 0;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  Tensor() : Object(Kind::tensor) {}
  int64_t count() const { return (int64_t)n * c * h * w; }
  /* Bytes from the first element to the end of the last: what the buffer must hold. */
  size_t extent_bytes() const;
  int64_t offset(int in, int ic, int ih, int iw) const {
    return in * sn + ic * sc + ih * sh + iw * sw;
  }
  bool packed_nchw() const;
  bool packed_nhwc() const;
};

/* Filters [k, c, r, s]: format NCHW is KCRS in memory, NHWC is KRSC. */
struct Filter : Object {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int k = 0, c = 0, r = 0, s = 0;
  Filter() : Object(Kind::filter) {}
  int64_t count() const { return (int64_t)k * c * r * s; }
  size_t bytes() const { return (size_t)count() * dtype_size(type); }
  int64_t offset(int ik, int ic, int ir, int is) const {
    return format == CUDNN_TENSOR_NHWC ? (((int64_t)ik * r + ir) * s + is) * c + ic
                                       : (((int64_t)ik * c + ic) * r + ir) * s + is;
  }
};

struct Convolution : Object {
  bool set = false;
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  Convolution() : Object(Kind::convolution) {}
};

struct Pooling : Object {
  bool set = false;
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  int kh = 0, kw = 0, pad_h = 0, pad_w = 0, stride_h = 0, stride_w = 0;
  Pooling() : Object(Kind::pooling) {}
};

struct Activation : Object {
  bool set = false;
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  double coef = 0.0;
  Activation() : Object(Kind::activation) {}
};

/* Registers a new object (created with new). */
void register_object(Object *o);
/* Marks p dead; fails loudly when p is not a live object of this kind. */
void destroy_object(const void *p, Kind kind, const char *api);
/* Runs fn(object) under the registry's lock; fails loudly when p is NULL, unknown, of
 * another kind or destroyed. `what` names the argument in the message. */
void with_object(const void *p, Kind kind, const char *api, const char *what,
                 const std::function<void(Object &)> &fn);

template <class T>
T copy_of(const void *p, Kind kind, const char *api, const char *what) {
  T out;
  with_object(p, kind, api, what, [&](Object &o) { out = static_cast<T &>(o); });
  return out;
}
template <class T>
void modify(const void *p, Kind kind, const char *api, const char *what,
            const std::function<void(T &)> &fn) {
  with_object(p, kind, api, what, [&](Object &o) { fn(static_cast<T &>(o)); });
}

/* Live copies with the check that the descriptor was set (an unset descriptor is a
 * caller defect: fails loudly). */
Tensor tensor_of(cudnnTensorDescriptor_t d, const char *api, const char *what);
Filter filter_of(cudnnFilterDescriptor_t d, const char *api, const char *what);
Convolution convolution_of(cudnnConvolutionDescriptor_t d, const char *api, const char *what);
/* The handle, its stream checked live (fake_cuda_check_stream) and its device current. */
Handle handle_of(cudnnHandle_t h, const char *api);
/* Fails loudly unless `device` (a handle's) is the calling thread's current device. */
void check_current_device(int device, const char *api, const char *what);

/* ---- statuses ----------------------------------------------------------------------- */

/* Records "api: message" as the calling thread's cudnnGetLastErrorString and returns s. */
__attribute__((format(printf, 3, 4))) cudnnStatus_t fail_status(cudnnStatus_t s, const char *api,
                                                                const char *fmt, ...);

/* ---- memory checks ------------------------------------------------------------------ */

struct Span {
  const void *p;
  size_t bytes;
  size_t align;
  const char *what;
};
/* Every span inside one live device allocation and aligned (fake_cuda_check_device). */
void check_spans(const std::vector<Span> &spans, const char *api);
/* Fails loudly when the two spans share a byte (an output aliasing an input or the
 * workspace: undefined in cuDNN and cuBLAS). */
void check_disjoint(const Span &a, const Span &b, const char *api);
/* Scaling factors (alpha, beta) are host memory in cuDNN and in cuBLAS's default pointer
 * mode: fails loudly on NULL or on a device pointer. Reads a float (a double for DOUBLE
 * data). */
float host_scalar(const void *p, cudnnDataType_t data, const char *api, const char *what);
/* The fake's alignment rule for a buffer of `type` (tensor_op: tensor-core math asked on
 * half data): the element size, 16 bytes for half types under tensor-core math. */
size_t data_alignment(cudnnDataType_t type, bool tensor_op);
/* A workspace's alignment. */
constexpr size_t kWorkspaceAlign = 16;

/* ---- tensor data -------------------------------------------------------------------- */

float load_element(cudnnDataType_t t, const void *base, int64_t index);
void store_element(cudnnDataType_t t, void *base, int64_t index, float v);
/* t's elements as logical NCHW fp32 (out holds t.count()). */
void load_nchw(const Tensor &t, const void *p, float *out);
/* p = alpha * v + beta * p, v logical NCHW; beta 0 leaves p unread. */
void store_nchw(const Tensor &t, void *p, const float *v, float alpha, float beta);
/* The filter as [k][c][r][s] fp32. */
void load_kcrs(const Filter &f, const void *p, float *out);
void store_kcrs(const Filter &f, void *p, const float *v, float alpha, float beta);

/* Enqueues work on `stream` under `api` (fake_cuda_enqueue_fn) after checking `spans`,
 * and checks them again when the work runs (a graph launched after a buffer was freed). */
void run_on(cudaStream_t stream, const char *api, std::vector<Span> spans,
            std::function<void()> work);

/* ---- arithmetic --------------------------------------------------------------------- */

/* C[M x N] (row stride ldc) = (or, accumulate, +=) A B in fp32: A(i, k) = A[i * a_rs + k *
 * a_cs], B row-major [K x N] with row stride ldb. The convolutions' and cublasGemmEx's. */
void gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t a_rs, int64_t a_cs,
              const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate);

} // namespace fake_dnn

#endif
