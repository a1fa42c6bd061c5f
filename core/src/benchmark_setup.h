/* benchmark_setup.h — the pieces of one run and how they are put together and taken
 * apart; benchmark.c drives the steps. Host-internal. */
#ifndef CNNB_BENCHMARK_SETUP_H
#define CNNB_BENCHMARK_SETUP_H

#include "executor.h"
#include "host.h"
#include "loader.h"
#include "prefetch.h"
#include "trainer.h"

typedef struct cnnb_run cnnb_run;

/* One replica: a device instance, the executor running the graph on it, its optimizer
 * and its own datasource. */
typedef struct cnnb_replica {
  cnnb_run *run;   /* for the executor's bucket callback */
  int32_t index;
  cnnb_ctx *device_ctx;
  void *device;
  cnnb_executor *executor;
  cnnb_trainer *trainer;
  cnnb_ctx *datasource_ctx;
  void *datasource;
  cnnb_prefetch *input;   /* reads batches ahead on its own thread */
  const int32_t *labels;  /* of the batch in use (for accuracy) */
} cnnb_replica;

struct cnnb_run {
  const cnnb_flags *flags;
  cnnb_ctx *ctx; /* "cnnbench": the run's own errors */

  const char *model_name, *device_name, *strategy_name, *datasource_name;
  const cnnb_model_vtable *model;
  const cnnb_plugin *device_plugin; /* for its extensions */
  const cnnb_device_vtable *device;
  const cnnb_strategy_vtable *strategy;
  const cnnb_datasource_vtable *datasource;
  cnnb_ctx *model_ctx, *strategy_ctx;

  uint32_t dataset;        /* cnnb_dataset_kind */
  const char *dataset_name;
  cnnb_model_info info;
  int32_t batch_size;      /* per replica */
  int32_t image_size;
  int32_t num_classes;
  uint32_t precision;
  bool training;           /* false: --forward_only / --eval */
  bool evaluation;
  int64_t examples_per_epoch;

  cnnb_graph *graph;
  int32_t num_replicas;
  cnnb_replica *replicas;
  void *strategy_state;
  float **params;          /* [num_replicas] device pointers, for the strategy */
  float **grads;
  cnnb_status bucket_status; /* the first failure inside a bucket callback */
};

/* Resolves the model named by the flags, the dataset and the model's defaults. */
cnnb_status cnnb_run_resolve(cnnb_run *run, cnnb_loader *loader);
/* Resolves the device, strategy and datasource plugins (not needed for --model_info). */
cnnb_status cnnb_run_resolve_runtime(cnnb_run *run, cnnb_loader *loader);
/* Builds the model's graph (and its loss when training). */
cnnb_status cnnb_run_build_graph(cnnb_run *run);
/* Devices, executors, strategy, datasources and optimizers for every replica. */
cnnb_status cnnb_run_setup_replicas(cnnb_run *run);
void cnnb_run_teardown(cnnb_run *run);

/* "<what>: <message of ctx>" into the run's ctx; returns status. */
cnnb_status cnnb_run_fail(cnnb_run *run, cnnb_status status, cnnb_ctx *from, const char *what);

#endif
