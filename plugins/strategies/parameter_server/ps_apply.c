/* ps_apply.c — the parameter server's host optimizer (ps_apply.h). */
#include "ps_apply.h"

#include <stdlib.h>

const char *ps_rule_name(uint32_t rule) {
  switch (rule) {
    case CNNB_OPT_SGD: return "sgd";
    case CNNB_OPT_MOMENTUM: return "momentum";
    case CNNB_OPT_RMSPROP: return "rmsprop";
    case CNNB_OPT_ADAM: return "adam";
    case 0: return "none yet";
    default: return "an unknown rule";
  }
}

cnnb_status ps_make_slots(ps *s, cnnb_ctx *ctx, uint32_t rule) {
  size_t bytes = (size_t)(s->count ? s->count : 1) * sizeof(float);
  int two = rule == CNNB_OPT_RMSPROP || rule == CNNB_OPT_ADAM;
  if ((rule != CNNB_OPT_SGD && !(s->slot1 = malloc(bytes))) ||
      (two && !(s->slot2 = calloc(1, bytes))))
    return cnnb_error(ctx, CNNB_ENOMEM, "parameter_server: out of memory for optimizer slots");
  /* TF's RMSProp starts its mean square at ones (as the trainer does on devices). */
  for (int64_t i = 0; s->slot1 && i < s->count; i++)
    s->slot1[i] = rule == CNNB_OPT_RMSPROP ? 1.0f : 0.0f;
  s->slots_rule = rule;
  return CNNB_OK;
}

cnnb_status ps_apply_to_shard(ps *s, cnnb_ctx *ctx, int32_t shard_index, float *vars,
                              const float *grads, int64_t offset, const cnnb_update *update) {
  if (!s->slots_rule) {
    cnnb_status st = ps_make_slots(s, ctx, update->rule);
    if (st != CNNB_OK) return st;
  }
  if (update->rule != s->slots_rule)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "parameter_server: the optimizer slots are %s's (restored "
                      "from a checkpoint), but the run updates with %s: resume with the "
                      "checkpoint's --optimizer",
                      ps_rule_name(s->slots_rule), ps_rule_name(update->rule));
  const ps_shard *shard = &s->shards.shards[shard_index];
  int64_t end = offset + update->count;
  for (int32_t i = 0; i < shard->num_ranges; i++) {
    int64_t lo = shard->ranges[i].offset, hi = lo + shard->ranges[i].count;
    if (lo < offset) lo = offset;
    if (hi > end) hi = end;
    if (lo >= hi) continue;
    cnnb_update u = *update;
    u.count = hi - lo;
    u.params = vars + lo;
    u.grads = grads + lo;
    u.slot1 = s->slot1 ? s->slot1 + lo : NULL;
    u.slot2 = s->slot2 ? s->slot2 + lo : NULL;
    cnnb_update_reference(&u);
  }
  return CNNB_OK;
}
