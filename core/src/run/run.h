/* run.h — one run's pieces, as setup (run/setup.h) puts them together: the four bound
 * plugins, the model's graph, one replica per device of this process, and the facts
 * every part reads once setup is over. The modules that keep state of their own keep it
 * behind an opaque pointer (the checkpoint module's resume state, the evaluation
 * module's second set of instances); the step loop keeps its own in its frame.
 * Host-internal: the run's modules, and tools that drive a run (bench/cnnb_profile,
 * tests/tools/train_params), read it. */
#ifndef CNNB_RUN_RUN_H
#define CNNB_RUN_RUN_H

#include <stdbool.h>
#include <cnnb/cnnb.h>

#include "config/run_config.h"
#include "config/run_facts.h"
#include "exec/executor.h"
#include "exec/prefetch.h"
#include "exec/trainer.h"
#include "loader/bound_plugin.h"

typedef struct cnnb_run cnnb_run;
typedef struct cnnb_benchmark_log cnnb_benchmark_log; /* report/benchmark_log.h */
typedef struct cnnb_checkpoints cnnb_checkpoints;     /* run/checkpoint.h */
typedef struct cnnb_evaluation cnnb_evaluation;       /* run/evaluation.h */
typedef struct cnnb_summaries cnnb_summaries;         /* run/summaries.h */

/* One replica: a device instance, the executor running the graph on it, its optimizer
 * and its own datasource instance, read ahead by its input thread. */
typedef struct cnnb_replica {
  cnnb_run *run; /* for the executor's bucket callback */
  int32_t index;
  cnnb_ctx *device_ctx;
  void *device;
  cnnb_executor *executor;
  cnnb_trainer *trainer; /* training only */
  cnnb_ctx *datasource_ctx;
  void *datasource;
  cnnb_prefetch *input;                       /* reads batches ahead on its own thread */
  const cnnb_datasource_uint8 *uint8_batches; /* the datasource's uint8 extension when the
                                                 run's batches are uint8 (input_dtype.h) */
  char trace_track[32];                       /* "replica 0": its track in --trace_file */
} cnnb_replica;

struct cnnb_run {
  /* The caller's configuration, or, once the model described itself with a training
   * recipe, recipe_cfg: the caller's with the recipe's defaults (run/recipe.h). */
  const cnnb_run_config *cfg;
  cnnb_run_config recipe_cfg;
  cnnb_ctx *ctx;        /* "cnnbench": the run's own errors; every plugin's ctx is its
                           child (the flag table, the log level and rank tag) */
  bool profile;         /* executors time every node (bench/cnnb_profile) */
  cnnb_model_info info; /* the model's own facts (its describe()) */
  cnnb_run_facts facts; /* read-only once setup is over */
  cnnb_graph *graph;
  cnnb_replica *replicas;        /* [facts.replicas] */
  float **params, **grads;       /* [facts.replicas] device arenas, as the strategy takes them */
  cnnb_status bucket_status;     /* the first failure inside a bucket callback */
  cnnb_benchmark_log *log;       /* --benchmark_log_dir; NULL without */
  cnnb_checkpoints *checkpoints; /* --train_dir; NULL without */
  cnnb_evaluation *evaluation;   /* --eval_during_training_*; NULL without */
  cnnb_summaries *summaries;     /* --summary_verbosity's TensorBoard events; NULL without */
  int interrupted;               /* the signal that stopped the steps early (run/interrupted.h);
                                    0: none */
  int32_t interrupted_ranks;     /* how many ranks received it */
};

#endif
