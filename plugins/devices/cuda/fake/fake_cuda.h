/* fake_cuda.h — the checking fake of the CUDA runtime, cuDNN, cuBLAS, NCCL and the driver
 * that the test-only build (-DCNNB_CUDA_FAKE=ON) links the cuda device against, so its
 * whole host side runs on a machine without a GPU. What its parts share lives here:
 * the registry of live "device" allocations, streams that run their work in order (or
 * record it under capture), and the one way to fail.
 *
 * A checker, not a pretend GPU: every call validates what a real GPU would leave to
 * undefined behaviour (a pointer outside a live allocation or misaligned, a descriptor
 * that disagrees with its buffer, a workspace smaller than asked, an allocation or a
 * synchronization inside a capture, a stream used after destroy, an illegal NCCL call
 * sequence) and ends the process through fake_cuda_fail with a message that names the
 * API call and what was wrong. "Device" memory is host memory.
 *
 * Threading: every entry point may be called from any thread; the registry is locked.
 * Work on a stream runs on the calling thread, at enqueue time, in enqueue order (the
 * fake has no asynchrony: a stream is always idle when the call returns), except under
 * capture, where it is recorded into the graph and runs at each cudaGraphLaunch. */
#ifndef CNNB_FAKE_CUDA_H
#define CNNB_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
#include <functional>
extern "C" {
#endif

/* Prints "fake CUDA: <api>: <message>" on stderr and aborts: a checker's finding is a
 * defect in the caller, never a condition to handle. */
__attribute__((noreturn, format(printf, 2, 3))) void fake_cuda_fail(const char *api,
                                                                    const char *fmt, ...);

/* [p, p + bytes) must lie inside one live device allocation (cudaMalloc) of the current
 * device's and p must be a multiple of `align` (1: any); else fake_cuda_fail naming
 * `api` and `what` ("cudnnConvolutionForward", "x"). bytes 0 checks p alone. */
void fake_cuda_check_device(const void *p, size_t bytes, size_t align, const char *api,
                            const char *what);
/* The same for memory a copy may read or write on the host side: any pointer that is not
 * inside a live device allocation passes (pageable or pinned host memory). Returns 1 when
 * [p, p + bytes) is device memory (and checked), 0 when it is host memory. */
int fake_cuda_is_device(const void *p, size_t bytes, const char *api, const char *what);

/* s must be 0 (the legacy default stream), cudaStreamPerThread or a live stream; else
 * fake_cuda_fail. */
void fake_cuda_check_stream(cudaStream_t s, const char *api);
/* Whether the calling thread's work on s is being recorded (stream capture). Calls that
 * allocate or synchronize fail under capture; compute is recorded. */
int fake_cuda_capturing(cudaStream_t s);

/* Runs work(arg) now on the calling thread, or, while s is capturing, records it into
 * the capture's graph (cudaGraphLaunch runs it again each launch): `arg` must then hold
 * everything the work reads besides device memory (descriptors are copied, not pointed
 * to). free_arg(arg), when given, runs when the work will never run again. */
void fake_cuda_enqueue(cudaStream_t s, const char *api, void (*work)(void *arg), void *arg,
                       void (*free_arg)(void *arg));

/* The fake device count (CNNB_FAKE_CUDA_DEVICES, default 2) and the current device. */
int fake_cuda_device_count(void);
int fake_cuda_current_device(void);
/* The CUDA version the fake driver reports (cuDriverGetVersion, cudaDriverGetVersion):
 * CNNB_FAKE_CUDA_DRIVER_VERSION (e.g. 12040, an older driver), else the runtime's. */
int fake_cuda_driver_version(void);

#ifdef __cplusplus
}

/* C++: the same, with a closure that owns its captured values. */
void fake_cuda_enqueue_fn(cudaStream_t s, const char *api, std::function<void()> work);
#endif

#endif
