/* replicated_nccl.c — the replicated strategy's nccl ranges (replicated_nccl.h). */
#include "replicated_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_gpus.h"

struct replicated_nccl {
  cnnb_ctx *ctx;
  nccl_gpus *gpus;
  mpi_world *world;
  nccl_comms *everyone; /* every GPU of every rank: nccl, nccl/nccl (and any nccl range
                           in one process) */
  nccl_comms *process;  /* this process's GPUs: nccl/mpi under mpirun */
  const cnnb_device_vtable *dv;
  void **devices; /* [n] */
  int32_t n, world_size;
  int64_t param_count;
  int32_t compact_type; /* NCCL_API_FLOAT16 / _BFLOAT16 for the NCCL all-reduces, or 0 */
  uint32_t compact16;   /* the same for MPI (mpi_world.h's), or 0 */
  void **scratch;       /* [n] 16-bit copies of each gradient arena (compact all-reduces) */
  void **at, **copies;  /* [n] one range's addresses on each GPU, in the arenas and scratch */
  float *host;          /* [param_count] the first GPU's sums on the host (nccl/mpi) */
  float scale;          /* 1 / (replicas * ranks) */
  char description[384];
};

static bool crosses_with_nccl(const replicated_nccl *n, const reduce_range *r) {
  return r->cross_nccl || n->world_size == 1;
}

void replicated_nccl_close(replicated_nccl *n) {
  if (!n) return;
  nccl_gpus_close(n->gpus); /* first: its last work may still read the scratch */
  for (int32_t i = 0; n->scratch && i < n->n; i++)
    if (n->scratch[i]) n->dv->free(n->devices[i], n->scratch[i]);
  free(n->scratch);
  free(n->devices);
  free(n->at);
  free(n->copies);
  free(n->host);
  free(n);
}

void replicated_nccl_abandon(replicated_nccl *n) {
  if (n) nccl_gpus_abandon(n->gpus);
}

const char *replicated_nccl_describe(const replicated_nccl *n) { return n->description; }

cnnb_status replicated_nccl_open(cnnb_ctx *ctx, const char *who, const cnnb_strategy_config *cfg,
                                 const all_reduce_spec *spec, mpi_world *world, uint32_t compact16,
                                 replicated_nccl **out) {
  *out = NULL;
  replicated_nccl *n = calloc(1, sizeof *n);
  if (!n) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
  n->ctx = ctx;
  n->world = world;
  n->dv = cfg->device;
  n->n = cfg->local_replicas;
  n->world_size = mpi_world_size(world);
  n->param_count = cfg->param_count;
  n->compact16 = compact16;
  n->compact_type = compact16 == CNNB_PRECISION_FP16   ? NCCL_API_FLOAT16
                    : compact16 == CNNB_PRECISION_BF16 ? NCCL_API_BFLOAT16
                                                       : 0;
  n->scale = (float)(1.0 / ((double)n->n * (double)n->world_size));
  cnnb_status st = CNNB_OK;
  n->devices = calloc((size_t)n->n, sizeof *n->devices);
  n->at = calloc((size_t)n->n, sizeof *n->at);
  n->copies = calloc((size_t)n->n, sizeof *n->copies);
  if (!n->devices || !n->at || !n->copies) {
    replicated_nccl_close(n);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
  }
  for (int32_t i = 0; i < n->n; i++) n->devices[i] = cfg->devices[i];
  if ((st = nccl_gpus_open(ctx, who, cfg, world, cfg->collective_timeout_s, &n->gpus)) != CNNB_OK) {
    replicated_nccl_close(n);
    return st;
  }
  bool everyone = false, process = false;
  for (int32_t k = 0; k < spec->num_ranges; k++) {
    const reduce_range *r = &spec->ranges[k];
    if (r->nccl && crosses_with_nccl(n, r)) everyone = true;
    else if (r->nccl) process = true;
  }
  /* Every rank makes the same sets in the same order: the spec is the same everywhere
   * (the host checks the ranks' configurations agree). */
  if (everyone) st = nccl_gpus_comms(n->gpus, NCCL_SPAN_WORLD, &n->everyone);
  if (st == CNNB_OK && process) st = nccl_gpus_comms(n->gpus, NCCL_SPAN_PROCESS, &n->process);
  if (st == CNNB_OK && everyone && n->compact_type) {
    if (!(n->scratch = calloc((size_t)n->n, sizeof *n->scratch)))
      st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
    size_t bytes = (size_t)(n->param_count ? n->param_count : 1) * 2;
    for (int32_t i = 0; st == CNNB_OK && i < n->n; i++)
      if ((st = n->dv->alloc(n->devices[i], bytes, &n->scratch[i])) != CNNB_OK)
        st = cnnb_error(ctx, st, "%s: the 16-bit copy of replica %d's %lld gradients", who, (int)i,
                        (long long)n->param_count);
  }
  if (st == CNNB_OK && process &&
      !(n->host = malloc((size_t)(n->param_count ? n->param_count : 1) * sizeof(float))))
    st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory for a host copy of %lld gradients", who,
                    (long long)n->param_count);
  if (st != CNNB_OK) {
    replicated_nccl_close(n);
    return st;
  }
  size_t used = (size_t)snprintf(n->description, sizeof n->description, "%s",
                                 nccl_gpus_describe(n->gpus));
  if (everyone && used < sizeof n->description)
    used += (size_t)snprintf(n->description + used, sizeof n->description - used,
                             "; one communicator set of %d GPUs%s",
                             (int)nccl_comms_size(n->everyone),
                             n->world_size > 1 ? " over every rank" : "");
  if (process && used < sizeof n->description)
    snprintf(n->description + used, sizeof n->description - used,
             "; one of this process's %d GPUs, MPI between the ranks", (int)n->n);
  *out = n;
  return CNNB_OK;
}

void replicated_nccl_how(const replicated_nccl *n, const reduce_range *range, char *out,
                         size_t size) {
  char pieces[32] = "";
  if (range->shards > 1) snprintf(pieces, sizeof pieces, " in %d pieces", (int)range->shards);
  if (crosses_with_nccl(n, range))
    snprintf(out, size, "NCCL avg %s%s%s",
             n->compact_type ? nccl_type_name(n->compact_type) : "fp32",
             n->compact_type ? " copies" : "", pieces);
  else
    snprintf(out, size, "NCCL sum, MPI %s, NCCL broadcast",
             n->compact16 == CNNB_PRECISION_FP16 ? "fp16"
             : n->compact16                      ? "bf16"
                                                 : "fp32");
}

/* Replica i's range as a device address: grads[i] + offset elements of `size` bytes,
 * for the arenas (size 4) and the 16-bit scratch (size 2) alike. */
static void ranges_of(void *const *bases, int32_t n, int64_t offset, size_t size, void **out) {
  for (int32_t i = 0; i < n; i++) out[i] = (char *)bases[i] + (size_t)offset * size;
}

/* nccl, nccl/nccl: one all-reduce over every GPU of every rank, averaged in it. */
static cnnb_status all_reduce(replicated_nccl *n, void **at, int64_t offset, int64_t count,
                              int32_t pieces, const char *what) {
  if (!n->compact_type)
    return nccl_all_reduce(n->everyone, at, count, NCCL_API_FLOAT32, NCCL_API_AVG, pieces, what);
  void **copies = n->copies;
  ranges_of(n->scratch, n->n, offset, 2, copies);
  cnnb_status st = nccl_convert(n->gpus, at, NCCL_API_FLOAT32, copies, n->compact_type, count, 1.0f,
                                what);
  if (st == CNNB_OK)
    st = nccl_all_reduce(n->everyone, copies, count, n->compact_type, NCCL_API_AVG, pieces, what);
  if (st == CNNB_OK)
    st = nccl_convert(n->gpus, copies, n->compact_type, at, NCCL_API_FLOAT32, count, 1.0f, what);
  return st;
}

/* nccl/mpi under mpirun: NCCL within the process, MPI across, NCCL back. */
static cnnb_status through_mpi(replicated_nccl *n, float *const *grads, void **at, int64_t offset,
                               int64_t count, const char *what) {
  cnnb_status st = CNNB_OK;
  size_t bytes = (size_t)count * sizeof(float);
  float *host = n->host + offset;
  if (n->n > 1) st = nccl_reduce(n->process, at, count, NCCL_API_FLOAT32, NCCL_API_SUM, 0, what);
  /* The copy below synchronizes the first GPU's stream: bounded here first, so a stuck
   * NCCL cannot hang it. */
  if (st == CNNB_OK) st = nccl_gpus_wait(n->gpus, what);
  if (st == CNNB_OK && (st = n->dv->copy_to_host(n->devices[0], host, grads[0] + offset, bytes)))
    st = cnnb_error(n->ctx, st, "copying the sum of %s to the host", what);
  if (st == CNNB_OK &&
      (st = mpi_world_allreduce_sum(n->world, n->ctx, host, count, n->compact16, what)) != CNNB_OK)
    st = cnnb_error(n->ctx, st, "summing %s across ranks", what);
  if (st == CNNB_OK) {
    for (int64_t k = 0; k < count; k++) host[k] *= n->scale;
    if ((st = n->dv->copy_to_device(n->devices[0], grads[0] + offset, host, bytes)) != CNNB_OK)
      st = cnnb_error(n->ctx, st, "copying the mean of %s back to the first GPU", what);
  }
  if (st == CNNB_OK && n->n > 1)
    st = nccl_broadcast(n->process, at, count, NCCL_API_FLOAT32, 0, what);
  return st;
}

cnnb_status replicated_nccl_average(replicated_nccl *n, float *const *grads, int64_t offset,
                                    int64_t count, const reduce_range *range, const char *what) {
  if (count <= 0) return CNNB_OK;
  void **at = n->at;
  ranges_of((void *const *)grads, n->n, offset, sizeof(float), at);
  if (crosses_with_nccl(n, range)) return all_reduce(n, at, offset, count, range->shards, what);
  return through_mpi(n, grads, at, offset, count, what);
}

cnnb_status replicated_nccl_wait(replicated_nccl *n, const char *what) {
  return nccl_gpus_wait(n->gpus, what);
}
