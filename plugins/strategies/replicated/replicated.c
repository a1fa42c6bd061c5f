/* replicated — tf_cnn_benchmarks' --variable_update=replicated: every replica keeps its
 * own copy of the variables, and every step each replica's gradients are replaced by the
 * mean over all replicas of all ranks, so the copies stay equal (they start equal:
 * broadcast_params) and N replicas of batch b train like one of batch N*b.
 *
 * A gradient range is averaged in three moves: the local replicas all-reduce it by the
 * algorithm --all_reduce_spec picks for its size (local_reduce.h: xring or pscpu); under
 * mpirun with several processes, replica 0's local sum is summed across the ranks with
 * MPI (mpi_world.h); then replica 0's sum is scaled by 1 / (replicas * ranks) and copied
 * to the other replicas, so every replica holds the same floats. The ranges are the
 * buckets the host announces, or with --gradient_repacking=K the gradient arena cut into
 * K chunks once all of it is ready (tf packs every gradient into one tensor and splits
 * it into K; our arena is that tensor already).
 *
 * Where the work runs: on a device whose arenas are host memory (CNNB_EXT_HOST_MEMORY)
 * a communication thread reduces each announced range while the step thread goes on with
 * the last replica's backward; otherwise the ranges are staged through host copies, which
 * device calls allow only on the step thread, so the step thread reduces them there. The
 * nccl ranges of the spec (GPUs: replicated_nccl.h) never leave the GPUs: the step
 * thread puts each range's NCCL all-reduce on the replicas' streams as it is announced,
 * and finish_step waits (bounded) for the last one.
 * finish_step waits for all of it. --replicated_timeline=FILE records when each range's
 * all-reduce ran beside the buckets' announcements and the end of backward
 * (../common/timeline.h), the proof that it overlaps the last replica's backward.
 *
 * The same plugin answers distributed_all_reduce and distributed_replicated, tf's names
 * for the multi-worker forms, with one line saying how they map onto this. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "all_reduce_spec.h"
#include "comm_thread.h"
#include "local_reduce.h"
#include "mpi_world.h"
#include "replica_arenas.h"
#include "replicated_nccl.h"
#include "timeline.h"

#define TIMELINE_FLAG "replicated_timeline"

typedef struct replicated replicated;

/* One range to average: a bucket, or a chunk of the repacked arena. */
typedef struct reduce_job {
  replicated *s;
  int64_t offset, count, step;
  float **views;  /* [replicas] host views of the range */
  char label[32]; /* "bucket 3", "chunk 2 of 4": for the timeline */
} reduce_job;

struct replicated {
  cnnb_ctx *ctx;
  all_reduce_spec spec;
  replica_arenas arenas;
  mpi_world *world;
  comm_thread *comm;     /* NULL: the step thread reduces (staging, or nothing to do) */
  replicated_nccl *nccl; /* the nccl ranges' GPUs and communicators, or NULL */
  timeline *timeline;    /* --replicated_timeline's file (if given) and --trace_file's events */
  int32_t replicas, world_size, repacking;
  bool exchange;      /* more than one replica in the world, or nccl asked for: there is
                         work (nccl runs even on one GPU: a communicator of one) */
  bool host_exchange; /* more than one replica in the world: the host ranges have work */
  bool host_ranges;   /* some range of the spec is a host algorithm (xring, pscpu) */
  float scale;        /* 1 / (replicas * world_size) */
  uint32_t compact16; /* --compact_gradient_transfer's 16-bit type across ranks, or 0 */
  int64_t param_count;
  float *pscpu_scratch; /* LOCAL_REDUCE_PSCPU_BLOCK floats, for whichever thread reduces */
  reduce_job *jobs;     /* [max_jobs] this step's ranges, in announcement order */
  float **job_views;    /* [max_jobs * replicas] */
  int32_t max_jobs, num_jobs;
  int64_t announced; /* gradient elements announced so far this step */
  int32_t buckets;   /* announced so far this step */
  int64_t step;      /* from 1 */
};

/* ---- averaging one range ------------------------------------------------------ */

/* v *= scale, in blocks gcc vectorizes at -O2 (local_reduce.c's add_into says why). */
static void scale_in_place(float *v, int64_t count, float scale) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    for (int k = 0; k < 16; k++) v[i + k] *= scale;
  for (; i < count; i++) v[i] *= scale;
}

/* "xring#1", "xring#1, then MPI fp32", "MPI bf16": how a range of `count` is reduced. */
static void describe_how(const replicated *s, int64_t count, char *out, size_t size) {
  const reduce_range *how = all_reduce_spec_pick(&s->spec, count);
  if (how->nccl) {
    replicated_nccl_how(s->nccl, how, out, size);
    return;
  }
  const char *sent = s->compact16 == CNNB_PRECISION_FP16 ? "fp16" : s->compact16 ? "bf16" : "fp32";
  if (s->world_size == 1)
    snprintf(out, size, "%s#%d", local_reduce_alg_name(how->alg), (int)how->shards);
  else if (s->replicas == 1) snprintf(out, size, "MPI %s", sent);
  else
    snprintf(out, size, "%s#%d, then MPI %s", local_reduce_alg_name(how->alg), (int)how->shards,
             sent);
}

/* Any thread (one at a time): the job's views[r][0, count) become the mean over every
 * replica. ctx: the calling thread's (the strategy's, or the communication thread's in a
 * job); tid: which thread that is, for the timeline. */
static cnnb_status average(replicated *s, const reduce_job *job, cnnb_ctx *ctx, int tid) {
  float *const *views = job->views;
  int64_t count = job->count;
  timeline_span span = {0};
  if (timeline_recording(s->timeline)) {
    char how[96];
    describe_how(s, count, how, sizeof how);
    timeline_allreduce_begin(s->timeline, &span, tid, job->step, job->label,
                             count * (int64_t)sizeof(float), how);
  }
  const reduce_range *how = all_reduce_spec_pick(&s->spec, count);
  local_reduce(how->alg, views, s->replicas, count, how->shards, s->pscpu_scratch);
  cnnb_status st = CNNB_OK;
  if (s->world_size > 1) {
    char what[128];
    snprintf(what, sizeof what, "gradients [%lld, %lld) of step %lld", (long long)job->offset,
             (long long)(job->offset + count), (long long)job->step);
    st = mpi_world_allreduce_sum(s->world, ctx, views[0], count, s->compact16, what);
    if (st != CNNB_OK) st = cnnb_error(ctx, st, "summing %s across ranks", what);
  }
  if (st == CNNB_OK) {
    /* Replica 0 alone is scaled and copied: every replica ends with its very floats, even
     * where MPI's sum would not promise the same bits on every rank's replicas. */
    float *mean = views[0];
    scale_in_place(mean, count, s->scale);
    for (int32_t r = 1; r < s->replicas; r++) memcpy(views[r], mean, (size_t)count * sizeof(float));
  }
  timeline_allreduce_end(s->timeline, &span);
  return st;
}

/* comm_thread job. */
static cnnb_status run_job(void *arg, cnnb_ctx *ctx) {
  reduce_job *job = arg;
  return average(job->s, job, ctx, TIMELINE_COMM_THREAD);
}

/* Step thread: an nccl range, put on the GPUs' streams (or, crossing ranks through MPI,
 * done here). */
static cnnb_status nccl_range(replicated *s, float *const *grads, int64_t offset, int64_t count,
                              const char *label) {
  timeline_span span = {0};
  if (timeline_recording(s->timeline)) {
    char how[96];
    describe_how(s, count, how, sizeof how);
    timeline_allreduce_begin(s->timeline, &span, TIMELINE_STEP_THREAD, s->step, label,
                             count * (int64_t)sizeof(float), how);
  }
  char what[128];
  snprintf(what, sizeof what, "%s (gradients [%lld, %lld)) of step %lld", label, (long long)offset,
           (long long)(offset + count), (long long)s->step);
  const reduce_range *how = all_reduce_spec_pick(&s->spec, count);
  cnnb_status st = replicated_nccl_average(s->nccl, grads, offset, count, how, what);
  timeline_allreduce_end(s->timeline, &span);
  return st;
}

/* Step thread: averages grads[.][offset, offset + count), on the communication thread
 * when there is one (host memory: the views are the arenas), else here through staging. */
static cnnb_status start_range(replicated *s, float *const *grads, int64_t offset, int64_t count,
                               const char *label) {
  if (s->num_jobs == s->max_jobs)
    return cnnb_error(s->ctx, CNNB_EINTERNAL,
                      "step %lld: more than %d gradient ranges to "
                      "reduce (the arena has that many variables)",
                      (long long)s->step, (int)s->max_jobs);
  const reduce_range *how = all_reduce_spec_pick(&s->spec, count);
  if (s->step == 1)
    cnnb_log(s->ctx, CNNB_LOG_DEBUG, "gradients [%lld, %lld) (%lld elements) by %s#%d",
             (long long)offset, (long long)(offset + count), (long long)count,
             how->nccl ? "nccl" : local_reduce_alg_name(how->alg), (int)how->shards);
  if (how->nccl) return nccl_range(s, grads, offset, count, label);
  if (!s->host_exchange) return CNNB_OK;
  reduce_job *job = &s->jobs[s->num_jobs++];
  *job = (reduce_job){.s = s,
                      .offset = offset,
                      .count = count,
                      .step = s->step,
                      .views = s->job_views + (size_t)(s->num_jobs - 1) * (size_t)s->replicas};
  snprintf(job->label, sizeof job->label, "%s", label);
  if (s->comm) {
    cnnb_status st = replica_arenas_pull(&s->arenas, grads, offset, count, job->views);
    return st != CNNB_OK ? st : comm_thread_post(s->comm, run_job, job);
  }
  /* Staging (on host memory a thread runs whenever there is work): with repacking the
   * buckets were pulled as they came; otherwise pull now. The copies synchronize the
   * streams, where NCCL work of earlier ranges may be: waited for first, bounded. */
  cnnb_status st = s->nccl ? replicated_nccl_wait(s->nccl, job->label) : CNNB_OK;
  if (st != CNNB_OK) return st;
  if (s->repacking) {
    for (int32_t r = 0; r < s->replicas; r++) job->views[r] = s->arenas.staging[r] + offset;
  } else {
    st = replica_arenas_pull(&s->arenas, grads, offset, count, job->views);
  }
  if (st == CNNB_OK) st = average(s, job, s->ctx, TIMELINE_STEP_THREAD);
  if (st == CNNB_OK) st = replica_arenas_push(&s->arenas, grads, offset, count);
  return st;
}

/* ---- the vtable ---------------------------------------------------------------- */

static cnnb_status bucket_ready(replicated *s, float *const *grads, int64_t offset, int64_t count);

static cnnb_status replicated_bucket_ready(void *strategy, float *const *grads, int64_t offset,
                                           int64_t count) {
  replicated *s = strategy;
  cnnb_status st = bucket_ready(s, grads, offset, count);
  if (st != CNNB_OK) replicated_nccl_abandon(s->nccl); /* nothing may wait for peers now */
  return st;
}

static cnnb_status bucket_ready(replicated *s, float *const *grads, int64_t offset, int64_t count) {
  if (count <= 0) return CNNB_OK;
  if (offset < 0 || count > s->param_count - offset || s->announced + count > s->param_count)
    return cnnb_error(s->ctx, CNNB_EINTERNAL,
                      "step %lld: bucket [%lld, %lld) lies outside the "
                      "%lld gradients, or repeats one (%lld announced before it)",
                      (long long)s->step, (long long)offset, (long long)(offset + count),
                      (long long)s->param_count, (long long)s->announced);
  s->announced += count;
  timeline_bucket_ready(s->timeline, s->step, ++s->buckets, offset, count);
  if (!s->exchange) return CNNB_OK;
  if (!s->repacking) {
    char label[32];
    snprintf(label, sizeof label, "bucket %d", (int)s->buckets);
    return start_range(s, grads, offset, count, label);
  }
  /* Repacking reduces once every gradient is ready (tf concatenates them all first). On
   * staging, each bucket is copied out as it comes, while its device is between kernels. */
  if (!s->comm && s->host_ranges && s->host_exchange) {
    float **staged = s->job_views; /* [replicas] scratch: no range has started this step */
    cnnb_status st = replica_arenas_pull(&s->arenas, grads, offset, count, staged);
    if (st != CNNB_OK) return st;
  }
  if (s->announced < s->param_count) return CNNB_OK;
  for (int32_t k = 0; k < s->repacking; k++) {
    int64_t lo = s->param_count * k / s->repacking, hi = s->param_count * (k + 1) / s->repacking;
    if (hi == lo) continue;
    char label[32];
    snprintf(label, sizeof label, "chunk %d of %d", (int)(k + 1), (int)s->repacking);
    cnnb_status st = start_range(s, grads, lo, hi - lo, label);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

static cnnb_status replicated_finish_step(void *strategy, float *const *grads) {
  replicated *s = strategy;
  timeline_backward_done(s->timeline, s->step);
  cnnb_status st = s->comm ? comm_thread_wait(s->comm) : CNNB_OK;
  if (st == CNNB_OK && s->nccl) {
    char what[64];
    snprintf(what, sizeof what, "the all-reduces of step %lld", (long long)s->step);
    st = replicated_nccl_wait(s->nccl, what);
  }
  if (st != CNNB_OK) replicated_nccl_abandon(s->nccl);
  /* A range never announced would keep one replica's own gradient: a silent wrong mean. */
  if (st == CNNB_OK && s->announced != s->param_count)
    st = cnnb_error(s->ctx, CNNB_EINTERNAL,
                    "step %lld: the host announced %lld of the %lld gradients before finish_step",
                    (long long)s->step, (long long)s->announced, (long long)s->param_count);
  timeline_flush(s->timeline);
  s->num_jobs = 0;
  s->announced = 0;
  s->buckets = 0;
  s->step++;
  return st;
}

static cnnb_status replicated_broadcast(void *strategy, float *const *params, int64_t count) {
  replicated *s = strategy;
  size_t bytes = (size_t)count * sizeof(float);
  if (count <= 0) return CNNB_OK;
  if (count > s->param_count)
    return cnnb_error(s->ctx, CNNB_EINTERNAL, "broadcast of %lld parameters, the arena has %lld",
                      (long long)count, (long long)s->param_count);
  replica_arenas *a = &s->arenas;
  cnnb_status st = CNNB_OK;
  /* On host memory replica 0's arena itself travels; otherwise its host copy. */
  float *source = a->host_memory ? params[0] : a->staging[0];
  if (!a->host_memory &&
      (st = a->dv->copy_to_host(a->devices[0], source, params[0], bytes)) != CNNB_OK)
    return cnnb_error(s->ctx, st, "copying replica 0's parameters to the host");
  if (s->world_size > 1 && (st = mpi_world_bcast(s->world, s->ctx, source, (int64_t)bytes, 0,
                                                 "the initial parameters")) != CNNB_OK)
    return cnnb_error(s->ctx, st, "broadcasting rank 0's initial parameters");
  for (int32_t r = a->host_memory ? 1 : (s->world_size > 1 ? 0 : 1); r < s->replicas; r++) {
    if (a->host_memory) {
      memcpy(params[r], source, bytes);
    } else if ((st = a->dv->copy_to_device(a->devices[r], params[r], source, bytes)) != CNNB_OK) {
      return cnnb_error(s->ctx, st, "copying the initial parameters to replica %d", (int)r);
    }
  }
  return CNNB_OK;
}

static cnnb_status replicated_allgather(void *strategy, const void *send, void *recv,
                                        int64_t bytes) {
  replicated *s = strategy;
  return mpi_world_allgather(s->world, s->ctx, send, recv, bytes, "the host's allgather");
}

static int32_t replicated_world_size(void *strategy) {
  return mpi_world_size(((replicated *)strategy)->world);
}

static int32_t replicated_rank(void *strategy) {
  return mpi_world_rank(((replicated *)strategy)->world);
}

static void replicated_destroy(void *strategy) {
  replicated *s = strategy;
  if (!s) return;
  comm_thread_stop(s->comm);      /* before the world and the timeline its jobs use */
  replicated_nccl_close(s->nccl); /* before the world: its faults meet at an MPI barrier */
  timeline_close(s->timeline);
  mpi_world_close(s->world);
  replica_arenas_free(&s->arenas);
  free(s->pscpu_scratch);
  free(s->jobs);
  free(s->job_views);
  free(s);
}

/* ---- create ---------------------------------------------------------------------- */

/* "--all_reduce_spec=SPEC" and, when SPEC is more than its nccl range, " part 'nccl'":
 * who asks for NCCL, in messages. */
static void nccl_asker(const cnnb_strategy_config *cfg, const reduce_range *nccl, char *out,
                       size_t size) {
  if (strcmp(cfg->all_reduce_spec, nccl->text) == 0)
    snprintf(out, size, "--all_reduce_spec=%s", cfg->all_reduce_spec);
  else snprintf(out, size, "--all_reduce_spec=%s: part '%s'", cfg->all_reduce_spec, nccl->text);
}

/* NCCL on a device whose memory is the host's (cpu): refused before anything is
 * allocated, so the refusal costs nothing. Other devices are judged by opening NCCL on
 * them (replicated_nccl_open: a device without CUDA streams, a build without NCCL, a
 * machine without a GPU, each in one line). */
static cnnb_status refuse_nccl_on_host(cnnb_ctx *ctx, const cnnb_strategy_config *cfg,
                                       const reduce_range *nccl) {
  bool host_memory = cfg->local_replicas > 0 && cfg->device->get_extension &&
                     cfg->device->get_extension(cfg->devices[0], CNNB_EXT_HOST_MEMORY);
  if (!host_memory) return CNNB_OK;
  const char *device = cfg->struct_size >= offsetof(cnnb_strategy_config, device_name) +
                                               sizeof cfg->device_name &&
                               cfg->device_name
                           ? cfg->device_name
                           : "of this run";
  char who[160];
  nccl_asker(cfg, nccl, who, sizeof who);
  return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                    "%s: NCCL reduces on GPUs; device %s has none: use xring or pscpu", who,
                    device);
}

/* tf's multi-worker names, and what they are here. */
static void explain_name(cnnb_ctx *ctx, const char *name) {
  if (strcmp(name, "distributed_all_reduce") == 0)
    cnnb_log(ctx, CNNB_LOG_INFO,
             "--variable_update=distributed_all_reduce runs as replicated: "
             "one all-reduce over every replica of every rank, done as the local replicas' "
             "--all_reduce_spec all-reduce, then MPI allreduce across ranks");
  else if (strcmp(name, "distributed_replicated") == 0)
    cnnb_log(ctx, CNNB_LOG_INFO,
             "--variable_update=distributed_replicated runs as replicated: "
             "local replicas all-reduced by --all_reduce_spec, then synced across workers by "
             "MPI allreduce instead of tf's parameter servers; every replica applies the "
             "same mean");
}

#define CONFIG_HAS(cfg, field) \
  ((cfg)->struct_size >= offsetof(cnnb_strategy_config, field) + sizeof((cfg)->field))

static cnnb_status allocate(replicated *s, const cnnb_strategy_config *cfg) {
  cnnb_status st = replica_arenas_init(s->ctx, cfg, &s->arenas);
  if (st != CNNB_OK) return st;
  int32_t n = s->replicas;
  /* A bucket never splits a variable, so a step has at most one bucket per variable. */
  s->max_jobs = s->repacking ? s->repacking : (cfg->num_variables > 0 ? cfg->num_variables : 1);
  s->jobs = calloc((size_t)s->max_jobs, sizeof *s->jobs);
  s->job_views = calloc((size_t)s->max_jobs * (size_t)n, sizeof *s->job_views);
  s->pscpu_scratch = malloc((size_t)LOCAL_REDUCE_PSCPU_BLOCK * sizeof(float));
  if (!s->jobs || !s->job_views || !s->pscpu_scratch)
    return cnnb_error(s->ctx, CNNB_ENOMEM, "replicated: out of memory for %d ranges of %d replicas",
                      (int)s->max_jobs, (int)n);
  if (s->exchange && s->arenas.host_memory)
    return comm_thread_start(s->ctx, "replicated", &s->comm);
  return CNNB_OK;
}

static cnnb_status replicated_create(cnnb_ctx *ctx, const char *name,
                                     const cnnb_strategy_config *cfg, void **out) {
  if (!CONFIG_HAS(cfg, compact_gradient_transfer))
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      "%s needs a host of ABI 1.4 or newer (its "
                      "--all_reduce_spec and --gradient_repacking reach strategies since)",
                      name);
  if (cfg->local_replicas < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: %d local replicas", name, (int)cfg->local_replicas);
  all_reduce_spec spec;
  cnnb_status st = all_reduce_spec_parse(ctx, cfg->all_reduce_spec, &spec);
  if (st != CNNB_OK) return st;
  const reduce_range *nccl = all_reduce_spec_find_nccl(&spec);
  if (nccl && (st = refuse_nccl_on_host(ctx, cfg, nccl)) != CNNB_OK) return st;
  explain_name(ctx, name);

  replicated *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", name);
  s->ctx = ctx;
  s->spec = spec;
  s->step = 1;
  s->replicas = cfg->local_replicas;
  s->param_count = cfg->param_count;
  s->repacking = cfg->gradient_repacking > 0 ? cfg->gradient_repacking : 0;
  if (cfg->compact_gradient_transfer)
    s->compact16 = cfg->precision == CNNB_PRECISION_FP16 ? CNNB_PRECISION_FP16
                                                         : CNNB_PRECISION_BF16;
  if ((st = mpi_world_open(ctx, name, cfg->collective_timeout_s, &s->world)) != CNNB_OK) {
    free(s);
    return st;
  }
  s->world_size = mpi_world_size(s->world);
  s->host_exchange = (int64_t)s->replicas * s->world_size > 1;
  s->exchange = s->host_exchange || nccl;
  for (int32_t k = 0; k < spec.num_ranges; k++) s->host_ranges |= !spec.ranges[k].nccl;
  s->scale = (float)(1.0 / ((double)s->replicas * (double)s->world_size));
  char who[160] = "";
  if (nccl) nccl_asker(cfg, nccl, who, sizeof who);
  if ((st = timeline_open(ctx, TIMELINE_FLAG, cnnb_flag_string(ctx, TIMELINE_FLAG),
                          mpi_world_rank(s->world), &s->timeline)) != CNNB_OK ||
      (nccl && (st = replicated_nccl_open(ctx, who, cfg, &s->spec, s->world, s->compact16,
                                          &s->nccl)) != CNNB_OK) ||
      (st = allocate(s, cfg)) != CNNB_OK) {
    replicated_destroy(s);
    return st;
  }
  char how[512];
  all_reduce_spec_describe(&s->spec, how, sizeof how);
  char repack[96] = "";
  if (s->repacking)
    snprintf(repack, sizeof repack, " (--gradient_repacking=%d: its chunks are the buckets)",
             (int)s->repacking);
  cnnb_log(ctx, CNNB_LOG_DEBUG, "%d local replicas x %d ranks; %s%s%s; reduced on %s",
           (int)s->replicas, (int)s->world_size, how,
           s->world_size > 1 && s->host_ranges ? ", then MPI across ranks" : "", repack,
           s->comm ? "a communication thread" : "the step thread");
  if (s->nccl) cnnb_log(ctx, CNNB_LOG_INFO, "%s", replicated_nccl_describe(s->nccl));
  *out = s;
  return CNNB_OK;
}

static const cnnb_strategy_vtable vtable = {
    .struct_size = sizeof(cnnb_strategy_vtable),
    .create = replicated_create,
    .destroy = replicated_destroy,
    .world_size = replicated_world_size,
    .rank = replicated_rank,
    .broadcast_params = replicated_broadcast,
    .bucket_ready = replicated_bucket_ready,
    .finish_step = replicated_finish_step,
    .allgather = replicated_allgather,
};

static const char *const offers[] = {"replicated", "distributed_all_reduce",
                                     "distributed_replicated", NULL};

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  /* Its own flag: plugin flags are unique across plugins, so horovod's
   * --horovod_timeline cannot be shared (and a core flag would be the host's to add). */
  return cnnb_flag_declare(
      registry, TIMELINE_FLAG, CNNB_FLAG_STRING, "",
      "Write a Chrome trace (chrome://tracing) of each rank's gradient buckets and "
      "all-reduces to FILE with the rank inserted: --replicated_timeline=t.json writes "
      "t.rank0.json, t.rank1.json, ... (as --horovod_timeline).");
}

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_STRATEGY, "replicated", "0.1.0",
                     "every replica keeps the variables; gradients all-reduced (xring, pscpu; "
                     "MPI across ranks; NCCL on GPUs)"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}
