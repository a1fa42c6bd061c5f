/* replica.h — the pieces of a replica and a step on them: a device instance (training
 * or inference kernels), a datasource instance for the replica's shard (training or
 * validation split), the thread that reads it ahead, and what one instance reports.
 * Setup makes the training set (run/setup.c); evaluating during training makes a second,
 * inference-mode set with the same calls (run/evaluation.c). Each creates the instance's
 * ctx as a child of the run's; a failure's message names the flag or plugin at fault.
 * Host-internal. */
#ifndef CNNB_RUN_REPLICA_H
#define CNNB_RUN_REPLICA_H

#include "run/run.h"

cnnb_status cnnb_replica_create_device(cnnb_run *run, int32_t index, bool training, cnnb_ctx **ctx,
                                       void **device);
/* A datasource instance for replica `index`'s shard, making batches of `batch` images
 * (facts.batch_size; evaluations during training: facts.eval_batch_size). */
cnnb_status cnnb_replica_create_datasource(cnnb_run *run, int32_t index, bool training,
                                           int32_t batch, cnnb_ctx **ctx, void **datasource);
/* The input thread of one datasource instance, `batch` images a batch: uint8 batches
 * through `uint8_batches` when given, else fp32 ones. */
cnnb_status cnnb_replica_start_input(cnnb_run *run, int32_t index, int32_t batch, cnnb_ctx *ctx,
                                     void *datasource, const cnnb_datasource_uint8 *uint8_batches,
                                     cnnb_prefetch **input);

/* What the run's datasource is told of replica `index`'s shard, at `batch` images a
 * batch; probing for a datasource asks with replica 0's. */
cnnb_datasource_config cnnb_replica_datasource_config(const cnnb_run *run, int32_t index,
                                                      bool training, int32_t batch);

/* Whether the run's datasource serves the same batch at every step
 * (CNNB_EXT_DATASOURCE_CONSTANT): executors then upload it once. */
bool cnnb_replica_constant_batch(const cnnb_run *run);

/* Examples one datasource instance skipped as unreadable (CNNB_EXT_DATASOURCE_STATS; 0
 * for a datasource that does not say, or a NULL instance). */
int64_t cnnb_replica_skipped_examples(const cnnb_run *run, void *datasource);

/* A batch replica r took from its input (cnnb_prefetch_take), fp32 or uint8, run through
 * its executor: one forward (and backward when training) step. Errors name the node. */
cnnb_status cnnb_replica_step(cnnb_replica *r, const cnnb_batch *batch, float loss_scale,
                              int64_t step);

#endif
