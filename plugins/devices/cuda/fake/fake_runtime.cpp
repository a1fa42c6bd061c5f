/* fake_runtime.cpp — the CUDA runtime calls of the cuda device and the NCCL strategies,
 * on the CPU, checked (fake_cuda.h): "device" memory is host memory in a registry of live
 * allocations, a stream runs its work on the calling thread at once (or records it while
 * capturing), events and graphs follow.
 *
 * What it checks, each a fake_cuda_fail naming the call: pointers outside a live
 * allocation (copies, memsets, frees), a host pointer given where device memory is due,
 * a stream or event used after destroy, anything that allocates, frees or synchronizes
 * from a thread that is capturing, pageable host memory copied inside a capture, work on
 * the legacy stream from a capturing thread, a capture ended on another stream or never
 * begun. Fresh allocations are filled with 0xff bytes (a NaN in every float type, -1 as
 * int32), so a kernel that reads memory nobody wrote shows it in its results.
 *
 * What it cannot check: races between streams and a host read of a download before its
 * synchronize (every call completes before it returns); only a GPU shows those. */
#include "fake_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

/* ---- the one way to fail ------------------------------------------------------------ */

extern "C" void fake_cuda_fail(const char *api, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  fprintf(stderr, "fake CUDA: %s: %s\n", api, message);
  fflush(stderr);
  abort();
}

/* ---- handles -------------------------------------------------------------------------- */

namespace {

/* One recorded piece of work: what a graph holds and replays. */
struct work_item {
  std::string api;
  std::function<void()> run;
};
using work_list = std::vector<std::shared_ptr<work_item>>;

} // namespace

struct CUstream_st {
  int device;
  bool live;
  bool capturing;
  std::thread::id capture_thread;
  work_list captured;
};
struct CUevent_st {
  bool live;
};
struct CUgraph_st {
  work_list items;
};
struct CUgraphExec_st {
  work_list items;
};

namespace {

struct allocation {
  size_t bytes;
  int device;
  bool pinned; /* cudaMallocHost: host memory, legal in a capture's copies */
};

/* The registries live on the heap and are never destroyed: objects a process never
 * destroyed stay reachable through them at exit (LeakSanitizer reports nothing), and a
 * call from another library's destructor still finds them. */
std::mutex &lock = *new std::mutex; /* guards everything below */
std::map<uintptr_t, allocation> &allocations = *new std::map<uintptr_t, allocation>;
std::set<CUstream_st *> &streams = *new std::set<CUstream_st *>; /* ever made; `live`: which */
std::set<CUevent_st *> &events = *new std::set<CUevent_st *>;    /* the same for events */
size_t device_bytes_in_use;
thread_local int current_device;
thread_local int capturing_here; /* streams this thread is capturing */
thread_local cudaError_t last_error = cudaSuccess;

const size_t kDeviceMemory = (size_t)16 << 30; /* what cudaMemGetInfo reports in all */

cudaError_t fail_soft(cudaError_t e) { /* an error the caller is meant to handle */
  last_error = e;
  return e;
}

/* The allocation holding p, or NULL. Caller holds the lock. */
const std::pair<const uintptr_t, allocation> *find_locked(const void *p) {
  uintptr_t a = (uintptr_t)p;
  auto it = allocations.upper_bound(a);
  if (it == allocations.begin()) return NULL;
  --it;
  if (a >= it->first && a < it->first + (it->second.bytes ? it->second.bytes : 1)) return &*it;
  return NULL;
}

void no_capture_here(const char *api, const char *what) {
  if (capturing_here)
    fake_cuda_fail(api, "%s while this thread is capturing a stream (not allowed in a CUDA graph)",
                   what);
}

CUstream_st *stream_of(cudaStream_t s, const char *api) {
  fake_cuda_check_stream(s, api);
  return s == 0 || s == cudaStreamPerThread ? NULL : s;
}

} // namespace

/* ---- checks other fakes share ----------------------------------------------------------- */

extern "C" void fake_cuda_check_device(const void *p, size_t bytes, size_t align, const char *api,
                                       const char *what) {
  if (!p) fake_cuda_fail(api, "%s is NULL", what);
  if (align > 1 && (uintptr_t)p % align)
    fake_cuda_fail(api, "%s = %p is not aligned to %zu bytes", what, p, align);
  std::lock_guard<std::mutex> g(lock);
  auto *a = find_locked(p);
  if (!a || a->second.pinned)
    fake_cuda_fail(api, "%s = %p is not inside a live device allocation", what, p);
  size_t offset = (uintptr_t)p - a->first;
  if (bytes > a->second.bytes - offset)
    fake_cuda_fail(api,
                   "%s = %p + %zu bytes runs past its allocation (%zu bytes at %p, %zu "
                   "bytes left)",
                   what, p, bytes, a->second.bytes, (void *)a->first, a->second.bytes - offset);
}

extern "C" int fake_cuda_is_device(const void *p, size_t bytes, const char *api, const char *what) {
  {
    std::lock_guard<std::mutex> g(lock);
    auto *a = find_locked(p);
    if (!a || a->second.pinned) return 0;
  }
  fake_cuda_check_device(p, bytes, 1, api, what);
  return 1;
}

static int is_pinned(const void *p) {
  std::lock_guard<std::mutex> g(lock);
  auto *a = find_locked(p);
  return a && a->second.pinned;
}

extern "C" void fake_cuda_check_stream(cudaStream_t s, const char *api) {
  if (s == 0 || s == cudaStreamPerThread) return;
  std::lock_guard<std::mutex> g(lock);
  if (!streams.count(s)) fake_cuda_fail(api, "stream %p was never created", (void *)s);
  if (!s->live) fake_cuda_fail(api, "stream %p is used after cudaStreamDestroy", (void *)s);
}

extern "C" int fake_cuda_capturing(cudaStream_t s) {
  CUstream_st *st = stream_of(s, "fake_cuda_capturing");
  return st && st->capturing;
}

void fake_cuda_enqueue_fn(cudaStream_t s, const char *api, std::function<void()> work) {
  CUstream_st *st = stream_of(s, api);
  if (!st && capturing_here)
    fake_cuda_fail(api, "work on the legacy default stream while this thread captures");
  if (st && st->capturing) {
    if (st->capture_thread != std::this_thread::get_id())
      fake_cuda_fail(api, "stream %p is being captured by another thread", (void *)st);
    st->captured.push_back(std::make_shared<work_item>(work_item{api, std::move(work)}));
    return;
  }
  work();
}

extern "C" void fake_cuda_enqueue(cudaStream_t s, const char *api, void (*work)(void *), void *arg,
                                  void (*free_arg)(void *)) {
  std::shared_ptr<void> owned(arg, [free_arg](void *p) {
    if (free_arg) free_arg(p);
  });
  fake_cuda_enqueue_fn(s, api, [work, owned]() { work(owned.get()); });
}

extern "C" int fake_cuda_device_count(void) {
  const char *env = getenv("CNNB_FAKE_CUDA_DEVICES");
  if (!env || !*env) return 2;
  int n = atoi(env);
  return n < 0 ? 0 : n;
}

extern "C" int fake_cuda_current_device(void) { return current_device; }

/* ---- devices and versions --------------------------------------------------------------- */

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = fake_cuda_device_count();
  return *count ? cudaSuccess : fail_soft(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= fake_cuda_device_count()) return fail_soft(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (device < 0 || device >= fake_cuda_device_count()) return fail_soft(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "fake CUDA device (the CPU, test-only)");
  /* An H100's compute capability, so every path the default build targets is taken. */
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = kDeviceMemory;
  prop->memPitch = (size_t)2 << 30;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->pciBusID = device + 1;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

/* The driver's CUDA version: CNNB_FAKE_CUDA_DRIVER_VERSION (e.g. 12040) plays an older
 * driver; the default is the runtime's own. */
int fake_cuda_driver_version(void) {
  const char *env = getenv("CNNB_FAKE_CUDA_DRIVER_VERSION");
  return env && *env ? atoi(env) : CUDART_VERSION;
}

cudaError_t cudaDriverGetVersion(int *version) {
  *version = fake_cuda_driver_version();
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
  memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNoKernelImageForDevice: return "cudaErrorNoKernelImageForDevice";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaError (fake: unnamed)";
  }
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return cudaGetErrorName(e);
  }
}

/* ---- memory ------------------------------------------------------------------------------ */

static cudaError_t allocate(void **ptr, size_t size, bool pinned, const char *api) {
  no_capture_here(api, "allocating");
  if (!ptr) fake_cuda_fail(api, "the result pointer is NULL");
  *ptr = NULL;
  {
    std::lock_guard<std::mutex> g(lock);
    if (!pinned && size > kDeviceMemory - device_bytes_in_use)
      return fail_soft(cudaErrorMemoryAllocation);
  }
  /* cudaMalloc aligns to 256 bytes; so does the fake, and rounds the size up for
   * aligned_alloc while the registry keeps the size asked for. */
  size_t rounded = (size ? size + 255 : 256) / 256 * 256;
  void *p = aligned_alloc(256, rounded);
  if (!p) return fail_soft(cudaErrorMemoryAllocation);
  memset(p, 0xff, rounded);
  std::lock_guard<std::mutex> g(lock);
  allocations[(uintptr_t)p] = allocation{size, current_device, pinned};
  if (!pinned) device_bytes_in_use += size;
  *ptr = p;
  return cudaSuccess;
}

static cudaError_t release(void *p, bool pinned, const char *api) {
  no_capture_here(api, "freeing");
  if (!p) return cudaSuccess;
  {
    std::lock_guard<std::mutex> g(lock);
    auto it = allocations.find((uintptr_t)p);
    if (it == allocations.end())
      fake_cuda_fail(api,
                     "%p is not the start of a live allocation (double free, or a pointer "
                     "into one)",
                     p);
    if (it->second.pinned != pinned)
      fake_cuda_fail(api, "%p was allocated with %s", p,
                     it->second.pinned ? "cudaMallocHost" : "cudaMalloc");
    if (!pinned) device_bytes_in_use -= it->second.bytes;
    allocations.erase(it);
  }
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) { return allocate(ptr, size, false, "cudaMalloc"); }
cudaError_t cudaMallocHost(void **ptr, size_t size) {
  return allocate(ptr, size, true, "cudaMallocHost");
}
cudaError_t cudaFree(void *p) { return release(p, false, "cudaFree"); }
cudaError_t cudaFreeHost(void *p) { return release(p, true, "cudaFreeHost"); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  no_capture_here("cudaMemGetInfo", "asking for free memory");
  std::lock_guard<std::mutex> g(lock);
  *total = kDeviceMemory;
  *free_bytes = kDeviceMemory - device_bytes_in_use;
  return cudaSuccess;
}

/* Checks one side of a copy against its kind: device memory where the kind says device,
 * host memory where it says host; cudaMemcpyDefault takes either. */
static void check_side(const void *p, size_t bytes, bool device, enum cudaMemcpyKind kind,
                       const char *api, const char *what, bool capturing) {
  if (kind == cudaMemcpyDefault) {
    if (!fake_cuda_is_device(p, bytes, api, what) && capturing && !is_pinned(p))
      fake_cuda_fail(api, "%s = %p is pageable host memory, copied inside a capture", what, p);
    return;
  }
  if (device) {
    fake_cuda_check_device(p, bytes, 1, api, what);
  } else {
    if (!p) fake_cuda_fail(api, "%s is NULL", what);
    if (fake_cuda_is_device(p, bytes, api, what))
      fake_cuda_fail(api, "%s = %p is device memory, but the copy's kind says host", what, p);
    if (capturing && !is_pinned(p))
      fake_cuda_fail(api, "%s = %p is pageable host memory, copied inside a capture", what, p);
  }
}

static bool dst_is_device(enum cudaMemcpyKind k) {
  return k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
}
static bool src_is_device(enum cudaMemcpyKind k) {
  return k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
}

static void check_kind(enum cudaMemcpyKind kind, const char *api) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost &&
      kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    fake_cuda_fail(api, "copy kind %d is not one the device should use", (int)kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  const char *api = "cudaMemcpyAsync";
  check_kind(kind, api);
  bool capturing = stream_of(stream, api) && stream->capturing;
  if (count == 0) return cudaSuccess;
  check_side(dst, count, dst_is_device(kind), kind, api, "dst", capturing);
  check_side(src, count, src_is_device(kind), kind, api, "src", capturing);
  fake_cuda_enqueue_fn(stream, api, [=]() { memmove(dst, src, count); });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  no_capture_here("cudaMemcpy", "a synchronous copy");
  return cudaMemcpyAsync(dst, src, count, kind, 0);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream) {
  const char *api = "cudaMemcpy2DAsync";
  check_kind(kind, api);
  if (width > dpitch || width > spitch)
    fake_cuda_fail(api, "width %zu is larger than a pitch (dst %zu, src %zu)", width, dpitch,
                   spitch);
  bool capturing = stream_of(stream, api) && stream->capturing;
  if (width == 0 || height == 0) return cudaSuccess;
  check_side(dst, (height - 1) * dpitch + width, dst_is_device(kind), kind, api, "dst", capturing);
  check_side(src, (height - 1) * spitch + width, src_is_device(kind), kind, api, "src", capturing);
  fake_cuda_enqueue_fn(stream, api, [=]() {
    for (size_t r = 0; r < height; r++)
      memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  no_capture_here("cudaMemcpy2D", "a synchronous copy");
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, 0);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t count, cudaStream_t stream) {
  const char *api = "cudaMemsetAsync";
  stream_of(stream, api);
  if (count == 0) return cudaSuccess;
  fake_cuda_check_device(p, count, 1, api, "devPtr");
  fake_cuda_enqueue_fn(stream, api, [=]() { memset(p, value, count); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t count) {
  no_capture_here("cudaMemset", "a synchronous memset");
  return cudaMemsetAsync(p, value, count, 0);
}

cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  const char *api = "cudaMemset2DAsync";
  stream_of(stream, api);
  if (width > pitch) fake_cuda_fail(api, "width %zu is larger than the pitch %zu", width, pitch);
  if (width == 0 || height == 0) return cudaSuccess;
  fake_cuda_check_device(p, (height - 1) * pitch + width, 1, api, "devPtr");
  fake_cuda_enqueue_fn(stream, api, [=]() {
    for (size_t r = 0; r < height; r++) memset((char *)p + r * pitch, value, width);
  });
  return cudaSuccess;
}

/* ---- streams ------------------------------------------------------------------------------ */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  CUstream_st *st = new CUstream_st();
  st->device = current_device;
  st->live = true;
  std::lock_guard<std::mutex> g(lock);
  streams.insert(st);
  *s = st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

/* The object stays allocated (and in `streams`, marked dead) so a later use is caught
 * rather than read through a freed pointer. */
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  const char *api = "cudaStreamDestroy";
  CUstream_st *st = stream_of(s, api);
  if (!st) fake_cuda_fail(api, "the default stream cannot be destroyed");
  if (st->capturing) fake_cuda_fail(api, "stream %p is still capturing", (void *)st);
  st->live = false;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  stream_of(s, "cudaStreamSynchronize");
  no_capture_here("cudaStreamSynchronize", "synchronizing");
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  no_capture_here("cudaDeviceSynchronize", "synchronizing");
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  const char *api = "cudaStreamBeginCapture";
  CUstream_st *st = stream_of(s, api);
  if (!st) fake_cuda_fail(api, "the legacy default stream cannot be captured");
  if (st->capturing) fake_cuda_fail(api, "stream %p is already capturing", (void *)st);
  if (mode != cudaStreamCaptureModeThreadLocal && mode != cudaStreamCaptureModeGlobal &&
      mode != cudaStreamCaptureModeRelaxed)
    fake_cuda_fail(api, "unknown capture mode %d", (int)mode);
  st->capturing = true;
  st->capture_thread = std::this_thread::get_id();
  st->captured.clear();
  capturing_here++;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  const char *api = "cudaStreamEndCapture";
  CUstream_st *st = stream_of(s, api);
  if (!st || !st->capturing) fake_cuda_fail(api, "stream %p is not capturing", (void *)s);
  if (st->capture_thread != std::this_thread::get_id())
    fake_cuda_fail(api, "the capture of stream %p began on another thread", (void *)st);
  st->capturing = false;
  capturing_here--;
  CUgraph_st *gr = new CUgraph_st();
  gr->items.swap(st->captured);
  *graph = gr;
  return cudaSuccess;
}

/* ---- graphs -------------------------------------------------------------------------------- */

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  if (!graph) fake_cuda_fail("cudaGraphInstantiate", "the graph is NULL");
  no_capture_here("cudaGraphInstantiate", "instantiating a graph");
  CUgraphExec_st *e = new CUgraphExec_st();
  e->items = graph->items; /* shared: the graph may be destroyed first */
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(exec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  const char *api = "cudaGraphLaunch";
  if (!exec) fake_cuda_fail(api, "the executable graph is NULL");
  work_list items = exec->items;
  fake_cuda_enqueue_fn(stream, api, [items]() {
    for (auto &item : items) item->run();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

/* ---- events -------------------------------------------------------------------------------- */

static CUevent_st *event_of(cudaEvent_t e, const char *api) {
  std::lock_guard<std::mutex> g(lock);
  if (!e || !events.count(e)) fake_cuda_fail(api, "event %p was never created", (void *)e);
  if (!e->live) fake_cuda_fail(api, "event %p is used after cudaEventDestroy", (void *)e);
  return e;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  CUevent_st *ev = new CUevent_st();
  ev->live = true;
  std::lock_guard<std::mutex> g(lock);
  events.insert(ev);
  *e = ev;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  event_of(e, "cudaEventDestroy")->live = false;
  return cudaSuccess;
}

/* Work completes when it is enqueued, so an event is complete once recorded. */
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  event_of(e, "cudaEventRecord");
  stream_of(s, "cudaEventRecord");
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  event_of(e, "cudaEventQuery");
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  event_of(e, "cudaEventSynchronize");
  no_capture_here("cudaEventSynchronize", "synchronizing");
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  stream_of(s, "cudaStreamWaitEvent");
  event_of(e, "cudaStreamWaitEvent");
  return cudaSuccess;
}

} // extern "C"
