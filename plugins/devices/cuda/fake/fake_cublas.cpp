/* fake_cublas.cpp — the checking fake's cuBLAS: the handle (stream, math mode), version and
 * status strings, and cublasGemmEx, the one product the device calls.
 *
 * cublasGemmEx computes C = alpha op(A) op(B) + beta C column-major, with op N or T (C, the
 * conjugate transpose, is T for real data), leading dimensions, fp32 / fp16 / bf16
 * matrices and an fp32 compute type, as cuBLAS's table of supported combinations for
 * CUBLAS_COMPUTE_32F* has them: A and B of one type; C of that type or fp32; the _FAST_*
 * compute types fp32 only. Other combinations answer CUBLAS_STATUS_NOT_SUPPORTED, bad
 * sizes and leading dimensions CUBLAS_STATUS_INVALID_VALUE, as cuBLAS does. What the call
 * reads and writes is checked loudly: each matrix's extent ((cols - 1) * ld + rows
 * elements) inside one live allocation, aligned to its element size, C apart from A and
 * B, alpha and beta in host memory (the default pointer mode, the only one here). The
 * fake computes in fp32 whatever the compute type allows (TF32, pedantic or not) and
 * rounds C to nearest even. m = 0 or n = 0 returns at once; k = 0 scales C by beta. */
#include <cstring>

#include <cublas_v2.h>

#include "fake_dnn.h"

namespace fake_dnn {
namespace {

struct BlasHandle : Object {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  int device = 0; /* current at cublasCreate */
  BlasHandle() : Object(Kind::cublas_handle) {}
};

BlasHandle blas_of(cublasHandle_t h, const char *api) {
  BlasHandle out = copy_of<BlasHandle>(h, Kind::cublas_handle, api, "handle");
  check_current_device(out.device, api, "the cuBLAS handle");
  fake_cuda_check_stream(out.stream, api);
  return out;
}

size_t matrix_elt(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
  }
}

/* The element type as cuDNN names it, for fake_dnn's conversions. */
cudnnDataType_t as_dnn(cudaDataType t) {
  return t == CUDA_R_16F    ? CUDNN_DATA_HALF
         : t == CUDA_R_16BF ? CUDNN_DATA_BFLOAT16
                            : CUDNN_DATA_FLOAT;
}

bool supported(cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute) {
  if (a != b || !matrix_elt(a) || !matrix_elt(c)) return false;
  switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC: return c == a || c == CUDA_R_32F;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32: return a == CUDA_R_32F && c == CUDA_R_32F;
    default: return false;
  }
}

/* Elements of a column-major rows x cols matrix with leading dimension ld. */
size_t extent(int rows, int cols, int ld) {
  if (rows <= 0 || cols <= 0) return 0;
  return (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

std::vector<float> to_float(cudaDataType t, const void *p, size_t count) {
  std::vector<float> v(count);
  const cudnnDataType_t dt = as_dnn(t);
  for (size_t i = 0; i < count; i++) v[i] = load_element(dt, p, (int64_t)i);
  return v;
}

} // namespace
} // namespace fake_dnn

using namespace fake_dnn;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (!handle) fake_cuda_fail("cublasCreate", "NULL handle pointer");
  BlasHandle *h = new BlasHandle();
  h->device = fake_cuda_current_device();
  register_object(h);
  *handle = reinterpret_cast<cublasHandle_t>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  destroy_object(handle, Kind::cublas_handle, "cublasDestroy");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  fake_cuda_check_stream(stream, "cublasSetStream");
  modify<BlasHandle>(handle, Kind::cublas_handle, "cublasSetStream", "handle",
                     [&](BlasHandle &h) { h.stream = stream; });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *stream) {
  if (!stream) fake_cuda_fail("cublasGetStream", "NULL stream pointer");
  *stream = copy_of<BlasHandle>(handle, Kind::cublas_handle, "cublasGetStream", "handle").stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  /* A base mode in the low bits, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION as the
   * one flag above them. */
  const unsigned base = (unsigned)mode & 0xfu, flags = (unsigned)mode & ~0xfu;
  const bool base_ok = base == CUBLAS_DEFAULT_MATH || base == CUBLAS_TENSOR_OP_MATH ||
                       base == CUBLAS_PEDANTIC_MATH || base == CUBLAS_TF32_TENSOR_OP_MATH ||
                       base == CUBLAS_FP32_EMULATED_BF16X9_MATH ||
                       base == CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH;
  if (!base_ok || (flags & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
    return CUBLAS_STATUS_INVALID_VALUE;
  modify<BlasHandle>(handle, Kind::cublas_handle, "cublasSetMathMode", "handle",
                     [&](BlasHandle &h) { h.math = mode; });
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version) {
  if (!version) fake_cuda_fail("cublasGetVersion", "NULL version pointer");
  copy_of<BlasHandle>(handle, Kind::cublas_handle, "cublasGetVersion", "handle");
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
  }
  return "unknown status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha_p,
                            const void *A, cudaDataType a_type, int lda, const void *B,
                            cudaDataType b_type, int ldb, const void *beta_p, void *C,
                            cudaDataType c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  static const char api[] = "cublasGemmEx";
  const BlasHandle h = blas_of(handle, api);
  auto op_ok = [](cublasOperation_t o) {
    return o == CUBLAS_OP_N || o == CUBLAS_OP_T || o == CUBLAS_OP_C;
  };
  if (!op_ok(transa) || !op_ok(transb) || m < 0 || n < 0 || k < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  const int algo_i = (int)algo;
  if (!((algo_i >= CUBLAS_GEMM_DEFAULT && algo_i <= CUBLAS_GEMM_ALGO23) ||
        (algo_i >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo_i <= CUBLAS_GEMM_ALGO15_TENSOR_OP)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(a_type, b_type, c_type, compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;

  const float alpha = host_scalar(alpha_p, CUDNN_DATA_FLOAT, api, "alpha");
  const float beta = host_scalar(beta_p, CUDNN_DATA_FLOAT, api, "beta");
  const size_t a_elt = matrix_elt(a_type), c_elt = matrix_elt(c_type);
  const size_t a_count = extent(a_rows, a_cols, lda), b_count = extent(b_rows, b_cols, ldb);
  const size_t c_count = extent(m, n, ldc);
  const Span cs = {C, c_count * c_elt, c_elt, "C"};
  std::vector<Span> spans = {cs};
  if (k > 0) {
    const Span as = {A, a_count * a_elt, a_elt, "A"}, bs = {B, b_count * a_elt, a_elt, "B"};
    check_disjoint(cs, as, api);
    check_disjoint(cs, bs, api);
    spans.push_back(as);
    spans.push_back(bs);
  }
  run_on(h.stream, api, spans, [=]() {
    /* Row-major C^T [n x m] = op(B)^T op(A)^T: A' (j, l) = op(B)(l, j) read in place,
     * B' [k x m] = op(A)^T materialized. */
    std::vector<float> ct((size_t)n * m, 0.0f);
    if (k > 0) {
      const std::vector<float> af = to_float(a_type, A, a_count), bf = to_float(b_type, B, b_count);
      std::vector<float> opa_t((size_t)k * m);
      for (int l = 0; l < k; l++)
        for (int i = 0; i < m; i++)
          opa_t[(size_t)l * m + i] = ta ? af[(size_t)l + (size_t)i * lda]
                                        : af[(size_t)i + (size_t)l * lda];
      const int64_t a_rs = tb ? 1 : ldb, a_cs = tb ? ldb : 1;
      gemm_f32(n, m, k, bf.data(), a_rs, a_cs, opa_t.data(), m, ct.data(), m, false);
    }
    const cudnnDataType_t dt = as_dnn(c_type);
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        const int64_t at = (int64_t)i + (int64_t)j * ldc;
        float v = alpha * ct[(size_t)j * m + i];
        if (beta != 0.0f) v += beta * load_element(dt, C, at);
        store_element(dt, C, at, v);
      }
  });
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
