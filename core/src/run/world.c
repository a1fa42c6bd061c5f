/* world.c — agreement and totals across ranks (world.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "run/world.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash_guard.h"
#include "graph/graph_internal.h"

/* One rank's view of the run: fixed size, so one allgather carries it. */
typedef struct run_facts {
  char model[64], device[32], strategy[48], precision[8], mode[16];
  int64_t batch_size, image_size, num_classes, replicas, param_count, num_batches,
      warmup_batches, num_eval_batches, eval_every_n_steps;
  double num_epochs, num_eval_epochs, eval_every_n_epochs;
} run_facts;

static void copy_name(char *dst, size_t size, const char *src) {
  snprintf(dst, size, "%s", src ? src : "");
}

static run_facts facts_of(const cnnb_run *run) {
  run_facts f;
  memset(&f, 0, sizeof f); /* padding too: the bytes travel */
  copy_name(f.model, sizeof f.model, run->model.name);
  copy_name(f.device, sizeof f.device, run->device.name);
  copy_name(f.strategy, sizeof f.strategy, run->strategy.name);
  copy_name(f.precision, sizeof f.precision, cnnb_precision_name(run->cfg->precision));
  f.batch_size = run->batch_size;
  f.image_size = run->image_size;
  f.num_classes = run->num_classes;
  f.replicas = run->num_replicas;
  f.param_count = cnnb_graph_param_arena_count(run->graph);
  f.num_batches = run->cfg->num_batches;
  f.warmup_batches = run->cfg->num_warmup_batches;
  f.num_epochs = run->cfg->num_epochs;
  /* Evaluations are collectives too: ranks that evaluate at different steps, or a
   * different number of batches, would wait on each other until the timeout. */
  copy_name(f.mode, sizeof f.mode, cnnb_run_mode_name(run->cfg->mode));
  f.num_eval_batches = run->cfg->num_eval_batches;
  f.eval_every_n_steps = run->cfg->eval_every_n_steps;
  f.num_eval_epochs = run->cfg->num_eval_epochs;
  f.eval_every_n_epochs = run->cfg->eval_every_n_epochs;
  return f;
}

static cnnb_status allgather(cnnb_run *run, const void *send, void *recv, int64_t bytes,
                             const char *what) {
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "allgather", what);
  cnnb_status st = run->strategy_vt->allgather(run->strategy_state, send, recv, bytes);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, what);
  return CNNB_OK;
}

/* "--batch_size is 32 on rank 0, 16 on rank 1" into `why`, for one field, when the ranks
 * differ in it. Ranks are named by the first few holding each value. */
typedef void (*field_text)(const run_facts *f, char *buf, size_t size);

static void describe_field(FILE *why, const char *flag, const run_facts *all, int32_t world,
                           field_text text) {
  char first[128], value[128];
  text(&all[0], first, sizeof first);
  bool differs = false;
  for (int32_t r = 1; r < world && !differs; r++) {
    text(&all[r], value, sizeof value);
    differs = strcmp(first, value) != 0;
  }
  if (!differs) return;
  fprintf(why, "%s%s is", ftell(why) > 0 ? "; " : "", flag);
  enum { SHOWN = 4 };
  for (int32_t r = 0, shown = 0; r < world; r++) {
    text(&all[r], value, sizeof value);
    bool seen = false; /* each value once, with the ranks holding it */
    for (int32_t q = 0; q < r && !seen; q++) {
      char earlier[128];
      text(&all[q], earlier, sizeof earlier);
      seen = strcmp(earlier, value) == 0;
    }
    if (seen) continue;
    if (shown++ == SHOWN) {
      fprintf(why, ", ...");
      break;
    }
    fprintf(why, "%s %s on rank %d", shown > 1 ? "," : "", value, (int)r);
    int32_t more = 0;
    for (int32_t q = r + 1; q < world; q++) {
      char later[128];
      text(&all[q], later, sizeof later);
      if (strcmp(later, value) == 0) more++;
    }
    if (more) fprintf(why, " (and %d more)", (int)more);
  }
}

#define TEXT_FIELD(name, fmt, expr)                                        \
  static void name(const run_facts *f, char *buf, size_t size) {          \
    snprintf(buf, size, fmt, expr);                                        \
  }
TEXT_FIELD(model_text, "%s", f->model)
TEXT_FIELD(device_text, "%s", f->device)
TEXT_FIELD(strategy_text, "%s", f->strategy)
TEXT_FIELD(precision_text, "%s", f->precision)
TEXT_FIELD(batch_text, "%" PRId64, f->batch_size)
TEXT_FIELD(image_text, "%" PRId64, f->image_size)
TEXT_FIELD(classes_text, "%" PRId64, f->num_classes)
TEXT_FIELD(replicas_text, "%" PRId64, f->replicas)
TEXT_FIELD(params_text, "%" PRId64, f->param_count)
TEXT_FIELD(batches_text, "%" PRId64, f->num_batches)
TEXT_FIELD(warmup_text, "%" PRId64, f->warmup_batches)
TEXT_FIELD(epochs_text, "%g", f->num_epochs)
TEXT_FIELD(mode_text, "%s", f->mode)
TEXT_FIELD(eval_batches_text, "%" PRId64, f->num_eval_batches)
TEXT_FIELD(eval_steps_text, "%" PRId64, f->eval_every_n_steps)
TEXT_FIELD(eval_epochs_text, "%g", f->num_eval_epochs)
TEXT_FIELD(eval_every_epochs_text, "%g", f->eval_every_n_epochs)
#undef TEXT_FIELD

cnnb_status cnnb_world_check_agreement(cnnb_run *run) {
  if (run->world_size <= 1) return CNNB_OK;
  if (!run->strategy_vt->allgather)
    return cnnb_error(run->ctx, CNNB_EUNSUPPORTED,
                      "%s reports %d processes but has no allgather (ABI 1.4): the host cannot "
                      "check that the ranks run the same thing, nor total their images",
                      run->strategy.label, (int)run->world_size);
  run_facts mine = facts_of(run);
  run_facts *all = calloc((size_t)run->world_size, sizeof *all);
  if (!all) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(run, &mine, all, (int64_t)sizeof mine,
                             "comparing the ranks' run configurations");
  char *why = NULL;
  size_t len = 0;
  FILE *out = st == CNNB_OK ? open_memstream(&why, &len) : NULL;
  if (st == CNNB_OK && !out) st = cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  if (out) {
    static const struct {
      const char *flag;
      field_text text;
    } fields[] = {
        {"--model", model_text},          {"--device", device_text},
        {"--variable_update", strategy_text}, {"--precision", precision_text},
        {"--batch_size", batch_text},     {"--image_size", image_text},
        {"--num_classes", classes_text},  {"--num_gpus", replicas_text},
        {"the parameter count", params_text}, {"--num_batches", batches_text},
        {"--num_warmup_batches", warmup_text}, {"--num_epochs", epochs_text},
        {"the mode (--eval, --forward_only, --input_only)", mode_text},
        {"--num_eval_batches", eval_batches_text},
        {"--eval_during_training_every_n_steps", eval_steps_text},
        {"--num_eval_epochs", eval_epochs_text},
        {"--eval_during_training_every_n_epochs", eval_every_epochs_text},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
      describe_field(out, fields[i].flag, all, run->world_size, fields[i].text);
    fclose(out);
    if (len > 0)
      st = cnnb_error(run->ctx, CNNB_EINVAL,
                      "ranks disagree on the run: %s. Every process of the job must be "
                      "started with the same flags", why);
  }
  free(why);
  free(all);
  return st;
}

cnnb_status cnnb_world_total(cnnb_run *run, double images, double seconds,
                             double *images_per_sec) {
  *images_per_sec = seconds > 0 ? images / seconds : 0;
  if (run->world_size <= 1) return CNNB_OK;
  double mine[2] = {images, seconds};
  double *all = calloc((size_t)run->world_size * 2, sizeof *all);
  if (!all) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(run, mine, all, (int64_t)sizeof mine, "gathering the ranks' step times");
  if (st == CNNB_OK) {
    double total_images = 0, slowest = 0;
    for (int32_t r = 0; r < run->world_size; r++) {
      total_images += all[2 * r];
      if (all[2 * r + 1] > slowest) slowest = all[2 * r + 1];
    }
    *images_per_sec = slowest > 0 ? total_images / slowest : 0;
  }
  free(all);
  return st;
}

cnnb_status cnnb_world_sum(cnnb_run *run, int64_t *values, int32_t count, const char *what) {
  if (run->world_size <= 1 || count <= 0) return CNNB_OK;
  if (!run->strategy_vt->allgather)
    return cnnb_error(run->ctx, CNNB_EUNSUPPORTED, "%s: %s has no allgather", what,
                      run->strategy.label);
  size_t n = (size_t)count;
  int64_t *all = calloc((size_t)run->world_size * n, sizeof *all);
  if (!all) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(run, values, all, (int64_t)(n * sizeof *values), what);
  if (st == CNNB_OK) {
    for (size_t k = 0; k < n; k++) values[k] = 0;
    for (int32_t r = 0; r < run->world_size; r++)
      for (size_t k = 0; k < n; k++) values[k] += all[(size_t)r * n + k];
  }
  free(all);
  return st;
}

/* Every rank's value of one counter, allgathered; NULL on a world of one. */
static cnnb_status gather_one(cnnb_run *run, int64_t value, const char *what, int64_t **all) {
  *all = NULL;
  if (run->world_size <= 1) return CNNB_OK;
  if (!run->strategy_vt->allgather)
    return cnnb_error(run->ctx, CNNB_EUNSUPPORTED, "%s: %s has no allgather", what,
                      run->strategy.label);
  if (!(*all = calloc((size_t)run->world_size, sizeof **all)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(run, &value, *all, (int64_t)sizeof value, what);
  if (st != CNNB_OK) {
    free(*all);
    *all = NULL;
  }
  return st;
}

cnnb_status cnnb_world_check_same(cnnb_run *run, int64_t value, const char *what) {
  int64_t *all;
  cnnb_status st = gather_one(run, value, what, &all);
  if (st != CNNB_OK || !all) return st;
  for (int32_t r = 1; r < run->world_size && st == CNNB_OK; r++)
    if (all[r] != all[0])
      st = cnnb_error(run->ctx, CNNB_EINVAL, "%s: %" PRId64 " on rank 0, %" PRId64 " on rank %d",
                      what, all[0], all[r], (int)r);
  free(all);
  return st;
}

cnnb_status cnnb_world_rank0_value(cnnb_run *run, int64_t *value, const char *what) {
  int64_t *all;
  cnnb_status st = gather_one(run, *value, what, &all);
  if (st == CNNB_OK && all) *value = all[0];
  free(all);
  return st;
}
