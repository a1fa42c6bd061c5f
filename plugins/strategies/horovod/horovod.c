/* horovod — Horovod-style data parallelism: one replica per MPI process, gradients
 * averaged by MPI allreduce while backward is still running.
 *
 * Buckets the executor announces are fused, in the order they come, into groups of up to
 * --horovod_fusion_threshold bytes (Horovod's tensor fusion; the buckets arrive in
 * reverse arena order and touch, so a group is one contiguous range), and each group
 * goes to the communication thread as soon as it is complete, which sums it over the
 * ranks with one allreduce and scales it by 1/world while backward goes on. finish_step
 * waits for the last one. The groups must be the same on every rank (an allreduce of
 * different ranges would mix unrelated gradients, or fail with MPI_ERR_TRUNCATE), so
 * they depend only on the buckets' sizes, never on timing: Horovod negotiates the same
 * agreement through its coordinator. In the first step a group is known complete when
 * the next bucket does not fit (or backward ends); from then on the groups of the first
 * step are reused, so each leaves with its last bucket. --compact_gradient_transfer
 * sends 16 bits a value (fp16 under fp16 precision, else bf16) and adds in fp32 at every
 * hop. --horovod_hierarchical_allreduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE) sums
 * in three moves instead: within each node to its leader, across the leaders only, then
 * back within the node (mpi_world_allreduce_sum_hierarchical), so one rank a node sends
 * between nodes.
 *
 * On a GPU (a device giving CUDA streams) the groups are averaged by NCCL instead, in
 * place on the GPU, on the replica's stream, as each group completes (horovod_nccl.h,
 * Horovod's HOROVOD_GPU_OPERATIONS=NCCL): nothing goes through host memory and no thread
 * is needed, as the step thread only enqueues. --horovod_gpu_operations=mpi keeps the
 * host path (what two ranks sharing one GPU need: NCCL refuses that).
 *
 * Every wait is bounded by --collective_timeout_s: a rank that died or stopped ends the
 * step with CNNB_ECOMM naming it (mpi_world.h, nccl_gpus.h). Run without mpirun it trains
 * as one process. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cnnb/cnnb.h>

#include "../common/comm_thread.h"
#include "../common/mpi_world.h"
#include "../common/replica_arenas.h"
#include "../common/timeline.h"
#include "horovod_nccl.h"

#define FUSION_FLAG "horovod_fusion_threshold"
#define TIMELINE_FLAG "horovod_timeline"
#define HIERARCHICAL_FLAG "horovod_hierarchical_allreduce"
#define GPU_OPS_FLAG "horovod_gpu_operations"
#define DEVICE_FLAG "horovod_device" /* tf_cnn_benchmarks' name for the same choice */

/* A bucket announced and not yet reduced: [offset, offset + count) of the arena, whose
 * host floats start at view. */
/* A group of fused buckets: one allreduce. */
typedef struct group {
  struct horovod *s;
  float *view; /* host floats of [offset, offset + count) */
  int64_t offset, count;
  int64_t step;
  int32_t first, last; /* its buckets' numbers within the step, from 1 */
} group;

typedef struct horovod {
  cnnb_ctx *ctx;
  mpi_world *world;
  comm_thread *comm;  /* the host path's allreduces; NULL on NCCL */
  horovod_nccl *nccl; /* the GPU path, or NULL */
  replica_arenas arenas;
  timeline *timeline;
  int64_t fusion_bytes;
  uint32_t compact16; /* 0, or the 16-bit format sent */
  bool hierarchical;  /* --horovod_hierarchical_allreduce */
  char how[64];       /* the allreduce, for the timeline: "MPI bf16" */
  float scale;        /* 1 / world size */
  /* The step thread's count of steps (from 1) and of this step's buckets, and the range
   * announced this step (what goes back to a device without host memory). */
  int64_t step;
  int32_t buckets;
  int64_t announced_lo, announced_hi;
  /* This step's groups: [0, posted) went to the communication thread (which reads
   * them until finish_step's wait), `open` is the one being filled. One per bucket at
   * most, and a bucket holds at least one variable: max_groups = variables + 1. */
  group *groups;
  int32_t max_groups, posted;
  bool open;
  /* The first step's groups, by their last bucket's number: where later steps close. */
  int32_t *plan_last;
  int32_t plan_groups;
  bool planned;
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
  st = cnnb_flag_declare(
      registry, GPU_OPS_FLAG, CNNB_FLAG_STRING, "auto",
      "How gradients on a GPU are averaged (Horovod's HOROVOD_GPU_OPERATIONS): nccl (on the "
      "GPU, no host copies), mpi (copied to host memory, MPI allreduce), auto (nccl where "
      "every rank can use it, else mpi).");
  if (st != CNNB_OK) return st;
  st = cnnb_flag_declare(
      registry, DEVICE_FLAG, CNNB_FLAG_STRING, "",
      "tf_cnn_benchmarks' device of the Horovod allreduce: cpu (--horovod_gpu_operations=mpi, "
      "through host memory), gpu (=nccl); empty: --horovod_gpu_operations decides.");
  if (st != CNNB_OK) return st;
  st = cnnb_flag_declare(
      registry, TIMELINE_FLAG, CNNB_FLAG_STRING, "",
      "Write a Chrome trace (chrome://tracing) of each rank's buckets and allreduces "
      "to FILE with the rank inserted: --horovod_timeline=t.json writes t.rank0.json, "
      "t.rank1.json, ... (Horovod's HOROVOD_TIMELINE).");
  /* What a rank records of itself, not what it computes (ABI 1.11). */
  return st == CNNB_OK ? cnnb_flag_mark_per_rank(registry, TIMELINE_FLAG) : st;
}

static void destroy(void *strategy) {
  horovod *s = strategy;
  if (!s) return;
  comm_thread_stop(s->comm);   /* first: its jobs use everything below */
  horovod_nccl_close(s->nccl); /* before the world: its faults meet at an MPI barrier */
  timeline_close(s->timeline);
  mpi_world_close(s->world);
  replica_arenas_free(&s->arenas);
  free(s->groups);
  free(s->plan_last);
  free(s);
}

/* Reads a 1.4 field only from a host that passes it. */
#define CFG_HAS(cfg, field) \
  ((cfg)->struct_size >= offsetof(cnnb_strategy_config, field) + sizeof((cfg)->field))

static cnnb_status gpu_ops_flag(cnnb_ctx *ctx, horovod_gpu_ops *ops) {
  const char *v = cnnb_flag_string(ctx, GPU_OPS_FLAG);
  const char *device = cnnb_flag_string(ctx, DEVICE_FLAG);
  if (*device) { /* tf's --horovod_device: where tf placed the allreduce op */
    bool cpu = strcasecmp(device, "cpu") == 0, gpu = strcasecmp(device, "gpu") == 0;
    if (!cpu && !gpu)
      return cnnb_error(ctx, CNNB_EINVAL, "--%s=%s: must be cpu, gpu or empty", DEVICE_FLAG,
                        device);
    const char *same = cpu ? "mpi" : "nccl";
    if (cnnb_flag_is_set(ctx, GPU_OPS_FLAG) && strcasecmp(v, same) != 0)
      return cnnb_error(ctx, CNNB_EINVAL,
                        "--%s=%s means --%s=%s, and --%s=%s was given: give one of them",
                        DEVICE_FLAG, device, GPU_OPS_FLAG, same, GPU_OPS_FLAG, v);
    v = same;
  }
  if (strcmp(v, "auto") == 0) *ops = HOROVOD_GPU_OPS_AUTO;
  else if (strcmp(v, "nccl") == 0 || strcmp(v, "NCCL") == 0) *ops = HOROVOD_GPU_OPS_NCCL;
  else if (strcmp(v, "mpi") == 0 || strcmp(v, "MPI") == 0) *ops = HOROVOD_GPU_OPS_MPI;
  else return cnnb_error(ctx, CNNB_EINVAL, "--%s=%s: must be auto, nccl or mpi", GPU_OPS_FLAG, v);
  return CNNB_OK;
}

static cnnb_status create(cnnb_ctx *ctx, const char *name, const cnnb_strategy_config *cfg,
                          void **out) {
  *out = NULL;
  if (cfg->local_replicas > 1)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "--num_gpus=%d: horovod runs one replica per MPI process; launch one "
                      "process per device (mpirun -np N), or use --variable_update=replicated "
                      "for several devices in one process",
                      (int)cfg->local_replicas);
  int64_t fusion = cnnb_flag_int(ctx, FUSION_FLAG);
  if (fusion < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%lld: must be a number of bytes >= 0 (0: no fusion)",
                      FUSION_FLAG, (long long)fusion);
  horovod *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "horovod: out of memory");
  s->ctx = ctx;
  /* A bucket holds at least one variable; a host older than 1.4 does not say how many
   * there are, and no model has more than this bound. */
  s->max_groups = CFG_HAS(cfg, num_variables) ? cfg->num_variables + 1 : 65536;
  s->groups = calloc((size_t)s->max_groups, sizeof *s->groups);
  s->plan_last = calloc((size_t)s->max_groups, sizeof *s->plan_last);
  if (!s->groups || !s->plan_last) {
    free(s->groups);
    free(s->plan_last);
    free(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "horovod: out of memory");
  }
  s->fusion_bytes = fusion;
  s->hierarchical = cnnb_flag_bool(ctx, HIERARCHICAL_FLAG);
  s->step = 1;
  uint32_t precision = CFG_HAS(cfg, precision) ? cfg->precision : CNNB_PRECISION_FP32;
  if (CFG_HAS(cfg, compact_gradient_transfer) && cfg->compact_gradient_transfer)
    s->compact16 = precision == CNNB_PRECISION_FP16 ? CNNB_PRECISION_FP16 : CNNB_PRECISION_BF16;
  double timeout = CFG_HAS(cfg, collective_timeout_s) ? cfg->collective_timeout_s : 60;
  horovod_gpu_ops ops = HOROVOD_GPU_OPS_AUTO;
  cnnb_status st = gpu_ops_flag(ctx, &ops);
  char staged_why[512] = "";
  if (st != CNNB_OK || (st = replica_arenas_init(ctx, cfg, &s->arenas)) != CNNB_OK ||
      (st = mpi_world_open(ctx, name, timeout, &s->world)) != CNNB_OK ||
      (st = timeline_open(ctx, TIMELINE_FLAG, cnnb_flag_string(ctx, TIMELINE_FLAG),
                          mpi_world_rank(s->world), &s->timeline)) != CNNB_OK ||
      (st = horovod_nccl_open(ctx, cfg, s->world, timeout, ops, s->hierarchical, s->compact16,
                              &s->nccl, staged_why, sizeof staged_why)) != CNNB_OK ||
      (!s->nccl && (st = comm_thread_start(ctx, name, &s->comm)) != CNNB_OK)) {
    destroy(s);
    return st;
  }
  s->scale = 1.0f / (float)mpi_world_size(s->world);
  const char *sent = s->compact16 == CNNB_PRECISION_FP16 ? "fp16" : s->compact16 ? "bf16" : "fp32";
  char hierarchy[160] = "";
  if (s->hierarchical) {
    snprintf(s->how, sizeof s->how, "MPI hierarchical, %s between nodes", sent);
    snprintf(hierarchy, sizeof hierarchy,
             "; hierarchical allreduce over %d node%s (local rank %d of %d: %s)",
             (int)mpi_world_num_nodes(s->world), mpi_world_num_nodes(s->world) == 1 ? "" : "s",
             (int)mpi_world_local_rank(s->world), (int)mpi_world_local_size(s->world),
             mpi_world_local_rank(s->world) == 0 ? "the node's leader" : "not a leader");
  } else {
    snprintf(s->how, sizeof s->how, "MPI %s", sent);
  }
  char staged[640] = "";
  if (!s->arenas.host_memory && !s->nccl)
    snprintf(staged, sizeof staged, ", staged through host memory (%s)", staged_why);
  if (s->nccl) {
    snprintf(s->how, sizeof s->how, "%s", horovod_nccl_how(s->nccl));
    snprintf(staged, sizeof staged, ", on the GPU by NCCL: %s", horovod_nccl_describe(s->nccl));
  }
  cnnb_log(ctx, CNNB_LOG_INFO,
           "rank %d of %d; buckets fused up to %.1f MiB; gradients sent as %s%s%s%s",
           (int)mpi_world_rank(s->world), (int)mpi_world_size(s->world), (double)fusion / (1 << 20),
           sent, s->hierarchical ? " between nodes" : "", hierarchy, staged);
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

/* [communication thread] Sums one group over the ranks and averages it. ctx is the
 * thread's own (comm_thread.h): the allreduce records its failure there. */
static cnnb_status reduce_group(void *arg, cnnb_ctx *ctx) {
  group *g = arg;
  horovod *s = g->s;
  char buckets[64], what[96];
  if (g->first == g->last) snprintf(buckets, sizeof buckets, "bucket %d", (int)g->first);
  else snprintf(buckets, sizeof buckets, "buckets %d-%d", (int)g->first, (int)g->last);
  snprintf(what, sizeof what, "%s of step %lld", buckets, (long long)g->step);
  timeline_span span;
  timeline_allreduce_begin(s->timeline, &span, TIMELINE_COMM_THREAD, g->step, buckets,
                           g->count * (int64_t)sizeof(float), s->how);
  cnnb_status st = s->hierarchical
                       ? mpi_world_allreduce_sum_hierarchical(s->world, ctx, g->view, g->count,
                                                              s->compact16, what)
                       : mpi_world_allreduce_sum(s->world, ctx, g->view, g->count, s->compact16,
                                                 what);
  if (st == CNNB_OK && s->scale != 1.0f)
    for (int64_t i = 0; i < g->count; i++) g->view[i] *= s->scale;
  timeline_allreduce_end(s->timeline, &span);
  return st;
}

/* [step thread] A group on the GPU: NCCL's all-reduce enqueued on the replica's stream. */
static cnnb_status reduce_group_nccl(horovod *s, const group *g, float *grads) {
  char buckets[64], what[96];
  if (g->first == g->last) snprintf(buckets, sizeof buckets, "bucket %d", (int)g->first);
  else snprintf(buckets, sizeof buckets, "buckets %d-%d", (int)g->first, (int)g->last);
  snprintf(what, sizeof what, "%s of step %lld", buckets, (long long)g->step);
  timeline_span span;
  timeline_allreduce_begin(s->timeline, &span, TIMELINE_STEP_THREAD, g->step, buckets,
                           g->count * (int64_t)sizeof(float), s->how);
  cnnb_status st = horovod_nccl_average(s->nccl, grads, g->offset, g->count, what);
  timeline_allreduce_end(s->timeline, &span);
  return st;
}

/* [step thread] The open group is complete: to the communication thread, or to NCCL. */
static cnnb_status post_group(horovod *s, float *const *grads) {
  if (!s->open) return CNNB_OK;
  group *g = &s->groups[s->posted++];
  s->open = false;
  if (!s->planned) s->plan_last[s->plan_groups++] = g->last;
  if (s->nccl) return reduce_group_nccl(s, g, grads[0]);
  return comm_thread_post(s->comm, reduce_group, g);
}

/* A failure ends NCCL's use: nothing may wait for peers from now on. */
static cnnb_status failed(horovod *s, cnnb_status st) {
  if (st != CNNB_OK) horovod_nccl_abandon(s->nccl);
  return st;
}

/* Whether bucket `index` ends a group in the first step's plan. */
static bool plan_ends_group_at(const horovod *s, int32_t index) {
  for (int32_t i = 0; i < s->plan_groups; i++)
    if (s->plan_last[i] == index) return true;
  return false;
}

static cnnb_status bucket_ready(void *strategy, float *const *grads, int64_t offset,
                                int64_t count) {
  horovod *s = strategy;
  int32_t index = ++s->buckets; /* from 1 within the step */
  float *view = NULL;
  timeline_bucket_ready(s->timeline, s->step, index, offset, count);
  /* On host memory this is the arena itself; otherwise a copy made here, on the step
   * thread, as device calls must be. A failing copy records its error in the strategy's
   * ctx while jobs may be recording theirs in the communication thread's; the wait then
   * lets them finish (they use the views) and adds what they failed with. */
  cnnb_status st = s->nccl ? CNNB_OK : replica_arenas_pull(&s->arenas, grads, offset, count, &view);
  if (st != CNNB_OK) {
    if (s->comm) comm_thread_wait(s->comm);
    return st;
  }
  if (s->announced_hi == s->announced_lo) s->announced_lo = s->announced_hi = offset;
  if (offset < s->announced_lo) s->announced_lo = offset;
  if (offset + count > s->announced_hi) s->announced_hi = offset + count;
  /* Into the open group when it touches and fits (only sizes decide: every rank
   * decides the same); else the open group is complete and this one starts the next. */
  group *g = s->open ? &s->groups[s->posted] : NULL;
  bool fits = g && offset + count == g->offset &&
              (g->count + count) * (int64_t)sizeof(float) <= s->fusion_bytes;
  if (g && !fits && (st = post_group(s, grads)) != CNNB_OK) return failed(s, st);
  if (fits) {
    g->offset = offset, g->count += count, g->view = view, g->last = index;
  } else {
    if (s->posted == s->max_groups)
      return cnnb_error(s->ctx, CNNB_EINTERNAL, "horovod: step %lld has more than %d buckets",
                        (long long)s->step, (int)s->max_groups);
    s->groups[s->posted] = (group){.s = s,
                                   .view = view,
                                   .offset = offset,
                                   .count = count,
                                   .step = s->step,
                                   .first = index,
                                   .last = index};
    s->open = true;
  }
  /* From the second step on, the first step's plan says where a group ends. */
  if (s->planned && plan_ends_group_at(s, index)) return failed(s, post_group(s, grads));
  return CNNB_OK;
}

static cnnb_status finish_step(void *strategy, float *const *grads) {
  horovod *s = strategy;
  timeline_backward_done(s->timeline, s->step);
  cnnb_status posted = post_group(s, grads); /* the last group ends with backward */
  cnnb_status st = CNNB_OK;
  if (s->nccl) {
    char what[64];
    snprintf(what, sizeof what, "the allreduces of step %lld", (long long)s->step);
    st = posted == CNNB_OK ? horovod_nccl_wait(s->nccl, what) : posted;
  } else {
    st = comm_thread_wait(s->comm);
    if (st == CNNB_OK) st = posted;
    if (st == CNNB_OK)
      st = replica_arenas_push(&s->arenas, grads, s->announced_lo,
                               s->announced_hi - s->announced_lo);
  }
  failed(s, st);
  timeline_flush(s->timeline);
  s->step++;
  s->buckets = 0;
  s->posted = 0;
  s->planned = true;
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
                     "one replica per MPI process; fused gradient allreduce overlapping backward "
                     "(MPI; NCCL on GPUs)"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}
