/* independent — every replica trains on its own: gradients are never exchanged.
 * tf_cnn_benchmarks' --variable_update=independent: the upper bound of throughput that
 * the communicating strategies are measured against. With one replica it is plain
 * single-device training. */
#include <stdlib.h>
#include <cnnb/cnnb.h>

typedef struct independent {
  int32_t replicas;
} independent;

static cnnb_status independent_create(cnnb_ctx *ctx, const char *name,
                                      const cnnb_strategy_config *cfg, void **out) {
  independent *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "independent: out of memory");
  s->replicas = cfg->local_replicas;
  *out = s;
  return CNNB_OK;
}

static void independent_destroy(void *strategy) { free(strategy); }
static int32_t independent_world_size(void *strategy) {
  (void)strategy;
  return 1;
}
static int32_t independent_rank(void *strategy) {
  (void)strategy;
  return 0;
}

/* Replicas start from their own initial values too, as tf_cnn_benchmarks' independent. */
static cnnb_status independent_broadcast(void *strategy, float *const *params, int64_t count) {
  return CNNB_OK;
}

static cnnb_status independent_bucket_ready(void *strategy, float *const *grads, int64_t offset,
                                            int64_t count) {
  return CNNB_OK;
}

static cnnb_status independent_finish_step(void *strategy, float *const *grads) { return CNNB_OK; }

static const cnnb_strategy_vtable vtable = {
    .struct_size = sizeof(cnnb_strategy_vtable),
    .create = independent_create,
    .destroy = independent_destroy,
    .world_size = independent_world_size,
    .rank = independent_rank,
    .broadcast_params = independent_broadcast,
    .bucket_ready = independent_bucket_ready,
    .finish_step = independent_finish_step,
};

static const char *const offers[] = {"independent", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_STRATEGY, "independent", "0.1.0",
                     "each replica trains alone; no gradient exchange"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}
