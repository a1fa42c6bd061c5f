/* replicated_nccl.h — the replicated strategy's nccl ranges of --all_reduce_spec: each
 * gradient range averaged on the GPUs, in place in the replicas' gradient arenas, on
 * their own streams, while backward goes on (../common/nccl_gpus.h).
 *
 *   nccl, nccl/nccl   one NCCL all-reduce over every GPU of every rank, the mean folded
 *                     into it (ncclAvg): one communicator per GPU spanning the job
 *   nccl/mpi (/xring, /pscpu)  tf's nccl/xring: NCCL sums the process's GPUs into its
 *                     first, that range goes to the host, MPI sums it across ranks (16-bit
 *                     with --compact_gradient_transfer), it is scaled and copied back, and
 *                     NCCL broadcasts it to the other GPUs; in one process, as nccl
 *   #SHARDS           that many collectives per range, of consecutive pieces, in one group
 * --compact_gradient_transfer on an NCCL all-reduce: each GPU converts the range to fp16
 * (--precision=fp16) or bf16 into a scratch copy, NCCL averages the copies, and they are
 * converted back: half the bytes on every link.
 *
 * Every replica ends with the same floats (an NCCL all-reduce and a broadcast give every
 * GPU the same result). Waits are nccl_gpus.h's: bounded, a lost rank named. */
#ifndef CNNB_REPLICATED_NCCL_H
#define CNNB_REPLICATED_NCCL_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "all_reduce_spec.h"
#include "mpi_world.h"

typedef struct replicated_nccl replicated_nccl;

/* Opens NCCL over cfg's devices and makes the communicators `spec` needs (collective
 * over the ranks). who: "--all_reduce_spec=nccl" (and the part), for refusals, which are
 * one line. compact16: 0, CNNB_PRECISION_BF16 or _FP16. */
cnnb_status replicated_nccl_open(cnnb_ctx *ctx, const char *who, const cnnb_strategy_config *cfg,
                                 const all_reduce_spec *spec, mpi_world *world, uint32_t compact16,
                                 replicated_nccl **out);
void replicated_nccl_close(replicated_nccl *n);
/* After a failure elsewhere in the step: close aborts instead of waiting for peers. */
void replicated_nccl_abandon(replicated_nccl *n);
/* "NCCL 2.28.9 (CUDA runtime 13.0) on GPUs 0, 1; 1 communicator set of 4 GPUs". */
const char *replicated_nccl_describe(const replicated_nccl *n);
/* "NCCL avg fp32", "NCCL sum, then MPI bf16, then NCCL broadcast": how `range` goes. */
void replicated_nccl_how(const replicated_nccl *n, const reduce_range *range, char *out,
                         size_t size);

/* [step-thread] Starts averaging grads[r][offset, offset + count) over every replica of
 * every rank by `range` (an nccl range). A range that crosses ranks through MPI is done
 * when this returns; the others are on the GPUs' streams. what: "bucket 3 of step 12". */
cnnb_status replicated_nccl_average(replicated_nccl *n, float *const *grads, int64_t offset,
                                    int64_t count, const reduce_range *range, const char *what);
/* [step-thread] Waits (bounded) until everything started has finished. */
cnnb_status replicated_nccl_wait(replicated_nccl *n, const char *what);

#endif
