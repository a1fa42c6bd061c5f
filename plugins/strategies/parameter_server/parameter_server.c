/* parameter_server — tf_cnn_benchmarks' --variable_update=parameter_server: the variables
 * live with parameter servers, replicas send gradients there, the averaged update is
 * applied once where the variables live, and every replica reads the fresh values.
 *
 * In one process the parameter server is host memory (--local_parameter_device=cpu):
 * the replicas' gradients are summed there, the optimizer runs there (the host hands its
 * updates over through apply_update), and finish_update copies the new values into every
 * replica. Under mpirun the first --num_ps_ranks ranks each keep a shard of the variables
 * (greedy by bytes, ps_shards.h) — tf's distributed parameter server on MPI instead of
 * gRPC: every rank sums its replicas' gradients and pushes each shard to its PS rank (one
 * reduce per PS rank), the PS ranks apply the update to their shard, and every rank pulls
 * each shard back (one broadcast per PS rank). PS ranks also train, as tf's PS tasks
 * usually share the workers' machines; their images count like any worker's.
 *
 * Updates are synchronous by default (--cross_replica_sync=true); with false, ranks push
 * and pull without waiting for each other (ps_async.h). Within one process the replicas'
 * gradients are always averaged first, as tf's replicas on one worker are.
 *
 * On GPUs the variables may instead live on the first replica's GPU
 * (--local_parameter_device=gpu, one process): pushes and pulls are NCCL's reduce and
 * broadcast on the replicas' streams, the update the first GPU's own kernel (ps_gpu.h). */
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "parameter_server.h"
#include "ps_apply.h"
#include "ps_async.h"
#include "ps_gpu.h"
#include "ps_optimizer_state.h"

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  cnnb_status st = cnnb_flag_declare(
      registry, "num_ps_ranks", CNNB_FLAG_INT, "1",
      "Under mpirun: how many ranks (the first ones) keep shards of the variables and apply "
      "the updates; every rank also trains.");
  if (st == CNNB_OK)
    st = cnnb_flag_declare(registry, "local_parameter_device", CNNB_FLAG_STRING, "gpu",
                           "Where the parameter server keeps the variables: cpu (host memory), "
                           "or gpu (the first replica's GPU, one process on a GPU device: "
                           "NCCL pushes and pulls, the update on that GPU). As tf_cnn_benchmarks' "
                           "soft placement, gpu (its default) on a device without GPU memory "
                           "(the cpu device) means host memory, and so does the default across "
                           "ranks.");
  if (st == CNNB_OK)
    st = cnnb_flag_declare(registry, "cross_replica_sync", CNNB_FLAG_BOOL, "true",
                           "Under mpirun: synchronous updates (every rank's gradients averaged, "
                           "one update per step); false: each rank's gradients are applied as "
                           "they arrive, without waiting for the other ranks (tf's asynchronous "
                           "parameter server).");
  return st;
}

static void ps_destroy(void *strategy) {
  ps *s = strategy;
  if (!s) return;
  ps_async_close(s);
  ps_gpu_close(s); /* before the world: its faults meet at an MPI barrier */
  mpi_world_close(s->world);
  ps_shards_free(&s->shards);
  replica_arenas_free(&s->replicas);
  free(s->vars);
  free(s->grads);
  free(s->pack);
  free(s->slot1);
  free(s->slot2);
  free(s->updates);
  if (s->slots_lock_ready) pthread_mutex_destroy(&s->slots_lock);
  free(s);
}

static cnnb_status read_flags(ps *s, const cnnb_strategy_config *cfg) {
  const char *where = cnnb_flag_string(s->ctx, "local_parameter_device");
  s->gpu = strcmp(where, "gpu") == 0 || strcmp(where, "GPU") == 0;
  if (!s->gpu && strcmp(where, "cpu") != 0 && strcmp(where, "CPU") != 0)
    return cnnb_error(s->ctx, CNNB_EINVAL,
                      "--local_parameter_device=%s: must be cpu (host memory) or gpu (the first "
                      "replica's GPU)",
                      where);
  /* tf's soft placement: its default, gpu, lands on the host wherever a GPU cannot hold
   * the variables, quietly; asked for by name across ranks it is refused below. */
  if (s->gpu && s->world_size > 1 && !cnnb_flag_is_set(s->ctx, "local_parameter_device"))
    s->gpu = false;
  if (s->gpu && s->world_size > 1)
    return cnnb_error(s->ctx, CNNB_EUNSUPPORTED,
                      "--local_parameter_device=gpu keeps the variables on one process's GPU; "
                      "across the %d ranks of this job the parameter servers keep them in host "
                      "memory: use --local_parameter_device=cpu",
                      (int)s->world_size);
  const char *device = cfg->struct_size >= offsetof(cnnb_strategy_config, device_name) +
                                               sizeof cfg->device_name &&
                               cfg->device_name
                           ? cfg->device_name
                           : "of this run";
  if (s->gpu && cfg->local_replicas > 0 && cfg->device->get_extension &&
      cfg->device->get_extension(cfg->devices[0], CNNB_EXT_HOST_MEMORY)) {
    cnnb_log(s->ctx, CNNB_LOG_DEBUG,
             "--local_parameter_device=gpu: device %s keeps its tensors in host memory, so "
             "the variables stay there (tf's soft placement)",
             device);
    s->gpu = false;
  }
  int64_t num_ps = cnnb_flag_int(s->ctx, "num_ps_ranks");
  if (num_ps < 1 || num_ps > s->world_size)
    return cnnb_error(s->ctx, CNNB_EINVAL,
                      "--num_ps_ranks=%lld: must be in [1, %d] (the job has %d rank%s)",
                      (long long)num_ps, (int)s->world_size, (int)s->world_size,
                      s->world_size == 1 ? "" : "s");
  s->num_ps = (int32_t)num_ps;
  /* A host before ABI 1.8 did not say; its trainers then decide alone. */
  s->check_finite = cfg->struct_size >= offsetof(cnnb_strategy_config, auto_loss_scale) +
                                            sizeof cfg->auto_loss_scale &&
                    cfg->auto_loss_scale;
  return CNNB_OK;
}

static cnnb_status ps_create(cnnb_ctx *ctx, const char *name, const cnnb_strategy_config *cfg,
                             void **out) {
  (void)name;
  ps *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  s->ctx = ctx;
  s->count = cfg->param_count;
  s->timeout_s = cfg->collective_timeout_s;
  if (pthread_mutex_init(&s->slots_lock, NULL) != 0) {
    free(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "parameter_server: cannot make a mutex");
  }
  s->slots_lock_ready = true;
  /* The server threads of asynchronous mode talk MPI while the step thread does. */
  s->sync = cnnb_flag_bool(ctx, "cross_replica_sync") || !mpi_world_launched();
  cnnb_status st = s->sync ? mpi_world_open(ctx, "parameter_server", cfg->collective_timeout_s,
                                            &s->world)
                           : mpi_world_open_multithreaded(ctx, "parameter_server",
                                                          cfg->collective_timeout_s, &s->world);
  if (st == CNNB_OK) {
    s->rank = mpi_world_rank(s->world);
    s->world_size = mpi_world_size(s->world);
    st = read_flags(s, cfg);
  }
  if (st == CNNB_OK) st = replica_arenas_init(ctx, cfg, &s->replicas);
  if (st == CNNB_OK)
    st = ps_shards_place(ctx, cfg->variable_bounds, cfg->num_variables, s->num_ps, &s->shards);
  int64_t largest = 1;
  for (int32_t p = 0; st == CNNB_OK && p < s->num_ps; p++)
    if (s->shards.shards[p].count > largest) largest = s->shards.shards[p].count;
  size_t arena = (size_t)(s->count ? s->count : 1) * sizeof(float);
  if (st == CNNB_OK && (!(s->vars = malloc(arena)) || !(s->grads = malloc(arena)) ||
                        !(s->pack = malloc((size_t)largest * sizeof(float)))))
    st = cnnb_error(ctx, CNNB_ENOMEM,
                    "parameter_server: out of memory for host copies of %lld parameters",
                    (long long)s->count);
  if (st == CNNB_OK && !s->sync) st = ps_async_open(s);
  if (st == CNNB_OK && s->gpu) {
    st = ps_gpu_open(s, cfg);
    if (st != CNNB_OK && !cnnb_flag_is_set(ctx, "local_parameter_device")) {
      /* The default asked for no GPU by name: placed softly, as tf, on the host. */
      cnnb_log(ctx, CNNB_LOG_WARN,
               "the variables stay in host memory: the default --local_parameter_device=gpu "
               "cannot place them on the GPU (%s)",
               cnnb_error_message(ctx));
      ps_gpu_close(s);
      s->gpu = false;
      st = CNNB_OK;
    }
  }
  if (st != CNNB_OK) {
    ps_destroy(s);
    return st;
  }
  if (!cnnb_flag_bool(ctx, "cross_replica_sync") && s->sync)
    cnnb_log(ctx, CNNB_LOG_WARN,
             "--cross_replica_sync=false has no effect here: one process, nothing to be "
             "asynchronous with (its replicas are averaged, as tf's on one worker)");
  if (s->rank < s->num_ps && !s->gpu)
    cnnb_log(ctx, CNNB_LOG_INFO,
             "parameter server %d of %d: %lld of %lld parameters in host memory", (int)s->rank,
             (int)s->num_ps, (long long)s->shards.shards[s->rank].count, (long long)s->count);
  *out = s;
  return CNNB_OK;
}

static int32_t ps_world_size(void *strategy) { return ((ps *)strategy)->world_size; }
static int32_t ps_rank(void *strategy) { return ((ps *)strategy)->rank; }

static cnnb_status ps_allgather(void *strategy, const void *send, void *recv, int64_t bytes) {
  ps *s = strategy;
  return mpi_world_allgather(s->world, s->ctx, send, recv, bytes, "the host's run facts");
}

/* --trace_file: a mark before some work (0 when the trace is not recording), and the work
 * since the mark as an event on `track`. The parameter server communicates on the step
 * thread, so its pushes and pulls are measured there. */
static double trace_mark(const ps *s) {
  return cnnb_trace_active(s->ctx) ? cnnb_trace_now_us() : 0.0;
}

static void trace_since(const ps *s, const char *track, const char *name, double start,
                        int64_t bytes) {
  if (!start || !cnnb_trace_active(s->ctx)) return;
  char args[96];
  snprintf(args, sizeof args, "{\"step\": %lld, \"bytes\": %lld}", (long long)s->step,
           (long long)bytes);
  cnnb_trace_event(s->ctx, track, name, start, cnnb_trace_now_us(), args);
}

/* Every replica's params <- vars. */
static cnnb_status write_vars(ps *s, float *const *params) {
  cnnb_status st = CNNB_OK;
  if (s->replicas.host_memory) {
    for (int32_t r = 0; r < s->replicas.n; r++)
      memcpy(params[r], s->vars, (size_t)s->count * sizeof(float));
  } else {
    for (int32_t r = 0; r < s->replicas.n; r++)
      memcpy(s->replicas.staging[r], s->vars, (size_t)s->count * sizeof(float));
    st = replica_arenas_push(&s->replicas, params, 0, s->count);
  }
  return st;
}

/* Rank 0's replica 0 is the truth everyone starts from. */
static cnnb_status ps_broadcast(void *strategy, float *const *params, int64_t count) {
  ps *s = strategy;
  if (count != s->count)
    return cnnb_error(s->ctx, CNNB_EINTERNAL, "parameter_server: %lld parameters, %lld at create",
                      (long long)count, (long long)s->count);
  if (s->count == 0) return CNNB_OK;
  if (s->gpu) return ps_gpu_broadcast(s, params);
  cnnb_status st = CNNB_OK;
  if (s->rank == 0) {
    if (s->replicas.host_memory) memcpy(s->vars, params[0], (size_t)s->count * sizeof(float));
    else
      st = s->replicas.dv->copy_to_host(s->replicas.devices[0], s->vars, params[0],
                                        (size_t)s->count * sizeof(float));
    if (st != CNNB_OK)
      return cnnb_error(s->ctx, st, "parameter_server: reading replica 0's initial values");
  }
  st = mpi_world_bcast(s->world, s->ctx, s->vars, s->count * (int64_t)sizeof(float), 0,
                       "the initial variables");
  if (st == CNNB_OK) st = write_vars(s, params);
  if (st == CNNB_OK && !s->sync) st = ps_async_start(s);
  return st;
}

/* Gradients travel once backward is done: a step's push is one message per PS rank. */
static cnnb_status ps_bucket_ready(void *strategy, float *const *grads, int64_t offset,
                                   int64_t count) {
  (void)strategy, (void)grads, (void)offset, (void)count;
  return CNNB_OK;
}

/* 1 when every element is finite. */
static float all_finite(const float *x, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; i++) acc += x[i] * 0.0f; /* NaN/inf poison the sum */
  return acc == 0.0f ? 1.0f : 0.0f;
}

static cnnb_status ps_finish_step(void *strategy, float *const *grads) {
  ps *s = strategy;
  s->step++;
  if (s->count == 0) return CNNB_OK;
  if (s->gpu) return ps_gpu_finish_step(s, grads);
  int32_t n = s->replicas.n;
  float **views = calloc((size_t)n, sizeof *views);
  if (!views) return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  double t = trace_mark(s);
  cnnb_status st = replica_arenas_pull(&s->replicas, grads, 0, s->count, views);
  if (st == CNNB_OK) {
    memcpy(s->grads, views[0], (size_t)s->count * sizeof(float));
    for (int32_t r = 1; r < n; r++)
      for (int64_t i = 0; i < s->count; i++) s->grads[i] += views[r][i];
  }
  if (st == CNNB_OK)
    trace_since(s, "parameter server", "sum of replicas", t, s->count * (int64_t)sizeof(float));
  /* The replicas' trainers check their own gradients for inf/NaN under dynamic loss
   * scaling, while the mean lives here: when any rank's sum is not finite, every
   * replica's gradients are marked so (NaN), and every rank skips the step the PS ranks
   * skip. A finite sum means finite replicas: nothing to mark. */
  if (st == CNNB_OK && s->check_finite) {
    float finite[1] = {all_finite(s->grads, s->count)};
    if (s->world_size > 1 && s->sync)
      st = mpi_world_allreduce_sum(s->world, s->ctx, finite, 1, 0, "the gradients' finiteness");
    if (st == CNNB_OK && finite[0] != (float)(s->sync ? s->world_size : 1)) {
      for (int32_t r = 0; r < n; r++) views[r][0] = NAN;
      st = replica_arenas_push(&s->replicas, grads, 0, 1);
    }
  }
  if (st == CNNB_OK && !s->sync) { /* this rank's mean goes out in finish_update */
    for (int64_t i = 0; i < s->count; i++) s->grads[i] *= 1.0f / (float)n;
    free(views);
    return CNNB_OK;
  }
  /* Push: each shard's sum of every rank's sums to its PS rank. */
  float scale = 1.0f / (float)((int64_t)n * s->world_size);
  char what[96];
  for (int32_t p = 0; st == CNNB_OK && p < s->num_ps; p++) {
    const ps_shard *shard = &s->shards.shards[p];
    ps_shard_pack(shard, s->grads, s->pack);
    snprintf(what, sizeof what, "pushing gradients to parameter server %d at step %lld", (int)p,
             (long long)s->step);
    t = trace_mark(s);
    st = mpi_world_reduce_sum(s->world, s->ctx, s->pack, shard->count, p, what);
    char track[64];
    snprintf(track, sizeof track, "push to parameter server %d", (int)p);
    if (st == CNNB_OK) trace_since(s, track, "reduce", t, shard->count * (int64_t)sizeof(float));
    if (st == CNNB_OK && p == s->rank) {
      for (int64_t i = 0; i < shard->count; i++) s->pack[i] *= scale;
      ps_shard_unpack(shard, s->pack, s->grads);
    }
  }
  free(views);
  return st;
}

/* Synchronous: this rank's shard of [offset, offset + count), updated here. Asynchronous:
 * kept for the push, which carries this step's updates to every PS rank. */
static cnnb_status ps_apply_update(void *strategy, int64_t offset, const cnnb_update *update) {
  ps *s = strategy;
  if (s->gpu) return ps_gpu_apply(s, offset, update);
  if (s->sync)
    return s->rank < s->num_ps
               ? ps_apply_to_shard(s, s->ctx, s->rank, s->vars, s->grads, offset, update)
               : CNNB_OK;
  if (s->num_updates == s->max_updates) {
    int32_t grown = s->max_updates ? 2 * s->max_updates : 16;
    ps_update *more = realloc(s->updates, (size_t)grown * sizeof *more);
    if (!more) return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
    s->updates = more, s->max_updates = grown;
  }
  s->updates[s->num_updates++] = (ps_update){offset, *update};
  return CNNB_OK;
}

/* Pull: every shard from its PS rank, then into every replica. */
static cnnb_status ps_finish_update(void *strategy, float *const *params) {
  ps *s = strategy;
  if (s->count == 0) return CNNB_OK;
  if (s->gpu) return ps_gpu_finish_update(s, params);
  cnnb_status st = CNNB_OK;
  if (!s->sync) {
    st = ps_async_push_pull(s);
    s->num_updates = 0;
    return st == CNNB_OK ? write_vars(s, params) : st;
  }
  char what[96];
  for (int32_t p = 0; st == CNNB_OK && p < s->num_ps && s->world_size > 1; p++) {
    const ps_shard *shard = &s->shards.shards[p];
    if (p == s->rank) ps_shard_pack(shard, s->vars, s->pack);
    snprintf(what, sizeof what, "pulling variables from parameter server %d at step %lld", (int)p,
             (long long)s->step);
    double t = trace_mark(s);
    st = mpi_world_bcast(s->world, s->ctx, s->pack, shard->count * (int64_t)sizeof(float), p, what);
    char track[64];
    snprintf(track, sizeof track, "pull from parameter server %d", (int)p);
    if (st == CNNB_OK) trace_since(s, track, "broadcast", t, shard->count * (int64_t)sizeof(float));
    if (st == CNNB_OK && p != s->rank) ps_shard_unpack(shard, s->pack, s->vars);
  }
  if (st != CNNB_OK) return st;
  double t = trace_mark(s);
  st = write_vars(s, params);
  if (st == CNNB_OK)
    trace_since(s, "parameter server", "variables to replicas", t,
                s->count * (int64_t)sizeof(float));
  return st;
}

/* Checkpoints reach the optimizer slots kept here (ps_optimizer_state.h). */
static const void *ps_get_extension(void *strategy, const char *id) {
  (void)strategy;
  return strcmp(id, CNNB_EXT_STRATEGY_OPTIMIZER_STATE) == 0 ? &ps_optimizer_state : NULL;
}

static const cnnb_strategy_vtable vtable = {
    .struct_size = sizeof(cnnb_strategy_vtable),
    .create = ps_create,
    .destroy = ps_destroy,
    .world_size = ps_world_size,
    .rank = ps_rank,
    .broadcast_params = ps_broadcast,
    .bucket_ready = ps_bucket_ready,
    .finish_step = ps_finish_step,
    .get_extension = ps_get_extension,
    .allgather = ps_allgather,
    .apply_update = ps_apply_update,
    .finish_update = ps_finish_update,
};

static const char *const offers[] = {"parameter_server", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_STRATEGY, "parameter_server", "0.1.0",
                     "variables on parameter servers (host memory, or the first GPU; the first "
                     "--num_ps_ranks ranks under mpirun), updates applied there, in step or "
                     "asynchronous"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}
