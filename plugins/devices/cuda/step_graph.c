/* step_graph.c — CNNB_EXT_STEP_GRAPH on the cuda device (--cuda_graphs): the instance's
 * stream is captured into a CUDA graph while the host makes one step's forward, backward
 * and accumulate calls, and the instantiated graph is launched for every later step, one
 * launch instead of one per kernel (the ~700 of a ResNet-50 training step).
 *
 * Capture mode cudaStreamCaptureModeThreadLocal: only this thread's unsafe calls (a
 * synchronize, a cudaMalloc) invalidate the capture, so the input pipeline's threads stay
 * free to use CUDA meanwhile. Every call the device makes inside forward and backward is
 * asynchronous on d->stream (cuDNN's and cuBLAS's included); what a step allocates on
 * first use is allocated by the two unrecorded steps the host makes before (device.h).
 * A recording that fails anyway is reported by end_capture, and the host then runs its
 * steps without one. */
#include "gpu_device.h"

static cnnb_status begin_capture(void *device) {
  gpu_device *d = device;
  cnnb_status st = gpu_cuda(d, cudaSetDevice(d->ordinal), NULL, "cudaSetDevice");
  if (st) return st;
  gpu_step_graph_discard(d);
  return gpu_cuda(d, cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal), NULL,
                  "recording a step (cudaStreamBeginCapture)");
}

static cnnb_status end_capture(void *device) {
  gpu_device *d = device;
  cnnb_status st = gpu_cuda(d, cudaSetDevice(d->ordinal), NULL, "cudaSetDevice");
  cudaGraph_t graph = NULL;
  /* Ends the capture even when a call in it failed (cudaErrorStreamCaptureInvalidated):
   * the stream must leave capture mode for the steps that follow. */
  cudaError_t e = cudaStreamEndCapture(d->stream, &graph);
  /* The flags form, the same call in CUDA 11.4+ and 12+ (plain cudaGraphInstantiate
   * changed its arguments in 12.0). */
  if (e == cudaSuccess) e = cudaGraphInstantiateWithFlags(&d->step_exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    d->step_exec = NULL;
    (void)cudaGetLastError(); /* not sticky: later launches must not report it again */
    return st ? st : gpu_cuda(d, e, NULL, "ending the recording of a step");
  }
  return st;
}

static cnnb_status replay(void *device) {
  gpu_device *d = device;
  if (!d->step_exec) return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: replay without a recorded step");
  cnnb_status st = gpu_cuda(d, cudaSetDevice(d->ordinal), NULL, "cudaSetDevice");
  return st ? st
            : gpu_cuda(d, cudaGraphLaunch(d->step_exec, d->stream), NULL,
                       "replaying the recorded step (cudaGraphLaunch)");
}

void gpu_step_graph_discard(gpu_device *d) {
  if (!d->step_exec) return;
  /* A launch in flight keeps its own reference: destroying the exec does not wait. */
  cudaGraphExecDestroy(d->step_exec);
  d->step_exec = NULL;
}

const cnnb_device_step_graph gpu_step_graph = {
    .struct_size = sizeof(cnnb_device_step_graph),
    .begin_capture = begin_capture,
    .end_capture = end_capture,
    .replay = replay,
};
