/* nccl_api.h — the handful of NCCL and CUDA entry points the strategies use on GPUs, as
 * one table of function pointers.
 *
 * Why a table: NCCL (218 MB) and the CUDA runtime must not be mapped by every cnnbench
 * start, nor stop a strategy plugin from loading on a machine without them, so the
 * strategies link neither. The real table is filled by libcnnb_nccl_impl.so
 * (plugins/strategies/nccl_impl/), which links NCCL and the CUDA runtime and which a
 * strategy opens only when a run asks for NCCL (nccl_load.h). Tests fill the same table
 * with a recording stub (tests/fixtures/nccl_stub.c), so everything above it — which
 * calls, in which order, on which stream, with which counts and types — is the
 * production code, checked on a machine without a GPU.
 *
 * The numbers are NCCL's own (nccl.h 2.28): results are ncclResult_t, types
 * ncclDataType_t, ops ncclRedOp_t; the implementation checks each with a static assert.
 * No CUDA or NCCL header is included here. Communicators are made non-blocking
 * (ncclConfig_t.blocking = 0), so a call may answer NCCL_API_IN_PROGRESS and the caller
 * polls comm_status until it is NCCL_API_OK or an error: no call waits for a peer.
 *
 * Threading: the calls of one communicator come from one thread at a time (the step
 * thread). last_error is that thread's own. */
#ifndef CNNB_STRATEGY_NCCL_API_H
#define CNNB_STRATEGY_NCCL_API_H

#include <stdint.h>

/* The table's version: a strategy refuses an implementation of another one. */
#define NCCL_API_VERSION "cnnb-nccl-api/1"
/* The implementation's one exported symbol, returning the table. */
#define NCCL_API_ENTRY "cnnb_nccl_impl_entry"
/* Where the implementation lies, relative to the strategy plugins' directory. */
#define NCCL_API_IMPL_FILE "nccl/libcnnb_nccl_impl.so"
/* An implementation to load instead (a path): tests point it at the recording stub. */
#define NCCL_API_LIBRARY_ENV "CNNB_NCCL_LIBRARY"

enum {
  NCCL_API_OK = 0,         /* ncclSuccess; cudaSuccess */
  NCCL_API_CUDA_ERROR = 1, /* ncclUnhandledCudaError; any CUDA error */
  NCCL_API_SYSTEM_ERROR = 2,
  NCCL_API_INTERNAL_ERROR = 3,
  NCCL_API_INVALID_ARGUMENT = 4,
  NCCL_API_INVALID_USAGE = 5,
  NCCL_API_REMOTE_ERROR = 6, /* a peer failed, or its connection did */
  NCCL_API_IN_PROGRESS = 7   /* not done yet: poll (an event not reached yet, too) */
};

enum { NCCL_API_FLOAT16 = 6, NCCL_API_FLOAT32 = 7, NCCL_API_BFLOAT16 = 9 };
enum { NCCL_API_SUM = 0, NCCL_API_AVG = 4 }; /* ops made by premul_sum are other values */

#define NCCL_API_UNIQUE_ID_BYTES 128
typedef struct nccl_unique_id {
  char internal[NCCL_API_UNIQUE_ID_BYTES];
} nccl_unique_id;

typedef struct nccl_comm nccl_comm;   /* ncclComm_t */
typedef struct nccl_event nccl_event; /* cudaEvent_t */

typedef struct nccl_api {
  uint32_t struct_size;
  const char *version; /* NCCL_API_VERSION */
  /* NULL when this machine can run NCCL (a driver, a GPU), else one line saying what is
   * missing. Never fails the process; may load the driver to find out. */
  const char *(*unavailable)(void);
  /* "NCCL 2.28.9" (the library's own version), for logs. */
  const char *(*describe)(void);
  /* Why the last failing call of this thread failed (NCCL's or CUDA's words). */
  const char *(*last_error)(nccl_comm *comm);

  /* NCCL. Every call returns an NCCL_API_* result. */
  int (*get_unique_id)(nccl_unique_id *id);
  /* ncclCommInitRankConfig, non-blocking, on GPU `ordinal` (made current first). */
  int (*comm_init_rank)(nccl_comm **comm, int32_t nranks, const nccl_unique_id *id, int32_t rank,
                        int32_t ordinal);
  int (*group_start)(void);
  int (*group_end)(void);
  int (*all_reduce)(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                    int32_t op, void *stream);
  int (*reduce)(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                int32_t op, int32_t root, void *stream);
  int (*broadcast)(nccl_comm *comm, const void *send, void *recv, int64_t count, int32_t type,
                   int32_t root, void *stream);
  /* ncclRedOpCreatePreMulSum with a host scalar: sums of x * scale, for `type`. */
  int (*premul_sum)(nccl_comm *comm, float scale, int32_t type, int32_t *op);
  int (*op_destroy)(nccl_comm *comm, int32_t op);
  /* ncclCommGetAsyncError: NCCL_API_OK, NCCL_API_IN_PROGRESS (still enqueuing or
   * initialising), or the error the communicator met. */
  int (*comm_status)(nccl_comm *comm);
  int (*comm_finalize)(nccl_comm *comm); /* then poll comm_status, then destroy */
  int (*comm_destroy)(nccl_comm *comm);
  int (*comm_abort)(nccl_comm *comm); /* ends its pending work; never waits for a peer */

  /* CUDA: events to poll for the end of the work on a stream, and the 16-bit copies of
   * --compact_gradient_transfer. */
  int (*event_create)(int32_t ordinal, nccl_event **event);
  int (*event_record)(nccl_event *event, void *stream);
  /* NCCL_API_OK when the work recorded before it has finished, NCCL_API_IN_PROGRESS when
   * not yet, else an error. */
  int (*event_query)(nccl_event *event);
  void (*event_destroy)(nccl_event *event);
  /* dst[i] = src[i] * scale for i < count, converted from type `from` to type `to`
   * (FLOAT32 <-> FLOAT16 / BFLOAT16, rounded to nearest even; FLOAT32 -> FLOAT32 scales),
   * a kernel on `stream` of GPU `ordinal`. */
  int (*convert)(int32_t ordinal, void *stream, const void *src, int32_t from, void *dst,
                 int32_t to, int64_t count, float scale);
} nccl_api;

typedef const nccl_api *(*nccl_api_entry_fn)(void);

#endif
