/* ps_optimizer_state.c — checkpoints' access to the optimizer slots the parameter server
 * keeps on its PS ranks (ps_optimizer_state.h). */
#include "ps_optimizer_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parameter_server.h"
#include "ps_apply.h"
#include "ps_gpu.h"

/* Whether `rule` keeps slot `slot` (cnnb_update's slot1 / slot2). */
static bool rule_has_slot(uint32_t rule, int32_t slot) {
  switch (rule) {
    case CNNB_OPT_MOMENTUM: return slot == 1;
    case CNNB_OPT_RMSPROP:
    case CNNB_OPT_ADAM: return slot == 1 || slot == 2;
    default: return false;
  }
}

static float *slot_array(ps *s, int32_t slot) { return slot == 1 ? s->slot1 : s->slot2; }

/* A bad argument is the host's bug, the same on every rank: refused at once. */
static cnnb_status check_args(ps *s, const char *call, int32_t slot, const void *host,
                              int64_t count) {
  if (slot != 1 && slot != 2)
    return cnnb_error(s->ctx, CNNB_EINVAL,
                      "parameter_server: %s: slot %d; an optimizer's slots are 1 and 2", call,
                      (int)slot);
  if (count != s->count)
    return cnnb_error(s->ctx, CNNB_EINVAL,
                      "parameter_server: %s: %lld elements; the arena has %lld", call,
                      (long long)count, (long long)s->count);
  if (!host) return cnnb_error(s->ctx, CNNB_EINVAL, "parameter_server: %s: no buffer", call);
  return CNNB_OK;
}

static cnnb_status ps_get_slot(void *strategy, int32_t slot, float *host, int64_t count,
                               int32_t *exists) {
  ps *s = strategy;
  cnnb_status st = check_args(s, "get_slot", slot, host, count);
  if (st == CNNB_OK && !exists)
    st = cnnb_error(s->ctx, CNNB_EINVAL, "parameter_server: get_slot: no `exists`");
  if (st != CNNB_OK) return st;
  *exists = 0;
  char what[112];
  snprintf(what, sizeof what, "saving optimizer slot %d at step %lld", (int)slot,
           (long long)s->step);
  /* Asynchronous: once every rank is here, every push any rank made is applied (a push
   * returns only when each PS rank has answered it), and no rank pushes again before it
   * has the whole slot, which needs every shard packed below. */
  if (!s->sync) st = mpi_world_barrier(s->world, s->ctx, what);
  /* The PS ranks made their slots at the same update (or restore), so they agree on the
   * rule; the other ranks, which keep none, learn it here. */
  uint32_t *rules = NULL, rule = 0;
  if (st == CNNB_OK && !(rules = calloc((size_t)s->world_size, sizeof *rules)))
    st = cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  if (st == CNNB_OK) {
    pthread_mutex_lock(&s->slots_lock);
    uint32_t mine = s->slots_rule;
    pthread_mutex_unlock(&s->slots_lock);
    st = mpi_world_allgather(s->world, s->ctx, &mine, rules, sizeof mine, what);
  }
  if (st == CNNB_OK) rule = rules[0];
  for (int32_t p = 1; st == CNNB_OK && p < s->num_ps; p++)
    if (rules[p] != rule)
      st = cnnb_error(s->ctx, CNNB_EINTERNAL,
                      "parameter_server: parameter servers 0 and %d keep "
                      "the slots of different rules (%s, %s)",
                      (int)p, ps_rule_name(rule), ps_rule_name(rules[p]));
  free(rules);
  if (st != CNNB_OK || !rule_has_slot(rule, slot)) return st;
  /* On the GPU the slots are read into their host mirror first. */
  if (s->gpu && (st = ps_gpu_slot_to_host(s, slot)) != CNNB_OK) return st;
  /* Each shard from its PS rank, as a step's pull. */
  for (int32_t p = 0; st == CNNB_OK && p < s->num_ps; p++) {
    const ps_shard *shard = &s->shards.shards[p];
    if (p == s->rank) {
      pthread_mutex_lock(&s->slots_lock);
      ps_shard_pack(shard, slot_array(s, slot), s->pack);
      pthread_mutex_unlock(&s->slots_lock);
    }
    snprintf(what, sizeof what, "saving optimizer slot %d from parameter server %d at step %lld",
             (int)slot, (int)p, (long long)s->step);
    st = mpi_world_bcast(s->world, s->ctx, s->pack, shard->count * (int64_t)sizeof(float), p, what);
    if (st == CNNB_OK) ps_shard_unpack(shard, s->pack, host);
  }
  if (st == CNNB_OK) *exists = 1;
  return st;
}

/* What each rank did with a set_slot, compared over the ranks. */
typedef struct restore_record {
  int64_t step;       /* finish_step calls so far: restoring needs 0 */
  uint64_t hash;      /* of the values passed */
  uint32_t rule;      /* asked for */
  uint32_t kept_rule; /* the slots' own before the call (0: none yet) */
  int32_t slot;
  int32_t failed; /* no room for the slots */
} restore_record;

static uint64_t hash_floats(const float *x, int64_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the bits, a word at a time */
  for (int64_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &x[i], sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

/* Every rank's verdict, the same on every rank (they all read the same records). */
static cnnb_status judge(ps *s, const restore_record *all, const restore_record *mine) {
  for (int32_t r = 0; r < s->world_size; r++) {
    const restore_record *o = &all[r];
    if (o->failed)
      return cnnb_error(s->ctx, CNNB_ENOMEM,
                        "parameter_server: rank %d has no room for the optimizer slots it restores",
                        (int)r);
    if (o->step != 0)
      return cnnb_error(s->ctx, CNNB_EINVAL,
                        "parameter_server: restoring optimizer slot %d: rank "
                        "%d already ran %lld steps; slots are restored before the first step",
                        (int)o->slot, (int)r, (long long)o->step);
    if (o->kept_rule && o->kept_rule != o->rule)
      return cnnb_error(s->ctx, CNNB_EINVAL,
                        "parameter_server: rank %d restores %s's slot %d "
                        "into slots restored for %s",
                        (int)r, ps_rule_name(o->rule), (int)o->slot, ps_rule_name(o->kept_rule));
    if (o->rule != mine->rule || o->slot != mine->slot)
      return cnnb_error(s->ctx, CNNB_EINVAL,
                        "parameter_server: rank %d restores %s's slot %d, "
                        "rank %d %s's slot %d: every rank restores the same",
                        (int)r, ps_rule_name(o->rule), (int)o->slot, (int)s->rank,
                        ps_rule_name(mine->rule), (int)mine->slot);
    if (o->hash != all[0].hash)
      return cnnb_error(s->ctx, CNNB_EINVAL,
                        "parameter_server: rank %d restores other values of "
                        "optimizer slot %d than rank 0 (did the ranks read different checkpoints?)",
                        (int)r, (int)o->slot);
  }
  return CNNB_OK;
}

static cnnb_status ps_set_slot(void *strategy, uint32_t rule, int32_t slot, const float *host,
                               int64_t count) {
  ps *s = strategy;
  cnnb_status st = check_args(s, "set_slot", slot, host, count);
  if (st == CNNB_OK && !rule_has_slot(rule, slot))
    st = cnnb_error(s->ctx, CNNB_EINVAL, "parameter_server: set_slot: %s has no optimizer slot %d",
                    ps_rule_name(rule), (int)slot);
  if (st != CNNB_OK) return st;
  restore_record mine = {
      .step = s->step, .hash = hash_floats(host, count), .rule = rule, .slot = slot};
  /* Each PS rank keeps its shard now: before any rank can push (none passes the allgather
   * below before this rank reached it), so the server thread never sees them half set. */
  pthread_mutex_lock(&s->slots_lock);
  mine.kept_rule = s->slots_rule;
  if (mine.step == 0 && (!mine.kept_rule || mine.kept_rule == rule) && s->rank < s->num_ps) {
    if (!s->slots_rule &&
        (s->gpu ? ps_gpu_make_slots(s, rule) : ps_make_slots(s, s->ctx, rule)) != CNNB_OK)
      mine.failed = 1;
    const ps_shard *shard = &s->shards.shards[s->rank];
    float *dst = slot_array(s, slot);
    for (int32_t i = 0; !mine.failed && i < shard->num_ranges; i++)
      memcpy(dst + shard->ranges[i].offset, host + shard->ranges[i].offset,
             (size_t)shard->ranges[i].count * sizeof *dst);
    if (!mine.failed && s->gpu && ps_gpu_slot_to_device(s, slot) != CNNB_OK) mine.failed = 1;
  }
  pthread_mutex_unlock(&s->slots_lock);
  restore_record *all = calloc((size_t)s->world_size, sizeof *all);
  if (!all) return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  char what[96];
  snprintf(what, sizeof what, "restoring optimizer slot %d", (int)slot);
  st = mpi_world_allgather(s->world, s->ctx, &mine, all, sizeof mine, what);
  if (st == CNNB_OK) st = judge(s, all, &mine);
  free(all);
  return st;
}

const cnnb_strategy_optimizer_state ps_optimizer_state = {
    .struct_size = sizeof(cnnb_strategy_optimizer_state),
    .get_slot = ps_get_slot,
    .set_slot = ps_set_slot,
};
