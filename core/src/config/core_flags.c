/* flags_core.c — the core's own flags, named and defaulted as tf_cnn_benchmarks names and
 * defaults them (scripts/tf_cnn_benchmarks/benchmark_cnn.py) wherever the meaning is the
 * same, so its command lines carry over. Where tf_cnn_benchmarks uses None for "not
 * given", we use a zero default plus cnnb_flags_is_set(); deliberate departures say so
 * in their help text. Grouped by theme for --help. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config/core_flags.h"
#include "config/tf_flags.h"

typedef struct core_flag {
  const char *name;
  cnnb_flag_type type;
  const char *default_value;
  const char *const *choices; /* string flags restricted to these values */
  const char *help;
  /* PER_RANK: may differ between the ranks of a job (it changes only what this process
   * shows, writes for itself or how it uses its own cores, never the numbers), so the
   * ranks' comparison before the first step passes it over (run/world.c). SAME: must
   * have one value on every rank. Every row says which. */
  bool per_rank;
} core_flag;

#define PER_RANK true
#define SAME false

static const char *const list_formats[] = {"text", "json", NULL};
static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};
static const char *const data_formats[] = {"NCHW", "NHWC", NULL};
static const char *const input_dtypes[] = {"auto", "uint8", "float32", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "rmsprop", "adam", NULL};

static const core_flag general[] = {
    {"help", CNNB_FLAG_BOOL, "false", NULL,
     "Print this help, including every plugin's flags, and exit.", PER_RANK},
    {"version", CNNB_FLAG_BOOL, "false", NULL,
     "Print the cnnbench version and plugin ABI, and exit.", PER_RANK},
    {"list_plugins", CNNB_FLAG_BOOL, "false", NULL,
     "List every plugin found (kind, names offered, version, ABI, file) and, for rejected "
     "ones, why; then exit.",
     PER_RANK},
    {"list_format", CNNB_FLAG_STRING, "text", list_formats,
     "How --list_plugins prints: text (a table for people) or json (every plugin by kind "
     "with its flags' types, defaults and allowed values, and the core's flags, for tools "
     "such as cnnbench-tune; keys in docs/flags.md).",
     PER_RANK},
    {"model_info", CNNB_FLAG_BOOL, "false", NULL,
     "Print the model's layers, output shapes and parameter counts, and exit.", PER_RANK},
    {"log_level", CNNB_FLAG_STRING, "info", log_levels, "Least severe log lines shown on stderr.",
     PER_RANK},
};

static const core_flag model_and_data[] = {
    {"model", CNNB_FLAG_STRING, "trivial", NULL,
     "Name of the model to run (any name a model plugin offers; see --list_plugins).", SAME},
    {"batch_size", CNNB_FLAG_INT, "0", NULL,
     "Batch size per compute device; 0 uses the model's default.", SAME},
    {"num_batches", CNNB_FLAG_INT, "100", NULL,
     "Number of batches to run, excluding warmup. At most one of --num_batches and "
     "--num_epochs may be given.",
     SAME},
    {"num_warmup_batches", CNNB_FLAG_INT, "10", NULL,
     "Number of batches to run before timing (tf_cnn_benchmarks' default, 10).", SAME},
    {"display_every", CNNB_FLAG_INT, "10", NULL,
     "Number of local steps after which progress is printed out (at least 1).", PER_RANK},
    {"display_perf_ewma", CNNB_FLAG_FLOAT, "0", NULL,
     "If set (in (0, 1]), the step lines' images/sec is the exponentially weighted moving "
     "average of the step times with this weight for the newest step (tf_cnn_benchmarks' "
     "meaning: larger follows the current speed, smaller the whole history); 0: every step "
     "alike. The total images/sec is unchanged.",
     PER_RANK},
    {"num_epochs", CNNB_FLAG_FLOAT, "0", NULL,
     "Number of epochs to run, excluding warmup, over the datasource's epoch (synthetic data "
     "counts the dataset's training set). When not given, --num_batches counts the steps.",
     SAME},
    {"data_name", CNNB_FLAG_STRING, "", NULL,
     "Name of the dataset (its classes, image shape and epoch sizes are described by the "
     "datasource that reads it). When not given, guessed from --data_dir as "
     "tf_cnn_benchmarks does: the first known name inside the path (imagenet, cifar10, "
     "mnist, ...; a longer name holding it wins, '-' matching '_'); else imagenet.",
     SAME},
    {"data_dir", CNNB_FLAG_STRING, "", NULL,
     "Path to the dataset, read by a datasource that understands what it holds. If empty, "
     "synthetic data is used.",
     SAME},
    {"datasource", CNNB_FLAG_STRING, "", NULL,
     "Datasource plugin to read batches with; empty asks every datasource plugin whether "
     "it can serve --data_name and --data_dir, and takes the best (synthetic without --data_dir).",
     SAME},
    {"num_classes", CNNB_FLAG_INT, "0", NULL,
     "Number of classes; 0 uses the dataset's (1001 for imagenet, as tf_cnn_benchmarks).", SAME},
    {"image_size", CNNB_FLAG_INT, "0", NULL,
     "Input image height and width; 0 uses the model's default.", SAME},
    {"forward_only", CNNB_FLAG_BOOL, "false", NULL,
     "Benchmark inference only: forward pass and loss, no backward pass or update.", SAME},
    {"eval", CNNB_FLAG_BOOL, "false", NULL,
     "Evaluate instead of training: forward passes in inference mode over the validation "
     "set, top-1/top-5 hits summed over every timed step, replica and process, and the "
     "report prints 'Accuracy @ 1 = ... Accuracy @ 5 = ... [N examples]' as "
     "tf_cnn_benchmarks. Warm-up steps rerun the first batch and are not counted. It evaluates "
     "--train_dir's latest checkpoint; without --train_dir it is refused (tf_cnn_benchmarks: "
     "'Trained model directory not specified') unless --eval_random_weights is given.",
     SAME},
    {"eval_interval_secs", CNNB_FLAG_INT, "0", NULL,
     "With --eval: keep evaluating, each new checkpoint of --train_dir as it appears, "
     "looking every this many seconds, until SIGINT or SIGTERM (tf_cnn_benchmarks' eval "
     "loop beside a training run; tf evaluates the latest at every interval, new or not). "
     "0: evaluate once.",
     SAME},
    {"eval_random_weights", CNNB_FLAG_BOOL, "false", NULL,
     "With --eval and no --train_dir: evaluate the model's initial (random) weights, to time "
     "inference with its accuracy counted; the accuracy then means nothing.",
     SAME},
    {"eval_batch_size", CNNB_FLAG_INT, "0", NULL,
     "Batch size per device of evaluations: --eval's, and each --eval_during_training_* "
     "one (its own graph, executor and validation reader at that size); 0: --batch_size.",
     SAME},
    {"num_eval_batches", CNNB_FLAG_INT, "0", NULL,
     "Number of evaluation batches (per replica, excluding warmup) for --eval and for "
     "each --eval_during_training_* evaluation. When neither it nor --num_eval_epochs is "
     "given, --eval counts --num_batches (or --num_epochs over the validation set), as "
     "tf_cnn_benchmarks; an evaluation during training covers the validation set once "
     "when the datasource knows its size (tf_cnn_benchmarks would run the training's "
     "--num_batches or --num_epochs), else as many batches as training runs.",
     SAME},
    {"num_eval_epochs", CNNB_FLAG_FLOAT, "0", NULL,
     "Number of evaluation epochs over the validation set (rounded up to whole batches), "
     "instead of --num_eval_batches.",
     SAME},
    {"eval_during_training_every_n_steps", CNNB_FLAG_INT, "0", NULL,
     "Every n timed training steps, and once more at the end, evaluate the model in "
     "memory on the validation set (inference mode: batch norm on its moving statistics, "
     "no dropout) and print its accuracy. The evaluation's time is left out of the "
     "training's images/sec. Not with --eval, --forward_only or --input_only; 0: off.",
     SAME},
    {"eval_during_training_every_n_epochs", CNNB_FLAG_FLOAT, "0", NULL,
     "As --eval_during_training_every_n_steps, after every n training epochs (the first "
     "step past n, 2n, ... epochs, as tf_cnn_benchmarks); 0: off.",
     SAME},
    {"eval_during_training_at_specified_steps", CNNB_FLAG_STRING, "", NULL,
     "As --eval_during_training_every_n_steps, after each of these timed steps "
     "(comma-separated, e.g. 1000,5000), and once more at the end.",
     SAME},
    {"eval_during_training_at_specified_epochs", CNNB_FLAG_STRING, "", NULL,
     "As --eval_during_training_every_n_epochs, after each of these epochs (comma-separated "
     "numbers, e.g. 1,2.5: the step completing each, as tf_cnn_benchmarks), and once more "
     "at the end.",
     SAME},
    {"input_only", CNNB_FLAG_BOOL, "false", NULL,
     "Run only the input pipeline (the datasource and its prefetch, no model) and report "
     "its images/sec, to see whether input or compute bounds a run. Not with --eval, "
     "--forward_only or --eval_during_training_*.",
     SAME},
    {"print_training_accuracy", CNNB_FLAG_BOOL, "false", NULL,
     "Calculate and print top-1 and top-5 training accuracy with each step line.", SAME},
    {"seed", CNNB_FLAG_INT, "1234", NULL,
     "Random seed for weights and synthetic data (tf_cnn_benchmarks' --tf_random_seed, "
     "which also works).",
     SAME},
};

static const core_flag devices[] = {
    {"device", CNNB_FLAG_STRING, "cpu", NULL,
     "Device plugin to compute on; tf_cnn_benchmarks' names work too: gpu or GPU is cuda, "
     "CPU is cpu (tf_cnn_benchmarks defaults to gpu; we default to what every machine "
     "has).",
     SAME},
    {"num_gpus", CNNB_FLAG_INT, "1", NULL,
     "Number of devices to run on (replicas in this process), whatever their kind.", SAME},
    {"num_intra_threads", CNNB_FLAG_INT, "0", NULL,
     "Threads for intra-op parallelism; 0 lets the device choose. At most 4 per core.", PER_RANK},
    {"cuda_graphs", CNNB_FLAG_BOOL, "false", NULL,
     "Record the device work of one step after two ordinary ones and replay it every later "
     "step: one launch a step instead of one per kernel (CUDA graphs; any device offering "
     "CNNB_EXT_STEP_GRAPH). Needs one replica in one process, a batch that never changes "
     "(synthetic data) and no dropout; otherwise a warning says why steps run as usual.",
     SAME},
    {"input_dtype", CNNB_FLAG_STRING, "auto", input_dtypes,
     "How batches travel from the datasource to the device: auto sends uint8 NHWC pixels "
     "that the device normalizes (a quarter of the bytes) when both offer it, else float32; "
     "uint8 or float32 forces one (uint8 is refused when either side lacks it).",
     SAME},
    {"precision", CNNB_FLAG_STRING, "fp32", precisions,
     "Compute precision of activations and gradients; master weights stay fp32.", SAME},
    {"data_format", CNNB_FLAG_STRING, "NCHW", data_formats,
     "Activations' layout asked of the device (tf_cnn_benchmarks' flag and default). Given, "
     "the cuda device runs fp32 in it; not given, each device runs its fastest (cuda: NHWC "
     "with TF32 on sm_80 and newer; the cpu device always picks oneDNN's own).",
     SAME},
    {"use_fp16", CNNB_FLAG_BOOL, "false", NULL,
     "Same as --precision=fp16 (tf_cnn_benchmarks' spelling).", SAME},
    {"fp16_loss_scale", CNNB_FLAG_FLOAT, "0", NULL,
     "With fp16, multiply the loss by this before backward and divide gradients by it; "
     "0 uses the model's default (128).",
     SAME},
    {"fp16_enable_auto_loss_scale", CNNB_FLAG_BOOL, "false", NULL,
     "With fp16, adjust the loss scale automatically during training.", SAME},
    {"fp16_inc_loss_scale_every_n", CNNB_FLAG_INT, "1000", NULL,
     "With automatic loss scaling, increase the loss scale every n steps.", SAME},
    /* tf_cnn_benchmarks' Intel OpenMP settings, given to GNU OpenMP (cli/openmp_env.h). */
    {"mkl", CNNB_FLAG_BOOL, "false", NULL,
     "Apply --kmp_blocktime, --kmp_affinity, --kmp_settings and --num_intra_threads to the "
     "OpenMP runtime of the cpu device's oneDNN, as tf_cnn_benchmarks sets Intel OpenMP's "
     "KMP_* variables. The runtime here is GNU OpenMP, so they become its variables "
     "(OMP_WAIT_POLICY, GOMP_SPINCOUNT, OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, "
     "OMP_DISPLAY_ENV, OMP_NUM_THREADS), replacing what the environment holds; the run "
     "restarts itself once, before any work, so the runtime reads them. Binding pins the "
     "main thread too, and the threads it starts after (the datasource's) inherit that.",
     PER_RANK},
    {"kmp_blocktime", CNNB_FLAG_INT, "0", NULL,
     "With --mkl: milliseconds an OpenMP thread spins after a parallel region before it "
     "sleeps (0: at once, OMP_WAIT_POLICY=PASSIVE; N: GOMP_SPINCOUNT measured as N ms of "
     "libgomp's spin loop on this CPU).",
     PER_RANK},
    {"kmp_affinity", CNNB_FLAG_STRING, "granularity=fine,verbose,compact,1,0", NULL,
     "With --mkl: Intel's KMP_AFFINITY, translated: compact -> OMP_PROC_BIND=close, "
     "scatter or balanced -> spread (OMP_PLACES=cores with permute >= 1 or granularity=core, "
     "else threads), none or disabled -> OMP_PROC_BIND=false, proclist=[...],explicit -> "
     "GOMP_CPU_AFFINITY, verbose -> OMP_DISPLAY_AFFINITY. An offset has no GNU spelling and "
     "is refused.",
     PER_RANK},
    {"kmp_settings", CNNB_FLAG_INT, "1", NULL,
     "With --mkl: 1 prints the OpenMP runtime's settings at start (OMP_DISPLAY_ENV=VERBOSE, "
     "on standard error), 0 does not.",
     PER_RANK},
};

static const core_flag distribution[] = {
    {"variable_update", CNNB_FLAG_STRING, "parameter_server", NULL,
     "Strategy plugin for variables and gradients; tf_cnn_benchmarks' default, "
     "parameter_server (one replica trains as with independent).",
     SAME},
    {"all_reduce_spec", CNNB_FLAG_STRING, "", NULL,
     "All-reduce algorithm for replicated strategies, e.g. nccl, xring, pscpu; empty lets "
     "the strategy choose.",
     SAME},
    {"gradient_bucket_mb", CNNB_FLAG_FLOAT, "25", NULL,
     "Gradients are grouped into buckets of about this many MiB (> 0), each reduced as "
     "soon as backward finishes it.",
     SAME},
    {"collective_timeout_s", CNNB_FLAG_FLOAT, "60", NULL,
     "Longest wait (seconds) for another process in a collective: past it the process "
     "counts as lost and every rank ends with an error naming it.",
     SAME},
    {"gradient_repacking", CNNB_FLAG_INT, "0", NULL,
     "Replicated strategies: pack the gradients into this many chunks before the "
     "all-reduce (tf_cnn_benchmarks' flag); 0 reduces each bucket as it is.",
     SAME},
    {"compact_gradient_transfer", CNNB_FLAG_BOOL, "false", NULL,
     "Send gradients between processes as 16 bits (bf16; fp16 under --precision=fp16), "
     "half the bytes, summed in fp32.",
     SAME},
};

static const core_flag optimization[] = {
    {"optimizer", CNNB_FLAG_STRING, "sgd", optimizers,
     "Optimizer to use. A model with a training recipe of its own (--model_info shows it) "
     "defaults to the recipe's optimizer, momentum, Nesterov, epsilon, weight decay and label "
     "smoothing; each flag given wins over the recipe's value.",
     SAME},
    {"init_learning_rate", CNNB_FLAG_FLOAT, "0", NULL,
     "Initial learning rate for training; when not given, the model's default.", SAME},
    {"piecewise_learning_rate_schedule", CNNB_FLAG_STRING, "", NULL,
     "A piecewise learning rate schedule over epochs, LR0;E1;LR1;...;En;LRn: the rate is "
     "LRi while E(i-1) <= epoch < Ei. No other learning rate flag may be given with it.",
     SAME},
    {"num_epochs_per_decay", CNNB_FLAG_FLOAT, "0", NULL,
     "Epochs after which the learning rate decays (staircase); 0: no decay.", SAME},
    {"learning_rate_decay_factor", CNNB_FLAG_FLOAT, "0", NULL,
     "Learning rate decay factor, applied every --num_epochs_per_decay epochs; 0: no decay.", SAME},
    {"minimum_learning_rate", CNNB_FLAG_FLOAT, "0", NULL,
     "The learning rate never decays below this value.", SAME},
    {"num_learning_rate_warmup_epochs", CNNB_FLAG_FLOAT, "0", NULL,
     "Increase the learning rate linearly to its initial value over these first epochs.", SAME},
    {"momentum", CNNB_FLAG_FLOAT, "0.9", NULL,
     "Momentum for training (Nesterov, as tf_cnn_benchmarks, unless --nonesterov), in [0, 1).",
     SAME},
    {"nesterov", CNNB_FLAG_BOOL, "true", NULL,
     "--optimizer=momentum: Nesterov momentum, as tf_cnn_benchmarks; --nonesterov: plain "
     "momentum, as torch.optim.SGD.",
     SAME},
    {"rmsprop_decay", CNNB_FLAG_FLOAT, "0.9", NULL, "Decay term for RMSProp, in [0, 1).", SAME},
    {"rmsprop_momentum", CNNB_FLAG_FLOAT, "0.9", NULL, "Momentum in RMSProp, in [0, 1).", SAME},
    {"rmsprop_epsilon", CNNB_FLAG_FLOAT, "1.0", NULL, "Epsilon term for RMSProp.", SAME},
    {"adam_beta1", CNNB_FLAG_FLOAT, "0.9", NULL, "Beta1 term for the Adam optimizer, in [0, 1).",
     SAME},
    {"adam_beta2", CNNB_FLAG_FLOAT, "0.999", NULL, "Beta2 term for the Adam optimizer, in [0, 1).",
     SAME},
    {"adam_epsilon", CNNB_FLAG_FLOAT, "1e-8", NULL, "Epsilon term for the Adam optimizer.", SAME},
    {"weight_decay", CNNB_FLAG_FLOAT, "0.00004", NULL, "Weight decay (L2) factor for training.",
     SAME},
    {"gradient_clip", CNNB_FLAG_FLOAT, "0", NULL,
     "Gradient clipping magnitude; 0 disables clipping.", SAME},
    {"label_smoothing", CNNB_FLAG_FLOAT, "0", NULL,
     "Label smoothing s in [0, 1): the loss's target is (1 - s) one-hot + s / classes.", SAME},
};

static const core_flag checkpoints_and_logs[] = {
    {"train_dir", CNNB_FLAG_STRING, "", NULL,
     "Directory for checkpoints (safetensors, torchvision's parameter names where the model "
     "has them). Training saves there every --save_model_steps / --save_model_secs and at the "
     "end, and resumes from its latest valid checkpoint when there is one (step, learning-rate "
     "schedule, optimizer state, loss scale); --eval evaluates its latest checkpoint. Empty: "
     "no checkpoints.",
     SAME},
    {"save_model_steps", CNNB_FLAG_INT, "0", NULL,
     "With --train_dir, save a checkpoint every n global steps; 0: only at the end (and as "
     "--save_model_secs says).",
     SAME},
    {"save_model_secs", CNNB_FLAG_FLOAT, "0", NULL,
     "With --train_dir, save a checkpoint when this many seconds passed since the last one; "
     "0: off.",
     SAME},
    {"max_ckpts_to_keep", CNNB_FLAG_INT, "5", NULL,
     "With --train_dir, how many of the newest checkpoints to keep; older ones are deleted.", SAME},
    {"ignore_unreadable_checkpoints", CNNB_FLAG_BOOL, "false", NULL,
     "With --train_dir: when it holds checkpoint files and none reads back whole, train from "
     "step 0 anyway instead of stopping (the files are kept, never deleted or saved over).",
     SAME},
    {"benchmark_log_dir", CNNB_FLAG_STRING, "", NULL,
     "Write a JSON-lines log of the run into this directory (one file per rank): the run's "
     "configuration, machine and plugins, every displayed step, and a final summary. Keys "
     "are documented in docs/checkpoints-and-logs.md. Empty: no log.",
     PER_RANK},
    {"benchmark_test_id", CNNB_FLAG_STRING, "", NULL,
     "A name for this run, written as test_id in --benchmark_log_dir's benchmark_run.log "
     "(tf_cnn_benchmarks' field); empty: null there.",
     PER_RANK},
    {"summary_verbosity", CNNB_FLAG_INT, "0", NULL,
     "TensorBoard summaries, as tf_cnn_benchmarks' levels: 0 none; 1 scalars (total_loss, "
     "learning_rate, images/sec, loss_scale, training accuracy with "
     "--print_training_accuracy) every --save_summaries_steps into --train_dir's events "
     "file, and the evaluations' eval/Accuracy@1 and @5 into --eval_dir; 2 and 3 (tf's "
     "histograms and images) write level 1's scalars here.",
     SAME},
    {"save_summaries_steps", CNNB_FLAG_INT, "0", NULL,
     "With --summary_verbosity and --train_dir, write the training scalars every n timed "
     "steps; 0: no training events.",
     SAME},
    {"eval_dir", CNNB_FLAG_STRING, "", NULL,
     "Directory for the evaluations' TensorBoard events (--eval, --eval_during_training_*): "
     "given, they are written whatever --summary_verbosity; empty: --train_dir/eval when "
     "--summary_verbosity is at least 1 (tf_cnn_benchmarks' default, /tmp/tf_cnn_benchmarks/"
     "eval, is not used: a run writes only where it is told).",
     SAME},
    {"trace_file", CNNB_FLAG_STRING, "", NULL,
     "Write a Chrome trace-event JSON file (Perfetto, chrome://tracing) of --trace_steps "
     "steady-state steps: every node's forward and backward, the optimizer update, the data "
     "wait and each gradient bucket's communication, one process per rank (\".rankN\" is "
     "added to the name under several ranks). Empty: no trace.",
     PER_RANK},
    {"trace_steps", CNNB_FLAG_INT, "3", NULL,
     "With --trace_file, how many timed steps to trace, from the first step after warm-up.",
     PER_RANK},
    {"datasets_prefetch_buffer_size", CNNB_FLAG_INT, "2", NULL,
     "Batches each replica's input thread reads ahead of the step (tf_cnn_benchmarks' "
     "name; its 1 batch on the host and 1 in its MultiDeviceIterator make the 2 here), "
     "1 to 64. Memory: this many batches more per replica.",
     PER_RANK},
    {"datasets_use_prefetch", CNNB_FLAG_BOOL, "true", NULL,
     "Read batches ahead of the step on an input thread (tf_cnn_benchmarks' name); false: "
     "each step reads its batch when it needs it, so the step time includes the input "
     "pipeline's.",
     PER_RANK},
    {"tfprof_file", CNNB_FLAG_STRING, "", NULL,
     "tf_cnn_benchmarks' profile of the first 10 timed steps, onto what cnnbench has: "
     "their trace written to this file (Chrome's format, as --trace_file with "
     "--trace_steps=10; tf writes a tfprof ProfileProto), then the 20 op kinds that took "
     "the most time printed, per step. Empty: none.",
     PER_RANK},
    {"graph_file", CNNB_FLAG_STRING, "", NULL,
     "Write the model's graph to this file before the run: every layer, its output shape "
     "and parameters, as --model_info prints them (tf_cnn_benchmarks writes a GraphDef "
     "there). Empty: none.",
     PER_RANK},
    {"use_chrome_trace_format", CNNB_FLAG_BOOL, "true", NULL,
     "tf_cnn_benchmarks' choice of --trace_file's format: true (its default), the Chrome "
     "trace format, the only one written here; false (tf's StepStats proto) is refused.",
     PER_RANK},
    {"target_accuracy", CNNB_FLAG_FLOAT, "0", NULL,
     "Time to accuracy (as MLPerf): stop training once top-1 accuracy on the validation set "
     "reaches this fraction at one of the --eval_during_training_* evaluations, and report "
     "the wall time, images and epochs it took (tf_cnn_benchmarks' "
     "--stop_at_top_1_accuracy, which also works). Needs an evaluation during training; 0: off.",
     SAME},
};

static cnnb_status declare_theme(cnnb_flags *flags, const char *theme, const core_flag *list,
                                 size_t count) {
  cnnb_flag_registry *r = cnnb_flags_theme_registry(flags, theme);
  if (!r) return CNNB_ENOMEM;
  for (size_t i = 0; i < count; i++) {
    const core_flag *f = &list[i];
    cnnb_status st = f->choices ? cnnb_flags_declare_choice(r, f->name, f->default_value,
                                                            f->choices, f->help)
                                : cnnb_flag_declare(r, f->name, f->type, f->default_value, f->help);
    if (st == CNNB_OK && f->per_rank) st = cnnb_flag_mark_per_rank(r, f->name);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

#define DECLARE(theme, list) declare_theme(flags, theme, list, sizeof list / sizeof list[0])

cnnb_status cnnb_flags_declare_core(cnnb_flags *flags) {
  if (!flags) return CNNB_EINVAL;
  cnnb_status st = DECLARE("General", general);
  if (st == CNNB_OK) {
    /* --plugin is repeatable: every value is kept, in order, joined with ':' like
     * CNNB_PLUGIN_PATH (so cnnb_flags_string(flags, "plugin") reads "a.so:b.so"). */
    st = cnnb_flags_declare_repeated(cnnb_flags_theme_registry(flags, "General"), "plugin", ':',
                                     "Load the plugin in FILE as well as those found on the "
                                     "plugin path; repeat the flag for several files. "
                                     "Values are joined with ':'.");
  }
  /* Which files are loaded may differ per machine; what they offer is compared (the
   * plugins' names, their flags). */
  if (st == CNNB_OK)
    st = cnnb_flag_mark_per_rank(cnnb_flags_theme_registry(flags, "General"), "plugin");
  if (st == CNNB_OK) {
    /* Read where it stands by the parser (flags_parse.c); declared so --help shows it and
     * the benchmark log records which files a run read. */
    st = cnnb_flags_declare_repeated(cnnb_flags_theme_registry(flags, "General"), "flagfile", ':',
                                     "Read more flags from FILE, one --flag=value a line "
                                     "('#' starts a comment line); a flagfile may name "
                                     "another. Flags after it on the command line win.");
  }
  /* The flags a flagfile sets are compared, not its path. */
  if (st == CNNB_OK)
    st = cnnb_flag_mark_per_rank(cnnb_flags_theme_registry(flags, "General"), "flagfile");
  if (st == CNNB_OK) st = DECLARE("Model and data", model_and_data);
  if (st == CNNB_OK) st = DECLARE("Devices", devices);
  if (st == CNNB_OK) st = DECLARE("Distribution", distribution);
  if (st == CNNB_OK) st = DECLARE("Optimization", optimization);
  if (st == CNNB_OK) st = DECLARE("Checkpoints and logs", checkpoints_and_logs);
  if (st == CNNB_OK) st = cnnb_flags_alias(flags, "tf_random_seed", "seed");
  /* tf's name for the same stop: at an evaluation during training, top-1 reaching it. */
  if (st == CNNB_OK) st = cnnb_flags_alias(flags, "stop_at_top_1_accuracy", "target_accuracy");
  /* The rest of tf_cnn_benchmarks' flags, so its command lines parse (tf_flags.h). */
  if (st == CNNB_OK) st = cnnb_tf_flags_declare(flags);
  return st;
}
