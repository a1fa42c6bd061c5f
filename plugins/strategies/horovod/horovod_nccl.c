/* horovod_nccl.c — horovod's allreduce on the GPU through NCCL (horovod_nccl.h). */
#define _POSIX_C_SOURCE 200809L /* gethostname */
#include "horovod_nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_gpus.h"

struct horovod_nccl {
  cnnb_ctx *ctx;
  nccl_gpus *gpus;
  nccl_comms *everyone; /* flat: every rank's GPU */
  nccl_comms *node;     /* hierarchical: the GPUs of this node's ranks */
  nccl_comms *leaders;  /* hierarchical: the nodes' leaders' GPUs (no member elsewhere) */
  const cnnb_device_vtable *dv;
  void *device;
  int32_t world_size;
  int32_t compact_type; /* NCCL_API_FLOAT16 / _BFLOAT16, or 0 */
  void *scratch;        /* the arena's 16-bit copy (compact), on the device */
  char description[320];
  char how[96];
};

void horovod_nccl_close(horovod_nccl *h) {
  if (!h) return;
  nccl_gpus_close(h->gpus); /* first: its last work may still read the scratch */
  if (h->scratch) h->dv->free(h->device, h->scratch);
  free(h);
}

void horovod_nccl_abandon(horovod_nccl *h) {
  if (h) nccl_gpus_abandon(h->gpus);
}

const char *horovod_nccl_describe(const horovod_nccl *h) { return h->description; }
const char *horovod_nccl_how(const horovod_nccl *h) { return h->how; }

/* Whether this rank can use NCCL, and if not why (a device without CUDA streams, NCCL not
 * loadable); opens it when it can. */
static bool try_open(cnnb_ctx *ctx, const char *who, const cnnb_strategy_config *cfg,
                     mpi_world *world, double timeout_s, nccl_gpus **gpus, char *why,
                     size_t why_size) {
  if (nccl_gpus_open(ctx, who, cfg, world, timeout_s, gpus) != CNNB_OK) {
    snprintf(why, why_size, "%s", cnnb_error_message(ctx));
    cnnb_clear_error(ctx);
    return false;
  }
  return true;
}

/* What each rank tells the others before AUTO takes NCCL: whether it can, and which GPU
 * it has (its host, what CUDA_VISIBLE_DEVICES shows it, the ordinal). */
typedef struct gpu_offer {
  int32_t able, ordinal;
  uint64_t host, visible;
} gpu_offer;

static uint64_t hash_text(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Every rank's verdict alike: why[] empty when every rank can and no two share a GPU. */
static cnnb_status agree_on_nccl(cnnb_ctx *ctx, const cnnb_strategy_config *cfg, mpi_world *world,
                                 bool able, char *why, size_t why_size) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const cnnb_device_cuda_stream *s =
      able ? cfg->device->get_extension(cfg->devices[0], CNNB_EXT_CUDA_STREAM) : NULL;
  gpu_offer mine = {.able = able,
                    .ordinal = s ? s->ordinal : -1,
                    .host = hash_text(host),
                    .visible = hash_text(getenv("CUDA_VISIBLE_DEVICES"))};
  int32_t n = mpi_world_size(world);
  gpu_offer *all = calloc((size_t)n, sizeof *all);
  if (!all) return cnnb_error(ctx, CNNB_ENOMEM, "horovod: out of memory");
  cnnb_status st = mpi_world_allgather(world, ctx, &mine, all, sizeof mine,
                                       "which GPUs the ranks have");
  for (int32_t a = 0; st == CNNB_OK && a < n && !why[0]; a++) {
    if (!all[a].able) {
      if (able) snprintf(why, why_size, "rank %d cannot use NCCL", (int)a);
      break;
    }
    for (int32_t b = a + 1; b < n && !why[0]; b++)
      if (all[b].able && all[a].host == all[b].host && all[a].visible == all[b].visible &&
          all[a].ordinal == all[b].ordinal)
        snprintf(why, why_size,
                 "ranks %d and %d share GPU %d (NCCL needs a GPU of its own per rank)", (int)a,
                 (int)b, (int)all[a].ordinal);
  }
  free(all);
  return st;
}

cnnb_status horovod_nccl_open(cnnb_ctx *ctx, const cnnb_strategy_config *cfg, mpi_world *world,
                              double timeout_s, horovod_gpu_ops ops, bool hierarchical,
                              uint32_t compact16, horovod_nccl **out, char *why, size_t why_size) {
  static const char who[] = "--horovod_gpu_operations=nccl";
  *out = NULL;
  why[0] = '\0';
  if (ops == HOROVOD_GPU_OPS_MPI) {
    snprintf(why, why_size, "--horovod_gpu_operations=mpi");
    return CNNB_OK;
  }
  if (ops == HOROVOD_GPU_OPS_AUTO && !nccl_gpus_devices_qualify(cfg)) {
    snprintf(why, why_size, "device %s is no GPU with CUDA streams", nccl_gpus_device_name(cfg));
    return CNNB_OK; /* the same device on every rank: no need to ask the others */
  }
  nccl_gpus *gpus = NULL;
  cnnb_status st;
  if (ops == HOROVOD_GPU_OPS_NCCL) {
    if ((st = nccl_gpus_open(ctx, who, cfg, world, timeout_s, &gpus)) != CNNB_OK) return st;
  } else {
    /* AUTO: NCCL only if every rank can (a collective of some ranks would hang) and no two
     * ranks share a GPU (NCCL refuses that; the host path does not mind). */
    bool able = try_open(ctx, "--horovod_gpu_operations=auto", cfg, world, timeout_s, &gpus, why,
                         why_size);
    if ((st = agree_on_nccl(ctx, cfg, world, able, why, why_size)) != CNNB_OK || why[0]) {
      nccl_gpus_close(gpus);
      return st;
    }
  }
  horovod_nccl *h = calloc(1, sizeof *h);
  if (!h) {
    nccl_gpus_close(gpus);
    return cnnb_error(ctx, CNNB_ENOMEM, "horovod: out of memory");
  }
  h->ctx = ctx;
  h->gpus = gpus;
  h->dv = cfg->device;
  h->device = cfg->devices[0];
  h->world_size = mpi_world_size(world);
  h->compact_type = compact16 == CNNB_PRECISION_FP16   ? NCCL_API_FLOAT16
                    : compact16 == CNNB_PRECISION_BF16 ? NCCL_API_BFLOAT16
                                                       : 0;
  if (hierarchical) {
    /* Every rank makes both sets, in this order; the leaders' has members on leaders only. */
    st = nccl_gpus_comms(gpus, NCCL_SPAN_NODE, &h->node);
    if (st == CNNB_OK) st = nccl_gpus_comms(gpus, NCCL_SPAN_LEADERS, &h->leaders);
    if (st == CNNB_OK) st = nccl_comms_premul(h->node, 1.0f / (float)h->world_size);
  } else {
    st = nccl_gpus_comms(gpus, NCCL_SPAN_WORLD, &h->everyone);
  }
  bool needs_scratch = h->compact_type && (!hierarchical || nccl_comms_member(h->leaders));
  if (st == CNNB_OK && needs_scratch &&
      (st = h->dv->alloc(h->device, (size_t)(cfg->param_count ? cfg->param_count : 1) * 2,
                         &h->scratch)) != CNNB_OK)
    st = cnnb_error(ctx, st, "horovod: the 16-bit copy of %lld gradients on the GPU",
                    (long long)cfg->param_count);
  if (st != CNNB_OK) {
    horovod_nccl_close(h);
    return st;
  }
  const char *sent = h->compact_type ? nccl_type_name(h->compact_type) : "fp32";
  if (hierarchical) {
    snprintf(h->how, sizeof h->how, "NCCL hierarchical, %s between nodes", sent);
    snprintf(h->description, sizeof h->description,
             "%s; NCCL within the node (%d GPUs), across %d node leader%s",
             nccl_gpus_describe(gpus), (int)nccl_comms_size(h->node),
             (int)nccl_comms_size(h->leaders), nccl_comms_size(h->leaders) == 1 ? "" : "s");
  } else {
    snprintf(h->how, sizeof h->how, "NCCL avg %s", sent);
    snprintf(h->description, sizeof h->description, "%s; one communicator of %d GPUs",
             nccl_gpus_describe(gpus), (int)nccl_comms_size(h->everyone));
  }
  *out = h;
  return CNNB_OK;
}

/* The range in 16 bits, all-reduced over `comms` by `op`, and back in place. */
static cnnb_status compact_all_reduce(horovod_nccl *h, nccl_comms *comms, void *at, int64_t offset,
                                      int64_t count, int32_t op, const char *what) {
  void *copy = (char *)h->scratch + (size_t)offset * 2;
  void *from[1] = {at}, *to[1] = {copy};
  cnnb_status st = nccl_convert(h->gpus, from, NCCL_API_FLOAT32, to, h->compact_type, count, 1.0f,
                                what);
  if (st == CNNB_OK) st = nccl_all_reduce(comms, to, count, h->compact_type, op, 1, what);
  if (st == CNNB_OK)
    st = nccl_convert(h->gpus, to, h->compact_type, from, NCCL_API_FLOAT32, count, 1.0f, what);
  return st;
}

cnnb_status horovod_nccl_average(horovod_nccl *h, float *grads, int64_t offset, int64_t count,
                                 const char *what) {
  void *at[1] = {grads + offset};
  if (h->everyone) {
    if (h->compact_type)
      return compact_all_reduce(h, h->everyone, at[0], offset, count, NCCL_API_AVG, what);
    return nccl_all_reduce(h->everyone, at, count, NCCL_API_FLOAT32, NCCL_API_AVG, 1, what);
  }
  /* Hierarchical: each GPU's share scaled by 1/world on the way into its leader. */
  cnnb_status st = nccl_reduce(h->node, at, count, NCCL_API_FLOAT32, NCCL_GPUS_PREMUL, 0, what);
  if (st == CNNB_OK && nccl_comms_member(h->leaders))
    st = h->compact_type
             ? compact_all_reduce(h, h->leaders, at[0], offset, count, NCCL_API_SUM, what)
             : nccl_all_reduce(h->leaders, at, count, NCCL_API_FLOAT32, NCCL_API_SUM, 1, what);
  if (st == CNNB_OK) st = nccl_broadcast(h->node, at, count, NCCL_API_FLOAT32, 0, what);
  return st;
}

cnnb_status horovod_nccl_wait(horovod_nccl *h, const char *what) {
  return nccl_gpus_wait(h->gpus, what);
}
