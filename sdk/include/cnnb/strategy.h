/* cnnb/strategy.h — what a strategy plugin provides: where gradients meet.
 *
 * The executor runs one replica per local device. During backward it announces each
 * gradient bucket as soon as every gradient in it is final (in reverse layer order), so
 * a strategy can start communicating while backward goes on; finish_step() waits for
 * all of it. After finish_step() every replica's gradient arena holds the *mean* over
 * all replicas on all ranks, so N replicas of batch b step like one replica of N*b.
 *
 * The host asks the strategy for the process's rank and the world's size right after
 * create, and uses them: each replica's datasource reads its own shard (shard index
 * rank * local_replicas + replica, of world_size * local_replicas), log lines carry the
 * rank when there is more than one process, and only rank 0 prints the report. */
#ifndef CNNB_STRATEGY_H
#define CNNB_STRATEGY_H

#include "ctx.h"
#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnb_strategy_config {
  uint32_t struct_size;
  int32_t local_replicas;              /* devices in this process */
  const cnnb_device_vtable *device;    /* to run device-side copies and kernels */
  void *const *devices;                /* [local_replicas] device instances; copy what you keep */
  int64_t param_count;                 /* elements in each arena */
} cnnb_strategy_config;

typedef struct cnnb_strategy_vtable {
  uint32_t struct_size;
  /* [required] [main-thread] once per run, after every replica's device exists. A
   * strategy that needs MPI initialises it here (and finalises it in destroy). */
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_strategy_config *cfg,
                        void **strategy);
  /* [required] [main-thread] once, at teardown. */
  void (*destroy)(void *strategy);
  /* [optional] [any-thread] the number of processes taking part (>= 1). NULL: 1. */
  int32_t (*world_size)(void *strategy);
  /* [optional] [any-thread] this process's rank, in [0, world_size). NULL: 0. */
  int32_t (*rank)(void *strategy);
  /* [required] [main-thread] once, before the first step: makes every replica start from
   * replica 0 of rank 0's parameters (params[replica], count elements each). */
  cnnb_status (*broadcast_params)(void *strategy, float *const *params, int64_t count);
  /* [required] [step-thread] per bucket per training step: grads[replica] + offset ..
   * + count is final on every local replica. May start communication and return. */
  cnnb_status (*bucket_ready)(void *strategy, float *const *grads, int64_t offset,
                              int64_t count);
  /* [required] [step-thread] per training step: waits until every announced bucket is
   * averaged on every replica. */
  cnnb_status (*finish_step)(void *strategy, float *const *grads);
  /* ABI 1.3 */
  /* [optional] [any-thread] this instance's capabilities by string id, valid until
   * destroy; NULL (slot or answer): ask the descriptor's get_extension. */
  const void *(*get_extension)(void *strategy, const char *id);
} cnnb_strategy_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_strategy_config) == 32, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_strategy_vtable, finish_step) == 56, "ABI: 1.0 layout moved");
_Static_assert(sizeof(cnnb_strategy_vtable) == 72, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
