/* run_config.h — one run, as the core's flags describe it: parsed and validated once, at
 * the top, into typed fields. Everything below the command line (setup, trainer,
 * learning-rate schedule, run loop, report) takes this struct and never reads a flag.
 * Plugins still read their own flags through their ctx. Host-internal.
 *
 * Strings are borrowed from the flag table, which outlives the run. Values the user
 * left to a plugin are 0 here ("the model's default batch size") and resolved at setup,
 * where the plugin's answer is known. */
#ifndef CNNB_RUN_CONFIG_H
#define CNNB_RUN_CONFIG_H

#include <stdbool.h>
#include <cnnb/dataset.h>
#include "flags/flags.h"
#include "exec/trainer.h"

typedef enum cnnb_run_mode {
  CNNB_MODE_TRAIN = 1,        /* forward, backward, update */
  CNNB_MODE_FORWARD_ONLY = 2, /* --forward_only: inference speed */
  CNNB_MODE_EVAL = 3,         /* --eval: forward with accuracy */
  CNNB_MODE_INPUT_ONLY = 4    /* --input_only: the input pipeline alone */
} cnnb_run_mode;

/* --input_dtype: how batches travel from the datasource to the device. */
typedef enum cnnb_input_dtype {
  CNNB_INPUT_AUTO = 0,   /* uint8 when datasource and device both offer it, else float32 */
  CNNB_INPUT_UINT8 = 1,  /* uint8 NHWC, normalized by the device; refused without both */
  CNNB_INPUT_FLOAT32 = 2 /* fp32 NCHW normalized by the datasource (every plugin can) */
} cnnb_input_dtype;

/* Flags a model's training recipe defaults, each true when the command line gave it
 * (momentum: --momentum or --rmsprop_momentum; epsilon: --rmsprop_epsilon or
 * --adam_epsilon). */
typedef struct cnnb_recipe_flags {
  bool optimizer, momentum, nesterov, epsilon, weight_decay, label_smoothing;
} cnnb_recipe_flags;

typedef struct cnnb_run_config {
  /* Plugins, by the names users pick them with. datasource "" lets the datasources'
   * probes choose. */
  const char *model, *device, *strategy, *datasource;
  const char *device_flag; /* --device as given: tf's "gpu" where device reads "cuda" */
  cnnb_run_mode mode;
  bool model_info; /* --model_info: describe the model, run nothing */

  /* Data. */
  const cnnb_dataset_info *dataset; /* --data_name (imagenet when empty) */
  const char *data_dir;             /* "" for none */
  int32_t num_classes;              /* the dataset's unless --num_classes */
  int32_t image_size;               /* 0: the model's */
  int32_t batch_size;               /* per replica; 0: the model's default (under --eval,
                                       --eval_batch_size when given, as tf) */
  int32_t eval_batch_size;          /* per replica, evaluations during training; 0: batch_size */
  int32_t input_prefetch_depth;     /* batches read ahead per replica: --datasets_prefetch_
                                       buffer_size; 0 under --nodatasets_use_prefetch */
  uint64_t seed;

  /* Steps. Exactly one of num_batches and num_epochs counts the timed steps. */
  int64_t num_batches;
  double num_epochs; /* > 0 when --num_epochs was given */
  int64_t num_warmup_batches;
  int64_t display_every;
  double display_perf_ewma; /* (0, 1]: the step lines' images/sec as tf's EWMA; 0: off */
  bool print_accuracy;      /* --print_training_accuracy, or any run without updates */

  /* Evaluation. Under --eval, --num_eval_batches / --num_eval_epochs already replaced
   * num_batches / num_epochs above (tf_cnn_benchmarks' rule); while training they size
   * each evaluation (0: not given, resolved at setup). */
  int64_t num_eval_batches;   /* > 0 when --num_eval_batches was given */
  double num_eval_epochs;     /* > 0 when --num_eval_epochs was given */
  int64_t eval_every_n_steps; /* --eval_during_training_every_n_steps; 0: off */
  double eval_every_n_epochs; /* --eval_during_training_every_n_epochs; 0: off */
  /* --eval_during_training_at_specified_steps / _epochs, in the order given. */
#define CNNB_MAX_EVAL_POINTS 256
  int64_t eval_at_steps[CNNB_MAX_EVAL_POINTS];
  size_t eval_at_steps_count;
  double eval_at_epochs[CNNB_MAX_EVAL_POINTS];
  size_t eval_at_epochs_count;
  bool eval_during_training; /* any of the four */
  double eval_interval_secs; /* > 0: --eval watches --train_dir (run/eval_watch.h) */

  /* Devices. */
  int32_t num_replicas;         /* --num_gpus */
  int32_t num_threads;          /* --num_intra_threads; 0: the device's choice */
  uint32_t precision;           /* cnnb_precision */
  const char *precision_flag;   /* "--precision=bf16" / "--use_fp16": what asked for it */
  const char *data_format;      /* as given (or tf's default), for the report */
  uint32_t data_format_request; /* cnnb_data_format: what the device is asked for */
  cnnb_input_dtype input_dtype; /* --input_dtype */
  bool step_graphs;             /* --cuda_graphs: record a step, replay it */

  /* Distribution. */
  const char *all_reduce_spec; /* "" when not given */
  int64_t gradient_bucket_bytes;
  double collective_timeout_s;    /* how long a rank waits for another before it is lost */
  int32_t gradient_repacking;     /* 0: none; K: gradients travel as K chunks */
  bool compact_gradient_transfer; /* 16-bit gradients between processes */

  /* Checkpoints, logs and traces. Paths are "" when not given. */
  const char *train_dir;              /* --train_dir */
  bool eval_random_weights;           /* --eval without --train_dir: the initial weights */
  int64_t save_model_steps;           /* 0: at the end only */
  double save_model_secs;             /* 0: off */
  int32_t max_ckpts_to_keep;          /* >= 1 */
  bool ignore_unreadable_checkpoints; /* train from step 0 when none reads back whole */
  const char *benchmark_log_dir;      /* --benchmark_log_dir */
  const char *benchmark_test_id;      /* --benchmark_test_id: benchmark_run.log's test_id */
  int32_t summary_verbosity;          /* --summary_verbosity, 0..3: TensorBoard scalars from 1 */
  int64_t save_summaries_steps;       /* training events every n timed steps; 0: none */
  const char *eval_dir;               /* --eval_dir: the evaluations' events ("": see the flag) */
  const char *trace_file;             /* --trace_file, or --tfprof_file's */
  const char *graph_file;             /* --graph_file: the model report, written before the run */
  int64_t trace_steps;                /* timed steps traced, from the first one */
  /* The launcher that started this process, from its environment (OpenMPI's
   * OMPI_COMM_WORLD_RANK / _SIZE, PMI_RANK / PMI_SIZE, or srun's SLURM_PROCID /
   * SLURM_STEP_NUM_TASKS): this process's place among the
   * processes it started; 0 of 1 without one. */
  int32_t launcher_rank, launcher_size;
  /* The Slurm job this process runs in, as its per-rank files are named by it, so a
   * requeued job (same job id, one more restart) or another job sharing the directory
   * never overwrites them: "job123", an array task "job45_7", a requeued run
   * "job123.restart1"; "" outside Slurm (SLURM_JOB_ID unset). */
  char job_tag[64];
  int32_t top_ops;        /* --tfprof_file: print the slowest op kinds of the
                             traced steps, this many; 0: none */
  double target_accuracy; /* (0, 1]: stop at this top-1; 0: off */
  /* The command line as given, for the benchmark log's record of the run; set by the
   * caller (cli.c), not by the flags (argc 0: none). */
  int argc;
  char *const *argv;

  /* Optimization: the optimizer, loss scaling and the learning-rate flags. The
   * schedule's dataset-dependent part (epoch size, global batch, the model's hook) is
   * filled at setup. */
  cnnb_trainer_config trainer;
  float label_smoothing; /* --label_smoothing, [0, 1) */
  /* Which of the flags a model's recipe (cnnb_model_info, 1.14) may default were given:
   * those keep their value, the rest take the recipe's (run/recipe.h). */
  cnnb_recipe_flags recipe_flags_set;
} cnnb_run_config;

/* The most --num_intra_threads may ask for: oversubscribing the cores this many times
 * over only slows a run, and far larger counts exhaust the OpenMP runtime. */
#define CNNB_MAX_THREADS_PER_CORE 4

/* Reads and checks every core flag. On a bad value or combination: CNNB_EINVAL with a
 * message naming the flag(s) in err (exit status 2). */
cnnb_status cnnb_run_config_from_flags(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                       size_t err_size);

/* "fp32" | "bf16" | "fp16", as --precision spells them; "unknown" otherwise. */
const char *cnnb_precision_name(uint32_t precision);
/* "training" | "forward only" | "evaluation" | "input-only" (tf_cnn_benchmarks' names of
 * its modes; input-only is cnnbench's own). */
const char *cnnb_run_mode_name(cnnb_run_mode mode);
/* The mode as the report's "Mode:" line and the benchmark log show it: the above, or
 * "training + evaluation" for training with --eval_during_training_* (tf's TRAIN_AND_EVAL). */
const char *cnnb_run_config_mode_label(const cnnb_run_config *cfg);

#endif
