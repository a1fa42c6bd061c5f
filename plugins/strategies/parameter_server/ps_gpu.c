/* ps_gpu.c — the parameter server's variables on the first replica's GPU (ps_gpu.h). */
#include "ps_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_gpus.h"
#include "ps_apply.h"

static const char who[] = "--local_parameter_device=gpu";

cnnb_status ps_gpu_open(ps *s, const cnnb_strategy_config *cfg) {
  cnnb_status st = nccl_gpus_open(s->ctx, who, cfg, s->world, s->timeout_s, &s->gpus);
  if (st == CNNB_OK) st = nccl_gpus_comms(s->gpus, NCCL_SPAN_PROCESS, &s->comms);
  if (st == CNNB_OK)
    cnnb_log(s->ctx, CNNB_LOG_INFO,
             "parameter server on the first replica's GPU: %lld parameters in its arena, "
             "pushed and pulled by NCCL (%s)",
             (long long)s->count, nccl_gpus_describe(s->gpus));
  return st;
}

void ps_gpu_close(ps *s) {
  nccl_gpus_close(s->gpus); /* first: the last update may still read the slots */
  replica_arenas *a = &s->replicas;
  if (s->gpu_slot1) a->dv->free(a->devices[0], s->gpu_slot1);
  if (s->gpu_slot2) a->dv->free(a->devices[0], s->gpu_slot2);
  s->gpus = NULL;
  s->gpu_slot1 = s->gpu_slot2 = NULL;
}

static cnnb_status failed(ps *s, cnnb_status st) {
  if (st != CNNB_OK) nccl_gpus_abandon(s->gpus);
  return st;
}

cnnb_status ps_gpu_broadcast(ps *s, float *const *params) {
  return failed(s, nccl_broadcast(s->comms, (void *const *)params, s->count, NCCL_API_FLOAT32, 0,
                                  "the initial variables"));
}

cnnb_status ps_gpu_finish_step(ps *s, float *const *grads) {
  char what[80];
  snprintf(what, sizeof what, "pushing the gradients of step %lld", (long long)s->step);
  cnnb_status st = nccl_reduce(s->comms, (void *const *)grads, s->count, NCCL_API_FLOAT32,
                               NCCL_API_AVG, 0, what);
  if (st != CNNB_OK || !s->check_finite) return failed(s, st);
  /* The trainers check their own arenas; the mean lives in the first: the others are
   * marked when it is not finite (a finite mean means finite replicas), as the host path
   * does. The check reads the first GPU: bounded first. */
  replica_arenas *a = &s->replicas;
  int32_t finite = 1;
  if ((st = nccl_gpus_wait(s->gpus, what)) != CNNB_OK) return failed(s, st);
  if ((st = a->dv->all_finite(a->devices[0], grads[0], s->count, &finite)) != CNNB_OK)
    return failed(s, cnnb_error(s->ctx, st, "parameter_server: checking the mean gradient"));
  const float nan = NAN;
  for (int32_t r = 1; !finite && r < a->n; r++)
    if ((st = a->dv->copy_to_device(a->devices[r], grads[r], &nan, sizeof nan)) != CNNB_OK)
      return failed(s, cnnb_error(s->ctx, st, "parameter_server: marking replica %d's gradients",
                                  (int)r));
  return CNNB_OK;
}

/* The slots on the GPU for `rule`, and their host mirrors (what checkpoints read):
 * zeros, RMSProp's mean square ones (cnnb_update_reference's start). */
cnnb_status ps_gpu_make_slots(ps *s, uint32_t rule) {
  replica_arenas *a = &s->replicas;
  cnnb_status st = ps_make_slots(s, s->ctx, rule);
  size_t bytes = (size_t)(s->count ? s->count : 1) * sizeof(float);
  if (st == CNNB_OK && s->slot1 &&
      (st = a->dv->alloc(a->devices[0], bytes, (void **)&s->gpu_slot1)) == CNNB_OK)
    st = ps_gpu_slot_to_device(s, 1);
  if (st == CNNB_OK && s->slot2 &&
      (st = a->dv->alloc(a->devices[0], bytes, (void **)&s->gpu_slot2)) == CNNB_OK)
    st = ps_gpu_slot_to_device(s, 2);
  if (st != CNNB_OK)
    return cnnb_error(s->ctx, st, "parameter_server: the optimizer slots on the GPU");
  return CNNB_OK;
}

cnnb_status ps_gpu_apply(ps *s, int64_t offset, const cnnb_update *update) {
  cnnb_status st = CNNB_OK;
  if (!s->slots_rule && (st = ps_gpu_make_slots(s, update->rule)) != CNNB_OK) return failed(s, st);
  if (update->rule != s->slots_rule)
    return cnnb_error(s->ctx, CNNB_EINVAL,
                      "parameter_server: the optimizer slots are %s's (restored from a "
                      "checkpoint), but the run updates with %s: resume with the checkpoint's "
                      "--optimizer",
                      ps_rule_name(s->slots_rule), ps_rule_name(update->rule));
  /* params and grads are the first replica's arena already (strategy.h); the slots ours. */
  cnnb_update u = *update;
  u.slot1 = s->gpu_slot1 ? s->gpu_slot1 + offset : NULL;
  u.slot2 = s->gpu_slot2 ? s->gpu_slot2 + offset : NULL;
  replica_arenas *a = &s->replicas;
  if ((st = a->dv->update(a->devices[0], &u)) != CNNB_OK)
    return failed(s,
                  cnnb_error(s->ctx, st, "parameter_server: the update of [%lld, %lld) on the GPU",
                             (long long)offset, (long long)(offset + update->count)));
  return CNNB_OK;
}

cnnb_status ps_gpu_finish_update(ps *s, float *const *params) {
  char what[80];
  snprintf(what, sizeof what, "pulling the variables after step %lld", (long long)s->step);
  return failed(s, nccl_broadcast(s->comms, (void *const *)params, s->count, NCCL_API_FLOAT32, 0,
                                  what));
}

cnnb_status ps_gpu_slot_to_host(ps *s, int32_t slot) {
  replica_arenas *a = &s->replicas;
  float *host = slot == 1 ? s->slot1 : s->slot2, *gpu = slot == 1 ? s->gpu_slot1 : s->gpu_slot2;
  if (!host || !gpu) return CNNB_OK;
  /* The copy synchronizes the GPU, where NCCL work may be: bounded first. */
  cnnb_status st = nccl_gpus_wait(s->gpus, "the optimizer slots");
  if (st == CNNB_OK &&
      (st = a->dv->copy_to_host(a->devices[0], host, gpu, (size_t)s->count * sizeof(float))))
    st = cnnb_error(s->ctx, st, "parameter_server: reading optimizer slot %d from the GPU",
                    (int)slot);
  return st;
}

cnnb_status ps_gpu_slot_to_device(ps *s, int32_t slot) {
  replica_arenas *a = &s->replicas;
  float *host = slot == 1 ? s->slot1 : s->slot2, *gpu = slot == 1 ? s->gpu_slot1 : s->gpu_slot2;
  if (!host || !gpu) return CNNB_OK;
  cnnb_status st = a->dv->copy_to_device(a->devices[0], gpu, host,
                                         (size_t)s->count * sizeof(float));
  return st != CNNB_OK ? cnnb_error(s->ctx, st,
                                    "parameter_server: writing optimizer slot %d to "
                                    "the GPU",
                                    (int)slot)
                       : CNNB_OK;
}
