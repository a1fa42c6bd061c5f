/* trainer.c — one optimizer step over a replica's arenas (trainer.h): slots, schedule,
 * weight decay runs, clipping and loss scaling around the device's update kernel. */
#include "exec/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A contiguous range of the arena whose params share one weight decay. */
typedef struct run {
  int64_t offset, count;
  float weight_decay;
} run;

struct cnnb_trainer {
  cnnb_ctx *ctx;
  cnnb_executor *ex;
  const cnnb_device_vtable *dv;
  void *device;
  cnnb_trainer_config cfg;
  cnnb_lr_schedule *schedule;
  cnnb_loss_scale loss_scale;
  float *slot1, *slot2;
  run *runs;
  int32_t num_runs;
  int64_t updates;
  int64_t overflow_steps; /* fp16 steps whose gradients held inf/NaN */
  float *host_params;     /* for the weight-decay loss, allocated when first asked */
  float *host_grads;      /* for the finiteness check of a device without all_finite */
  bool has_sink;          /* updates go to sink, not to the device */
  cnnb_update_sink sink;
  char description[512];
};

uint32_t cnnb_optimizer_rule_parse(const char *name) {
  for (uint32_t rule = CNNB_OPT_SGD; name && rule <= CNNB_OPT_ADAM; ++rule)
    if (strcmp(name, cnnb_optimizer_rule_name(rule)) == 0) return rule;
  return 0;
}

static cnnb_status validate(cnnb_ctx *ctx, const cnnb_trainer_config *c) {
  if (c->rule < CNNB_OPT_SGD || c->rule > CNNB_OPT_ADAM)
    return cnnb_error(ctx, CNNB_EINVAL, "trainer: unknown optimizer rule %u", c->rule);
  if (c->weight_decay < 0.0f || !isfinite(c->weight_decay))
    return cnnb_error(ctx, CNNB_EINVAL, "--weight_decay=%g: must be >= 0", c->weight_decay);
  if (c->gradient_clip < 0.0f || !isfinite(c->gradient_clip))
    return cnnb_error(ctx, CNNB_EINVAL, "--gradient_clip=%g: must be >= 0 (0: no clipping)",
                      c->gradient_clip);
  if (c->fp16 && (c->fp16_loss_scale < 0.0f || !isfinite(c->fp16_loss_scale)))
    return cnnb_error(ctx, CNNB_EINVAL, "--fp16_loss_scale=%g: must be > 0 (0: the default 128)",
                      c->fp16_loss_scale);
  if (c->fp16 && c->auto_loss_scale && c->inc_loss_scale_every_n <= 0)
    return cnnb_error(ctx, CNNB_EINVAL, "--fp16_inc_loss_scale_every_n=%lld: must be > 0",
                      (long long)c->inc_loss_scale_every_n);
  if (c->rule == CNNB_OPT_RMSPROP && c->rmsprop_epsilon <= 0.0f)
    return cnnb_error(ctx, CNNB_EINVAL, "--rmsprop_epsilon=%g: must be > 0", c->rmsprop_epsilon);
  if (c->rule == CNNB_OPT_ADAM && (c->adam_beta1 < 0.0f || c->adam_beta1 >= 1.0f ||
                                   c->adam_beta2 < 0.0f || c->adam_beta2 >= 1.0f))
    return cnnb_error(ctx, CNNB_EINVAL, "--adam_beta1=%g --adam_beta2=%g: each must be in [0, 1)",
                      c->adam_beta1, c->adam_beta2);
  return CNNB_OK;
}

/* Runs over the trainable params in arena order; a run ends where the decay changes.
 * Gaps between params (none today) ride along with the run around them: their
 * gradients stay zero, so the update leaves them alone. */
static cnnb_status make_runs(cnnb_trainer *tr) {
  const cnnb_graph *g = cnnb_executor_graph(tr->ex);
  int32_t np = cnnb_graph_num_params(g);
  int64_t total = cnnb_executor_param_count(tr->ex);
  tr->runs = calloc((size_t)np + 1, sizeof *tr->runs);
  if (!tr->runs)
    return cnnb_error(tr->ctx, CNNB_ENOMEM, "trainer: out of memory for %d parameter ranges",
                      (int)np + 1);
  for (int32_t i = 0; i < np; ++i) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (p->is_stat || p->count == 0) continue;
    float wd = (p->flags & CNNB_PARAM_NO_DECAY) ? 0.0f : tr->cfg.weight_decay;
    run *last = tr->num_runs ? &tr->runs[tr->num_runs - 1] : NULL;
    if (!last) {
      tr->runs[tr->num_runs++] = (run){0, p->offset + p->count, wd};
    } else if (last->weight_decay == wd) {
      last->count = p->offset + p->count - last->offset;
    } else {
      last->count = p->offset - last->offset; /* a gap goes to the run before */
      tr->runs[tr->num_runs++] = (run){p->offset, p->count, wd};
    }
  }
  if (tr->num_runs > 0) {
    run *last = &tr->runs[tr->num_runs - 1];
    last->count = total - last->offset;
  }
  return CNNB_OK;
}

static cnnb_status alloc_slot(cnnb_trainer *tr, float **slot, float value) {
  int64_t count = cnnb_executor_param_count(tr->ex);
  size_t bytes = (size_t)count * sizeof(float);
  *slot = NULL;
  if (count == 0) return CNNB_OK;
  cnnb_status st = tr->dv->alloc(tr->device, bytes, (void **)slot);
  if (st != CNNB_OK)
    return cnnb_executor_device_error(tr->ex, st, "trainer: allocating optimizer slots (%zu bytes)",
                                      bytes);
  if (value == 0.0f) {
    st = tr->dv->fill_zero(tr->device, *slot, bytes);
    if (st != CNNB_OK)
      return cnnb_executor_device_error(tr->ex, st, "trainer: zeroing optimizer slots");
    return CNNB_OK;
  }
  /* Upload in chunks so a large model never needs a second full host copy. */
  enum { CHUNK = 1 << 20 };
  int64_t chunk_count = count < CHUNK ? count : CHUNK;
  float *host = malloc((size_t)chunk_count * sizeof(float));
  if (!host)
    return cnnb_error(tr->ctx, CNNB_ENOMEM,
                      "trainer: out of memory for %lld floats to initialise the optimizer slots",
                      (long long)chunk_count);
  for (int64_t i = 0; i < chunk_count; ++i) host[i] = value;
  for (int64_t off = 0; off < count && st == CNNB_OK; off += chunk_count) {
    int64_t n = count - off < chunk_count ? count - off : chunk_count;
    st = tr->dv->copy_to_device(tr->device, *slot + off, host, (size_t)n * sizeof(float));
  }
  free(host);
  if (st != CNNB_OK)
    return cnnb_executor_device_error(tr->ex, st, "trainer: initialising optimizer slots");
  return CNNB_OK;
}

const char *cnnb_optimizer_rule_name(uint32_t rule) {
  switch (rule) {
    case CNNB_OPT_SGD: return "sgd";
    case CNNB_OPT_MOMENTUM: return "momentum";
    case CNNB_OPT_RMSPROP: return "rmsprop";
    case CNNB_OPT_ADAM: return "adam";
    default: return "unknown";
  }
}

static void describe(cnnb_trainer *tr) {
  const cnnb_trainer_config *c = &tr->cfg;
  char rule[128];
  switch (c->rule) {
    case CNNB_OPT_MOMENTUM:
      snprintf(rule, sizeof rule, "momentum (%sm=%g)", c->nesterov ? "nesterov, " : "",
               c->momentum);
      break;
    case CNNB_OPT_RMSPROP:
      snprintf(rule, sizeof rule, "rmsprop (decay=%g, m=%g, eps=%g)", c->rmsprop_decay,
               c->rmsprop_momentum, c->rmsprop_epsilon);
      break;
    case CNNB_OPT_ADAM:
      snprintf(rule, sizeof rule, "adam (b1=%g, b2=%g, eps=%g)", c->adam_beta1, c->adam_beta2,
               c->adam_epsilon);
      break;
    default: snprintf(rule, sizeof rule, "%s", cnnb_optimizer_rule_name(c->rule)); break;
  }
  int n = snprintf(tr->description, sizeof tr->description, "%s, lr %s, weight decay %g", rule,
                   cnnb_lr_schedule_describe(tr->schedule), c->weight_decay);
  if (n > 0 && (size_t)n < sizeof tr->description && c->gradient_clip > 0.0f)
    n += snprintf(tr->description + n, sizeof tr->description - (size_t)n, ", clip %g",
                  c->gradient_clip);
  if (n > 0 && (size_t)n < sizeof tr->description && c->fp16)
    snprintf(tr->description + n, sizeof tr->description - (size_t)n, ", loss scale %g%s",
             tr->loss_scale.scale, c->auto_loss_scale ? " (auto)" : "");
}

cnnb_status cnnb_trainer_create(cnnb_ctx *ctx, const cnnb_trainer_config *cfg, cnnb_executor *ex,
                                cnnb_trainer **out) {
  return cnnb_trainer_create_with_sink(ctx, cfg, ex, NULL, out);
}

cnnb_status cnnb_trainer_create_with_sink(cnnb_ctx *ctx, const cnnb_trainer_config *cfg,
                                          cnnb_executor *ex, const cnnb_update_sink *sink,
                                          cnnb_trainer **out) {
  *out = NULL;
  if (!ex || !cnnb_executor_training(ex))
    return cnnb_error(ctx, CNNB_EINVAL, "trainer: needs an executor created for training");
  cnnb_status st = validate(ctx, cfg);
  if (st != CNNB_OK) return st;
  cnnb_trainer *tr = calloc(1, sizeof *tr);
  if (!tr) return cnnb_error(ctx, CNNB_ENOMEM, "trainer: out of memory");
  tr->ctx = ctx;
  tr->ex = ex;
  tr->dv = cnnb_executor_device_vtable(ex);
  tr->device = cnnb_executor_device(ex);
  tr->cfg = *cfg;
  if (sink) tr->has_sink = true, tr->sink = *sink;
  /* Borrowed from the caller (the model struct may be a stack local, the schedule
   * string belongs to the flags): the schedule keeps its own copies. */
  tr->cfg.lr.model = NULL;
  tr->cfg.lr.piecewise = NULL;
  if (cfg->fp16)
    cnnb_loss_scale_init(&tr->loss_scale, cfg->fp16_loss_scale, cfg->auto_loss_scale,
                         cfg->inc_loss_scale_every_n);
  else cnnb_loss_scale_init(&tr->loss_scale, 1.0f, false, 0);
  st = cnnb_lr_schedule_create(ctx, &cfg->lr, &tr->schedule);
  if (st == CNNB_OK) st = make_runs(tr);
  if (st == CNNB_OK && cfg->rule != CNNB_OPT_SGD && !tr->has_sink)
    st = alloc_slot(tr, &tr->slot1, cfg->rule == CNNB_OPT_RMSPROP ? 1.0f : 0.0f);
  if (st == CNNB_OK && (cfg->rule == CNNB_OPT_RMSPROP || cfg->rule == CNNB_OPT_ADAM) &&
      !tr->has_sink)
    st = alloc_slot(tr, &tr->slot2, 0.0f);
  if (st != CNNB_OK) {
    cnnb_trainer_destroy(tr);
    return st;
  }
  describe(tr);
  *out = tr;
  return CNNB_OK;
}

void cnnb_trainer_destroy(cnnb_trainer *tr) {
  if (!tr) return;
  if (tr->slot1) tr->dv->free(tr->device, tr->slot1);
  if (tr->slot2) tr->dv->free(tr->device, tr->slot2);
  cnnb_lr_schedule_destroy(tr->schedule);
  free(tr->runs);
  free(tr->host_params);
  free(tr->host_grads);
  free(tr);
}

float cnnb_trainer_loss_scale(const cnnb_trainer *tr) { return tr->loss_scale.scale; }

int64_t cnnb_trainer_overflow_steps(const cnnb_trainer *tr) { return tr->overflow_steps; }

float cnnb_trainer_learning_rate(const cnnb_trainer *tr, int64_t step) {
  return cnnb_lr_schedule_at(tr->schedule, step);
}

/* The device's all_finite, or, for a device without one (it is optional), the same
 * check on a host copy of the gradients. */
static cnnb_status grads_finite(cnnb_trainer *tr, const float *grads, int64_t count, bool *finite) {
  cnnb_status st;
  if (tr->dv->all_finite) {
    int32_t all = 0;
    st = tr->dv->all_finite(tr->device, grads, count, &all);
    if (st != CNNB_OK)
      return cnnb_executor_device_error(tr->ex, st, "trainer: checking gradients for inf/NaN");
    *finite = all != 0;
    return CNNB_OK;
  }
  if (!tr->host_grads && !(tr->host_grads = malloc((size_t)count * sizeof(float))))
    return cnnb_error(tr->ctx, CNNB_ENOMEM,
                      "trainer: out of memory for a host copy of the "
                      "gradients (the device has no all_finite)");
  st = tr->dv->copy_to_host(tr->device, tr->host_grads, grads, (size_t)count * sizeof(float));
  if (st != CNNB_OK)
    return cnnb_executor_device_error(tr->ex, st, "trainer: copying gradients to check them");
  *finite = true;
  for (int64_t i = 0; i < count && *finite; ++i) *finite = isfinite(tr->host_grads[i]);
  return CNNB_OK;
}

cnnb_status cnnb_trainer_apply(cnnb_trainer *tr, int64_t step, int *skipped, float *lr_used) {
  float lr = cnnb_lr_schedule_at(tr->schedule, step);
  if (lr_used) *lr_used = lr;
  if (skipped) *skipped = 0;
  float *params = cnnb_executor_params(tr->ex);
  const float *grads = cnnb_executor_grads(tr->ex);
  int64_t count = cnnb_executor_param_count(tr->ex);
  /* The scale this step's backward ran with: the bookkeeping below may change it. */
  float scale = tr->loss_scale.scale;
  bool finite = true;
  /* fp16 gradients are checked every step, static scale or not: a static scale applies
   * an overflowed update as tf_cnn_benchmarks does, but never silently (counted here,
   * warned once, reported at the end). */
  if ((cnnb_loss_scale_needs_check(&tr->loss_scale) || tr->cfg.fp16) && count > 0) {
    cnnb_status st = grads_finite(tr, grads, count, &finite);
    if (st != CNNB_OK) return st;
  }
  if (!finite && tr->overflow_steps++ == 0 && !tr->loss_scale.dynamic)
    cnnb_log(tr->ctx, CNNB_LOG_WARN,
             "step %lld: fp16 gradients overflowed to inf/NaN at the static loss scale %g; the "
             "update was applied, as tf_cnn_benchmarks does: --fp16_enable_auto_loss_scale skips "
             "such steps and lowers the scale",
             (long long)step + 1, scale);
  if (cnnb_loss_scale_after_step(&tr->loss_scale, finite)) {
    if (skipped) *skipped = 1;
    cnnb_log(tr->ctx, CNNB_LOG_DEBUG,
             "step %lld: inf/NaN gradients, update skipped, loss scale %g -> %g", (long long)step,
             scale, tr->loss_scale.scale);
    return CNNB_OK;
  }
  const cnnb_trainer_config *c = &tr->cfg;
  for (int32_t r = 0; r < tr->num_runs; ++r) {
    const run *rn = &tr->runs[r];
    cnnb_update u = {
        .struct_size = (uint32_t)sizeof(cnnb_update),
        .rule = c->rule,
        .count = rn->count,
        .params = params + rn->offset,
        .grads = grads + rn->offset,
        .slot1 = tr->slot1 ? tr->slot1 + rn->offset : NULL,
        .slot2 = tr->slot2 ? tr->slot2 + rn->offset : NULL,
        .learning_rate = lr,
        .weight_decay = rn->weight_decay,
        .grad_scale = 1.0f / scale,
        .clip = c->gradient_clip,
        .momentum = c->rule == CNNB_OPT_RMSPROP ? c->rmsprop_momentum : c->momentum,
        .rho = c->rmsprop_decay,
        .epsilon = c->rule == CNNB_OPT_ADAM ? c->adam_epsilon : c->rmsprop_epsilon,
        .beta1 = c->adam_beta1,
        .beta2 = c->adam_beta2,
        .nesterov = c->nesterov ? 1 : 0,
        .step = tr->updates,
    };
    if (tr->has_sink && !tr->sink.apply) continue; /* bookkeeping only */
    cnnb_status st = tr->has_sink ? tr->sink.apply(tr->sink.user, rn->offset, &u)
                                  : tr->dv->update(tr->device, &u);
    if (st != CNNB_OK && tr->has_sink) return st; /* the sink recorded its own message */
    if (st != CNNB_OK)
      return cnnb_executor_device_error(tr->ex, st, "trainer: %s update of parameters [%lld, %lld)",
                                        cnnb_optimizer_rule_name(c->rule), (long long)rn->offset,
                                        (long long)(rn->offset + rn->count));
  }
  /* Adam's t counts applied updates: TF's beta powers only advance in apply_gradients,
   * which a skipped step never runs. */
  tr->updates += 1;
  return CNNB_OK;
}

cnnb_status cnnb_trainer_weight_decay_loss(cnnb_trainer *tr, double *out) {
  *out = 0.0;
  int64_t count = cnnb_executor_param_count(tr->ex);
  if (tr->cfg.weight_decay == 0.0f || count == 0) return CNNB_OK;
  if (!tr->host_params) {
    tr->host_params = malloc((size_t)count * sizeof(float));
    if (!tr->host_params)
      return cnnb_error(tr->ctx, CNNB_ENOMEM,
                        "trainer: out of memory for a host copy of the "
                        "%lld parameters (the weight-decay term of total_loss)",
                        (long long)count);
  }
  cnnb_status st = cnnb_executor_download_params(tr->ex, tr->host_params, NULL);
  if (st != CNNB_OK) return st;
  const cnnb_graph *g = cnnb_executor_graph(tr->ex);
  double sum = 0.0;
  for (int32_t i = 0; i < cnnb_graph_num_params(g); ++i) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (p->is_stat || (p->flags & CNNB_PARAM_NO_DECAY)) continue;
    for (int64_t k = 0; k < p->count; ++k) {
      double w = tr->host_params[p->offset + k];
      sum += w * w;
    }
  }
  *out = (double)tr->cfg.weight_decay * 0.5 * sum;
  return CNNB_OK;
}

const char *cnnb_trainer_describe(const cnnb_trainer *tr) { return tr->description; }
float *cnnb_trainer_slot1(const cnnb_trainer *tr) { return tr->slot1; }
float *cnnb_trainer_slot2(const cnnb_trainer *tr) { return tr->slot2; }
int64_t cnnb_trainer_updates(const cnnb_trainer *tr) { return tr->updates; }

void cnnb_trainer_get_state(const cnnb_trainer *tr, cnnb_trainer_state *out) {
  *out = (cnnb_trainer_state){.updates = tr->updates,
                              .loss_scale = tr->loss_scale.scale,
                              .loss_scale_normal_steps = tr->loss_scale.normal_steps};
}

cnnb_status cnnb_trainer_set_state(cnnb_trainer *tr, const cnnb_trainer_state *state) {
  if (state->updates < 0)
    return cnnb_error(tr->ctx, CNNB_EINVAL, "trainer: %lld updates applied: must be >= 0",
                      (long long)state->updates);
  if (!(state->loss_scale > 0.0f && isfinite(state->loss_scale)) ||
      state->loss_scale_normal_steps < 0)
    return cnnb_error(tr->ctx, CNNB_EINVAL,
                      "trainer: loss scale %g after %lld clean steps: "
                      "the scale must be finite and > 0, the count >= 0",
                      (double)state->loss_scale, (long long)state->loss_scale_normal_steps);
  tr->updates = state->updates;
  if (tr->loss_scale.dynamic) {
    tr->loss_scale.scale = state->loss_scale;
    tr->loss_scale.normal_steps = state->loss_scale_normal_steps;
    describe(tr);
  }
  return CNNB_OK;
}
