/* benchmark_setup.h — the pieces of one run and how they are put together and taken
 * apart; benchmark.c drives the steps. Host-internal (cnnb_profile reuses it).
 *
 * Order, so nothing is allocated for a run that cannot work: resolve the model, ask its
 * facts, build the graph; resolve the device, strategy and datasource plugins; create
 * every replica's device and check it runs every op of the graph; create the strategy
 * (which tells this process's rank, and refuses what it cannot do before any arena
 * exists); then plan and allocate (executors), let the ranks agree on the run and
 * broadcast the initial values, and last give each replica its shard of the data (and,
 * evaluating during training, a second inference-mode set: evaluation.h). --input_only
 * stops short of the executors. */
#ifndef CNNB_BENCHMARK_SETUP_H
#define CNNB_BENCHMARK_SETUP_H

#include "exec/executor.h"
#include "flags/flags.h"
#include "loader/loader.h"
#include "exec/prefetch.h"
#include "config/run_config.h"
#include "exec/trainer.h"

typedef struct cnnb_run cnnb_run;
typedef struct cnnb_benchmark_log cnnb_benchmark_log; /* benchmark_log.h */

/* A plugin the run uses, as the user picked it. */
typedef struct cnnb_run_plugin {
  const char *name;          /* what the user picked it by: "resnet50", "cpu" */
  const cnnb_plugin *plugin; /* the loader's host-sized copy: missing slots read NULL */
  const char *path;          /* its file */
  char *label;               /* "model plugin 'resnet' (FILE)": for crash reports */
} cnnb_run_plugin;

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
  const cnnb_datasource_uint8 *uint8_batches; /* the datasource's uint8 extension when the
                                                 run's batches are uint8 (input_dtype.h) */
  char trace_track[32];   /* "replica 0": its track in --trace_file */
  cnnb_batch held;        /* --eval's warm-up: the first batch, rerun until timing starts */
  bool holding;

  /* --eval_during_training_*: the same device again in inference mode, an executor of
   * the graph on it (its arenas refreshed from the training executor's before each
   * evaluation: evaluation.h), and a datasource instance reading the validation split. */
  cnnb_ctx *eval_device_ctx;
  void *eval_device;
  cnnb_executor *eval_executor;
  cnnb_ctx *eval_datasource_ctx;
  void *eval_datasource;
  cnnb_prefetch *eval_input;
} cnnb_replica;

struct cnnb_run {
  const cnnb_run_config *cfg;
  cnnb_ctx *ctx;           /* "cnnbench": the run's own errors; every plugin's ctx is its
                              child (the flag table, the log level and rank tag) */
  bool profile;            /* executors time every node (bench/cnnb_profile) */

  cnnb_run_plugin model, device, strategy, datasource;
  const cnnb_model_vtable *model_vt;
  const cnnb_device_vtable *device_vt;
  const cnnb_strategy_vtable *strategy_vt;
  const cnnb_datasource_vtable *datasource_vt;
  cnnb_ctx *model_ctx, *strategy_ctx;

  cnnb_model_info info;
  int32_t batch_size;      /* per replica */
  int32_t image_size;
  int32_t num_classes;
  int32_t num_replicas;    /* in this process */
  int32_t rank, world_size;/* the strategy's: processes taking part, and this one */
  int64_t examples_per_epoch; /* the datasource's; 0 when it does not know */
  int64_t num_batches;     /* timed steps: --num_batches, or --num_epochs in steps */
  bool input_uint8;        /* batches travel as uint8 NHWC, normalized by the device */
  int64_t eval_examples_per_epoch; /* the validation split's, while training; 0: unknown */
  int64_t num_eval_batches;/* per evaluation during training (evaluation.h) */
  const char *device_description; /* replica 0's describe(), or the plugin's description */

  cnnb_graph *graph;
  cnnb_replica *replicas;
  void *strategy_state;
  float **params;          /* [num_replicas] device pointers, for the strategy */
  float **grads;
  cnnb_status bucket_status; /* the first failure inside a bucket callback */
  cnnb_benchmark_log *log; /* --benchmark_log_dir; NULL without */

  /* --train_dir (checkpoint.h): the global step the run starts at (the resumed
   * checkpoint's, else 0), the checkpoint found at setup until its optimizer state is
   * restored, and when the last save ended (CLOCK_MONOTONIC seconds). */
  int64_t start_step;
  struct cnnb_safetensors *resume_file;
  char *resume_path;
  double last_save_time;
};

/* Resolves the model, reads its facts (the sizes the config leaves to it) and builds
 * its graph with the loss. Enough for --model_info. run->ctx becomes a child of `parent`
 * (its flags and log settings; NULL: none). `cfg` and `parent` must outlive run. */
cnnb_status cnnb_run_open(cnnb_run *run, const cnnb_run_config *cfg, cnnb_ctx *parent,
                          cnnb_loader *loader);
/* Everything else: device, strategy and datasource plugins, replicas, strategy, data. */
cnnb_status cnnb_run_prepare(cnnb_run *run, cnnb_loader *loader);
/* Frees what open and prepare made, in reverse; safe after a failure at any point. */
void cnnb_run_close(cnnb_run *run);

/* The pieces cnnb_run_prepare makes, for evaluation.c to make a second set: a device
 * instance for replica `index` (training or inference kernels), a datasource instance
 * for its shard (training or validation split) and the thread reading it ahead. Each
 * creates *ctx as a child of the run's; on failure the message names the flag. */
cnnb_status cnnb_run_create_device(cnnb_run *run, int32_t index, bool training,
                                   cnnb_ctx **ctx, void **device);
cnnb_status cnnb_run_create_datasource(cnnb_run *run, int32_t index, bool training,
                                       cnnb_ctx **ctx, void **datasource);
cnnb_status cnnb_run_start_input(cnnb_run *run, int32_t index, cnnb_ctx *ctx, void *datasource,
                                 const cnnb_datasource_uint8 *uint8_batches,
                                 cnnb_prefetch **input);

/* Examples this process's datasource instances skipped as unreadable, summed over its
 * replicas (CNNB_EXT_DATASOURCE_STATS, asked of each instance, then of the plugin's
 * descriptor; 0 for a datasource that answers neither): the training (or --eval)
 * instances, or with `evaluation` those evaluating during training. */
int64_t cnnb_run_skipped_examples(const cnnb_run *run, bool evaluation);

/* Whether the run's datasource serves the same batch at every step
 * (CNNB_EXT_DATASOURCE_CONSTANT): executors then upload it once. */
bool cnnb_run_constant_batch(const cnnb_run *run);

/* "<what>: <message of ctx>" into the run's ctx; returns status. A plugin that failed
 * without a message gets its status's name and a note saying so. */
cnnb_status cnnb_run_fail(cnnb_run *run, cnnb_status status, cnnb_ctx *from, const char *what);

#endif
