/* run_config.c — the core's flags read once into a cnnb_run_config (run_config.h), each
 * checked where it is read, so every refusal names the flag the user typed. The rules
 * that need a plugin's answer (the model's defaults, the datasource's epoch) are checked
 * at setup instead. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include "config/run_config.h"

#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/host_ctx.h"
#include "exec/loss_scale.h"

/* Largest values that still mean something; beyond them a flag is a typo. */
#define MAX_BATCH_SIZE (1 << 20)
#define MAX_IMAGE_SIZE 4096
#define MAX_REPLICAS 64
#define MAX_CLASSES (1 << 24)
#define MAX_BUCKET_MB 1e6
/* A day: longer is a hang by any measure; a collective that slow is a lost rank. */
#define MAX_COLLECTIVE_TIMEOUT_S 86400.0
/* tf_cnn_benchmarks packs into a handful of chunks; thousands is a typo. */
#define MAX_REPACKING 1024

/* tf_cnn_benchmarks' --tfprof_file: _NUM_STEPS_TO_PROFILE and _NUM_OPS_TO_PRINT. */
#define TFPROF_STEPS 10
#define TFPROF_TOP_OPS 20

static cnnb_status refuse(char *err, size_t size, const char *fmt, ...) CNNB_PRINTF(3, 4);
static cnnb_status refuse(char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return CNNB_EINVAL;
}

/* The precisions, as --precision spells them. */
static const struct {
  const char *name, *flag;
  uint32_t precision;
} precisions[] = {{"fp32", "--precision=fp32", CNNB_PRECISION_FP32},
                  {"bf16", "--precision=bf16", CNNB_PRECISION_BF16},
                  {"fp16", "--precision=fp16", CNNB_PRECISION_FP16}};

const char *cnnb_precision_name(uint32_t precision) {
  for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++)
    if (precisions[i].precision == precision) return precisions[i].name;
  return "unknown";
}

const char *cnnb_run_mode_name(cnnb_run_mode mode) {
  switch (mode) {
    case CNNB_MODE_TRAIN: return "training";
    case CNNB_MODE_FORWARD_ONLY: return "forward only"; /* tf's constants.BenchmarkMode */
    case CNNB_MODE_EVAL: return "evaluation";
    case CNNB_MODE_INPUT_ONLY: return "input-only";
  }
  return "unknown";
}

const char *cnnb_run_config_mode_label(const cnnb_run_config *cfg) {
  /* tf's get_mode_from_params: training that evaluates on the way is its own mode. */
  if (cfg->mode == CNNB_MODE_TRAIN && cfg->eval_during_training) return "training + evaluation";
  return cnnb_run_mode_name(cfg->mode);
}

/* An int flag inside [lo, hi]; `meaning` finishes the sentence "must be in [lo, hi]". */
static cnnb_status int_in(const cnnb_flags *flags, const char *name, int64_t lo, int64_t hi,
                          const char *meaning, int64_t *out, char *err, size_t size) {
  int64_t v = cnnb_flags_int(flags, name);
  if ((v < lo || v > hi) && hi >= INT64_MAX / 2) /* no upper bound worth naming */
    return refuse(err, size, "--%s=%lld: must be at least %lld%s", name, (long long)v,
                  (long long)lo, meaning);
  if (v < lo || v > hi)
    return refuse(err, size, "--%s=%lld: must be in [%lld, %lld]%s", name, (long long)v,
                  (long long)lo, (long long)hi, meaning);
  *out = v;
  return CNNB_OK;
}

/* A float flag in [lo, hi) (hi_open) or [lo, hi]. */
static cnnb_status float_in(const cnnb_flags *flags, const char *name, double lo, double hi,
                            bool hi_open, double *out, char *err, size_t size) {
  double v = cnnb_flags_float(flags, name);
  if (!(v >= lo && (hi_open ? v < hi : v <= hi)))
    return refuse(err, size, "--%s=%g: must be in [%g, %g%c", name, v, lo, hi, hi_open ? ')' : ']');
  *out = v;
  return CNNB_OK;
}

static cnnb_status read_plugins_and_mode(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                         size_t size) {
  static const struct {
    const char *flag;
    size_t offset;
  } names[] = {{"model", offsetof(cnnb_run_config, model)},
               {"device", offsetof(cnnb_run_config, device)},
               {"variable_update", offsetof(cnnb_run_config, strategy)}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = cnnb_flags_string(flags, names[i].flag);
    if (!*v)
      return refuse(err, size, "--%s is empty: name a plugin (see --list_plugins)", names[i].flag);
    memcpy((char *)cfg + names[i].offset, &v, sizeof v);
  }
  /* tf_cnn_benchmarks' device names: gpu (in either case) is the cuda device. */
  cfg->device_flag = cfg->device;
  if (strcmp(cfg->device, "gpu") == 0 || strcmp(cfg->device, "GPU") == 0) cfg->device = "cuda";
  else if (strcmp(cfg->device, "CPU") == 0) cfg->device = "cpu";
  cfg->datasource = cnnb_flags_string(flags, "datasource");
  cfg->model_info = cnnb_flags_bool(flags, "model_info");
  bool eval = cnnb_flags_bool(flags, "eval"), forward = cnnb_flags_bool(flags, "forward_only");
  bool input = cnnb_flags_bool(flags, "input_only");
  if (eval && forward)
    return refuse(err, size, "--eval and --forward_only both given: give one of them");
  if (input && (eval || forward))
    return refuse(err, size,
                  "--input_only and %s both given: --input_only runs no model, so give one of them",
                  eval ? "--eval" : "--forward_only");
  cfg->mode = eval      ? CNNB_MODE_EVAL
              : forward ? CNNB_MODE_FORWARD_ONLY
              : input   ? CNNB_MODE_INPUT_ONLY
                        : CNNB_MODE_TRAIN;
  return CNNB_OK;
}

/* --num_eval_batches / --num_eval_epochs and the --eval_during_training_* pair, after
 * the steps (under --eval they replace --num_batches / --num_epochs). */
/* A comma-separated list of steps (integers >= 1) or epochs (numbers > 0), as tf's
 * DEFINE_list takes them; empty items are skipped. */
static cnnb_status read_points(const cnnb_flags *flags, const char *name, bool integers,
                               int64_t *steps, double *epochs, size_t *count, char *err,
                               size_t size) {
  const char *p = cnnb_flags_string(flags, name);
  *count = 0;
  while (*p) {
    size_t len = strcspn(p, ",");
    char item[64];
    if (len >= sizeof item)
      return refuse(err, size, "--%s: '%.20s...' is not a %s", name, p,
                    integers ? "step" : "number of epochs");
    memcpy(item, p, len);
    item[len] = '\0';
    p += len + (p[len] == ',');
    if (!len) continue;
    if (*count == CNNB_MAX_EVAL_POINTS)
      return refuse(err, size, "--%s: more than %d evaluations", name, CNNB_MAX_EVAL_POINTS);
    char *end = NULL;
    if (integers) {
      long long v = strtoll(item, &end, 10);
      if (*end || v < 1 || v > INT64_MAX / 2)
        return refuse(err, size, "--%s: '%s' is not a step (an integer >= 1)", name, item);
      steps[(*count)++] = v;
    } else {
      double v = strtod(item, &end);
      if (*end || !(v > 0.0) || v > 1e9)
        return refuse(err, size, "--%s: '%s' is not a number of epochs (> 0)", name, item);
      epochs[(*count)++] = v;
    }
  }
  return CNNB_OK;
}

static cnnb_status read_eval(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                             size_t size) {
  static const char *const ways[] = {
      "eval_during_training_every_n_steps", "eval_during_training_every_n_epochs",
      "eval_during_training_at_specified_steps", "eval_during_training_at_specified_epochs"};
  const char *given = NULL;
  for (size_t i = 0; i < 4; i++) {
    if (!cnnb_flags_is_set(flags, ways[i])) continue;
    if (given)
      return refuse(err, size, "--%s and --%s both given: give one of them", given, ways[i]);
    given = ways[i];
  }
  bool by_steps = cnnb_flags_is_set(flags, "eval_during_training_every_n_steps");
  bool by_epochs = cnnb_flags_is_set(flags, "eval_during_training_every_n_epochs");
  char during[64];
  snprintf(during, sizeof during, "--%s", given ? given : "");
  if (given && cfg->mode != CNNB_MODE_TRAIN)
    return refuse(err, size,
                  "%s and %s both given: evaluating during training needs "
                  "training; give one of them",
                  during,
                  cfg->mode == CNNB_MODE_EVAL           ? "--eval"
                  : cfg->mode == CNNB_MODE_FORWARD_ONLY ? "--forward_only"
                                                        : "--input_only");
  cnnb_status st;
  if (by_steps && (st = int_in(flags, "eval_during_training_every_n_steps", 1, INT64_MAX / 2, "",
                               &cfg->eval_every_n_steps, err, size)))
    return st;
  if (by_epochs) {
    double e = cnnb_flags_float(flags, "eval_during_training_every_n_epochs");
    if (!(e > 0.0) || e > 1e9)
      return refuse(err, size,
                    "--eval_during_training_every_n_epochs=%g: must be > 0 and at most 1e9", e);
    cfg->eval_every_n_epochs = e;
  }
  if ((st = read_points(flags, ways[2], true, cfg->eval_at_steps, NULL, &cfg->eval_at_steps_count,
                        err, size)) ||
      (st = read_points(flags, ways[3], false, NULL, cfg->eval_at_epochs,
                        &cfg->eval_at_epochs_count, err, size)))
    return st;
  cfg->eval_during_training = by_steps || by_epochs || cfg->eval_at_steps_count ||
                              cfg->eval_at_epochs_count;

  bool batches = cnnb_flags_is_set(flags, "num_eval_batches");
  bool epochs = cnnb_flags_is_set(flags, "num_eval_epochs");
  if (batches && epochs)
    return refuse(err, size,
                  "--num_eval_batches and --num_eval_epochs both given: give one of them");
  if ((batches || epochs) && cfg->mode != CNNB_MODE_EVAL && !cfg->eval_during_training)
    return refuse(err, size,
                  "%s sizes an evaluation, and this run evaluates nothing: give it "
                  "with --eval or --eval_during_training_every_n_steps / _epochs",
                  batches ? "--num_eval_batches" : "--num_eval_epochs");
  if (batches && (st = int_in(flags, "num_eval_batches", 1, INT64_MAX / 2, "",
                              &cfg->num_eval_batches, err, size)))
    return st;
  if (epochs) {
    double e = cnnb_flags_float(flags, "num_eval_epochs");
    if (!(e > 0.0) || e > 1e9)
      return refuse(err, size, "--num_eval_epochs=%g: must be > 0 and at most 1e9", e);
    cfg->num_eval_epochs = e;
  }
  int64_t interval = 0;
  if ((st = int_in(flags, "eval_interval_secs", 0, 366 * 86400, " (0: evaluate once)", &interval,
                   err, size)))
    return st;
  if (interval > 0 && cfg->mode != CNNB_MODE_EVAL)
    cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                       "--eval_interval_secs=%lld has no effect here: it paces --eval's watch "
                       "of --train_dir, and this run %s",
                       (long long)interval,
                       cfg->mode == CNNB_MODE_TRAIN ? "trains" : "does not evaluate");
  cfg->eval_interval_secs = cfg->mode == CNNB_MODE_EVAL ? (double)interval : 0;
  int64_t eval_batch = 0;
  if ((st = int_in(flags, "eval_batch_size", 0, MAX_BATCH_SIZE, " (0: --batch_size)", &eval_batch,
                   err, size)))
    return st;
  if (eval_batch > 0 && cfg->mode != CNNB_MODE_EVAL && !cfg->eval_during_training)
    cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                       "--eval_batch_size=%lld has no effect here: this run evaluates nothing "
                       "(give --eval or --eval_during_training_*)",
                       (long long)eval_batch);
  /* tf: an --eval run's batch is the evaluation batch. */
  if (cfg->mode == CNNB_MODE_EVAL && eval_batch > 0) cfg->batch_size = (int32_t)eval_batch;
  if (cfg->eval_during_training) cfg->eval_batch_size = (int32_t)eval_batch;
  /* tf_cnn_benchmarks: under --eval, the eval counts replace the run's own. */
  if (cfg->mode == CNNB_MODE_EVAL && (batches || epochs)) {
    cfg->num_batches = cfg->num_eval_batches;
    cfg->num_epochs = cfg->num_eval_epochs;
  }
  return CNNB_OK;
}

/* Whether `name` is in `path`, '_' in the name also matching '-' (fashion_mnist finds
 * Debian's /usr/share/datasets/fashion-mnist). */
static bool path_names(const char *path, const char *name) {
  size_t n = strlen(name);
  for (const char *p = path; *p; p++) {
    size_t i = 0;
    while (i < n && (p[i] == name[i] || (name[i] == '_' && p[i] == '-'))) i++;
    if (i == n) return true;
  }
  return false;
}

/* tf_cnn_benchmarks' rule when --data_name is not given: the first known dataset (in kind
 * order: imagenet, then cifar10, as tf tries them) whose name is inside --data_dir, unless
 * a later one's name holds it (fashion_mnist over mnist). tf refuses a path naming none; we
 * keep imagenet, whose datasource's probe then judges the folder. */
static const char *guess_dataset(const char *data_dir) {
  const cnnb_dataset_info *d, *best = NULL;
  for (uint32_t i = 0; data_dir && *data_dir && (d = cnnb_dataset_at(i)); i++)
    if (path_names(data_dir, d->name) && (!best || strstr(d->name, best->name))) best = d;
  return best ? best->name : "imagenet";
}

static cnnb_status read_data(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                             size_t size) {
  const char *name = cnnb_flags_string(flags, "data_name");
  if (!cnnb_flags_is_set(flags, "data_name"))
    name = guess_dataset(cnnb_flags_string(flags, "data_dir"));
  cfg->dataset = cnnb_dataset_find(name);
  if (!cfg->dataset) {
    size_t len = (size_t)snprintf(err, size, "--data_name=%s: unknown dataset; ", name);
    const cnnb_dataset_info *d = cnnb_dataset_at(0);
    if (!d && len < size)
      snprintf(err + len, size - len,
               "no datasource plugin loaded here describes any (is the plugin directory "
               "installed? --list_plugins shows what was found)");
    for (uint32_t i = 0; (d = cnnb_dataset_at(i)) && len < size; i++)
      len += (size_t)snprintf(err + len, size - len, "%s %s", i ? "," : "known:", d->name);
    return CNNB_EINVAL;
  }
  cfg->data_dir = cnnb_flags_string(flags, "data_dir");
  cfg->num_classes = cfg->dataset->num_classes;
  int64_t v = 0;
  cnnb_status st;
  if (cnnb_flags_is_set(flags, "num_classes")) {
    if ((st = int_in(flags, "num_classes", 2, MAX_CLASSES, "", &v, err, size))) return st;
    cfg->num_classes = (int32_t)v;
  }
  if ((st = int_in(flags, "image_size", 0, MAX_IMAGE_SIZE, " (0: the model's)", &v, err, size)))
    return st;
  cfg->image_size = (int32_t)v;
  if ((st = int_in(flags, "batch_size", 0, MAX_BATCH_SIZE, " (0: the model's default)", &v, err,
                   size)))
    return st;
  cfg->batch_size = (int32_t)v;
  if ((st = int_in(flags, "seed", 0, UINT32_MAX, "", &v, err, size))) return st;
  cfg->seed = (uint64_t)v;
  if ((st = int_in(flags, "datasets_prefetch_buffer_size", 1, 64, " batches", &v, err, size)))
    return st;
  cfg->input_prefetch_depth = (int32_t)v;
  if (!cnnb_flags_bool(flags, "datasets_use_prefetch")) {
    if (cnnb_flags_is_set(flags, "datasets_prefetch_buffer_size"))
      cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                         "--datasets_prefetch_buffer_size=%lld has no effect here: "
                         "--nodatasets_use_prefetch reads each batch when the step needs it",
                         (long long)v);
    cfg->input_prefetch_depth = 0;
  }
  return CNNB_OK;
}

static cnnb_status read_steps(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                              size_t size) {
  bool epochs = cnnb_flags_is_set(flags, "num_epochs");
  if (epochs && cnnb_flags_is_set(flags, "num_batches"))
    return refuse(err, size, "--num_batches and --num_epochs both given: give one of them");
  cnnb_status st;
  if (epochs) {
    /* Refused rather than rounded: 0 or less would run nothing the user asked for, and
     * the step count it leads to is checked against the epoch's size at setup. */
    double e = cnnb_flags_float(flags, "num_epochs");
    if (!(e > 0.0) || e > 1e9)
      return refuse(err, size, "--num_epochs=%g: must be > 0 and at most 1e9", e);
    cfg->num_epochs = e;
  } else if ((st = int_in(flags, "num_batches", 1, INT64_MAX / 2, "", &cfg->num_batches, err,
                          size))) {
    return st;
  }
  if ((st = int_in(flags, "num_warmup_batches", 0, INT64_MAX / 2, "", &cfg->num_warmup_batches, err,
                   size)) ||
      (st = int_in(flags, "display_every", 1, INT64_MAX, " (1 prints every step)",
                   &cfg->display_every, err, size)))
    return st;
  double ewma = cnnb_flags_float(flags, "display_perf_ewma");
  if (!(ewma >= 0.0 && ewma <= 1.0)) /* tf's lower_bound=0, upper_bound=1 */
    return refuse(err, size,
                  "--display_perf_ewma=%g: must be in [0, 1] (the newest step's weight; 0: "
                  "every step alike)",
                  ewma);
  cfg->display_perf_ewma = ewma;
  cfg->print_accuracy = cnnb_flags_bool(flags, "print_training_accuracy") ||
                        cfg->mode == CNNB_MODE_FORWARD_ONLY || cfg->mode == CNNB_MODE_EVAL;
  return CNNB_OK;
}

static cnnb_status read_devices(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                size_t size) {
  int64_t v = 0;
  cnnb_status st;
  if ((st = int_in(flags, "num_gpus", 1, MAX_REPLICAS, "", &v, err, size))) return st;
  cfg->num_replicas = (int32_t)v;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  int64_t max_threads = (int64_t)cores * CNNB_MAX_THREADS_PER_CORE;
  v = cnnb_flags_int(flags, "num_intra_threads");
  if (v < 0 || v > max_threads)
    return refuse(err, size,
                  "--num_intra_threads=%lld: must be in [0, %lld] (0: the device "
                  "chooses; at most %d threads per core, and this machine has %ld cores online)",
                  (long long)v, (long long)max_threads, CNNB_MAX_THREADS_PER_CORE, cores);
  cfg->num_threads = (int32_t)v;
  cfg->step_graphs = cnnb_flags_bool(flags, "cuda_graphs");

  /* precision_flag keeps the user's own spelling, so a device's refusal names it. */
  const char *precision = cnnb_flags_string(flags, "precision");
  if (cnnb_flags_bool(flags, "use_fp16")) {
    if (cnnb_flags_is_set(flags, "precision") && strcmp(precision, "fp16") != 0)
      return refuse(err, size, "--use_fp16 contradicts --precision=%s: give one of them",
                    precision);
    precision = "fp16";
    cfg->precision_flag = "--use_fp16";
  }
  for (size_t i = 0; i < sizeof precisions / sizeof precisions[0]; i++) {
    if (strcmp(precision, precisions[i].name) != 0) continue;
    cfg->precision = precisions[i].precision;
    if (!cfg->precision_flag) cfg->precision_flag = precisions[i].flag;
  }
  if (!cfg->precision)
    return refuse(err, size, "--precision=%s: known: fp32, bf16, fp16", precision);
  cfg->data_format = cnnb_flags_string(flags, "data_format");
  /* tf's default (NCHW) asks for nothing: each device keeps its fastest layout unless
   * the user names one. */
  /* (The flag's choices are NCHW and NHWC: the parser refused any other.) */
  if (!cnnb_flags_is_set(flags, "data_format")) cfg->data_format_request = CNNB_DATA_FORMAT_ANY;
  else if (strcmp(cfg->data_format, "NCHW") == 0) cfg->data_format_request = CNNB_DATA_FORMAT_NCHW;
  else cfg->data_format_request = CNNB_DATA_FORMAT_NHWC;
  const char *dtype = cnnb_flags_string(flags, "input_dtype");
  if (strcmp(dtype, "auto") == 0) cfg->input_dtype = CNNB_INPUT_AUTO;
  else if (strcmp(dtype, "uint8") == 0) cfg->input_dtype = CNNB_INPUT_UINT8;
  else if (strcmp(dtype, "float32") == 0) cfg->input_dtype = CNNB_INPUT_FLOAT32;
  else return refuse(err, size, "--input_dtype=%s: known: auto, uint8, float32", dtype);

  cfg->all_reduce_spec = cnnb_flags_string(flags, "all_reduce_spec");
  double mb = cnnb_flags_float(flags, "gradient_bucket_mb");
  if (!(mb > 0.0 && mb <= MAX_BUCKET_MB))
    return refuse(err, size, "--gradient_bucket_mb=%g: must be > 0 and at most %g", mb,
                  MAX_BUCKET_MB);
  cfg->gradient_bucket_bytes = (int64_t)(mb * (1 << 20));
  if (cfg->gradient_bucket_bytes < (int64_t)sizeof(float))
    cfg->gradient_bucket_bytes = sizeof(float); /* each parameter then fills its own bucket */
  double timeout = cnnb_flags_float(flags, "collective_timeout_s");
  if (!(timeout > 0.0 && timeout <= MAX_COLLECTIVE_TIMEOUT_S))
    return refuse(err, size, "--collective_timeout_s=%g: must be > 0 and at most %g seconds",
                  timeout, MAX_COLLECTIVE_TIMEOUT_S);
  cfg->collective_timeout_s = timeout;
  if ((st = int_in(flags, "gradient_repacking", 0, MAX_REPACKING, " (0: no repacking)", &v, err,
                   size)))
    return st;
  cfg->gradient_repacking = (int32_t)v;
  cfg->compact_gradient_transfer = cnnb_flags_bool(flags, "compact_gradient_transfer");
  return CNNB_OK;
}

static cnnb_status read_optimizer(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                  size_t size) {
  cnnb_trainer_config *t = &cfg->trainer;
  const char *opt = cnnb_flags_string(flags, "optimizer");
  t->rule = cnnb_optimizer_rule_parse(opt);
  if (!t->rule)
    return refuse(err, size, "--optimizer=%s: unknown optimizer (sgd, momentum, rmsprop or adam)",
                  opt);
  t->nesterov = cnnb_flags_bool(flags, "nesterov"); /* default: tf_cnn_benchmarks' Nesterov */
  double v = 0;
  cnnb_status st;
  /* Momenta and decays outside [0, 1) make the accumulators grow without bound: the run
   * would diverge and blame the learning rate. */
  if ((st = float_in(flags, "momentum", 0, 1, true, &v, err, size))) return st;
  t->momentum = (float)v;
  if ((st = float_in(flags, "rmsprop_decay", 0, 1, true, &v, err, size))) return st;
  t->rmsprop_decay = (float)v;
  if ((st = float_in(flags, "rmsprop_momentum", 0, 1, true, &v, err, size))) return st;
  t->rmsprop_momentum = (float)v;
  if ((st = float_in(flags, "adam_beta1", 0, 1, true, &v, err, size))) return st;
  t->adam_beta1 = (float)v;
  if ((st = float_in(flags, "adam_beta2", 0, 1, true, &v, err, size))) return st;
  t->adam_beta2 = (float)v;
  static const char *const epsilons[] = {"rmsprop_epsilon", "adam_epsilon"};
  for (size_t i = 0; i < 2; i++) {
    v = cnnb_flags_float(flags, epsilons[i]);
    if (!(v > 0.0 && v <= 1e6))
      return refuse(err, size, "--%s=%g: must be > 0 and at most 1e6", epsilons[i], v);
    if (i == 0) t->rmsprop_epsilon = (float)v;
    else t->adam_epsilon = (float)v;
  }
  if ((st = float_in(flags, "weight_decay", 0, 1, false, &v, err, size))) return st;
  t->weight_decay = (float)v;
  if ((st = float_in(flags, "gradient_clip", 0, 1e30, false, &v, err, size))) return st;
  t->gradient_clip = (float)v;
  if ((st = float_in(flags, "label_smoothing", 0, 1, true, &v, err, size))) return st;
  cfg->label_smoothing = (float)v;
  cfg->recipe_flags_set.optimizer = cnnb_flags_is_set(flags, "optimizer");
  cfg->recipe_flags_set.nesterov = cnnb_flags_is_set(flags, "nesterov");
  cfg->recipe_flags_set.weight_decay = cnnb_flags_is_set(flags, "weight_decay");
  cfg->recipe_flags_set.label_smoothing = cnnb_flags_is_set(flags, "label_smoothing");
  /* A recipe's momentum and epsilon are its optimizer's, which may be either flag's. */
  cfg->recipe_flags_set.momentum = cnnb_flags_is_set(flags, "momentum") ||
                                   cnnb_flags_is_set(flags, "rmsprop_momentum");
  cfg->recipe_flags_set.epsilon = cnnb_flags_is_set(flags, "rmsprop_epsilon") ||
                                  cnnb_flags_is_set(flags, "adam_epsilon");

  t->fp16 = cfg->precision == CNNB_PRECISION_FP16;
  if ((st = float_in(flags, "fp16_loss_scale", 0, 16777216, false, &v, err, size))) return st;
  t->fp16_loss_scale = (float)v;
  t->auto_loss_scale = cnnb_flags_bool(flags, "fp16_enable_auto_loss_scale");
  int64_t n = 0;
  if ((st = int_in(flags, "fp16_inc_loss_scale_every_n", 1, INT64_MAX, "", &n, err, size)))
    return st;
  t->inc_loss_scale_every_n = n;

  cnnb_lr_config *lr = &t->lr;
  lr->has_init_learning_rate = cnnb_flags_is_set(flags, "init_learning_rate");
  lr->init_learning_rate = cnnb_flags_float(flags, "init_learning_rate");
  lr->piecewise = cnnb_flags_string(flags, "piecewise_learning_rate_schedule");
  lr->num_epochs_per_decay = cnnb_flags_float(flags, "num_epochs_per_decay");
  lr->learning_rate_decay_factor = cnnb_flags_float(flags, "learning_rate_decay_factor");
  lr->minimum_learning_rate = cnnb_flags_float(flags, "minimum_learning_rate");
  lr->warmup_epochs = cnnb_flags_float(flags, "num_learning_rate_warmup_epochs");
  return cnnb_lr_config_check(lr, err, size);
}

/* --train_dir and its saving flags, the log and trace outputs, --target_accuracy. */
static cnnb_status read_outputs(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                size_t size) {
  cnnb_status st;
  cfg->train_dir = cnnb_flags_string(flags, "train_dir");
  bool training = cfg->mode == CNNB_MODE_TRAIN;
  static const char *const saving[] = {"save_model_steps", "save_model_secs", "max_ckpts_to_keep"};
  for (size_t i = 0; i < sizeof saving / sizeof saving[0]; i++) {
    if (!cnnb_flags_is_set(flags, saving[i])) continue;
    if (!*cfg->train_dir)
      return refuse(err, size,
                    "--%s given without --train_dir: name the directory to save checkpoints in",
                    saving[i]);
    if (!training)
      return refuse(err, size, "--%s given with %s: only training saves checkpoints", saving[i],
                    cfg->mode == CNNB_MODE_EVAL           ? "--eval"
                    : cfg->mode == CNNB_MODE_FORWARD_ONLY ? "--forward_only"
                                                          : "--input_only");
  }
  if (*cfg->train_dir && (cfg->mode == CNNB_MODE_FORWARD_ONLY || cfg->mode == CNNB_MODE_INPUT_ONLY))
    return refuse(err, size, "--train_dir given with %s: checkpoints are for training and --eval",
                  cfg->mode == CNNB_MODE_FORWARD_ONLY ? "--forward_only" : "--input_only");
  cfg->ignore_unreadable_checkpoints = cnnb_flags_bool(flags, "ignore_unreadable_checkpoints");
  if (cfg->ignore_unreadable_checkpoints && (!*cfg->train_dir || !training))
    return refuse(err, size,
                  "--ignore_unreadable_checkpoints %s: it lets training start over the "
                  "checkpoints of a --train_dir that none reads back whole",
                  !*cfg->train_dir ? "given without --train_dir" : "given with --eval");
  /* --eval with nothing to evaluate would print the accuracy of random weights as if it
   * were a model's: tf_cnn_benchmarks refuses it ("Trained model directory not specified"),
   * and so does this, unless the random weights are asked for by name. */
  cfg->eval_random_weights = cnnb_flags_bool(flags, "eval_random_weights");
  if (cfg->eval_random_weights && (cfg->mode != CNNB_MODE_EVAL || *cfg->train_dir))
    return refuse(err, size, "--eval_random_weights given %s: it is for --eval without --train_dir",
                  cfg->mode != CNNB_MODE_EVAL ? "without --eval" : "with --train_dir");
  if (cfg->mode == CNNB_MODE_EVAL && !*cfg->train_dir && !cfg->eval_random_weights)
    return refuse(err, size,
                  "--eval: no trained model to evaluate (tf_cnn_benchmarks: \"Trained model "
                  "directory not specified\"): give --train_dir=DIR holding a checkpoint, or "
                  "--eval_random_weights to evaluate the initial weights");
  if (cfg->eval_interval_secs > 0 && !*cfg->train_dir)
    return refuse(err, size,
                  "--eval_interval_secs with --eval_random_weights: it waits for new "
                  "checkpoints of --train_dir, and random weights have none");
  if ((st = int_in(flags, "save_model_steps", 0, INT64_MAX / 2, " (0: at the end only)",
                   &cfg->save_model_steps, err, size)))
    return st;
  if ((st = float_in(flags, "save_model_secs", 0, 1e9, false, &cfg->save_model_secs, err, size)))
    return st;
  int64_t v = 0;
  if ((st = int_in(flags, "max_ckpts_to_keep", 1, 1000000, "", &v, err, size))) return st;
  cfg->max_ckpts_to_keep = (int32_t)v;

  cfg->benchmark_log_dir = cnnb_flags_string(flags, "benchmark_log_dir");
  cfg->benchmark_test_id = cnnb_flags_string(flags, "benchmark_test_id");
  if ((st = int_in(flags, "summary_verbosity", 0, 3, " (tf_cnn_benchmarks' levels)", &v, err,
                   size)))
    return st;
  cfg->summary_verbosity = (int32_t)v;
  if ((st = int_in(flags, "save_summaries_steps", 0, INT64_MAX / 2, " (0: no training events)",
                   &cfg->save_summaries_steps, err, size)))
    return st;
  cfg->eval_dir = cnnb_flags_string(flags, "eval_dir");
  cfg->trace_file = cnnb_flags_string(flags, "trace_file");
  /* tf's --tfprof_file: its first 10 timed steps profiled, its 20 slowest ops printed.
   * Here the profile is the trace of those steps (a Chrome trace, not a ProfileProto). */
  const char *tfprof = cnnb_flags_string(flags, "tfprof_file");
  if (*tfprof) {
    if (*cfg->trace_file)
      return refuse(err, size,
                    "--tfprof_file=%s and --trace_file=%s both write the steps' trace here: "
                    "give one",
                    tfprof, cfg->trace_file);
    cfg->trace_file = tfprof;
    cfg->top_ops = TFPROF_TOP_OPS;
  }
  cfg->graph_file = cnnb_flags_string(flags, "graph_file");
  if (*cfg->graph_file && cfg->mode == CNNB_MODE_INPUT_ONLY)
    return refuse(err, size, "--graph_file given with --input_only: the run builds no model");
  if (cnnb_flags_is_set(flags, "trace_steps") && !*cfg->trace_file)
    return refuse(err, size, "--trace_steps given without --trace_file: name the file to write");
  if ((st = int_in(flags, "trace_steps", 1, 1000000, "", &cfg->trace_steps, err, size))) return st;
  if (*tfprof && !cnnb_flags_is_set(flags, "trace_steps")) cfg->trace_steps = TFPROF_STEPS;
  if (!cnnb_flags_bool(flags, "use_chrome_trace_format")) {
    if (*cfg->trace_file)
      return refuse(err, size,
                    "--use_chrome_trace_format=false asks for tf's StepStats proto, which "
                    "cnnbench cannot write: --trace_file=%s writes the Chrome trace format "
                    "(drop the flag)",
                    cfg->trace_file);
    cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                       "--use_chrome_trace_format=false has no effect here: no --trace_file");
  }
  if (*cfg->trace_file && cfg->mode == CNNB_MODE_INPUT_ONLY)
    return refuse(err, size, "--%s given with --input_only: the trace shows a model's steps",
                  *tfprof ? "tfprof_file" : "trace_file");

  if (cnnb_flags_is_set(flags, "target_accuracy")) {
    double t = cnnb_flags_float(flags, "target_accuracy");
    if (!(t > 0.0 && t <= 1.0))
      return refuse(err, size, "--target_accuracy=%g: must be a top-1 fraction in (0, 1]", t);
    if (!cfg->eval_during_training)
      return refuse(err, size,
                    "--target_accuracy=%g needs an evaluation to measure it: add "
                    "--eval_during_training_every_n_epochs (or _every_n_steps)",
                    t);
    cfg->target_accuracy = t;
  }
  return CNNB_OK;
}

/* An environment variable holding a whole number in [0, 2^31); -1 when absent or not. */
static int32_t env_index(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return -1;
  char *end;
  long n = strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n <= INT32_MAX ? (int32_t)n : -1;
}

/* The launcher's view of this process (mpirun sets these whether or not the strategy
 * joins its processes into a world; srun sets SLURM_PROCID and SLURM_STEP_NUM_TASKS with
 * any --mpi, PMIx's PMIX_RANK carries no size). */
static void read_launcher(cnnb_run_config *cfg) {
  static const char *const names[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                         {"PMI_RANK", "PMI_SIZE"},
                                         {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
  cfg->launcher_rank = 0;
  cfg->launcher_size = 1;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int32_t rank = env_index(names[i][0]), size = env_index(names[i][1]);
    if (rank >= 0 && size > rank) {
      cfg->launcher_rank = rank;
      cfg->launcher_size = size;
      return;
    }
  }
}

/* Whether `v` is a whole number as Slurm writes its ids (digits only). */
static bool slurm_id(const char *v) {
  if (!v || !*v || strlen(v) > 20) return false;
  for (const char *p = v; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
}

/* Slurm's %j (or %A_%a for an array task) and the restart count of a requeued job. */
static void read_job_tag(cnnb_run_config *cfg) {
  const char *job = getenv("SLURM_JOB_ID"), *array = getenv("SLURM_ARRAY_JOB_ID"),
             *task = getenv("SLURM_ARRAY_TASK_ID"), *restarts = getenv("SLURM_RESTART_COUNT");
  cfg->job_tag[0] = '\0';
  if (!slurm_id(job)) return;
  size_t len;
  if (slurm_id(array) && slurm_id(task))
    len = (size_t)snprintf(cfg->job_tag, sizeof cfg->job_tag, "job%s_%s", array, task);
  else len = (size_t)snprintf(cfg->job_tag, sizeof cfg->job_tag, "job%s", job);
  if (slurm_id(restarts) && strcmp(restarts, "0") != 0 && len < sizeof cfg->job_tag)
    snprintf(cfg->job_tag + len, sizeof cfg->job_tag - len, ".restart%s", restarts);
}

cnnb_status cnnb_run_config_from_flags(const cnnb_flags *flags, cnnb_run_config *cfg, char *err,
                                       size_t err_size) {
  memset(cfg, 0, sizeof *cfg);
  if (err && err_size) err[0] = '\0';
  char scratch[2];
  if (!err || !err_size) err = scratch, err_size = sizeof scratch;
  cnnb_status st;
  if ((st = read_plugins_and_mode(flags, cfg, err, err_size)) ||
      (st = read_data(flags, cfg, err, err_size)) || (st = read_steps(flags, cfg, err, err_size)) ||
      (st = read_eval(flags, cfg, err, err_size)) ||
      (st = read_devices(flags, cfg, err, err_size)) ||
      (st = read_optimizer(flags, cfg, err, err_size)) ||
      (st = read_outputs(flags, cfg, err, err_size)))
    return st;
  read_launcher(cfg);
  read_job_tag(cfg);
  return CNNB_OK;
}
