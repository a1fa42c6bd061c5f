/* nccl_impl.c — libcnnb_nccl_impl.so: the table of nccl_api.h filled from NCCL and the
 * CUDA runtime (linked statically, as the cuda device's implementation does), loaded by
 * the strategy plugins on demand (../common/nccl_load.h). Each entry is a thin wrapper:
 * the call, its result in NCCL's numbering, and on failure the words for last_error.
 *
 * Communicators are created non-blocking (ncclConfig_t.blocking = 0) so that no call
 * waits for a peer: the strategies poll comm_status and events to --collective_timeout_s
 * and abort on a timeout (../common/nccl_gpus.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "../common/nccl_api.h"
#include "nccl_convert.h"

/* The table speaks NCCL's numbers. */
_Static_assert(NCCL_API_OK == (int)ncclSuccess, "results");
_Static_assert(NCCL_API_CUDA_ERROR == (int)ncclUnhandledCudaError, "results");
_Static_assert(NCCL_API_SYSTEM_ERROR == (int)ncclSystemError, "results");
_Static_assert(NCCL_API_INTERNAL_ERROR == (int)ncclInternalError, "results");
_Static_assert(NCCL_API_INVALID_ARGUMENT == (int)ncclInvalidArgument, "results");
_Static_assert(NCCL_API_INVALID_USAGE == (int)ncclInvalidUsage, "results");
_Static_assert(NCCL_API_REMOTE_ERROR == (int)ncclRemoteError, "results");
_Static_assert(NCCL_API_IN_PROGRESS == (int)ncclInProgress, "results");
_Static_assert(NCCL_API_FLOAT16 == (int)ncclFloat16, "types");
_Static_assert(NCCL_API_FLOAT32 == (int)ncclFloat32, "types");
_Static_assert(NCCL_API_BFLOAT16 == (int)ncclBfloat16, "types");
_Static_assert(NCCL_API_SUM == (int)ncclSum && NCCL_API_AVG == (int)ncclAvg, "ops");
_Static_assert(sizeof(nccl_unique_id) == sizeof(ncclUniqueId), "unique id");

struct nccl_event {
  cudaEvent_t event;
  int32_t ordinal;
};

static _Thread_local char last[768];

static int nccl_result(ncclResult_t r, const char *call, ncclComm_t comm) {
  if (r != ncclSuccess && r != ncclInProgress) {
    const char *detail = ncclGetLastError(comm);
    snprintf(last, sizeof last, "%s: %s%s%s", call, ncclGetErrorString(r),
             detail && *detail ? ": " : "", detail ? detail : "");
  }
  return (int)r;
}

static int cuda_result(cudaError_t e, const char *call) {
  if (e == cudaSuccess) return NCCL_API_OK;
  if (e == cudaErrorNotReady) return NCCL_API_IN_PROGRESS;
  snprintf(last, sizeof last, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
  return NCCL_API_CUDA_ERROR;
}

static const char *last_error(nccl_comm *comm) {
  (void)comm;
  return last[0] ? last : "no error recorded";
}

/* ---- can it run here ----------------------------------------------------------- */

static char why[512];
static int probed;

/* The driver library the probe opens: NVIDIA's, or in the test-only fake tree
 * (CNNB_CUDA_FAKE) the fake's, by its path in the build tree (as the cuda plugin's). */
#ifndef GPU_DRIVER_LIBRARY
#define GPU_DRIVER_LIBRARY "libcuda.so.1"
#endif

static void probe(void) {
  /* The driver first, by name, as the CUDA runtime finds it: its absence is the common
   * case (a machine without a GPU) and deserves plain words. */
  void *driver = dlopen(GPU_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    snprintf(why, sizeof why, "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s)", dlerror());
    return;
  }
  /* (kept open: the runtime uses the same library) */
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(why, sizeof why, "no usable GPU: cudaGetDeviceCount failed: %s (%s)",
             cudaGetErrorString(e), cudaGetErrorName(e));
    return;
  }
  if (count <= 0) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(why, sizeof why, "no CUDA device visible%s%s%s",
             visible ? " (CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "", visible ? ")" : "");
    return;
  }
  why[0] = '\0';
}

static const char *unavailable(void) {
  if (!probed) { /* [main-thread]: the strategies ask at create */
    probe();
    probed = 1;
  }
  return why[0] ? why : NULL;
}

static const char *describe(void) {
  static char text[96];
  int version = 0, runtime = 0;
  ncclGetVersion(&version);
  cudaRuntimeGetVersion(&runtime);
  snprintf(text, sizeof text, "NCCL %d.%d.%d (CUDA runtime %d.%d)", version / 10000,
           version / 100 % 100, version % 100, runtime / 1000, runtime % 1000 / 10);
  return text;
}

/* ---- NCCL ------------------------------------------------------------------------ */

static int get_unique_id(nccl_unique_id *id) {
  return nccl_result(ncclGetUniqueId((ncclUniqueId *)id), "ncclGetUniqueId", NULL);
}

static int comm_init_rank(nccl_comm **comm, int32_t nranks, const nccl_unique_id *id, int32_t rank,
                          int32_t ordinal) {
  int st = cuda_result(cudaSetDevice(ordinal), "cudaSetDevice");
  if (st != NCCL_API_OK) return st;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclComm_t c = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&c, nranks, uid, rank, &config);
  *comm = (nccl_comm *)c;
  return nccl_result(r, "ncclCommInitRankConfig", c);
}

static int group_start(void) { return nccl_result(ncclGroupStart(), "ncclGroupStart", NULL); }
static int group_end(void) { return nccl_result(ncclGroupEnd(), "ncclGroupEnd", NULL); }

static int all_reduce(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                      int32_t op, void *stream) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclAllReduce(send, recv, (size_t)count, (ncclDataType_t)type, (ncclRedOp_t)op,
                                   c, (cudaStream_t)stream),
                     "ncclAllReduce", c);
}

static int reduce(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                  int32_t op, int32_t root, void *stream) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclReduce(send, recv, (size_t)count, (ncclDataType_t)type, (ncclRedOp_t)op,
                                root, c, (cudaStream_t)stream),
                     "ncclReduce", c);
}

static int broadcast(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                     int32_t root, void *stream) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclBroadcast(send, recv, (size_t)count, (ncclDataType_t)type, root, c,
                                   (cudaStream_t)stream),
                     "ncclBroadcast", c);
}

static int premul_sum(nccl_comm *comm, float scale, int32_t type, int32_t *op) {
  ncclComm_t c = (ncclComm_t)comm;
  ncclRedOp_t made;
  ncclResult_t r;
  /* The scalar has the collective's type. */
  if (type == NCCL_API_FLOAT16 || type == NCCL_API_BFLOAT16) {
    uint16_t bits = nccl_convert_scalar(scale, type);
    r = ncclRedOpCreatePreMulSum(&made, &bits, (ncclDataType_t)type, ncclScalarHostImmediate, c);
  } else {
    r = ncclRedOpCreatePreMulSum(&made, &scale, ncclFloat32, ncclScalarHostImmediate, c);
  }
  if (r == ncclSuccess) *op = (int32_t)made;
  return nccl_result(r, "ncclRedOpCreatePreMulSum", c);
}

static int op_destroy(nccl_comm *comm, int32_t op) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclRedOpDestroy((ncclRedOp_t)op, c), "ncclRedOpDestroy", c);
}

static int comm_status(nccl_comm *comm) {
  ncclComm_t c = (ncclComm_t)comm;
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(c, &async);
  if (r != ncclSuccess) return nccl_result(r, "ncclCommGetAsyncError", c);
  return nccl_result(async, "the communicator", c);
}

static int comm_finalize(nccl_comm *comm) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclCommFinalize(c), "ncclCommFinalize", c);
}

static int comm_destroy(nccl_comm *comm) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclCommDestroy(c), "ncclCommDestroy", c);
}

static int comm_abort(nccl_comm *comm) {
  ncclComm_t c = (ncclComm_t)comm;
  return nccl_result(ncclCommAbort(c), "ncclCommAbort", c);
}

/* ---- CUDA ------------------------------------------------------------------------ */

static int event_create(int32_t ordinal, nccl_event **out) {
  *out = NULL;
  int st = cuda_result(cudaSetDevice(ordinal), "cudaSetDevice");
  if (st != NCCL_API_OK) return st;
  nccl_event *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(last, sizeof last, "out of memory for an event");
    return NCCL_API_SYSTEM_ERROR;
  }
  e->ordinal = ordinal;
  if ((st = cuda_result(cudaEventCreateWithFlags(&e->event, cudaEventDisableTiming),
                        "cudaEventCreateWithFlags")) != NCCL_API_OK) {
    free(e);
    return st;
  }
  *out = e;
  return NCCL_API_OK;
}

static int event_record(nccl_event *e, void *stream) {
  int st = cuda_result(cudaSetDevice(e->ordinal), "cudaSetDevice");
  return st != NCCL_API_OK
             ? st
             : cuda_result(cudaEventRecord(e->event, (cudaStream_t)stream), "cudaEventRecord");
}

static int event_query(nccl_event *e) {
  return cuda_result(cudaEventQuery(e->event), "cudaEventQuery");
}

static void event_destroy(nccl_event *e) {
  if (!e) return;
  cudaSetDevice(e->ordinal);
  cudaEventDestroy(e->event);
  free(e);
}

static int convert(int32_t ordinal, void *stream, const void *src, int32_t from, void *dst,
                   int32_t to, int64_t count, float scale) {
  int st = cuda_result(cudaSetDevice(ordinal), "cudaSetDevice");
  return st != NCCL_API_OK ? st
                           : cuda_result(nccl_convert_launch((cudaStream_t)stream, src, from, dst,
                                                             to, count, scale),
                                         "the 16-bit conversion kernel");
}

static const nccl_api api = {
    .struct_size = sizeof(nccl_api),
    .version = NCCL_API_VERSION,
    .unavailable = unavailable,
    .describe = describe,
    .last_error = last_error,
    .get_unique_id = get_unique_id,
    .comm_init_rank = comm_init_rank,
    .group_start = group_start,
    .group_end = group_end,
    .all_reduce = all_reduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .premul_sum = premul_sum,
    .op_destroy = op_destroy,
    .comm_status = comm_status,
    .comm_finalize = comm_finalize,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .event_create = event_create,
    .event_record = event_record,
    .event_query = event_query,
    .event_destroy = event_destroy,
    .convert = convert,
};

__attribute__((visibility("default"))) const nccl_api *cnnb_nccl_impl_entry(void);
const nccl_api *cnnb_nccl_impl_entry(void) { return &api; }
