/* ps_optimizer_state_check.c — drives the parameter_server plugin's optimizer slots
 * (CNNB_EXT_STRATEGY_OPTIMIZER_STATE, sdk/include/cnnb/strategy.h) directly, on real
 * `cpu` devices, as the host would for checkpoints; for tests/cli/ps_optimizer_state.sh.
 * Flags are cnnbench's (--optimizer, --num_gpus, the plugin's --num_ps_ranks and
 * --cross_replica_sync, --collective_timeout_s) plus:
 *   --steps=K        training steps (default 3)
 *   --restore        resume: every replica gets a checkpoint's parameters before
 *                    broadcast_params, and set_slot the checkpoint's slots (slot 1 before
 *                    broadcast_params, slot 2 after), at global step 5
 *   --wrong_rule=R   with --restore, in one process: train with rule R, which
 *                    apply_update must refuse
 * Run alone or under mpirun (every rank runs it). Each replica of each rank gets
 * gradients every rank can compute for every other, and the steps run as the host runs
 * them (bucket_ready, finish_step, apply_update per run of weight decay, finish_update).
 * Checked on every rank:
 *  - before any update (and before restoring), get_slot says no slot exists and leaves
 *    the buffer alone;
 *  - --restore: get_slot reads back exactly what set_slot was given; a rank passing other
 *    values (under mpirun the last rank, once) is refused on every rank, naming it;
 *  - after K steps, get_slot returns the whole slot on every rank, bit for bit what
 *    cnnb_update_reference gives from the same start (the rank-0 replica-0 parameters at
 *    broadcast_params, or the restored ones) on the mean gradients; synchronous: every
 *    replica's parameters too. Asynchronous (--cross_replica_sync=false): every push
 *    carries the same gradients and no weight decay, so the slots after all W x K pushes
 *    do not depend on their order (the parameters do, on when a rank pulled: not checked);
 *  - refusals: a slot the rule lacks (exists = 0; set_slot refused), slot 3, a wrong
 *    count, set_slot after a step (on every rank).
 * Prints one line per failed check; exits 0 when all passed, 1 otherwise. Never installed. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"
#include "loader/loader.h"
#include "config/core_flags.h"

static int failures;
static int32_t my_rank;

#define CHECK(cond, ...)                                                           \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "[rank %d] FAIL %s:%d: ", (int)my_rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fputc('\n', stderr);                                                         \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

/* The arena's variables: sizes that give each of 2 PS ranks several ranges. */
static const int64_t variable_sizes[] = {300, 17, 250, 5, 128, 301};
enum { NUM_VARIABLES = 6, SPLIT_VARIABLE = 2 }; /* weight decay on variables [0, 2) */

typedef struct setup {
  cnnb_ctx *ctx;
  const cnnb_device_vtable *dv;
  const cnnb_strategy_vtable *sv;
  void *strategy;
  const cnnb_strategy_optimizer_state *ext;
  int32_t n, world, rank;
  bool sync;
  uint32_t rule;
  int64_t count, split; /* elements; where the weight decay's run ends */
  void **devices;
  float **params, **grads; /* [n] device arenas */
  float *host;             /* [count] scratch */
} setup;

/* Gradient of replica r on rank k at step t: multiples of 1/16 in [-1/2, 1/2], so every
 * sum of a few of them is exact in fp32, whatever order MPI adds in. Asynchronous: the
 * same on every rank and step, so the order pushes arrive in does not matter. */
static float gradient(const setup *s, int32_t k, int32_t r, int64_t t, int64_t i) {
  if (!s->sync) k = 0, t = 0;
  return (float)((i * 7 + k * 3 + r * 5 + t * 11) % 17 - 8) / 16.0f;
}
/* Initial values: distinct on every replica of every rank (only rank 0's replica 0 may
 * count); a checkpoint's parameters and slots (positive: RMSProp's and Adam's second
 * moments must be). */
static float initial(int32_t k, int32_t r, int64_t i) {
  return 0.01f * (float)(i % 29 - 14) + (float)k + 10.0f * (float)r;
}
static float checkpoint_param(int64_t i) { return 0.02f * (float)(i % 23 - 11); }
static float checkpoint_slot(int32_t slot, int64_t i) {
  return 0.001f * (float)(1 + (i * slot) % 13);
}

static bool rule_has_slot(uint32_t rule, int32_t slot) {
  return (rule == CNNB_OPT_MOMENTUM && slot == 1) ||
         ((rule == CNNB_OPT_RMSPROP || rule == CNNB_OPT_ADAM) && (slot == 1 || slot == 2));
}

static uint32_t rule_named(const char *name) {
  static const char *const names[] = {"", "sgd", "momentum", "rmsprop", "adam"};
  for (uint32_t r = 1; r < 5; r++)
    if (strcmp(name, names[r]) == 0) return r;
  return 0;
}

/* The hyperparameters of run `run` (0: with weight decay, 1: without) at global step t. */
static cnnb_update update_of(const setup *s, uint32_t rule, int run, int64_t t) {
  int64_t lo = run == 0 ? 0 : s->split, hi = run == 0 ? s->split : s->count;
  return (cnnb_update){.struct_size = sizeof(cnnb_update),
                       .rule = rule,
                       .count = hi - lo,
                       .learning_rate = 0.1f,
                       .weight_decay = run == 0 && s->sync ? 1e-3f : 0.0f,
                       .grad_scale = 1.0f,
                       .momentum = 0.9f,
                       .rho = 0.9f,
                       .epsilon = 1e-3f,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f,
                       .step = t};
}

static cnnb_status upload(setup *s, float *dst, float (*value)(int32_t, int32_t, int64_t),
                          int32_t k, int32_t r) {
  for (int64_t i = 0; i < s->count; i++) s->host[i] = value(k, r, i);
  return s->dv->copy_to_device(s->devices[r], dst, s->host, (size_t)s->count * sizeof(float));
}
static float checkpoint_param_of(int32_t k, int32_t r, int64_t i) {
  (void)k, (void)r;
  return checkpoint_param(i);
}

/* Reads slot `slot` through the extension; fails the check unless it exists. */
static bool read_slot(setup *s, int32_t slot, float *out) {
  int32_t exists = -1;
  cnnb_status st = s->ext->get_slot(s->strategy, slot, out, s->count, &exists);
  CHECK(st == CNNB_OK, "get_slot(%d): %s", (int)slot, cnnb_error_message(s->ctx));
  CHECK(st != CNNB_OK || exists == 1, "get_slot(%d): exists = %d, want 1", (int)slot, (int)exists);
  return st == CNNB_OK && exists == 1;
}

/* get_slot says `slot` does not exist and leaves the buffer alone. */
static void check_no_slot(setup *s, int32_t slot, const char *when) {
  for (int64_t i = 0; i < s->count; i++) s->host[i] = 7.0f;
  int32_t exists = -1;
  cnnb_status st = s->ext->get_slot(s->strategy, slot, s->host, s->count, &exists);
  CHECK(st == CNNB_OK, "%s: get_slot(%d): %s", when, (int)slot, cnnb_error_message(s->ctx));
  CHECK(exists == 0, "%s: get_slot(%d): exists = %d, want 0", when, (int)slot, (int)exists);
  int64_t touched = 0;
  for (int64_t i = 0; i < s->count; i++) touched += s->host[i] != 7.0f;
  CHECK(touched == 0, "%s: get_slot(%d) wrote %lld elements of a slot that does not exist", when,
        (int)slot, (long long)touched);
}

static void compare(const float *got, const float *want, int64_t n, const char *what) {
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], sizeof *got) != 0 && wrong++ == 0) first = i;
  CHECK(wrong == 0,
        "%s: %lld of %lld elements differ from the reference, first [%lld]: %.9g, want %.9g", what,
        (long long)wrong, (long long)n, (long long)first, first >= 0 ? got[first] : 0.0,
        first >= 0 ? want[first] : 0.0);
}

/* A call that must fail with `want` and a message containing `says`. */
static void check_refused(setup *s, cnnb_status st, cnnb_status want, const char *says,
                          const char *what) {
  const char *msg = cnnb_error_message(s->ctx);
  CHECK(st == want, "%s: status %d, want %d (%s)", what, (int)st, (int)want, msg);
  CHECK(strstr(msg, says) != NULL, "%s: message \"%s\" does not say \"%s\"", what, msg, says);
  cnnb_clear_error(s->ctx);
}

/* The whole scenario; the reference follows every step on the host. */
static void run(setup *s, int64_t steps, bool restore, uint32_t train_rule) {
  int64_t count = s->count;
  float *w = calloc((size_t)count, sizeof *w), *s1 = calloc((size_t)count, sizeof *s1),
        *s2 = calloc((size_t)count, sizeof *s2), *g = calloc((size_t)count, sizeof *g),
        *got = calloc((size_t)count, sizeof *got);
  if (!w || !s1 || !s2 || !g || !got) {
    CHECK(0, "out of memory");
    goto out;
  }
  check_no_slot(s, 1, "before any update");
  int64_t step0 = restore ? 5 : 0;
  for (int32_t r = 0; r < s->n; r++) {
    CHECK(upload(s, s->params[r], restore ? checkpoint_param_of : initial, s->rank, r) == CNNB_OK,
          "upload: %s", cnnb_error_message(s->ctx));
  }
  for (int64_t i = 0; i < count; i++) {
    w[i] = restore ? checkpoint_param(i) : initial(0, 0, i);
    s1[i] = restore ? checkpoint_slot(1, i) : s->rule == CNNB_OPT_RMSPROP ? 1.0f : 0.0f;
    s2[i] = restore ? checkpoint_slot(2, i) : 0.0f;
  }
  bool slots = restore && s->rule != CNNB_OPT_SGD; /* sgd's checkpoint has none */
  if (slots && s->world > 1) {
    /* One rank read another checkpoint: refused on every rank, naming it. */
    float *other = malloc((size_t)count * sizeof *other);
    memcpy(other, s1, (size_t)count * sizeof *other);
    if (s->rank == s->world - 1) other[count / 2] += 1.0f;
    char says[64];
    snprintf(says, sizeof says, "rank %d restores other values", (int)(s->world - 1));
    check_refused(s, s->ext->set_slot(s->strategy, s->rule, 1, other, count), CNNB_EINVAL, says,
                  "set_slot with one rank's values differing");
    free(other);
  }
  if (slots) {
    CHECK(s->ext->set_slot(s->strategy, s->rule, 1, s1, count) == CNNB_OK, "set_slot(1): %s",
          cnnb_error_message(s->ctx));
    check_refused(s,
                  s->ext->set_slot(s->strategy,
                                   s->rule == CNNB_OPT_ADAM ? CNNB_OPT_MOMENTUM : CNNB_OPT_ADAM, 1,
                                   s1, count),
                  CNNB_EINVAL, "into slots restored for", "set_slot of another rule");
  }
  CHECK(s->sv->broadcast_params(s->strategy, s->params, count) == CNNB_OK, "broadcast_params: %s",
        cnnb_error_message(s->ctx));
  if (slots) {
    if (rule_has_slot(s->rule, 2))
      CHECK(s->ext->set_slot(s->strategy, s->rule, 2, s2, count) == CNNB_OK, "set_slot(2): %s",
            cnnb_error_message(s->ctx));
    else
      check_refused(s, s->ext->set_slot(s->strategy, s->rule, 2, s2, count), CNNB_EINVAL,
                    "has no optimizer slot 2", "set_slot of a slot the rule lacks");
    if (read_slot(s, 1, got)) compare(got, s1, count, "slot 1 read back after set_slot");
    if (rule_has_slot(s->rule, 2) && read_slot(s, 2, got))
      compare(got, s2, count, "slot 2 read back after set_slot");
  }
  /* The parameters every replica starts from: rank 0's replica 0's (or the checkpoint's). */
  for (int32_t r = 0; r < s->n; r++) {
    s->dv->copy_to_host(s->devices[r], got, s->params[r], (size_t)count * sizeof *got);
    compare(got, w, count, "a replica's parameters after broadcast_params");
  }
  /* W x K pushes of one gradient (asynchronous), or K steps of the mean (synchronous). */
  int64_t ref_updates = s->sync ? steps : steps * s->world;
  float scale = 1.0f / (float)(s->n * (s->sync ? s->world : 1));
  for (int64_t u = 0; u < ref_updates; u++) {
    for (int64_t i = 0; i < count; i++) {
      float sum = 0.0f;
      for (int32_t k = 0; k < (s->sync ? s->world : 1); k++)
        for (int32_t r = 0; r < s->n; r++) sum += gradient(s, k, r, u, i);
      g[i] = sum * scale;
    }
    for (int run_index = 0; run_index < 2; run_index++) {
      cnnb_update up = update_of(s, s->rule, run_index, step0 + u);
      int64_t lo = run_index == 0 ? 0 : s->split;
      up.params = w + lo, up.grads = g + lo, up.slot1 = s1 + lo, up.slot2 = s2 + lo;
      cnnb_update_reference(&up);
    }
  }
  for (int64_t t = 0; t < steps; t++) {
    for (int32_t r = 0; r < s->n; r++) {
      for (int64_t i = 0; i < count; i++) s->host[i] = gradient(s, s->rank, r, t, i);
      s->dv->copy_to_device(s->devices[r], s->grads[r], s->host, (size_t)count * sizeof(float));
    }
    cnnb_status st = s->sv->bucket_ready(s->strategy, s->grads, 0, count);
    if (st == CNNB_OK) st = s->sv->finish_step(s->strategy, s->grads);
    for (int run_index = 0; st == CNNB_OK && run_index < 2; run_index++) {
      cnnb_update up = update_of(s, train_rule, run_index, step0 + t);
      int64_t lo = run_index == 0 ? 0 : s->split;
      up.params = s->params[0] + lo, up.grads = s->grads[0] + lo; /* slots: the strategy's */
      st = s->sv->apply_update(s->strategy, lo, &up);
    }
    if (train_rule != s->rule) { /* the slots were restored for another rule */
      check_refused(s, st, CNNB_EINVAL, "but the run updates with", "training with another rule");
      goto out;
    }
    if (st == CNNB_OK) st = s->sv->finish_update(s->strategy, s->params);
    CHECK(st == CNNB_OK, "step %lld: %s", (long long)t, cnnb_error_message(s->ctx));
    if (st != CNNB_OK) goto out;
  }
  if (s->rule == CNNB_OPT_SGD) {
    check_no_slot(s, 1, "sgd after training");
    check_refused(s, s->ext->set_slot(s->strategy, CNNB_OPT_SGD, 1, s1, count), CNNB_EINVAL,
                  "sgd has no optimizer slot 1", "set_slot for sgd");
  } else {
    if (read_slot(s, 1, got)) compare(got, s1, count, "slot 1 after training");
    if (rule_has_slot(s->rule, 2)) {
      if (read_slot(s, 2, got)) compare(got, s2, count, "slot 2 after training");
    } else {
      check_no_slot(s, 2, "momentum's slot 2");
    }
  }
  for (int32_t r = 0; s->sync && r < s->n; r++) {
    s->dv->copy_to_host(s->devices[r], got, s->params[r], (size_t)count * sizeof *got);
    compare(got, w, count, "a replica's parameters after training");
  }
  /* Refusals: a bad argument at once; a late restore on every rank. */
  int32_t exists = 0;
  check_refused(s, s->ext->get_slot(s->strategy, 3, got, count, &exists), CNNB_EINVAL, "slot 3",
                "get_slot(3)");
  check_refused(s, s->ext->get_slot(s->strategy, 1, got, count - 1, &exists), CNNB_EINVAL,
                "elements; the arena has", "get_slot with a wrong count");
  if (s->rule != CNNB_OPT_SGD)
    check_refused(s, s->ext->set_slot(s->strategy, s->rule, 1, s1, count), CNNB_EINVAL,
                  "slots are restored before the first step", "set_slot after training");
out:
  free(w);
  free(s1);
  free(s2);
  free(g);
  free(got);
}

static int fail(const char *what) {
  fprintf(stderr, "ps_optimizer_state_check: %s\n", what);
  return 2;
}

int main(int argc, char **argv) {
  char err[4096];
  cnnb_flags *flags = cnnb_flags_create();
  if (!flags || cnnb_flags_declare_core(flags) != CNNB_OK) return fail("flags");
  cnnb_flag_registry *own = cnnb_flags_registry(flags, "ps_optimizer_state_check");
  if (cnnb_flag_declare(own, "steps", CNNB_FLAG_INT, "3", "training steps") != CNNB_OK ||
      cnnb_flag_declare(own, "restore", CNNB_FLAG_BOOL, "false", "resume from a checkpoint") ||
      cnnb_flag_declare(own, "wrong_rule", CNNB_FLAG_STRING, "", "train with this rule"))
    return fail("flags");
  cnnb_ctx *ctx = cnnb_ctx_create("ps_optimizer_state_check", flags);
  cnnb_loader *loader = cnnb_loader_create(ctx);
  const char *install = getenv("CNNB_PLUGIN_DIR");
  if (!loader || (install && cnnb_loader_set_install_dir(loader, install) != CNNB_OK) ||
      cnnb_loader_discover(loader, NULL, err, sizeof err) != CNNB_OK)
    return fail(err);
  cnnb_loader_register_flags(loader, flags);
  if (cnnb_flags_parse(flags, argc, argv, err, sizeof err) != CNNB_OK) return fail(err);
  const cnnb_plugin *device = NULL, *strategy = NULL;
  if (cnnb_loader_find(loader, CNNB_KIND_DEVICE, "cpu", &device, NULL, err, sizeof err) ||
      cnnb_loader_find(loader, CNNB_KIND_STRATEGY, "parameter_server", &strategy, NULL, err,
                       sizeof err))
    return fail(err);

  setup s = {.ctx = ctx,
             .dv = device->vtable,
             .sv = strategy->vtable,
             .n = (int32_t)cnnb_flags_int(flags, "num_gpus"),
             .rule = rule_named(cnnb_flags_string(flags, "optimizer"))};
  const char *wrong = cnnb_flags_string(flags, "wrong_rule");
  uint32_t train_rule = *wrong ? rule_named(wrong) : s.rule;
  if (s.n < 1 || !s.rule || !train_rule) return fail("--num_gpus, --optimizer or --wrong_rule");
  int64_t bounds[NUM_VARIABLES + 1] = {0};
  for (int v = 0; v < NUM_VARIABLES; v++) bounds[v + 1] = bounds[v] + variable_sizes[v];
  s.count = bounds[NUM_VARIABLES];
  s.split = bounds[SPLIT_VARIABLE];
  s.devices = calloc((size_t)s.n, sizeof *s.devices);
  s.params = calloc((size_t)s.n, sizeof *s.params);
  s.grads = calloc((size_t)s.n, sizeof *s.grads);
  s.host = malloc((size_t)s.count * sizeof *s.host);
  if (!s.devices || !s.params || !s.grads || !s.host) return fail("out of memory");
  for (int32_t r = 0; r < s.n; r++) {
    cnnb_device_config dcfg = {.struct_size = sizeof dcfg,
                               .device_index = r,
                               .num_threads = 1,
                               .precision = CNNB_PRECISION_FP32,
                               .training = 1};
    void *p = NULL, *q = NULL;
    if (s.dv->create(ctx, "cpu", &dcfg, &s.devices[r]) != CNNB_OK ||
        s.dv->alloc(s.devices[r], (size_t)s.count * sizeof(float), &p) != CNNB_OK ||
        s.dv->alloc(s.devices[r], (size_t)s.count * sizeof(float), &q) != CNNB_OK)
      return fail(cnnb_error_message(ctx));
    s.params[r] = p, s.grads[r] = q;
  }
  cnnb_strategy_config cfg = {
      .struct_size = sizeof cfg,
      .local_replicas = s.n,
      .device = s.dv,
      .devices = s.devices,
      .param_count = s.count,
      .variable_bounds = bounds,
      .num_variables = NUM_VARIABLES,
      .precision = CNNB_PRECISION_FP32,
      .all_reduce_spec = "",
      .collective_timeout_s = cnnb_flags_float(flags, "collective_timeout_s")};
  if (s.sv->create(ctx, "parameter_server", &cfg, &s.strategy) != CNNB_OK)
    return fail(cnnb_error_message(ctx));
  s.world = s.sv->world_size(s.strategy);
  s.rank = my_rank = s.sv->rank(s.strategy);
  s.sync = cnnb_flags_bool(flags, "cross_replica_sync") || s.world == 1;
  s.ext = s.sv->get_extension ? s.sv->get_extension(s.strategy, CNNB_EXT_STRATEGY_OPTIMIZER_STATE)
                              : NULL;
  CHECK(s.ext && s.ext->struct_size >= sizeof *s.ext && s.ext->get_slot && s.ext->set_slot,
        "parameter_server does not answer " CNNB_EXT_STRATEGY_OPTIMIZER_STATE);
  if (s.ext) run(&s, cnnb_flags_int(flags, "steps"), cnnb_flags_bool(flags, "restore"), train_rule);
  printf("[rank %d of %d] %s %s%s: %s\n", (int)s.rank, (int)s.world,
         cnnb_flags_string(flags, "optimizer"), s.sync ? "synchronous" : "asynchronous",
         cnnb_flags_bool(flags, "restore") ? ", restored" : "",
         failures ? "FAILED" : "all checks passed");
  s.sv->destroy(s.strategy);
  for (int32_t r = 0; r < s.n; r++) {
    s.dv->free(s.devices[r], s.params[r]);
    s.dv->free(s.devices[r], s.grads[r]);
    s.dv->destroy(s.devices[r]);
  }
  free(s.devices);
  free(s.params);
  free(s.grads);
  free(s.host);
  cnnb_loader_destroy(loader);
  cnnb_ctx_destroy(ctx);
  cnnb_flags_destroy(flags);
  return failures ? 1 : 0;
}
