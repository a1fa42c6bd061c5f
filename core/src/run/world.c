/* world.c — agreement and totals across ranks (world.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "run/world.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/host_ctx.h"
#include "flags/flags.h"
#include "loader/bound_plugin.h"

/* One rank's view of the run: fixed size, so one allgather carries it. */
typedef struct rank_view {
  char model[64], device[32], strategy[48], precision[8], mode[16];
  int64_t batch_size, image_size, num_classes, replicas, param_count, num_batches, warmup_batches,
      num_eval_batches, eval_every_n_steps;
  double num_epochs, num_eval_epochs, eval_every_n_epochs;
} rank_view;

static void copy_name(char *dst, size_t size, const char *src) {
  snprintf(dst, size, "%s", src ? src : "");
}

static rank_view view_of(const cnnb_run_config *cfg, const cnnb_run_facts *facts,
                         int64_t param_count) {
  rank_view f;
  memset(&f, 0, sizeof f); /* padding too: the bytes travel */
  copy_name(f.model, sizeof f.model, facts->model.name);
  copy_name(f.device, sizeof f.device, facts->device.name);
  copy_name(f.strategy, sizeof f.strategy, facts->strategy.name);
  copy_name(f.precision, sizeof f.precision, cnnb_precision_name(cfg->precision));
  f.batch_size = facts->batch_size;
  f.image_size = facts->image_size;
  f.num_classes = facts->num_classes;
  f.replicas = facts->replicas;
  f.param_count = param_count;
  f.num_batches = cfg->num_batches;
  f.warmup_batches = cfg->num_warmup_batches;
  f.num_epochs = cfg->num_epochs;
  /* Evaluations are collectives too: ranks that evaluate at different steps, or a
   * different number of batches, would wait on each other until the timeout. */
  copy_name(f.mode, sizeof f.mode, cnnb_run_mode_name(cfg->mode));
  f.num_eval_batches = cfg->num_eval_batches;
  f.eval_every_n_steps = cfg->eval_every_n_steps;
  f.num_eval_epochs = cfg->num_eval_epochs;
  f.eval_every_n_epochs = cfg->eval_every_n_epochs;
  return f;
}

static cnnb_status allgather(const cnnb_world *w, const void *send, void *recv, int64_t bytes,
                             const char *what) {
  const cnnb_bound_plugin *s = w->strategy;
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, w->ctx, s, "allgather", s->ctx, what,
                   s->vt.strategy->allgather(s->state, send, recv, bytes));
  return st;
}

/* A world of several without an allgather: nothing could keep the ranks in step. */
static cnnb_status no_allgather(const cnnb_world *w, const char *what) {
  return cnnb_error(w->ctx, CNNB_EUNSUPPORTED, "%s: %s has no allgather", what, w->strategy->label);
}

/* "--batch_size is 32 on rank 0, 16 on rank 1" into `why`, when the ranks' values[]
 * (NULL: the rank has no such flag) differ. Each value is named once, with the first
 * rank holding it and how many more do, up to a few values. */
static bool same_value(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void describe_values(FILE *why, const char *flag, const char *const *values, int32_t world) {
  bool differs = false;
  for (int32_t r = 1; r < world && !differs; r++) differs = !same_value(values[0], values[r]);
  if (!differs) return;
  fprintf(why, "%s%s is", ftell(why) > 0 ? "; " : "", flag);
  enum { SHOWN = 4 };
  for (int32_t r = 0, shown = 0; r < world; r++) {
    bool seen = false; /* each value once, with the ranks holding it */
    for (int32_t q = 0; q < r && !seen; q++) seen = same_value(values[q], values[r]);
    if (seen) continue;
    if (shown++ == SHOWN) {
      fprintf(why, ", ...");
      break;
    }
    const char *v = values[r];
    if (!v) fprintf(why, "%s not declared on rank %d", shown > 1 ? "," : "", (int)r);
    else
      fprintf(why, "%s %s%.120s%s on rank %d", shown > 1 ? "," : "", *v ? "" : "\"", *v ? v : "",
              *v ? "" : "\"", (int)r);
    int32_t more = 0;
    for (int32_t q = r + 1; q < world; q++) more += same_value(values[q], values[r]);
    if (more) fprintf(why, " (and %d more)", (int)more);
  }
}

/* One field of rank_view as text, for describe_values. */
typedef void (*field_text)(const rank_view *f, char *buf, size_t size);

static void describe_field(FILE *why, const char *flag, const rank_view *all, int32_t world,
                           field_text text) {
  if (world <= 0) return;
  char(*texts)[128] = calloc((size_t)world, sizeof *texts);
  const char **values = calloc((size_t)world, sizeof *values);
  if (texts && values) {
    for (int32_t r = 0; r < world; r++) {
      text(&all[r], texts[r], sizeof texts[r]);
      values[r] = texts[r];
    }
    describe_values(why, flag, values, world);
  }
  free(texts);
  free(values);
}

#define TEXT_FIELD(name, fmt, expr) \
  static void name(const rank_view *f, char *buf, size_t size) { snprintf(buf, size, fmt, expr); }
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

/* The run as each rank resolved it (a model's default batch, the parameter count). */
static void describe_views(FILE *why, const rank_view *all, int32_t world) {
  static const struct {
    const char *flag;
    field_text text;
  } fields[] = {
      {"--model", model_text},
      {"--device", device_text},
      {"--variable_update", strategy_text},
      {"--precision", precision_text},
      {"--batch_size", batch_text},
      {"--image_size", image_text},
      {"--num_classes", classes_text},
      {"--num_gpus", replicas_text},
      {"the parameter count", params_text},
      {"--num_batches", batches_text},
      {"--num_warmup_batches", warmup_text},
      {"--num_epochs", epochs_text},
      {"the mode (--eval, --forward_only, --input_only)", mode_text},
      {"--num_eval_batches", eval_batches_text},
      {"--eval_during_training_every_n_steps", eval_steps_text},
      {"--num_eval_epochs", eval_epochs_text},
      {"--eval_during_training_every_n_epochs", eval_every_epochs_text},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    describe_field(why, fields[i].flag, all, world, fields[i].text);
}

/* ---- every flag (flags.h's agreement text) -------------------------------------- */

/* FNV-1a: equal texts give equal digests; the texts travel only when digests differ. */
static uint64_t digest_of(const char *text, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
  return h;
}

/* The value of `name` in one rank's agreement text ("name\tvalue\n" lines), copied into
 * out; NULL when the rank declares no such flag. */
static const char *value_in(const char *text, const char *name, char *out, size_t size) {
  size_t n = strlen(name);
  for (const char *line = text; *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    if (len > n && strncmp(line, name, n) == 0 && line[n] == '\t') {
      snprintf(out, size, "%.*s", (int)(len - n - 1), line + n + 1);
      return out;
    }
    line += len + (eol ? 1 : 0);
  }
  return NULL;
}

/* Names every flag whose value differs between the texts, rank 0's flags first, then
 * any flag only another rank declares (a plugin loaded there alone); a flag the views
 * already named (*said, the text so far) is not named twice. */
static cnnb_status describe_flags(FILE *why, char *const *said, char *const *texts, int32_t world) {
  enum { VALUE = 256, NAME = 128 };
  if (world <= 0) return CNNB_OK;
  const char **values = calloc((size_t)world, sizeof *values);
  char(*bufs)[VALUE] = calloc((size_t)world, sizeof *bufs);
  if (!values || !bufs) {
    free(values);
    free(bufs);
    return CNNB_ENOMEM;
  }
  for (int32_t owner = 0; owner < world; owner++) {
    for (const char *line = texts[owner]; *line;) {
      const char *tab = strchr(line, '\t'), *eol = strchr(line, '\n');
      if (!tab || !eol || tab > eol) break;
      char name[NAME];
      snprintf(name, sizeof name, "%.*s", (int)(tab - line), line);
      bool earlier = false; /* a lower rank declared it: described there */
      for (int32_t q = 0; q < owner && !earlier; q++)
        earlier = value_in(texts[q], name, bufs[0], sizeof bufs[0]) != NULL;
      if (!earlier) {
        for (int32_t r = 0; r < world; r++)
          values[r] = value_in(texts[r], name, bufs[r], sizeof bufs[r]);
        char flag[NAME + 2], named[NAME + 8];
        snprintf(flag, sizeof flag, "--%s", name);
        snprintf(named, sizeof named, "%s is ", flag);
        fflush(why);
        if (!*said || !strstr(*said, named)) describe_values(why, flag, values, world);
      }
      line = eol + 1;
    }
  }
  free(values);
  free(bufs);
  return CNNB_OK;
}

/* Every rank's flags against every other's: a digest each, then the texts themselves
 * only when the digests differ, to name what differs. */
static cnnb_status compare_flags(const cnnb_world *w, FILE *why, char *const *said) {
  size_t len = 0;
  char *text = cnnb_flags_agreement_text(cnnb_ctx_flags(w->ctx), &len);
  if (!text) return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  uint64_t mine[2] = {digest_of(text, len), (uint64_t)len};
  uint64_t *digests = calloc((size_t)w->size * 2, sizeof *digests);
  cnnb_status st = digests ? allgather(w, mine, digests, (int64_t)sizeof mine,
                                       "comparing the ranks' flags")
                           : cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  bool differ = false;
  uint64_t longest = 0;
  for (int32_t r = 0; st == CNNB_OK && r < w->size; r++) {
    differ |= digests[2 * r] != mine[0] || digests[2 * r + 1] != mine[1];
    if (digests[2 * r + 1] > longest) longest = digests[2 * r + 1];
  }
  /* Every rank saw the same digests, so all of them take this branch or none does. */
  if (st == CNNB_OK && differ) {
    size_t stride = (size_t)longest + 1;
    char *padded = calloc(stride, 1), *all = calloc((size_t)w->size, stride);
    char **texts = calloc((size_t)w->size, sizeof *texts);
    if (!padded || !all || !texts) st = cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
    if (st == CNNB_OK) {
      memcpy(padded, text, len);
      st = allgather(w, padded, all, (int64_t)stride, "gathering the ranks' flags");
    }
    for (int32_t r = 0; st == CNNB_OK && r < w->size; r++) texts[r] = all + (size_t)r * stride;
    if (st == CNNB_OK && describe_flags(why, said, texts, w->size) != CNNB_OK)
      st = cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
    free(texts);
    free(all);
    free(padded);
  }
  free(digests);
  free(text);
  return st;
}

cnnb_status cnnb_world_check_agreement(const cnnb_world *w, const cnnb_run_config *cfg,
                                       const cnnb_run_facts *facts, int64_t param_count) {
  if (w->size <= 1) return CNNB_OK;
  if (!w->strategy->vt.strategy->allgather)
    return cnnb_error(w->ctx, CNNB_EUNSUPPORTED,
                      "%s reports %d processes but has no allgather (ABI 1.4): the host cannot "
                      "check that the ranks run the same thing, nor total their images",
                      w->strategy->label, (int)w->size);
  rank_view mine = view_of(cfg, facts, param_count);
  rank_view *all = calloc((size_t)w->size, sizeof *all);
  if (!all) return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(w, &mine, all, (int64_t)sizeof mine,
                             "comparing the ranks' run configurations");
  char *why = NULL;
  size_t len = 0;
  FILE *out = st == CNNB_OK ? open_memstream(&why, &len) : NULL;
  if (st == CNNB_OK && !out) st = cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  if (out) {
    describe_views(out, all, w->size);
    /* The flags even when the views differ: every rank must take part in the exchange,
     * and the user gets every difference in one message. */
    st = compare_flags(w, out, &why);
    fclose(out);
    if (st == CNNB_OK && len > 0)
      st = cnnb_error(w->ctx, CNNB_EINVAL,
                      "ranks disagree on the run: %s. Every process of the job must be "
                      "started with the same flags (those marked \"may differ per rank\" in "
                      "--help excepted)",
                      why);
  }
  free(why);
  free(all);
  return st;
}

cnnb_status cnnb_world_total(const cnnb_world *w, double images, double seconds,
                             double *images_per_sec) {
  *images_per_sec = seconds > 0 ? images / seconds : 0;
  if (w->size <= 1) return CNNB_OK;
  double mine[2] = {images, seconds};
  double *all = calloc((size_t)w->size * 2, sizeof *all);
  if (!all) return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(w, mine, all, (int64_t)sizeof mine, "gathering the ranks' step times");
  if (st == CNNB_OK) {
    double total_images = 0, slowest = 0;
    for (int32_t r = 0; r < w->size; r++) {
      total_images += all[2 * r];
      if (all[2 * r + 1] > slowest) slowest = all[2 * r + 1];
    }
    *images_per_sec = slowest > 0 ? total_images / slowest : 0;
  }
  free(all);
  return st;
}

cnnb_status cnnb_world_sum(const cnnb_world *w, int64_t *values, int32_t count, const char *what) {
  if (w->size <= 1 || count <= 0) return CNNB_OK;
  if (!w->strategy->vt.strategy->allgather) return no_allgather(w, what);
  size_t n = (size_t)count;
  int64_t *all = calloc((size_t)w->size * n, sizeof *all);
  if (!all) return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(w, values, all, (int64_t)(n * sizeof *values), what);
  if (st == CNNB_OK) {
    for (size_t k = 0; k < n; k++) values[k] = 0;
    for (int32_t r = 0; r < w->size; r++)
      for (size_t k = 0; k < n; k++) values[k] += all[(size_t)r * n + k];
  }
  free(all);
  return st;
}

/* Every rank's value of one counter, allgathered; NULL on a world of one. */
static cnnb_status gather_one(const cnnb_world *w, int64_t value, const char *what, int64_t **all) {
  *all = NULL;
  if (w->size <= 1) return CNNB_OK;
  if (!w->strategy->vt.strategy->allgather) return no_allgather(w, what);
  if (!(*all = calloc((size_t)w->size, sizeof **all)))
    return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = allgather(w, &value, *all, (int64_t)sizeof value, what);
  if (st != CNNB_OK) {
    free(*all);
    *all = NULL;
  }
  return st;
}

cnnb_status cnnb_world_check_same(const cnnb_world *w, int64_t value, const char *what) {
  int64_t *all;
  cnnb_status st = gather_one(w, value, what, &all);
  if (st != CNNB_OK || !all) return st;
  for (int32_t r = 1; r < w->size && st == CNNB_OK; r++)
    if (all[r] != all[0])
      st = cnnb_error(w->ctx, CNNB_EINVAL, "%s: %" PRId64 " on rank 0, %" PRId64 " on rank %d",
                      what, all[0], all[r], (int)r);
  free(all);
  return st;
}

cnnb_status cnnb_world_rank0_value(const cnnb_world *w, int64_t *value, const char *what) {
  int64_t *all;
  cnnb_status st = gather_one(w, *value, what, &all);
  if (st == CNNB_OK && all) *value = all[0];
  free(all);
  return st;
}
