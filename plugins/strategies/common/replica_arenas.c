/* replica_arenas.c — host views of the replicas' arenas (replica_arenas.h). */
#include "replica_arenas.h"

#include <stdlib.h>
#include <string.h>

static bool device_is_host_memory(const cnnb_device_vtable *dv, void *device) {
  return dv->get_extension && dv->get_extension(device, CNNB_EXT_HOST_MEMORY) != NULL;
}

cnnb_status replica_arenas_init(cnnb_ctx *ctx, const cnnb_strategy_config *cfg, replica_arenas *a) {
  memset(a, 0, sizeof *a);
  a->ctx = ctx;
  a->dv = cfg->device;
  a->n = cfg->local_replicas;
  a->count = cfg->param_count;
  a->devices = calloc((size_t)a->n, sizeof *a->devices);
  if (!a->devices) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for %d replicas", (int)a->n);
  a->host_memory = true;
  for (int32_t r = 0; r < a->n; r++) {
    a->devices[r] = cfg->devices[r];
    a->host_memory = a->host_memory && device_is_host_memory(a->dv, a->devices[r]);
  }
  if (a->host_memory || a->count == 0) return CNNB_OK;
  a->staging = calloc((size_t)a->n, sizeof *a->staging);
  if (!a->staging) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for %d replicas", (int)a->n);
  for (int32_t r = 0; r < a->n; r++)
    if (!(a->staging[r] = malloc((size_t)a->count * sizeof(float))))
      return cnnb_error(ctx, CNNB_ENOMEM,
                        "out of memory for a host copy of replica %d's %lld gradients", (int)r,
                        (long long)a->count);
  return CNNB_OK;
}

void replica_arenas_free(replica_arenas *a) {
  for (int32_t r = 0; a->staging && r < a->n; r++) free(a->staging[r]);
  free(a->staging);
  free(a->devices);
  memset(a, 0, sizeof *a);
}

cnnb_status replica_arenas_pull(replica_arenas *a, float *const *arenas, int64_t offset,
                                int64_t count, float **views) {
  for (int32_t r = 0; r < a->n; r++) {
    if (a->host_memory) {
      views[r] = arenas[r] + offset;
      continue;
    }
    views[r] = a->staging[r] + offset;
    cnnb_status st = a->dv->copy_to_host(a->devices[r], views[r], arenas[r] + offset,
                                         (size_t)count * sizeof(float));
    if (st != CNNB_OK)
      return cnnb_error(a->ctx, st, "copying replica %d's range [%lld, %lld) to the host", (int)r,
                        (long long)offset, (long long)(offset + count));
  }
  return CNNB_OK;
}

cnnb_status replica_arenas_push(replica_arenas *a, float *const *arenas, int64_t offset,
                                int64_t count) {
  for (int32_t r = 0; !a->host_memory && r < a->n; r++) {
    cnnb_status st = a->dv->copy_to_device(a->devices[r], arenas[r] + offset,
                                           a->staging[r] + offset, (size_t)count * sizeof(float));
    if (st != CNNB_OK)
      return cnnb_error(a->ctx, st, "copying the range [%lld, %lld) back to replica %d",
                        (long long)offset, (long long)(offset + count), (int)r);
  }
  return CNNB_OK;
}
