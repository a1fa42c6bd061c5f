/* cnnb/strategy.h — what a strategy plugin provides: where gradients meet.
 *
 * The executor runs one replica per local device. During backward it announces each
 * gradient bucket as soon as every gradient in it is final (in reverse layer order), so
 * a strategy can start communicating while backward goes on; finish_step() waits for
 * all of it. After finish_step() every replica's gradient arena holds the *mean* over
 * all replicas on all ranks, so N replicas of batch b step like one replica of N*b. */
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
  void *const *devices;                /* [local_replicas] device instances */
  int64_t param_count;                 /* elements in each arena */
} cnnb_strategy_config;

typedef struct cnnb_strategy_vtable {
  uint32_t struct_size;
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_strategy_config *cfg,
                        void **strategy);
  void (*destroy)(void *strategy);
  /* This process's rank and the number of processes (1 and 0 without MPI). */
  int32_t (*world_size)(void *strategy);
  int32_t (*rank)(void *strategy);
  /* Makes every replica start from replica 0 of rank 0's parameters. */
  cnnb_status (*broadcast_params)(void *strategy, float *const *params, int64_t count);
  /* grads[replica] + offset .. + count is final on every local replica. */
  cnnb_status (*bucket_ready)(void *strategy, float *const *grads, int64_t offset,
                              int64_t count);
  /* Waits until every announced bucket is averaged on every replica. */
  cnnb_status (*finish_step)(void *strategy, float *const *grads);
} cnnb_strategy_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_strategy_config) == 32, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_strategy_vtable) == 64, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
