/* lr_schedule.c — tf_cnn_benchmarks' get_learning_rate() and
 * get_piecewise_learning_rate(), evaluated on the host once per step (see
 * lr_schedule.h for the rules and the order they are picked in). */
#include "exec/lr_schedule.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash_guard.h"

typedef enum kind { KIND_PIECEWISE, KIND_DECAY, KIND_MODEL } kind;

struct cnnb_lr_schedule {
  kind kind;
  double batches_per_epoch;
  /* piecewise: values[0..nb], boundaries[0..nb) in steps */
  int32_t num_boundaries;
  double *values;
  int64_t *boundaries;
  /* decay (also a plain constant when decay_steps == 0) */
  double init_lr;
  int64_t decay_steps;
  double decay_factor, minimum_lr;
  /* warm-up from 0 to init_lr over warmup_steps (0: none) */
  int64_t warmup_steps;
  double warmup_target;
  /* the model's own schedule */
  cnnb_lr_model model;
  int32_t global_batch_size;
  int64_t examples_per_epoch;
  char description[256];
};

/* Writes the message into err and returns CNNB_EINVAL: the checks here run both from
 * the command line (no ctx yet) and at setup (the caller moves it into its ctx). */
static cnnb_status fail(char *err, size_t size, const char *fmt, ...) CNNB_PRINTF(3, 4);
static cnnb_status fail(char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return CNNB_EINVAL;
}

/* Copies piece [begin, end) of the schedule into buf, trimmed of spaces. */
static void piece_text(const char *begin, const char *end, char *buf, size_t size) {
  while (begin < end && (*begin == ' ' || *begin == '\t')) ++begin;
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  size_t n = (size_t)(end - begin);
  if (n >= size) n = size - 1;
  memcpy(buf, begin, n);
  buf[n] = '\0';
}

static bool parse_rate(const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (!*text || *end || errno || !isfinite(v) || v < 0.0) return false;
  *out = v;
  return true;
}

/* Epochs are whole numbers, as TF's int(piece). */
static bool parse_epoch(const char *text, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (!*text || *end || errno) return false;
  *out = v;
  return true;
}

static cnnb_status parse_piecewise(cnnb_lr_schedule *s, const char *spec, char *err, size_t size) {
  int32_t pieces = 1;
  for (const char *p = spec; *p; ++p) pieces += *p == ';';
  if (pieces % 2 == 0)
    return fail(err, size,
                "--piecewise_learning_rate_schedule=\"%s\": needs an odd number of "
                "';'-separated parts (rate;epoch;rate;...;rate), got %d",
                spec, (int)pieces);
  s->num_boundaries = pieces / 2;
  s->values = calloc((size_t)s->num_boundaries + 1, sizeof *s->values);
  s->boundaries = calloc((size_t)s->num_boundaries + 1, sizeof *s->boundaries);
  if (!s->values || !s->boundaries) {
    snprintf(err, size, "learning-rate schedule: out of memory");
    return CNNB_ENOMEM;
  }
  const char *begin = spec;
  long long prev_epoch = 0;
  for (int32_t i = 0; i < pieces; ++i) {
    const char *end = strchr(begin, ';');
    if (!end) end = begin + strlen(begin);
    char text[128];
    piece_text(begin, end, text, sizeof text);
    if (i % 2 == 0) {
      if (!parse_rate(text, &s->values[i / 2]))
        return fail(err, size,
                    "--piecewise_learning_rate_schedule=\"%s\": invalid learning rate "
                    "'%s' (part %d): expected a non-negative number",
                    spec, text, (int)i + 1);
    } else {
      long long epoch;
      if (!parse_epoch(text, &epoch))
        return fail(err, size,
                    "--piecewise_learning_rate_schedule=\"%s\": invalid epoch '%s' "
                    "(part %d): expected a whole number of epochs",
                    spec, text, (int)i + 1);
      if (epoch <= prev_epoch)
        return fail(err, size,
                    "--piecewise_learning_rate_schedule=\"%s\": epoch %lld (part %d) "
                    "must be greater than %lld: epochs increase left to right",
                    spec, epoch, (int)i + 1, prev_epoch);
      prev_epoch = epoch;
      /* A step past int64's range cannot be reached; converting it would be undefined. */
      double step = (double)epoch * s->batches_per_epoch;
      if (!(step < 9.2e18))
        return fail(err, size,
                    "--piecewise_learning_rate_schedule=\"%s\": epoch %lld (part %d) is "
                    "past any step a run can reach",
                    spec, epoch, (int)i + 1);
      s->boundaries[i / 2] = (int64_t)step - 1;
    }
    begin = *end ? end + 1 : end;
  }
  return CNNB_OK;
}

static cnnb_status check_flags(const cnnb_lr_config *cfg, char *err, size_t size) {
  bool piecewise = cfg->piecewise && *cfg->piecewise;
  bool decay = cfg->num_epochs_per_decay != 0.0 || cfg->learning_rate_decay_factor != 0.0;
  if (piecewise && (cfg->has_init_learning_rate || decay || cfg->minimum_learning_rate != 0.0))
    return fail(err, size,
                "--piecewise_learning_rate_schedule excludes --init_learning_rate, "
                "--num_epochs_per_decay, --learning_rate_decay_factor and "
                "--minimum_learning_rate: the schedule gives every rate");
  bool full_decay = cfg->has_init_learning_rate && cfg->num_epochs_per_decay != 0.0 &&
                    cfg->learning_rate_decay_factor != 0.0;
  if (decay && !full_decay)
    return fail(err, size,
                "--num_epochs_per_decay and --learning_rate_decay_factor go together, "
                "and need --init_learning_rate (got %g and %g%s)",
                cfg->num_epochs_per_decay, cfg->learning_rate_decay_factor,
                cfg->has_init_learning_rate ? "" : ", no --init_learning_rate");
  if (cfg->minimum_learning_rate != 0.0 && !full_decay)
    return fail(err, size,
                "--minimum_learning_rate needs --init_learning_rate, "
                "--num_epochs_per_decay and --learning_rate_decay_factor");
  if (cfg->has_init_learning_rate &&
      (!isfinite(cfg->init_learning_rate) || cfg->init_learning_rate < 0.0))
    return fail(err, size, "--init_learning_rate=%g: must be a non-negative number",
                cfg->init_learning_rate);
  if (cfg->num_epochs_per_decay < 0.0 || cfg->learning_rate_decay_factor < 0.0 ||
      cfg->minimum_learning_rate < 0.0 || cfg->warmup_epochs < 0.0)
    return fail(err, size,
                "learning-rate flags must not be negative (--num_epochs_per_decay=%g "
                "--learning_rate_decay_factor=%g --minimum_learning_rate=%g "
                "--num_learning_rate_warmup_epochs=%g)",
                cfg->num_epochs_per_decay, cfg->learning_rate_decay_factor,
                cfg->minimum_learning_rate, cfg->warmup_epochs);
  return CNNB_OK;
}

cnnb_status cnnb_lr_config_check(const cnnb_lr_config *cfg, char *err, size_t err_size) {
  cnnb_status st = check_flags(cfg, err, err_size);
  if (st != CNNB_OK || !cfg->piecewise || !*cfg->piecewise) return st;
  /* The schedule's syntax does not depend on the epoch's size: parse it against one. */
  cnnb_lr_schedule probe = {.batches_per_epoch = 1.0};
  st = parse_piecewise(&probe, cfg->piecewise, err, err_size);
  free(probe.values);
  free(probe.boundaries);
  return st;
}

/* The flag that makes the schedule count epochs, or NULL when it counts none. */
static const char *epoch_flag(const cnnb_lr_config *cfg, bool piecewise) {
  if (piecewise) return "--piecewise_learning_rate_schedule";
  if (cfg->has_init_learning_rate && cfg->num_epochs_per_decay > 0.0)
    return "--num_epochs_per_decay";
  if (cfg->warmup_epochs > 0.0 && (piecewise || cfg->has_init_learning_rate))
    return "--num_learning_rate_warmup_epochs";
  return NULL;
}

cnnb_status cnnb_lr_schedule_create(cnnb_ctx *ctx, const cnnb_lr_config *cfg,
                                    cnnb_lr_schedule **out) {
  *out = NULL;
  char err[512];
  bool piecewise = cfg->piecewise && *cfg->piecewise;
  if (check_flags(cfg, err, sizeof err) != CNNB_OK) return cnnb_error(ctx, CNNB_EINVAL, "%s", err);
  if (cfg->global_batch_size <= 0)
    return cnnb_error(ctx, CNNB_EINVAL, "learning-rate schedule: global batch size %d",
                      (int)cfg->global_batch_size);
  if (!piecewise && !cfg->has_init_learning_rate && !cfg->model)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "no learning rate: give --init_learning_rate or "
                      "--piecewise_learning_rate_schedule (no model default is known)");
  const char *in_epochs = epoch_flag(cfg, piecewise);
  if (in_epochs && cfg->examples_per_epoch <= 0)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s counts epochs, but the datasource does not say how many examples "
                      "an epoch holds: give the schedule in steps (--init_learning_rate alone) "
                      "or use a datasource that knows its size",
                      in_epochs);
  cnnb_lr_schedule *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "learning-rate schedule: out of memory");
  s->examples_per_epoch = cfg->examples_per_epoch > 0 ? cfg->examples_per_epoch : 0;
  s->global_batch_size = cfg->global_batch_size;
  s->batches_per_epoch = (double)s->examples_per_epoch / (double)cfg->global_batch_size;

  if (piecewise) {
    s->kind = KIND_PIECEWISE;
    cnnb_status st = parse_piecewise(s, cfg->piecewise, err, sizeof err);
    if (st != CNNB_OK) {
      cnnb_lr_schedule_destroy(s);
      return cnnb_error(ctx, st, "%s", err);
    }
    s->warmup_target = s->values[0];
    snprintf(s->description, sizeof s->description, "piecewise %s", cfg->piecewise);
  } else if (cfg->has_init_learning_rate) {
    s->kind = KIND_DECAY;
    s->init_lr = cfg->init_learning_rate;
    s->warmup_target = s->init_lr;
    if (cfg->num_epochs_per_decay > 0.0 && cfg->learning_rate_decay_factor > 0.0) {
      s->decay_steps = (int64_t)(s->batches_per_epoch * cfg->num_epochs_per_decay);
      if (s->decay_steps < 1) {
        cnnb_error(ctx, CNNB_EINVAL,
                   "--num_epochs_per_decay=%g is less than one step at %.4g steps per epoch",
                   cfg->num_epochs_per_decay, s->batches_per_epoch);
        cnnb_lr_schedule_destroy(s);
        return CNNB_EINVAL;
      }
      s->decay_factor = cfg->learning_rate_decay_factor;
      s->minimum_lr = cfg->minimum_learning_rate;
      snprintf(s->description, sizeof s->description,
               "%g, x%g every %g epochs (%lld steps), floor %g", s->init_lr, s->decay_factor,
               cfg->num_epochs_per_decay, (long long)s->decay_steps, s->minimum_lr);
    } else {
      snprintf(s->description, sizeof s->description, "%g (constant)", s->init_lr);
    }
  } else {
    s->kind = KIND_MODEL;
    s->model = *cfg->model;
    s->init_lr = cfg->model->default_learning_rate;
    if (s->model.learning_rate_at || s->model.learning_rate)
      snprintf(s->description, sizeof s->description, "%s's own schedule",
               s->model.name ? s->model.name : "the model");
    else
      snprintf(s->description, sizeof s->description, "%g (%s's default)", s->init_lr,
               s->model.name ? s->model.name : "the model");
  }
  /* TF applies warm-up only to a rate the user chose, never to a model's schedule. */
  if (cfg->warmup_epochs > 0.0 && s->kind != KIND_MODEL) {
    s->warmup_steps = (int64_t)(s->batches_per_epoch * cfg->warmup_epochs);
    size_t len = strlen(s->description);
    snprintf(s->description + len, sizeof s->description - len, ", warm-up %g epochs (%lld steps)",
             cfg->warmup_epochs, (long long)s->warmup_steps);
  }
  *out = s;
  return CNNB_OK;
}

void cnnb_lr_schedule_destroy(cnnb_lr_schedule *s) {
  if (!s) return;
  free(s->values);
  free(s->boundaries);
  free(s);
}

/* tf.train.piecewise_constant: values[0] while step <= b[0], values[i] while
 * b[i-1] < step <= b[i], the last value after the last boundary. */
static double piecewise_at(const cnnb_lr_schedule *s, int64_t step) {
  int32_t i = 0;
  while (i < s->num_boundaries && step > s->boundaries[i]) ++i;
  return s->values[i];
}

float cnnb_lr_schedule_at(const cnnb_lr_schedule *s, int64_t step) {
  double lr;
  switch (s->kind) {
    case KIND_PIECEWISE: lr = piecewise_at(s, step); break;
    case KIND_DECAY:
      lr = s->init_lr;
      if (s->decay_steps > 0) {
        /* tf.train.exponential_decay(staircase=True). */
        lr = s->init_lr * pow(s->decay_factor, (double)(step / s->decay_steps));
        if (s->minimum_lr != 0.0 && lr < s->minimum_lr) lr = s->minimum_lr;
      }
      break;
    case KIND_MODEL:
    default:
      if (s->model.learning_rate_at || s->model.learning_rate) {
        float rate;
        CNNB_GUARDED(s->model.crash_label, "learning_rate", s->model.name,
                     rate = s->model.learning_rate_at
                                ? s->model.learning_rate_at(s->model.ctx, s->model.name,
                                                            s->model.dataset, step,
                                                            s->global_batch_size,
                                                            s->examples_per_epoch)
                                : s->model.learning_rate(s->model.name, step, s->global_batch_size,
                                                         s->examples_per_epoch));
        return rate;
      }
      lr = s->init_lr;
      break;
  }
  if (s->warmup_steps > 0 && step < s->warmup_steps)
    lr = s->warmup_target * (double)step / (double)s->warmup_steps;
  return (float)lr;
}

const char *cnnb_lr_schedule_describe(const cnnb_lr_schedule *s) { return s->description; }
