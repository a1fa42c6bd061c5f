/* parameter_server.h — the parameter_server plugin's state, shared by its synchronous
 * step (parameter_server.c) and its asynchronous one (ps_async.c). Plugin-internal. */
#ifndef CNNB_PARAMETER_SERVER_H
#define CNNB_PARAMETER_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <cnnb/cnnb.h>

#include "mpi_world.h"
#include "ps_shards.h"
#include "replica_arenas.h"

typedef struct ps_async ps_async;
typedef struct nccl_gpus nccl_gpus;
typedef struct nccl_comms nccl_comms;

/* One run of parameters sharing a weight decay, as the host handed it over. */
typedef struct ps_update {
  int64_t offset;
  cnnb_update update; /* only the hyperparameters and count are meaningful */
} ps_update;

typedef struct ps {
  cnnb_ctx *ctx;
  replica_arenas replicas;
  mpi_world *world;
  ps_shards shards;
  int32_t rank, world_size, num_ps;
  bool sync;            /* --cross_replica_sync */
  int64_t count;        /* elements per arena */
  float *vars;          /* [count]: this rank's shard is the truth, the rest last pulled */
  float *grads;         /* [count]: sum of this rank's replicas, then on a PS rank the
                           global mean of its shard (synchronous), or this rank's mean
                           (asynchronous) */
  float *pack;          /* the largest shard, packed */
  float *slot1, *slot2; /* [count] on PS ranks, made at the first update (or restored) */
  uint32_t slots_rule;  /* the rule they were made for; 0: not yet */
  /* Guards the slots: the server thread of asynchronous mode applies updates while the
   * main thread saves or restores them for a checkpoint (ps_optimizer_state.h). */
  pthread_mutex_t slots_lock;
  bool slots_lock_ready;
  int check_finite;   /* dynamic loss scaling: every rank must skip the same steps */
  int64_t step;       /* finish_step calls: for messages, and slots are
                         restored only before the first */
  double timeout_s;   /* --collective_timeout_s */
  ps_update *updates; /* this step's, asynchronous mode */
  int32_t num_updates, max_updates;
  ps_async *async;
  /* --local_parameter_device=gpu (ps_gpu.h): the variables are replica 0's arena on its
   * GPU, the slots beside them there; slot1/slot2 above are then their host mirrors. */
  bool gpu;
  nccl_gpus *gpus;
  nccl_comms *comms; /* the process's GPUs */
  float *gpu_slot1, *gpu_slot2;
} ps;

#endif
