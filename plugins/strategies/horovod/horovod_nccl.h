/* horovod_nccl.h — horovod's allreduce on the GPU (Horovod's HOROVOD_GPU_OPERATIONS=NCCL):
 * each fused group of buckets averaged by NCCL in place in the replica's gradient arena,
 * on its stream, while backward goes on; nothing is staged through host memory
 * (../common/nccl_gpus.h).
 *
 *   flat          one NCCL all-reduce over every rank's GPU, the mean folded in (ncclAvg)
 *   hierarchical  --horovod_hierarchical_allreduce: an NCCL reduce within the node to its
 *                 leader (local rank 0) with the 1/world scale folded in (a premultiplied
 *                 sum), an NCCL all-reduce across the nodes' leaders only, and an NCCL
 *                 broadcast within the node: one GPU a node sends between nodes
 * --compact_gradient_transfer converts to fp16 (--precision=fp16) or bf16 where the bytes
 * cross between nodes: the whole all-reduce when flat, the leaders' all-reduce when
 * hierarchical. */
#ifndef CNNB_HOROVOD_NCCL_H
#define CNNB_HOROVOD_NCCL_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "mpi_world.h"

typedef struct horovod_nccl horovod_nccl;

/* The --horovod_gpu_operations values. */
typedef enum horovod_gpu_ops {
  HOROVOD_GPU_OPS_AUTO = 0, /* NCCL where every rank can, else MPI through host memory */
  HOROVOD_GPU_OPS_NCCL = 1, /* NCCL, or a refusal saying why not */
  HOROVOD_GPU_OPS_MPI = 2   /* MPI through host memory */
} horovod_gpu_ops;

/* Opens NCCL on cfg's device when `ops` asks for it and every rank can (collective: every
 * rank calls it). *out is NULL when horovod goes through host memory instead (MPI asked,
 * or AUTO and some rank cannot: a device without CUDA streams, a build without NCCL);
 * `why` then says why, for the log. who: the flag, for refusals. compact16: 0 or the
 * 16-bit format (cnnb_precision); timeout_s: --collective_timeout_s. */
cnnb_status horovod_nccl_open(cnnb_ctx *ctx, const cnnb_strategy_config *cfg, mpi_world *world,
                              double timeout_s, horovod_gpu_ops ops, bool hierarchical,
                              uint32_t compact16, horovod_nccl **out, char *why, size_t why_size);
void horovod_nccl_close(horovod_nccl *h);
void horovod_nccl_abandon(horovod_nccl *h);
/* "NCCL 2.28.9 (CUDA runtime 13.0) on GPU 0; 4 GPUs" and "NCCL avg fp32", for logs and
 * the timeline. */
const char *horovod_nccl_describe(const horovod_nccl *h);
const char *horovod_nccl_how(const horovod_nccl *h);

/* [step-thread] Starts averaging grads[offset, offset + count) over every rank, on the
 * GPU's stream. what: "buckets 1-3 of step 12". */
cnnb_status horovod_nccl_average(horovod_nccl *h, float *grads, int64_t offset, int64_t count,
                                 const char *what);
/* [step-thread] Waits (bounded) until everything started has finished. */
cnnb_status horovod_nccl_wait(horovod_nccl *h, const char *what);

#endif
