/* summaries.c — when a run writes TensorBoard events, and which (summaries.h). */
#define _GNU_SOURCE /* asprintf */
#include "run/summaries.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report/event_file.h"

struct cnnb_summaries {
  cnnb_event_file *train; /* --train_dir's; NULL: no training events */
  cnnb_event_file *eval;  /* --eval_dir's or --train_dir/eval's; NULL: no evaluation events */
  int64_t every;          /* --save_summaries_steps */
};

static bool evaluates(const cnnb_run_config *cfg) {
  return cfg->mode == CNNB_MODE_EVAL || cfg->eval_during_training;
}

/* What --summary_verbosity (and --eval_dir) will not do in this run, said once each. */
static void warn_unused(const cnnb_run *run, bool train, bool eval) {
  const cnnb_run_config *cfg = run->cfg;
  int level = cfg->summary_verbosity;
  if (level >= 2)
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "--summary_verbosity=%d: tf_cnn_benchmarks' histograms and images (levels 2 and "
             "3) are not written here; the scalars of level 1 are",
             level);
  if (level >= 1 && !train && !eval)
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "--summary_verbosity=%d writes nothing in this run: training events need "
             "--train_dir and --save_summaries_steps > 0, evaluation events an evaluation "
             "(--eval, --eval_during_training_*) and --eval_dir or --train_dir",
             level);
  else if (level >= 1 && cfg->mode == CNNB_MODE_TRAIN && !train)
    cnnb_log(run->ctx, CNNB_LOG_WARN, "--summary_verbosity=%d: no training events without %s",
             level, *cfg->train_dir ? "--save_summaries_steps > 0" : "--train_dir");
  if (*cfg->eval_dir && !evaluates(cfg))
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "--eval_dir=%s has no effect: this run does not evaluate (--eval, "
             "--eval_during_training_*)",
             cfg->eval_dir);
  if (cfg->save_summaries_steps > 0 && level == 0)
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "--save_summaries_steps=%lld has no effect with --summary_verbosity=0",
             (long long)cfg->save_summaries_steps);
}

static cnnb_status open_file(cnnb_run *run, const char *flag, const char *dir,
                             cnnb_event_file **out) {
  char *label = NULL;
  if (asprintf(&label, "--%s=%s", flag, dir) < 0)
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = cnnb_event_file_open(run->ctx, label, dir, out);
  free(label);
  if (st == CNNB_OK)
    cnnb_log(run->ctx, CNNB_LOG_INFO, "TensorBoard events: %s", cnnb_event_file_path(*out));
  return st;
}

cnnb_status cnnb_summaries_open(cnnb_run *run) {
  const cnnb_run_config *cfg = run->cfg;
  run->summaries = NULL;
  bool level = cfg->summary_verbosity >= 1;
  bool train = level && cfg->mode == CNNB_MODE_TRAIN && *cfg->train_dir &&
               cfg->save_summaries_steps > 0;
  bool eval = evaluates(cfg) && (*cfg->eval_dir || (level && *cfg->train_dir));
  if (run->facts.world.rank == 0) warn_unused(run, train, eval);
  if ((!train && !eval) || run->facts.world.rank != 0) return CNNB_OK;
  cnnb_summaries *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  run->summaries = s;
  s->every = cfg->save_summaries_steps;
  cnnb_status st = CNNB_OK;
  if (train) st = open_file(run, "train_dir", cfg->train_dir, &s->train);
  if (st == CNNB_OK && eval && *cfg->eval_dir)
    st = open_file(run, "eval_dir", cfg->eval_dir, &s->eval);
  else if (st == CNNB_OK && eval) {
    char *dir = NULL;
    if (asprintf(&dir, "%s/eval", cfg->train_dir) < 0)
      return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
    st = open_file(run, "train_dir", dir, &s->eval);
    free(dir);
  }
  return st;
}

cnnb_status cnnb_summaries_start(cnnb_run *run) {
  cnnb_summaries *s = run->summaries;
  if (!s) return CNNB_OK;
  int64_t start = run->facts.start_step;
  cnnb_status st = CNNB_OK;
  if (s->train) st = cnnb_event_file_session_start(s->train, start);
  if (st == CNNB_OK && s->eval) st = cnnb_event_file_session_start(s->eval, start);
  return st;
}

void cnnb_summaries_free(cnnb_run *run) {
  cnnb_summaries *s = run->summaries;
  if (!s) return;
  cnnb_event_file *files[2] = {s->train, s->eval};
  for (int i = 0; i < 2; i++)
    if (files[i] && cnnb_event_file_close(files[i]) != CNNB_OK) {
      cnnb_log(run->ctx, CNNB_LOG_WARN, "%s", cnnb_error_message(run->ctx));
      cnnb_clear_error(run->ctx);
    }
  free(s);
  run->summaries = NULL;
}

bool cnnb_summaries_due(const cnnb_run *run, int64_t step) {
  const cnnb_summaries *s = run->summaries;
  return s && s->train && step % s->every == 0;
}

cnnb_status cnnb_summaries_step(cnnb_run *run, const cnnb_benchmark_log_step *m) {
  cnnb_summaries *s = run->summaries;
  if (!s || !s->train) return CNNB_OK;
  const cnnb_trainer_config *t = &run->cfg->trainer;
  cnnb_event_scalar v[8];
  size_t n = 0;
  /* tf_cnn_benchmarks' order: its accuracies, learning_rate, the loss, the loss scale. */
  if (isfinite(m->top1)) v[n++] = (cnnb_event_scalar){"top_1_accuracy", m->top1};
  if (isfinite(m->top5)) v[n++] = (cnnb_event_scalar){"top_5_accuracy", m->top5};
  if (isfinite(m->learning_rate)) v[n++] = (cnnb_event_scalar){"learning_rate", m->learning_rate};
  v[n++] = (cnnb_event_scalar){"total_loss", m->loss};
  if (t->fp16 && isfinite(m->loss_scale)) {
    v[n++] = (cnnb_event_scalar){"loss_scale", m->loss_scale};
    if (t->auto_loss_scale && run->replicas[0].trainer) {
      cnnb_trainer_state state;
      cnnb_trainer_get_state(run->replicas[0].trainer, &state);
      v[n++] = (cnnb_event_scalar){"loss_scale_normal_steps",
                                   (double)state.loss_scale_normal_steps};
    }
  }
  v[n++] = (cnnb_event_scalar){"images/sec", m->images_per_sec};
  v[n++] = (cnnb_event_scalar){"global_step/sec",
                               m->images_per_sec / (double)run->facts.global_batch};
  return cnnb_event_file_scalars(s->train, m->global_step, v, n);
}

cnnb_status cnnb_summaries_eval(cnnb_run *run, int64_t global_step, double top1, double top5) {
  cnnb_summaries *s = run->summaries;
  if (!s || !s->eval) return CNNB_OK;
  cnnb_event_scalar v[2] = {{"eval/Accuracy@1", top1}, {"eval/Accuracy@5", top5}};
  return cnnb_event_file_scalars(s->eval, global_step, v, 2);
}
