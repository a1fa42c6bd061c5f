/* ps_shards.c — greedy placement of variables on PS ranks, and packing (ps_shards.h). */
#include "ps_shards.h"

#include <stdlib.h>
#include <string.h>

typedef struct variable {
  int64_t offset, count;
  int32_t holder;
} variable;

static int larger_first(const void *a, const void *b) {
  const variable *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return x->offset < y->offset ? -1 : x->offset > y->offset; /* stable for equal sizes */
}

static int arena_order(const void *a, const void *b) {
  const variable *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

cnnb_status ps_shards_place(cnnb_ctx *ctx, const int64_t *bounds, int32_t num_variables,
                            int32_t num_ps, ps_shards *out) {
  memset(out, 0, sizeof *out);
  variable *vars = calloc((size_t)(num_variables ? num_variables : 1), sizeof *vars);
  int64_t *load = calloc((size_t)num_ps, sizeof *load);
  out->shards = calloc((size_t)num_ps, sizeof *out->shards);
  out->num_ps = num_ps;
  if (!vars || !load || !out->shards) {
    free(vars);
    free(load);
    return cnnb_error(ctx, CNNB_ENOMEM, "parameter_server: out of memory placing %d variables",
                      (int)num_variables);
  }
  for (int32_t i = 0; i < num_variables; i++)
    vars[i] = (variable){bounds[i], bounds[i + 1] - bounds[i], 0};
  qsort(vars, (size_t)num_variables, sizeof *vars, larger_first);
  for (int32_t i = 0; i < num_variables; i++) {
    int32_t best = 0;
    for (int32_t p = 1; p < num_ps; p++)
      if (load[p] < load[best]) best = p;
    vars[i].holder = best;
    load[best] += vars[i].count;
    out->shards[best].num_ranges++;
  }
  qsort(vars, (size_t)num_variables, sizeof *vars, arena_order);
  cnnb_status st = CNNB_OK;
  for (int32_t p = 0; p < num_ps && st == CNNB_OK; p++) {
    ps_shard *s = &out->shards[p];
    s->ranges = calloc((size_t)(s->num_ranges ? s->num_ranges : 1), sizeof *s->ranges);
    if (!s->ranges) st = cnnb_error(ctx, CNNB_ENOMEM, "parameter_server: out of memory");
    s->num_ranges = 0;
  }
  for (int32_t i = 0; i < num_variables && st == CNNB_OK; i++) {
    ps_shard *s = &out->shards[vars[i].holder];
    ps_range *last = s->num_ranges ? &s->ranges[s->num_ranges - 1] : NULL;
    if (last && last->offset + last->count == vars[i].offset) {
      last->count += vars[i].count; /* neighbours on one holder travel as one range */
    } else {
      s->ranges[s->num_ranges++] = (ps_range){vars[i].offset, vars[i].count, s->count};
    }
    s->count += vars[i].count;
  }
  free(vars);
  free(load);
  if (st != CNNB_OK) ps_shards_free(out);
  return st;
}

void ps_shards_free(ps_shards *s) {
  for (int32_t p = 0; s->shards && p < s->num_ps; p++) free(s->shards[p].ranges);
  free(s->shards);
  memset(s, 0, sizeof *s);
}

void ps_shard_pack(const ps_shard *s, const float *arena, float *pack) {
  for (int32_t i = 0; i < s->num_ranges; i++)
    memcpy(pack + s->ranges[i].packed, arena + s->ranges[i].offset,
           (size_t)s->ranges[i].count * sizeof *pack);
}

void ps_shard_unpack(const ps_shard *s, const float *pack, float *arena) {
  for (int32_t i = 0; i < s->num_ranges; i++)
    memcpy(arena + s->ranges[i].offset, pack + s->ranges[i].packed,
           (size_t)s->ranges[i].count * sizeof *pack);
}
