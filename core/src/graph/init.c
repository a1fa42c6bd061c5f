/* init.c — the parameter initializers declared in init.h: one random stream per
 * parameter (splitmix64-seeded xoshiro256**), normals by Box-Muller, TF's truncation
 * and variance-scaling rules. */
#include <math.h>
#include <string.h>

#include "graph/init.h"

/* TF's variance_scaling_initializer divides by this: the stddev of a unit normal
 * truncated to [-2, 2], so the drawn values keep the variance asked for. */
#define TRUNCATED_STDDEV 0.87962566103423978

typedef struct rng {
  uint64_t s[4];
  double spare; /* Box-Muller makes normals in pairs */
  int has_spare;
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed, int32_t index) {
  /* Mix the index in through splitmix first, so neighbouring (seed, index) pairs give
   * unrelated streams. */
  uint64_t x = seed;
  uint64_t k = splitmix64(&x) ^ ((uint64_t)(uint32_t)index * 0xD1B54A32D192ED03ull);
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&k);
  r->has_spare = 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/* Uniform in (0, 1): never 0, so log() below is safe. */
static double next_open01(rng *r) {
  return ((double)(next_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double next_normal(rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u = next_open01(r), v = next_open01(r);
  double radius = sqrt(-2.0 * log(u));
  double angle = 2.0 * 3.14159265358979323846 * v;
  r->spare = radius * sin(angle);
  r->has_spare = 1;
  return radius * cos(angle);
}

static double next_truncated(rng *r) {
  for (;;) {
    double z = next_normal(r);
    if (fabs(z) <= 2.0) return z;
  }
}

void cnnb_param_fans(const cnnb_param *p, double *fan_in, double *fan_out) {
  double in = 1.0, out = 1.0;
  if (p->ndims == 4) {
    double receptive = (double)p->dims[2] * p->dims[3];
    in = p->dims[1] * receptive;
    out = p->dims[0] * receptive;
  } else if (p->ndims == 2) {
    in = p->dims[1];
    out = p->dims[0];
  } else if (p->ndims == 1) {
    in = out = p->dims[0];
  } else if (p->ndims > 0) {
    in = out = sqrt((double)p->count); /* TF's rule for other ranks, roughly */
  }
  if (fan_in) *fan_in = in > 0 ? in : 1.0;
  if (fan_out) *fan_out = out > 0 ? out : 1.0;
}

cnnb_status cnnb_param_initialize(const cnnb_param *p, int32_t index, uint64_t seed, float *dst) {
  if (!p || (p->count > 0 && !dst)) return CNNB_EINVAL;
  rng r;
  rng_seed(&r, seed, index);
  double a = p->init.a, fan_in, fan_out;
  cnnb_param_fans(p, &fan_in, &fan_out);
  int64_t n = p->count;
  switch (p->init.kind) {
    case CNNB_INIT_ZEROS: memset(dst, 0, (size_t)n * sizeof(float)); return CNNB_OK;
    case CNNB_INIT_CONSTANT:
      for (int64_t i = 0; i < n; i++) dst[i] = (float)a;
      return CNNB_OK;
    case CNNB_INIT_NORMAL:
      for (int64_t i = 0; i < n; i++) dst[i] = (float)(a * next_normal(&r));
      return CNNB_OK;
    case CNNB_INIT_TRUNCATED_NORMAL:
      for (int64_t i = 0; i < n; i++) dst[i] = (float)(a * next_truncated(&r));
      return CNNB_OK;
    case CNNB_INIT_UNIFORM:
      for (int64_t i = 0; i < n; i++) dst[i] = (float)(a * (2.0 * next_open01(&r) - 1.0));
      return CNNB_OK;
    case CNNB_INIT_GLOROT_UNIFORM: {
      double limit = sqrt(6.0 / (fan_in + fan_out));
      for (int64_t i = 0; i < n; i++) dst[i] = (float)(limit * (2.0 * next_open01(&r) - 1.0));
      return CNNB_OK;
    }
    case CNNB_INIT_VARIANCE_SCALING:
    case CNNB_INIT_HE_NORMAL: {
      bool he = p->init.kind == CNNB_INIT_HE_NORMAL;
      double scale = a != 0.0 ? a : (he ? 2.0 : 1.0);
      double stddev = sqrt(scale / (he ? fan_out : fan_in)) / TRUNCATED_STDDEV;
      for (int64_t i = 0; i < n; i++) dst[i] = (float)(stddev * next_truncated(&r));
      return CNNB_OK;
    }
    default: return CNNB_EINVAL; /* DEFAULT (unresolved) or a kind this host does not know */
  }
}

cnnb_status cnnb_params_initialize(const cnnb_graph *g, uint64_t seed, float *params,
                                   float *stats) {
  if (!g) return CNNB_EINVAL;
  if (cnnb_graph_status(g) != CNNB_OK) return cnnb_graph_status(g);
  if ((cnnb_graph_param_arena_count(g) > 0 && !params) ||
      (cnnb_graph_stat_arena_count(g) > 0 && !stats))
    return CNNB_EINVAL;
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    float *base = p->is_stat ? stats : params;
    cnnb_status st = cnnb_param_initialize(p, i, seed, base + p->offset);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}
