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
 * rank when there is more than one process, and only rank 0 prints the report.
 *
 * Since ABI 1.4 a strategy spanning processes also offers allgather(): the host compares
 * every rank's run configuration with it before the first step (a mismatch is refused on
 * every rank, naming the values) and gathers the step times for the report's total. A
 * strategy that keeps the variables itself (a parameter server) offers apply_update()
 * and finish_update(): the host then hands it each step's optimizer updates instead of
 * running them on every replica's device. Since ABI 1.5 such a strategy also answers
 * CNNB_EXT_STRATEGY_OPTIMIZER_STATE, so checkpoints can save and restore the optimizer
 * slots it keeps.
 *
 * Failures between processes (a rank that died or stopped answering) end in a bounded
 * time (cfg->collective_timeout_s) with CNNB_ECOMM and a message naming the lost rank;
 * after that the host calls only destroy(), which must not wait for the lost rank. */
#ifndef CNNB_STRATEGY_H
#define CNNB_STRATEGY_H

#include "ctx.h"
#include "device.h"
#include "optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnb_strategy_config {
  uint32_t struct_size;
  int32_t local_replicas;           /* devices in this process */
  const cnnb_device_vtable *device; /* to run device-side copies and kernels */
  void *const *devices;             /* [local_replicas] device instances; copy what you keep */
  int64_t param_count;              /* elements in each arena */
  /* ABI 1.4 */
  /* The arena's variables: variable i is [variable_bounds[i], variable_bounds[i + 1]),
   * in arena order, num_variables + 1 entries ending at param_count (what a parameter
   * server shards by; a bucket never splits a variable). */
  const int64_t *variable_bounds;
  int32_t num_variables;
  uint32_t precision;                /* cnnb_precision of the replicas' compute */
  const char *all_reduce_spec;       /* --all_reduce_spec, "" when not given */
  double collective_timeout_s;       /* --collective_timeout_s (> 0): the longest wait
                                        for another process before it counts as lost */
  int32_t gradient_repacking;        /* --gradient_repacking: 0, or pack into K chunks */
  int32_t compact_gradient_transfer; /* --compact_gradient_transfer: send 16-bit
                                        gradients between processes, sum in fp32 */
  /* ABI 1.8 */
  int32_t auto_loss_scale; /* --fp16_enable_auto_loss_scale: an update whose
                              gradients are not all finite is skipped (and the
                              scale lowered): a strategy that applies updates
                              itself checks them first */
  int32_t reserved;
  const char *device_name; /* the devices' plugin as the user picked it
                              (--device), for messages */
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
  cnnb_status (*bucket_ready)(void *strategy, float *const *grads, int64_t offset, int64_t count);
  /* [required] [step-thread] per training step: waits until every announced bucket is
   * averaged on every replica. */
  cnnb_status (*finish_step)(void *strategy, float *const *grads);
  /* ABI 1.3 */
  /* [optional] [any-thread] this instance's capabilities by string id, valid until
   * destroy; NULL (slot or answer): ask the descriptor's get_extension. */
  const void *(*get_extension)(void *strategy, const char *id);
  /* ABI 1.4 */
  /* [optional] [main-thread] a few times per run (setup, report), collective over the
   * processes (each calls it in the same order): recv[rank * bytes ..] receives every
   * rank's `bytes` bytes of send. NULL: the host trusts that one process runs alone,
   * and refuses world_size > 1 without it. */
  cnnb_status (*allgather)(void *strategy, const void *send, void *recv, int64_t bytes);
  /* [optional] [step-thread] per step, per run of parameters sharing one weight decay,
   * after finish_step: the strategy applies `update` to the variables it keeps, over
   * [offset, offset + update->count) of the arena. Its params/grads/slot pointers are
   * replica 0's and may be ignored: a parameter server applies the hyperparameters
   * (rule, learning rate, decay, scale, step) to its own copies and optimizer slots.
   * With this slot the host runs no update on the replicas' devices and allocates no
   * optimizer slots there; finish_update must then be non-NULL too. The mean gradient is
   * then the strategy's: after finish_step the replicas' gradient arenas need only hold
   * a non-finite value exactly when the mean is not finite (the trainers' dynamic loss
   * scaling checks them, and every rank must skip the same steps). NULL: every replica
   * applies the update on its device. */
  cnnb_status (*apply_update)(void *strategy, int64_t offset, const cnnb_update *update);
  /* [optional] [step-thread] per step, after the last apply_update (also on a step whose
   * update was skipped for inf/NaN gradients): every replica's params[] holds the new
   * values when it returns. Required when apply_update is set. */
  cnnb_status (*finish_update)(void *strategy, float *const *params);
} cnnb_strategy_vtable;

/* ABI 1.5: a strategy that keeps the optimizer's slots itself (apply_update) lets
 * checkpoints save and restore them. Answered with a cnnb_strategy_optimizer_state by the
 * instance's get_extension. The slots are arena-sized, in arena order, as the trainers'
 * (slot1/slot2 of cnnb_update for the run's rule: momentum's accumulator; RMSProp's mean
 * square and momentum; Adam's m and v); the strategy may keep them spread over processes
 * (a parameter server's shards), which is why both calls are collective. Adam's step
 * count is not here: the host passes it in every update (cnnb_update.step).
 * Both calls are [main-thread] and between steps (never while a step runs). A bad
 * argument (slot not 1 or 2, count not the arena's, NULL pointer) is refused at once with
 * CNNB_EINVAL on the rank that passes it; every other refusal comes back the same on every
 * rank, so no rank is left waiting. Every wait is bounded by the collective timeout. */
#define CNNB_EXT_STRATEGY_OPTIMIZER_STATE "cnnb.strategy.optimizer_state/1"
typedef struct cnnb_strategy_optimizer_state {
  uint32_t struct_size;
  /* [required] [main-thread] when saving a checkpoint, collective (every process calls
   * it, in the same order): slot `slot` (1 or 2) of the whole arena, [0, count) elements,
   * into host on every process. When the rule has no such slot (sgd; momentum's slot 2),
   * or no update ran yet and nothing was restored (the slots do not exist), it returns
   * CNNB_OK with *exists = 0 and leaves host untouched; otherwise *exists = 1. A strategy
   * updating asynchronously first waits for every process to reach the call, so the slots
   * hold every update pushed before it, and none pushed after. */
  cnnb_status (*get_slot)(void *strategy, int32_t slot, float *host, int64_t count,
                          int32_t *exists);
  /* [required] [main-thread] when resuming, collective: after create and before the first
   * step (before or after broadcast_params), slot `slot` of the arena for rule `rule`
   * (cnnb_optimizer_rule) from host; every process passes the same values and each keeps
   * what it holds (its shards). A slot not set keeps its initial value (zeros; RMSProp's
   * mean square ones). CNNB_EINVAL on every rank when a step already ran, when an earlier
   * set_slot named another rule, or when the processes pass different values (the message
   * names the rank); at once when the rule has no such slot (sgd; momentum's slot 2: an
   * argument error, which every rank makes alike). The run's updates must then use the
   * same rule (apply_update refuses another). */
  cnnb_status (*set_slot)(void *strategy, uint32_t rule, int32_t slot, const float *host,
                          int64_t count);
} cnnb_strategy_optimizer_state;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_strategy_config, param_count) == 24, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_strategy_config, compact_gradient_transfer) == 68,
               "ABI: 1.4 layout moved");
_Static_assert(sizeof(cnnb_strategy_config) == 88, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_strategy_vtable, finish_step) == 56, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_strategy_vtable, allgather) == 72, "ABI: 1.3 layout moved");
_Static_assert(sizeof(cnnb_strategy_vtable) == 96, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_strategy_optimizer_state, get_slot) == 8, "ABI: 1.5 layout moved");
_Static_assert(sizeof(cnnb_strategy_optimizer_state) == 24, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
