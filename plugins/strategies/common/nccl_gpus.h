/* nccl_gpus.h — a strategy's NCCL: the GPUs of its local replicas, communicators over
 * them spanning this process, the whole MPI job, this node or the nodes' leaders, the
 * collectives on the replicas' own streams, and every wait bounded.
 *
 * Each local replica's device tells its GPU and stream (CNNB_EXT_CUDA_STREAM); every
 * call here goes onto that stream, in order after the device's own work (a gradient
 * bucket's backward), so nothing synchronizes the device and the step thread goes on
 * with backward while NCCL runs. A collective is one NCCL group over the local GPUs
 * (ncclGroupStart, one call per GPU, ncclGroupEnd), as NCCL wants one thread driving
 * several GPUs. Communicators are non-blocking: a call that answers "in progress" is
 * polled (ncclCommGetAsyncError) with the deadline --collective_timeout_s, and so is the
 * end of the work (an event per GPU, nccl_gpus_wait).
 *
 * Faults: a deadline passed, or a communicator reporting an error (a peer died), aborts
 * every communicator (ncclCommAbort: their pending work ends, nothing waits for the
 * peer), and — under mpirun — meets the other ranks at a barrier of the MPI layer,
 * whose own timeout and liveness probe name the rank that is gone (mpi_world.h); the
 * call then fails with CNNB_ECOMM saying so. From then on every call fails at once.
 * The longest a lost rank takes to be named: twice the timeout and the probe window.
 *
 * The library is nccl_load.h's table (nccl_api.h), so tests run all of this against a
 * recording stub. Threading: one thread (the step thread) makes every call. */
#ifndef CNNB_STRATEGY_NCCL_GPUS_H
#define CNNB_STRATEGY_NCCL_GPUS_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "mpi_world.h"
#include "nccl_api.h"

typedef struct nccl_gpus nccl_gpus;
typedef struct nccl_comms nccl_comms;

/* Which GPUs one set of communicators joins (every local GPU gets one communicator). */
typedef enum nccl_span {
  NCCL_SPAN_PROCESS = 1, /* this process's GPUs */
  NCCL_SPAN_WORLD = 2,   /* every GPU of every rank of the job */
  NCCL_SPAN_NODE = 3,    /* every GPU of the ranks on this node (mpi_world's nodes) */
  NCCL_SPAN_LEADERS = 4  /* the GPUs of every node's leader (local rank 0); none elsewhere */
} nccl_span;

/* The op of a premultiplied sum (nccl_comms_premul): a value no NCCL op has. */
#define NCCL_GPUS_PREMUL (-1)

/* Whether every local replica's device gives a CUDA stream (CNNB_EXT_CUDA_STREAM) and
 * none is host memory: the devices NCCL can work on. */
bool nccl_gpus_devices_qualify(const cnnb_strategy_config *cfg);

/* The devices' plugin as the user named it (--device), for messages; "of this run" from a
 * host before ABI 1.8, which does not pass it. */
const char *nccl_gpus_device_name(const cnnb_strategy_config *cfg);

/* Loads NCCL (nccl_load.h) and takes each device's GPU and stream. `who` names what asked
 * ("--all_reduce_spec=nccl") in refusals, which are one line (CNNB_EUNSUPPORTED).
 * world: the strategy's MPI job (kept, not owned); timeout_s: --collective_timeout_s. */
cnnb_status nccl_gpus_open(cnnb_ctx *ctx, const char *who, const cnnb_strategy_config *cfg,
                           mpi_world *world, double timeout_s, nccl_gpus **out);
/* Waits (bounded) for the work enqueued, frees the communicators (or aborts them after a
 * fault) and the events. NULL is a no-op. */
void nccl_gpus_close(nccl_gpus *g);
/* After a failure elsewhere (the MPI job lost a rank): aborts the communicators, so close
 * does not wait for peers. */
void nccl_gpus_abandon(nccl_gpus *g);
/* "NCCL 2.28.9 (CUDA runtime 13.0) on GPUs 0, 1", for a log line. */
const char *nccl_gpus_describe(const nccl_gpus *g);
int32_t nccl_gpus_count(const nccl_gpus *g);

/* Makes one communicator per local GPU over `span`: collective over the span's ranks
 * (every rank of the job calls it, in the same order, with the same span), the unique id
 * travelling over the MPI layer. Owned by g. A rank outside the span (LEADERS on a
 * non-leader) gets comms with no member: its collectives do nothing. */
cnnb_status nccl_gpus_comms(nccl_gpus *g, nccl_span span, nccl_comms **out);
/* GPUs in the communicators (every rank's), and whether this rank takes part. */
int32_t nccl_comms_size(const nccl_comms *c);
bool nccl_comms_member(const nccl_comms *c);
/* Makes the comms' premultiplied sum (op NCCL_GPUS_PREMUL): each GPU's values times
 * `scale`, then summed, so an average over unequal groups is folded into a reduction. */
cnnb_status nccl_comms_premul(nccl_comms *c, float scale);

/* The collectives, each one NCCL group over the local GPUs, in place: bufs[i] is on local
 * GPU i (count elements of `type`: NCCL_API_FLOAT32, _FLOAT16, _BFLOAT16), op
 * NCCL_API_SUM, NCCL_API_AVG or NCCL_GPUS_PREMUL; roots are ranks of the communicators
 * (GPU i of rank r of the span is r * local GPUs + i). `pieces` (>= 1) cuts the buffer
 * into that many collectives of consecutive elements in the same group (--all_reduce_spec's
 * #SHARDS). `what` names what travels, for messages ("bucket 3 of step 12"). */
cnnb_status nccl_all_reduce(nccl_comms *c, void *const *bufs, int64_t count, int32_t type,
                            int32_t op, int32_t pieces, const char *what);
cnnb_status nccl_reduce(nccl_comms *c, void *const *bufs, int64_t count, int32_t type, int32_t op,
                        int32_t root, const char *what);
cnnb_status nccl_broadcast(nccl_comms *c, void *const *bufs, int64_t count, int32_t type,
                           int32_t root, const char *what);
/* dst[i][k] = src[i][k] * scale as type `to`, on every local GPU's stream. */
cnnb_status nccl_convert(nccl_gpus *g, void *const *src, int32_t from, void *const *dst, int32_t to,
                         int64_t count, float scale, const char *what);
/* Waits, bounded, until the work enqueued on every local GPU so far has finished. */
cnnb_status nccl_gpus_wait(nccl_gpus *g, const char *what);

/* Bytes of one element of `type`. */
int32_t nccl_type_size(int32_t type);
/* "fp32", "fp16", "bf16". */
const char *nccl_type_name(int32_t type);

#endif
