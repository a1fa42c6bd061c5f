/* checkpoint.c — a run's state to and from a safetensors checkpoint (checkpoint.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "run/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/dir_lock.h"
#include "base/writable.h"
#include "graph/graph_internal.h"
#include "report/benchmark_log.h"
#include "run/world.h"
#include "store/checkpoint_dir.h"
#include "store/checkpoint_tensors.h"

#define META(key) "cnnbench." key

/* What the module keeps between setup and the end of the run. */
struct cnnb_checkpoints {
  cnnb_safetensors *resume_file; /* found at setup, until its optimizer state is restored */
  char *resume_path;
  char *resumed_from;    /* the checkpoint the run's weights came from, for the whole run */
  double last_save_time; /* when the last save ended (cnnb_now_seconds) */
  char *last_saved;      /* rank 0: the last save's path; NULL before one */
  cnnb_dir_lock *lock;   /* rank 0 of a training run: the one writer of --train_dir */
};

void cnnb_checkpoints_free(cnnb_checkpoints *c) {
  if (!c) return;
  cnnb_safetensors_close(c->resume_file);
  free(c->resume_path);
  free(c->resumed_from);
  free(c->last_saved);
  cnnb_dir_lock_release(c->lock);
  free(c);
}

const char *cnnb_checkpoint_resumed_from(const cnnb_run *run) {
  return run->checkpoints ? run->checkpoints->resumed_from : NULL;
}

const char *cnnb_checkpoint_last_saved(const cnnb_run *run) {
  return run->checkpoints ? run->checkpoints->last_saved : NULL;
}

static void arenas_free(cnnb_ckpt_arenas *h) {
  free(h->params);
  free(h->stats);
  free(h->slot[0]);
  free(h->slot[1]);
  free(h->ones);
}

/* ---- reading replica 0's state ---------------------------------------------------------- */

/* Whether the strategy keeps the variables (and so the optimizer's slots) itself. */
static bool keeps_variables(const cnnb_run *run) {
  return run->facts.strategy.vt.strategy->apply_update != NULL;
}

/* The strategy's CNNB_EXT_STRATEGY_OPTIMIZER_STATE when it keeps the slots itself. */
static const cnnb_strategy_optimizer_state *strategy_slots(const cnnb_run *run) {
  if (!keeps_variables(run)) return NULL;
  const cnnb_strategy_optimizer_state *ext =
      cnnb_bound_extension(&run->facts.strategy, run->facts.strategy.state,
                           CNNB_EXT_STRATEGY_OPTIMIZER_STATE,
                           CNNB_EXT_NEEDS(cnnb_strategy_optimizer_state, set_slot));
  return ext && ext->get_slot && ext->set_slot ? ext : NULL;
}

static float *alloc_floats(cnnb_run *run, int64_t count) {
  float *p = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
  if (!p)
    cnnb_error(run->ctx, CNNB_ENOMEM, "checkpoint: out of memory for %lld floats",
               (long long)count);
  return p;
}

/* Slot `slot` of the whole arena into *out (NULL when the rule has none). */
static cnnb_status read_slot(cnnb_run *run, int slot, float **out) {
  *out = NULL;
  uint32_t rule = run->cfg->trainer.rule;
  if (!cnnb_ckpt_slot_name(rule, slot)) return CNNB_OK;
  int64_t count = cnnb_graph_param_arena_count(run->graph);
  const cnnb_strategy_optimizer_state *keeper = strategy_slots(run);
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  cnnb_status st;
  if (keeps_variables(run)) {
    /* Collective: every rank takes part even though only rank 0 writes. */
    if (!(*out = alloc_floats(run, count))) return CNNB_ENOMEM;
    int32_t exists = 0;
    CNNB_PLUGIN_CALL(st, run->ctx, strategy, "get_slot", strategy->ctx,
                     "reading the optimizer's slots",
                     keeper->get_slot(strategy->state, slot, *out, count, &exists));
    if (st != CNNB_OK) return st;
    if (!exists) {
      free(*out);
      *out = NULL;
    }
    return CNNB_OK;
  }
  if (run->facts.world.rank != 0) return CNNB_OK; /* only rank 0 writes */
  cnnb_replica *r = &run->replicas[0];
  float *device_slot = slot == 1 ? cnnb_trainer_slot1(r->trainer) : cnnb_trainer_slot2(r->trainer);
  if (!device_slot) return CNNB_OK;
  if (!(*out = alloc_floats(run, count))) return CNNB_ENOMEM;
  CNNB_PLUGIN_CALL(st, run->ctx, &run->facts.device, "copy_to_host", r->device_ctx,
                   "reading the optimizer's slots",
                   run->facts.device.vt.device->copy_to_host(r->device, *out, device_slot,
                                                             (size_t)count * sizeof(float)));
  return st;
}

static cnnb_status read_state(cnnb_run *run, int64_t global_step, cnnb_ckpt_arenas *h) {
  const cnnb_graph *g = run->graph;
  cnnb_replica *r = &run->replicas[0];
  memset(h, 0, sizeof *h);
  h->step = global_step;
  cnnb_status st;
  for (int slot = 1; slot <= 2; slot++)
    if ((st = read_slot(run, slot, &h->slot[slot - 1])) != CNNB_OK) return st;
  if (run->facts.world.rank != 0) return CNNB_OK;
  if (!(h->params = alloc_floats(run, cnnb_graph_param_arena_count(g))) ||
      !(h->stats = alloc_floats(run, cnnb_graph_stat_arena_count(g))))
    return CNNB_ENOMEM;
  CNNB_GUARDED(run->facts.device.label, "copy_to_host", "parameters",
               st = cnnb_executor_download_params(r->executor, h->params, h->stats));
  if (st != CNNB_OK) return st;
  int64_t widest = 1;
  for (int32_t n = 0; n < cnnb_graph_num_nodes(g); n++) {
    const cnnb_node *node = cnnb_graph_node(g, n);
    if (node->op == CNNB_OP_BATCH_NORM && node->shape.c > widest) widest = node->shape.c;
  }
  if (!(h->ones = alloc_floats(run, widest))) return CNNB_ENOMEM;
  for (int64_t i = 0; i < widest; i++) h->ones[i] = 1.0f;
  return CNNB_OK;
}

/* ---- metadata ------------------------------------------------------------------------------- */

enum { META_MAX = 24, META_VALUE = 64 };

typedef struct metadata {
  cnnb_st_meta items[META_MAX];
  char values[META_MAX][META_VALUE];
  size_t count;
  char *config; /* the run as the core read it, as "key=value" lines */
} metadata;

static void meta_add(metadata *m, const char *key, const char *fmt, ...) CNNB_PRINTF(3, 4);
static void meta_add(metadata *m, const char *key, const char *fmt, ...) {
  if (m->count == META_MAX) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->values[m->count], META_VALUE, fmt, ap);
  va_end(ap);
  m->items[m->count] = (cnnb_st_meta){key, m->values[m->count]};
  m->count++;
}

/* The run's configuration as the core read it (run_config.h), one "name=value" per line:
 * enough to see how a checkpoint was trained. */
static char *describe_config(const cnnb_run *run) {
  const cnnb_run_config *c = run->cfg;
  const cnnb_run_facts *facts = &run->facts;
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (!f) return NULL;
  fprintf(f,
          "model=%s\ndevice=%s\nvariable_update=%s\ndatasource=%s\ndata_name=%s\n"
          "data_dir=%s\nbatch_size=%d\nnum_gpus=%d\nranks=%d\nimage_size=%d\nnum_classes=%d\n"
          "precision=%s\noptimizer=%s\nmomentum=%g\nweight_decay=%g\ngradient_clip=%g\n"
          "seed=%" PRIu64 "\nnum_warmup_batches=%" PRId64 "\n",
          facts->model.name, facts->device.name, facts->strategy.name, facts->datasource.name,
          c->dataset->name, c->data_dir, (int)facts->batch_size, (int)facts->replicas,
          (int)facts->world.size, (int)facts->image_size, (int)facts->num_classes,
          cnnb_precision_name(c->precision), cnnb_optimizer_rule_name(c->trainer.rule),
          (double)c->trainer.momentum, (double)c->trainer.weight_decay,
          (double)c->trainer.gradient_clip, c->seed, c->num_warmup_batches);
  if (run->replicas && run->replicas[0].trainer)
    fprintf(f, "trainer=%s\n", cnnb_trainer_describe(run->replicas[0].trainer));
  fclose(f);
  return text;
}

static void make_metadata(const cnnb_run *run, int64_t global_step, metadata *m) {
  memset(m, 0, sizeof *m);
  cnnb_trainer_state state = {0, 1.0f, 0};
  if (run->replicas[0].trainer) cnnb_trainer_get_state(run->replicas[0].trainer, &state);
  meta_add(m, "format", "pt"); /* what Hugging Face tools expect of a PyTorch state dict */
  meta_add(m, META("version"), "%s", CNNB_VERSION_STRING);
  meta_add(m, META("model"), "%s", run->facts.model.name);
  meta_add(m, META("dataset"), "%s", run->cfg->dataset->name);
  meta_add(m, META("num_classes"), "%d", (int)run->facts.num_classes);
  meta_add(m, META("image_size"), "%d", (int)run->facts.image_size);
  meta_add(m, META("precision"), "%s", cnnb_precision_name(run->cfg->precision));
  meta_add(m, META("optimizer"), "%s", cnnb_optimizer_rule_name(run->cfg->trainer.rule));
  meta_add(m, META("global_step"), "%" PRId64, global_step);
  meta_add(m, META("updates"), "%" PRId64, state.updates);
  meta_add(m, META("loss_scale"), "%.9g", (double)state.loss_scale);
  meta_add(m, META("loss_scale_normal_steps"), "%" PRId64, state.loss_scale_normal_steps);
  m->config = describe_config(run);
  if (m->config && m->count < META_MAX)
    m->items[m->count++] = (cnnb_st_meta){META("config"), m->config};
}

/* ---- saving --------------------------------------------------------------------------------- */

/* Rank 0's part: the file. */
static cnnb_status write_checkpoint(cnnb_run *run, int64_t global_step, const cnnb_ckpt_arenas *h,
                                    char **path) {
  cnnb_ckpt_tensors l = {0};
  metadata m;
  make_metadata(run, global_step, &m);
  cnnb_status st = CNNB_OK;
  if (!cnnb_ckpt_add_model(&l, run->graph, h) ||
      !cnnb_ckpt_add_slots(&l, run->graph, run->cfg->trainer.rule, h))
    st = cnnb_error(run->ctx, CNNB_ENOMEM, "checkpoint: out of memory for its tensor list");
  if (st == CNNB_OK)
    st = cnnb_checkpoint_dir_save(run->ctx, run->cfg->train_dir, global_step,
                                  run->cfg->max_ckpts_to_keep, l.items, l.count, m.items, m.count,
                                  path);
  free(m.config);
  cnnb_ckpt_tensors_free(&l);
  return st;
}

cnnb_status cnnb_checkpoint_save(cnnb_run *run, int64_t global_step) {
  cnnb_checkpoints *c = run->checkpoints;
  double start = cnnb_now_seconds();
  cnnb_ckpt_arenas h;
  cnnb_status st = read_state(run, global_step, &h);
  char *path = NULL;
  if (st == CNNB_OK && run->facts.world.rank == 0)
    st = write_checkpoint(run, global_step, &h, &path);
  arenas_free(&h);
  /* Every rank learns whether rank 0's write worked, so no rank trains on alone. */
  int64_t failed = st != CNNB_OK;
  cnnb_status world = cnnb_world_sum(&run->facts.world, &failed, 1,
                                     "agreeing that the checkpoint was saved");
  if (st == CNNB_OK && world != CNNB_OK) st = world;
  if (st == CNNB_OK && failed)
    st = cnnb_error(run->ctx, CNNB_EIO,
                    "rank 0 could not save the checkpoint of step %" PRId64
                    " in %s (its message says why)",
                    global_step, run->cfg->train_dir);
  c->last_save_time = cnnb_now_seconds();
  if (st == CNNB_OK && path) {
    cnnb_log(run->ctx, CNNB_LOG_INFO, "saved checkpoint %s (step %" PRId64 ", %.2f s)", path,
             global_step, c->last_save_time - start);
    st = cnnb_benchmark_log_checkpoint(run->log, global_step, path, c->last_save_time - start);
  }
  if (st == CNNB_OK && path) {
    free(c->last_saved);
    c->last_saved = path;
  } else {
    free(path);
  }
  return st;
}

cnnb_status cnnb_checkpoint_due(cnnb_run *run, int64_t global_step, bool *due) {
  const cnnb_run_config *c = run->cfg;
  *due = false;
  if (!*c->train_dir || c->mode != CNNB_MODE_TRAIN) return CNNB_OK;
  if (c->save_model_steps > 0 && global_step % c->save_model_steps == 0) {
    *due = true;
    return CNNB_OK;
  }
  if (!(c->save_model_secs > 0)) return CNNB_OK;
  int64_t elapsed = cnnb_now_seconds() - run->checkpoints->last_save_time >= c->save_model_secs;
  cnnb_status st = cnnb_world_rank0_value(&run->facts.world, &elapsed,
                                          "agreeing when to save a checkpoint");
  *due = elapsed != 0;
  return st;
}

/* ---- loading -------------------------------------------------------------------------------- */

/* A "cnnbench.*" integer, or `fallback` when the file has none (a torchvision file). */
static cnnb_status meta_int(cnnb_ctx *ctx, const cnnb_safetensors *f, const char *path,
                            const char *key, int64_t fallback, int64_t *out) {
  const char *v = cnnb_safetensors_meta(f, key);
  *out = fallback;
  if (!v) return CNNB_OK;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (errno || end == v || *end || n < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "checkpoint %s: metadata %s=\"%s\" is not a count", path,
                      key, v);
  *out = n;
  return CNNB_OK;
}

/* checkpoint_dir's check: the newest file must be this model's. */
static cnnb_status check_model_name(void *user, cnnb_ctx *ctx, const cnnb_safetensors *f,
                                    const char *path) {
  const cnnb_run *run = user;
  const char *name = run->facts.model.name;
  const char *model = cnnb_safetensors_meta(f, META("model"));
  if (model && strcmp(model, name) != 0)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "checkpoint %s is of model '%s', this run's is '%s': "
                      "give another --train_dir or --model=%s",
                      path, model, name, model);
  const char *classes = cnnb_safetensors_meta(f, META("num_classes"));
  char mine[16];
  snprintf(mine, sizeof mine, "%d", (int)run->facts.num_classes);
  if (classes && strcmp(classes, mine) != 0)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "checkpoint %s has %s classes, this run %s (--num_classes, --data_name)",
                      path, classes, mine);
  return CNNB_OK;
}

/* Uploads host arenas into every replica's executor. */
static cnnb_status upload_all(cnnb_run *run, const float *params, const float *stats) {
  cnnb_status st = CNNB_OK;
  CNNB_GUARDED(run->facts.device.label, "copy_to_device", "checkpoint", {
    for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++)
      st = cnnb_executor_upload_params(run->replicas[i].executor, params, stats);
  });
  return st;
}

/* Rank 0 of a training run, before anything else touches --train_dir: made, found
 * writable (a test file), locked for this run alone, and cleared of dead saves' temporary
 * files (only its one writer may: another host's live pid looks gone from here). */
static cnnb_status take_train_dir(cnnb_run *run, cnnb_checkpoints *ck) {
  const char *dir = run->cfg->train_dir;
  cnnb_status st = cnnb_checkpoint_dir_make(run->ctx, dir);
  if (st == CNNB_OK) st = cnnb_check_writable(run->ctx, "--train_dir", dir);
  if (st == CNNB_OK) st = cnnb_dir_lock_take(run->ctx, "--train_dir", dir, &ck->lock);
  if (st == CNNB_OK) cnnb_checkpoint_dir_tidy(run->ctx, dir);
  return st;
}

/* A --train_dir that holds checkpoint files none of which reads back whole: refused,
 * naming each and why, unless training was told to start over them. */
static cnnb_status refuse_unreadable(cnnb_run *run, const cnnb_checkpoint_found *found) {
  const cnnb_run_config *c = run->cfg;
  bool training = c->mode == CNNB_MODE_TRAIN;
  size_t bad = cnnb_checkpoint_found_unreadable(found);
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (!f) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  const char *why;
  for (size_t k = 0; (why = cnnb_checkpoint_found_why(found, k, NULL)) != NULL; k++)
    fprintf(f, "\n  %s", why);
  fclose(f);
  cnnb_status st =
      cnnb_error(run->ctx, CNNB_EIO,
                 "--train_dir=%s holds %zu checkpoint file(s) and none reads back whole, so %s:%s\n"
                 "fix or move them away%s (no file is deleted or saved over)",
                 c->train_dir, bad, training ? "nothing was trained" : "there is none to evaluate",
                 text ? text : "",
                 training ? ", or give --ignore_unreadable_checkpoints to train from step 0 anyway"
                          : "");
  free(text);
  return st;
}

/* Every rank learns whether rank 0 could take --train_dir, so none goes on alone. */
static cnnb_status agree_on_train_dir(cnnb_run *run, cnnb_status st) {
  int64_t failed = st != CNNB_OK;
  cnnb_status world = cnnb_world_sum(&run->facts.world, &failed, 1,
                                     "agreeing that rank 0 could take --train_dir");
  if (st != CNNB_OK) return st;
  if (world != CNNB_OK) return world;
  if (failed)
    return cnnb_error(run->ctx, CNNB_EIO,
                      "rank 0 could not take --train_dir=%s (its message says why)",
                      run->cfg->train_dir);
  return CNNB_OK;
}

/* The checkpoint to start from (the newest that reads back whole) into ck, a warning for
 * each file that does not, and, on the writer, the index made to agree with the files. */
static cnnb_status find_checkpoint(cnnb_run *run, cnnb_checkpoints *ck, bool writer) {
  const cnnb_run_config *c = run->cfg;
  cnnb_checkpoint_found *found;
  cnnb_status st = cnnb_checkpoint_dir_find(run->ctx, c->train_dir, check_model_name, run, &found);
  if (st != CNNB_OK) return st;
  size_t bad = cnnb_checkpoint_found_unreadable(found);
  bool none = !cnnb_checkpoint_found_path(found);
  if (none && bad && !(c->mode == CNNB_MODE_TRAIN && c->ignore_unreadable_checkpoints)) {
    st = refuse_unreadable(run, found);
  } else {
    cnnb_checkpoint_found_warn(run->ctx, found);
    if (none && bad)
      cnnb_log(run->ctx, CNNB_LOG_WARN,
               "--ignore_unreadable_checkpoints: training starts at step 0 in %s, over %zu "
               "checkpoint file(s) that do not read back whole (kept: never deleted or saved "
               "over)",
               c->train_dir, bad);
    if (writer) st = cnnb_checkpoint_dir_reindex(run->ctx, c->train_dir, found);
  }
  if (st == CNNB_OK) cnnb_checkpoint_found_take(found, &ck->resume_file, &ck->resume_path);
  cnnb_checkpoint_found_free(found);
  return st;
}

cnnb_status cnnb_checkpoint_restore_model(cnnb_run *run) {
  const cnnb_run_config *c = run->cfg;
  run->facts.start_step = 0;
  if (!*c->train_dir) return CNNB_OK;
  cnnb_checkpoints *ck = run->checkpoints = calloc(1, sizeof *run->checkpoints);
  if (!ck) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  ck->last_save_time = cnnb_now_seconds();
  bool training = c->mode == CNNB_MODE_TRAIN;
  bool writer = training && run->facts.world.rank == 0;
  cnnb_status st = CNNB_OK;
  if (writer) st = take_train_dir(run, ck);
  if (training) st = agree_on_train_dir(run, st);
  if (st == CNNB_OK) st = find_checkpoint(run, ck, writer);
  int64_t found = st == CNNB_OK && ck->resume_file;
  if (st == CNNB_OK && !found && !training)
    st = cnnb_error(run->ctx, CNNB_EINVAL,
                    "--eval --train_dir=%s: no checkpoint there to "
                    "evaluate (train with --train_dir first)",
                    c->train_dir);
  if (st == CNNB_OK && found) {
    const cnnb_safetensors *f = ck->resume_file;
    float *params = alloc_floats(run, cnnb_graph_param_arena_count(run->graph));
    float *stats = alloc_floats(run, cnnb_graph_stat_arena_count(run->graph));
    st = params && stats
             ? cnnb_ckpt_read_model(run->ctx, f, ck->resume_path, run->graph, params, stats)
             : CNNB_ENOMEM;
    if (st == CNNB_OK)
      st = meta_int(run->ctx, f, ck->resume_path, META("global_step"), 0, &run->facts.start_step);
    if (st == CNNB_OK) st = upload_all(run, params, stats);
    if (st == CNNB_OK && !(ck->resumed_from = strdup(ck->resume_path)))
      st = cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
    free(params);
    free(stats);
  }
  if (st != CNNB_OK) return st;
  /* Ranks that found different checkpoints (a directory that is not shared) would train
   * different models in lockstep: refuse. */
  if ((st = cnnb_world_check_same(&run->facts.world, run->facts.start_step,
                                  "the checkpoint step each rank resumes from (is --train_dir "
                                  "one shared directory?)")) != CNNB_OK)
    return st;
  if (found)
    cnnb_log(run->ctx, CNNB_LOG_INFO, "%s %s (global step %" PRId64 ")",
             training ? "resuming from" : "evaluating", ck->resume_path, run->facts.start_step);
  else
    cnnb_log(run->ctx, CNNB_LOG_INFO, "no checkpoint in %s yet: training starts at step 0",
             c->train_dir);
  return CNNB_OK;
}

static void close_resume_file(cnnb_checkpoints *c) {
  if (!c) return;
  cnnb_safetensors_close(c->resume_file);
  c->resume_file = NULL;
  free(c->resume_path);
  c->resume_path = NULL;
}

static cnnb_status write_slot(cnnb_run *run, int slot, const float *host, int64_t count) {
  const cnnb_strategy_optimizer_state *keeper = strategy_slots(run);
  const cnnb_bound_plugin *strategy = &run->facts.strategy, *device = &run->facts.device;
  cnnb_status st = CNNB_OK;
  if (keeps_variables(run)) {
    CNNB_PLUGIN_CALL(st, run->ctx, strategy, "set_slot", strategy->ctx,
                     "restoring the optimizer's slots",
                     keeper->set_slot(strategy->state, run->cfg->trainer.rule, slot, host, count));
    return st;
  }
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    float *dst = slot == 1 ? cnnb_trainer_slot1(r->trainer) : cnnb_trainer_slot2(r->trainer);
    if (!dst) continue;
    CNNB_PLUGIN_CALL(st, run->ctx, device, "copy_to_device", r->device_ctx,
                     "restoring the optimizer's slots",
                     device->vt.device->copy_to_device(r->device, dst, host,
                                                       (size_t)count * sizeof(float)));
  }
  return st;
}

static cnnb_status restore_optimizer(cnnb_run *run) {
  const cnnb_safetensors *f = run->checkpoints->resume_file;
  const char *path = run->checkpoints->resume_path;
  uint32_t rule = run->cfg->trainer.rule;
  const char *saved = cnnb_safetensors_meta(f, META("optimizer"));
  if (saved && strcmp(saved, cnnb_optimizer_rule_name(rule)) != 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "checkpoint %s was trained with --optimizer=%s, this "
                      "run asks for --optimizer=%s: resume with %s, or start a new --train_dir "
                      "(from these weights: copy the checkpoint without its \"optimizer.\" "
                      "tensors)",
                      path, saved, cnnb_optimizer_rule_name(rule), saved);
  cnnb_trainer_state state;
  cnnb_trainer_get_state(run->replicas[0].trainer, &state);
  int64_t updates = 0, normal = 0;
  cnnb_status st = meta_int(run->ctx, f, path, META("updates"), 0, &updates);
  if (st == CNNB_OK) st = meta_int(run->ctx, f, path, META("loss_scale_normal_steps"), 0, &normal);
  const char *scale = cnnb_safetensors_meta(f, META("loss_scale"));
  if (st == CNNB_OK && scale) {
    char *end;
    double v = strtod(scale, &end);
    if (end == scale || *end || !(v > 0) || !isfinite(v))
      return cnnb_error(run->ctx, CNNB_EINVAL,
                        "checkpoint %s: metadata %s=\"%s\" is not a loss scale", path,
                        META("loss_scale"), scale);
    state.loss_scale = (float)v;
  }
  state.updates = updates;
  state.loss_scale_normal_steps = normal;
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++)
    st = cnnb_trainer_set_state(run->replicas[i].trainer, &state);
  int64_t count = cnnb_graph_param_arena_count(run->graph);
  float *host = NULL;
  for (int slot = 1; st == CNNB_OK && slot <= 2; slot++) {
    if (!cnnb_ckpt_slot_name(rule, slot)) continue;
    if (!host && !(host = alloc_floats(run, count))) return CNNB_ENOMEM;
    bool present = false;
    st = cnnb_ckpt_read_slot(run->ctx, f, path, run->graph, rule, slot, host, &present);
    /* A checkpoint saved before the first update (or by torchvision) has no slots: they
     * start as the optimizer starts them. Every rank reads the same file, so all agree. */
    if (st == CNNB_OK && present) st = write_slot(run, slot, host, count);
  }
  free(host);
  return st;
}

cnnb_status cnnb_checkpoint_restore_optimizer(cnnb_run *run) {
  cnnb_status st = CNNB_OK;
  bool training = *run->cfg->train_dir && run->cfg->mode == CNNB_MODE_TRAIN &&
                  run->replicas[0].trainer;
  /* Refused before the first step rather than at the first save. */
  if (training && keeps_variables(run) && cnnb_ckpt_slot_name(run->cfg->trainer.rule, 1) &&
      !strategy_slots(run))
    st = cnnb_error(run->ctx, CNNB_EUNSUPPORTED,
                    "--train_dir with --optimizer=%s: %s keeps the "
                    "optimizer's state itself and offers no %s to save and restore it",
                    cnnb_optimizer_rule_name(run->cfg->trainer.rule), run->facts.strategy.label,
                    CNNB_EXT_STRATEGY_OPTIMIZER_STATE);
  else if (training && run->checkpoints && run->checkpoints->resume_file)
    st = restore_optimizer(run);
  close_resume_file(run->checkpoints);
  return st;
}

cnnb_status cnnb_checkpoint_load_model_file(cnnb_ctx *ctx, const char *path, cnnb_executor *ex) {
  cnnb_safetensors *f = NULL;
  cnnb_status st = cnnb_safetensors_open(ctx, path, &f);
  if (st != CNNB_OK) return st;
  const cnnb_graph *g = cnnb_executor_graph(ex);
  int64_t np = cnnb_graph_param_arena_count(g), ns = cnnb_graph_stat_arena_count(g);
  float *params = malloc((size_t)(np > 0 ? np : 1) * sizeof(float));
  float *stats = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(float));
  if (!params || !stats) st = cnnb_error(ctx, CNNB_ENOMEM, "out of memory loading %s", path);
  if (st == CNNB_OK) st = cnnb_ckpt_read_model(ctx, f, path, g, params, stats);
  if (st == CNNB_OK) st = cnnb_executor_upload_params(ex, params, stats);
  free(params);
  free(stats);
  cnnb_safetensors_close(f);
  return st;
}
