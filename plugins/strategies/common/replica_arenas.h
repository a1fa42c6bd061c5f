/* replica_arenas.h — a strategy's host view of its local replicas' gradient and parameter
 * arenas. On a device with CNNB_EXT_HOST_MEMORY (the cpu device) the views are the arenas
 * themselves; otherwise each replica gets a host staging copy, filled with copy_to_host
 * and written back with copy_to_device (both on the step thread, as device calls must
 * be). Either way a strategy then reduces plain host floats. */
#ifndef CNNB_STRATEGY_REPLICA_ARENAS_H
#define CNNB_STRATEGY_REPLICA_ARENAS_H

#include <stdbool.h>
#include <cnnb/cnnb.h>

typedef struct replica_arenas {
  cnnb_ctx *ctx;
  const cnnb_device_vtable *dv;
  void **devices; /* [n] */
  int32_t n;
  int64_t count;    /* elements per arena */
  bool host_memory; /* every device answers CNNB_EXT_HOST_MEMORY */
  float **staging;  /* [n] host arenas when !host_memory, else NULL */
} replica_arenas;

/* Copies what it keeps from cfg. */
cnnb_status replica_arenas_init(cnnb_ctx *ctx, const cnnb_strategy_config *cfg, replica_arenas *a);
void replica_arenas_free(replica_arenas *a);

/* [step-thread] views[r] = host floats of arenas[r][offset, offset + count), copied out
 * of the device unless it is host memory. */
cnnb_status replica_arenas_pull(replica_arenas *a, float *const *arenas, int64_t offset,
                                int64_t count, float **views);
/* [step-thread] writes the views of that range back (a no-op on host memory). */
cnnb_status replica_arenas_push(replica_arenas *a, float *const *arenas, int64_t offset,
                                int64_t count);

#endif
