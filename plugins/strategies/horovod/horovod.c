/* horovod — Horovod-style data parallelism: one replica per MPI process, gradients
 * averaged by MPI allreduce while backward is still running.
 *
 * Each bucket the executor announces goes to the communication thread at once. When the
 * thread comes round it takes every bucket that is ready by then, fuses the adjacent
 * ones up to --horovod_fusion_threshold bytes (Horovod's tensor fusion; the buckets
 * arrive in reverse arena order and touch, so a fusion is one contiguous range), sums
 * the range over the ranks with one allreduce and scales it by 1/world. finish_step waits
 * for the last one. --compact_gradient_transfer sends 16 bits a value (fp16 under fp16
 * precision, else bf16) and adds in fp32 at every hop. --horovod_hierarchical_allreduce
 * (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE) sums in three moves instead: within each
 * node to its leader, across the leaders only, then back within the node
 * (mpi_world_allreduce_sum_hierarchical), so one rank a node sends between nodes.
 *
 * Every wait is bounded by --collective_timeout_s: a rank that died or stopped ends the
 * step with CNNB_ECOMM naming it (mpi_world.h). Run without mpirun it trains as one
 * process. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "../common/comm_thread.h"
#include "../common/mpi_world.h"
#include "../common/replica_arenas.h"
#include "../common/timeline.h"

#define FUSION_FLAG "horovod_fusion_threshold"
#define TIMELINE_FLAG "horovod_timeline"
#define HIERARCHICAL_FLAG "horovod_hierarchical_allreduce"

/* A bucket announced and not yet reduced: [offset, offset + count) of the arena, whose
 * host floats start at view. */
typedef struct bucket {
  float *view;
  int64_t offset, count;
  int64_t step;
  int32_t index; /* 1-based within its step */
} bucket;

typedef struct horovod {
  cnnb_ctx *ctx;
  mpi_world *world;
  comm_thread *comm;
  replica_arenas arenas;
  timeline *timeline;
  int64_t fusion_bytes;
  uint32_t compact16;   /* 0, or the 16-bit format sent */
  bool hierarchical;    /* --horovod_hierarchical_allreduce */
  char how[64];         /* the allreduce, for the timeline: "MPI bf16" */
  float scale;          /* 1 / world size */
  /* The step thread's count of steps (from 1) and of this step's buckets, and the range
   * announced this step (what goes back to a device without host memory). */
  int64_t step;
  int32_t buckets;
  int64_t announced_lo, announced_hi;
  /* Announced buckets not yet taken by the communication thread, oldest first. */
  pthread_mutex_t lock;
  bucket *ready;
  int32_t ready_head, ready_count, ready_cap;
} horovod;

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  cnnb_status st = cnnb_flag_declare(
      registry, FUSION_FLAG, CNNB_FLAG_INT, "67108864",
      "Fuse gradient buckets that are ready together into one allreduce of up to "
      "this many bytes (Horovod's HOROVOD_FUSION_THRESHOLD, 64 MiB); 0 sends each bucket alone.");
  if (st != CNNB_OK) return st;
  st = cnnb_flag_declare(
      registry, HIERARCHICAL_FLAG, CNNB_FLAG_BOOL, "false",
      "Sum gradients in three moves (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE): within each "
      "node to its first rank, across those ranks only, then back within the node; one rank "
      "a node sends between nodes. --compact_gradient_transfer then applies between nodes.");
  if (st != CNNB_OK) return st;
  return cnnb_flag_declare(
      registry, TIMELINE_FLAG, CNNB_FLAG_STRING, "",
      "Write a Chrome trace (chrome://tracing) of each rank's buckets and allreduces "
      "to FILE with the rank inserted: --horovod_timeline=t.json writes t.rank0.json, "
      "t.rank1.json, ... (Horovod's HOROVOD_TIMELINE).");
}

static void destroy(void *strategy) {
  horovod *s = strategy;
  if (!s) return;
  comm_thread_stop(s->comm); /* first: its jobs use everything below */
  timeline_close(s->timeline);
  mpi_world_close(s->world);
  replica_arenas_free(&s->arenas);
  pthread_mutex_destroy(&s->lock);
  free(s->ready);
  free(s);
}

/* Reads a 1.4 field only from a host that passes it. */
#define CFG_HAS(cfg, field) \
  ((cfg)->struct_size >= offsetof(cnnb_strategy_config, field) + sizeof((cfg)->field))

static cnnb_status create(cnnb_ctx *ctx, const char *name, const cnnb_strategy_config *cfg,
                          void **out) {
  *out = NULL;
  if (cfg->local_replicas > 1)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "--num_gpus=%d: horovod runs one replica per MPI process; launch one "
                      "process per device (mpirun -np N), or use --variable_update=replicated "
                      "for several devices in one process", (int)cfg->local_replicas);
  int64_t fusion = cnnb_flag_int(ctx, FUSION_FLAG);
  if (fusion < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%lld: must be a number of bytes >= 0 (0: no fusion)",
                      FUSION_FLAG, (long long)fusion);
  horovod *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "horovod: out of memory");
  pthread_mutex_init(&s->lock, NULL);
  s->ctx = ctx;
  s->fusion_bytes = fusion;
  s->hierarchical = cnnb_flag_bool(ctx, HIERARCHICAL_FLAG);
  s->step = 1;
  uint32_t precision = CFG_HAS(cfg, precision) ? cfg->precision : CNNB_PRECISION_FP32;
  if (CFG_HAS(cfg, compact_gradient_transfer) && cfg->compact_gradient_transfer)
    s->compact16 = precision == CNNB_PRECISION_FP16 ? CNNB_PRECISION_FP16 : CNNB_PRECISION_BF16;
  double timeout = CFG_HAS(cfg, collective_timeout_s) ? cfg->collective_timeout_s : 60;
  cnnb_status st;
  if ((st = replica_arenas_init(ctx, cfg, &s->arenas)) != CNNB_OK ||
      (st = mpi_world_open(ctx, name, timeout, &s->world)) != CNNB_OK ||
      (st = timeline_open(ctx, TIMELINE_FLAG, cnnb_flag_string(ctx, TIMELINE_FLAG),
                          mpi_world_rank(s->world), &s->timeline)) != CNNB_OK ||
      (st = comm_thread_start(ctx, name, &s->comm)) != CNNB_OK) {
    destroy(s);
    return st;
  }
  s->scale = 1.0f / (float)mpi_world_size(s->world);
  const char *sent = s->compact16 == CNNB_PRECISION_FP16 ? "fp16" : s->compact16 ? "bf16" : "fp32";
  char hierarchy[160] = "";
  if (s->hierarchical) {
    snprintf(s->how, sizeof s->how, "MPI hierarchical, %s between nodes", sent);
    snprintf(hierarchy, sizeof hierarchy, "; hierarchical allreduce over %d node%s (local rank "
             "%d of %d: %s)", (int)mpi_world_num_nodes(s->world),
             mpi_world_num_nodes(s->world) == 1 ? "" : "s", (int)mpi_world_local_rank(s->world),
             (int)mpi_world_local_size(s->world),
             mpi_world_local_rank(s->world) == 0 ? "the node's leader" : "not a leader");
  } else {
    snprintf(s->how, sizeof s->how, "MPI %s", sent);
  }
  cnnb_log(ctx, CNNB_LOG_INFO, "rank %d of %d; buckets fused up to %.1f MiB; gradients sent as "
           "%s%s%s%s", (int)mpi_world_rank(s->world), (int)mpi_world_size(s->world),
           (double)fusion / (1 << 20), sent, s->hierarchical ? " between nodes" : "", hierarchy,
           s->arenas.host_memory ? "" : ", staged through host memory");
  *out = s;
  return CNNB_OK;
}

static int32_t world_size(void *strategy) { return mpi_world_size(((horovod *)strategy)->world); }
static int32_t rank(void *strategy) { return mpi_world_rank(((horovod *)strategy)->world); }

static cnnb_status broadcast_params(void *strategy, float *const *params, int64_t count) {
  horovod *s = strategy;
  if (mpi_world_size(s->world) == 1) return CNNB_OK;
  float *view;
  cnnb_status st = replica_arenas_pull(&s->arenas, params, 0, count, &view);
  if (st == CNNB_OK)
    st = mpi_world_bcast(s->world, s->ctx, view, count * (int64_t)sizeof(float), 0,
                         "the initial parameters");
  if (st == CNNB_OK) st = replica_arenas_push(&s->arenas, params, 0, count);
  return st;
}

static cnnb_status allgather(void *strategy, const void *send, void *recv, int64_t bytes) {
  horovod *s = strategy;
  /* The host calls this on the main thread between steps, when the communication
   * thread is idle: the world sees one call at a time. */
  return mpi_world_allgather(s->world, s->ctx, send, recv, bytes, "the host's per-rank values");
}

/* [communication thread] Takes the oldest ready bucket and the ones after it that extend
 * it downwards within the fusion threshold, reduces them as one range and averages it.
 * A job whose bucket an earlier job already took finds nothing and returns. ctx is the
 * thread's own (comm_thread.h): the allreduce records its failure there. */
static cnnb_status reduce_ready(void *arg, cnnb_ctx *ctx) {
  horovod *s = arg;
  pthread_mutex_lock(&s->lock);
  if (s->ready_count == 0) {
    pthread_mutex_unlock(&s->lock);
    return CNNB_OK;
  }
  bucket first = s->ready[s->ready_head], low = first;
  int32_t taken = 1;
  while (taken < s->ready_count) {
    bucket next = s->ready[(s->ready_head + taken) % s->ready_cap];
    int64_t fused = first.offset + first.count - next.offset;
    if (next.offset + next.count != low.offset || fused * (int64_t)sizeof(float) > s->fusion_bytes)
      break;
    low = next;
    taken++;
  }
  s->ready_head = (s->ready_head + taken) % s->ready_cap;
  s->ready_count -= taken;
  pthread_mutex_unlock(&s->lock);

  int64_t count = first.offset + first.count - low.offset;
  char buckets[64], what[96];
  if (taken == 1)
    snprintf(buckets, sizeof buckets, "bucket %d", (int)first.index);
  else
    snprintf(buckets, sizeof buckets, "buckets %d-%d", (int)first.index, (int)low.index);
  snprintf(what, sizeof what, "%s of step %lld", buckets, (long long)first.step);
  timeline_allreduce_begin(s->timeline, TIMELINE_COMM_THREAD, first.step, buckets,
                           count * (int64_t)sizeof(float), s->how);
  cnnb_status st =
      s->hierarchical
          ? mpi_world_allreduce_sum_hierarchical(s->world, ctx, low.view, count, s->compact16, what)
          : mpi_world_allreduce_sum(s->world, ctx, low.view, count, s->compact16, what);
  if (st == CNNB_OK && s->scale != 1.0f)
    for (int64_t i = 0; i < count; i++) low.view[i] *= s->scale;
  timeline_allreduce_end(s->timeline, TIMELINE_COMM_THREAD);
  return st;
}

static cnnb_status queue_bucket(horovod *s, bucket b) {
  pthread_mutex_lock(&s->lock);
  if (s->ready_count == s->ready_cap) {
    int32_t cap = s->ready_cap ? 2 * s->ready_cap : 64;
    bucket *grown = malloc((size_t)cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&s->lock);
      cnnb_status st = comm_thread_wait(s->comm); /* a failed allreduce is the cause */
      return st != CNNB_OK ? st : cnnb_error(s->ctx, CNNB_ENOMEM, "out of memory queueing buckets");
    }
    for (int32_t i = 0; i < s->ready_count; i++)
      grown[i] = s->ready[(s->ready_head + i) % s->ready_cap];
    free(s->ready);
    s->ready = grown;
    s->ready_head = 0;
    s->ready_cap = cap;
  }
  s->ready[(s->ready_head + s->ready_count) % s->ready_cap] = b;
  s->ready_count++;
  pthread_mutex_unlock(&s->lock);
  return comm_thread_post(s->comm, reduce_ready, s);
}

static cnnb_status bucket_ready(void *strategy, float *const *grads, int64_t offset, int64_t count) {
  horovod *s = strategy;
  bucket b = {.offset = offset, .count = count, .step = s->step, .index = ++s->buckets};
  timeline_bucket_ready(s->timeline, s->step, b.index, offset, count);
  /* On host memory this is the arena itself; otherwise a copy made here, on the step
   * thread, as device calls must be. A failing copy records its error in the strategy's
   * ctx while jobs may be recording theirs in the communication thread's; the wait then
   * lets them finish (they use the views) and adds what they failed with. */
  cnnb_status st = replica_arenas_pull(&s->arenas, grads, offset, count, &b.view);
  if (st != CNNB_OK) {
    comm_thread_wait(s->comm);
    return st;
  }
  if (s->announced_hi == s->announced_lo) s->announced_lo = s->announced_hi = offset;
  if (offset < s->announced_lo) s->announced_lo = offset;
  if (offset + count > s->announced_hi) s->announced_hi = offset + count;
  return queue_bucket(s, b);
}

static cnnb_status finish_step(void *strategy, float *const *grads) {
  horovod *s = strategy;
  timeline_backward_done(s->timeline, s->step);
  cnnb_status st = comm_thread_wait(s->comm);
  if (st == CNNB_OK)
    st = replica_arenas_push(&s->arenas, grads, s->announced_lo, s->announced_hi - s->announced_lo);
  timeline_flush(s->timeline);
  s->step++;
  s->buckets = 0;
  s->announced_lo = s->announced_hi = 0;
  return st;
}

static const cnnb_strategy_vtable vtable = {
    .struct_size = sizeof(cnnb_strategy_vtable),
    .create = create,
    .destroy = destroy,
    .world_size = world_size,
    .rank = rank,
    .broadcast_params = broadcast_params,
    .bucket_ready = bucket_ready,
    .finish_step = finish_step,
    .allgather = allgather,
};

static const char *const offers[] = {"horovod", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_STRATEGY, "horovod", "0.1.0",
                     "one replica per MPI process; fused gradient allreduce overlapping backward"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}
