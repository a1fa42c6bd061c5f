/* run_facts.h — what a run is once its plugins have answered: the sizes the user left to
 * the model, the datasource's epoch, how many replicas and processes take part, how the
 * batches travel. Filled at setup (run/setup.c), in the order the answers come, and
 * read-only once setup is over; the report's header, the benchmark log, checkpoint
 * metadata and the ranks' agreement all read them here, each number computed once.
 * Host-internal. */
#ifndef CNNB_CONFIG_RUN_FACTS_H
#define CNNB_CONFIG_RUN_FACTS_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/bound_plugin.h"

/* The processes taking part, as the strategy reports them, and what carries exchanges
 * between them (run/world.h: agreement, totals and sums across ranks). */
typedef struct cnnb_world {
  int32_t rank, size;                /* this process, of `size` (1 without MPI) */
  const cnnb_bound_plugin *strategy; /* its allgather carries every exchange */
  cnnb_ctx *ctx;                     /* where a failed exchange is recorded: the run's */
} cnnb_world;

typedef struct cnnb_run_facts {
  /* The four plugins, as the run bound them (names as picked, files, descriptors, the
   * strategy's state): the run's one route to each (run.h has no copy). */
  cnnb_bound_plugin model, device, strategy, datasource;
  int32_t batch_size;      /* per replica: --batch_size, or the model's default */
  int32_t eval_batch_size; /* per replica, of evaluations during training:
                              --eval_batch_size, or batch_size */
  int32_t image_size;      /* --image_size, or the model's */
  int32_t num_classes;     /* --num_classes, or the dataset's */
  int32_t replicas;        /* in this process (--num_gpus) */
  cnnb_world world;        /* the processes taking part */
  /* Whose files these are: the world's rank and size, or, when a launcher started several
   * processes and the strategy joined none of them (mpirun -np 2 with independent), the
   * launcher's, so that no two processes write one file (benchmark_run.rankR.jsonl, the
   * trace). Only file_rank 0 writes the files of rank 0 alone. */
  int32_t file_rank, file_ranks;
  int64_t process_batch;          /* images per step over this process's replicas */
  int64_t global_batch;           /* images per step over every replica and process */
  int64_t examples_per_epoch;     /* the datasource's epoch (the split the run reads); 0:
                                     unknown */
  int64_t total_batches;          /* --num_batches, or --num_epochs in steps: the total a
                                     training run counts to, resumed or not, as tf */
  int64_t num_batches;            /* this run's timed steps: total_batches, less a resumed
                                     training run's start_step (tf's end_local_step) */
  int64_t start_step;             /* global steps before the first: a resumed checkpoint's */
  bool input_uint8;               /* batches travel as uint8 NHWC, normalized by the device */
  const char *device_description; /* replica 0's describe(), or the plugin's description */
} cnnb_run_facts;

#endif
