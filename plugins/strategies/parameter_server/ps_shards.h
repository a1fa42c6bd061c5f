/* ps_shards.h — which parameter-server rank keeps which variable, and the packing of a
 * rank's variables into one contiguous buffer so a step moves one message per PS rank.
 *
 * Placement is tf_cnn_benchmarks' GreedyLoadBalancingStrategy by bytes: variables
 * largest first, each to the PS rank holding the fewest bytes so far (ties: the lower
 * rank). Every rank computes the same placement from the same variable list. */
#ifndef CNNB_PS_SHARDS_H
#define CNNB_PS_SHARDS_H

#include <stdint.h>
#include <cnnb/cnnb.h>

typedef struct ps_range {
  int64_t offset, count; /* in the arena */
  int64_t packed;        /* where it starts in its holder's pack */
} ps_range;

typedef struct ps_shard {
  ps_range *ranges; /* in arena order */
  int32_t num_ranges;
  int64_t count; /* elements packed */
} ps_shard;

typedef struct ps_shards {
  ps_shard *shards; /* [num_ps] */
  int32_t num_ps;
} ps_shards;

/* bounds[num_variables + 1] as cnnb_strategy_config's variable_bounds. */
cnnb_status ps_shards_place(cnnb_ctx *ctx, const int64_t *bounds, int32_t num_variables,
                            int32_t num_ps, ps_shards *out);
void ps_shards_free(ps_shards *s);

/* pack[shard's packed] <- arena's ranges, and back. */
void ps_shard_pack(const ps_shard *s, const float *arena, float *pack);
void ps_shard_unpack(const ps_shard *s, const float *pack, float *arena);

#endif
