/* fake_driver.cpp — the driver entry points the cuda plugin's probe opens (plugin.c:
 * cuInit, cuDeviceGetCount, cuDriverGetVersion and the error texts), answered by the fake:
 * the same device count and CUDA version as its runtime (fake_cuda.h), so the probe's
 * messages (no device visible, a driver too old) can be played here by environment. */
#include <cuda.h>

#include "fake_cuda.h"

extern "C" {

CUresult cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }

CUresult cuDeviceGetCount(int *count) {
  *count = fake_cuda_device_count();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
  *version = fake_cuda_driver_version();
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **text) {
  *text = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_INVALID_VALUE";
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
  *text = error == CUDA_SUCCESS ? "no error" : "invalid argument";
  return CUDA_SUCCESS;
}

} // extern "C"
