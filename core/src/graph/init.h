/* init.h — parameter initializers: fill host arrays with every parameter's cnnb_init
 * (graph.h), as TensorFlow's initializers would, deterministically from a seed.
 *
 * Each parameter draws from its own stream, keyed by (seed, parameter index), so its
 * values depend on nothing else: replicas that initialise from the same seed hold the
 * same weights, and inserting a layer does not reshuffle every other layer's numbers.
 *
 * Distributions (fan_in / fan_out from the param's dims: conv kernel [O, I/groups, KH, KW]
 * gives fan_in = I/groups*KH*KW and fan_out = O*KH*KW, as TF's kernel [KH, KW, I/g, O];
 * dense [units, K] gives fan_in = K, fan_out = units; a 1-D [C] gives both = C):
 *   ZEROS, CONSTANT a                      exact values;
 *   NORMAL a                               N(0, a^2);
 *   TRUNCATED_NORMAL a                     N(0, a^2), resampled beyond 2a (TF's rule);
 *   UNIFORM a                              U[-a, a];
 *   GLOROT_UNIFORM                         U[-l, l], l = sqrt(6 / (fan_in + fan_out));
 *   VARIANCE_SCALING a (0 = 1)             tf.variance_scaling_initializer: truncated normal
 *                                          with stddev sqrt(a / fan_in) / 0.8796..., the
 *                                          divisor undoing the variance truncation removes,
 *                                          so the drawn values have stddev sqrt(a / fan_in);
 *   HE_NORMAL a (0 = 2)                    the same with scale 2 over fan_out: drawn values
 *                                          have stddev sqrt(2 / fan_out).
 * CNNB_INIT_DEFAULT never reaches here (the builder resolves it); it is refused. */
#ifndef CNNB_INIT_H
#define CNNB_INIT_H

#include <cnnb/graph.h>

/* Fills params[0 .. cnnb_graph_param_arena_count) and stats[0 .. cnnb_graph_stat_arena_count)
 * (either may be NULL when its arena is empty). CNNB_EINVAL for a failed graph, a NULL
 * array for a non-empty arena, or an unknown init kind. */
cnnb_status cnnb_params_initialize(const cnnb_graph *g, uint64_t seed, float *params, float *stats);

/* One parameter: fills dst[0 .. p->count) from the stream of (seed, index). The same
 * values cnnb_params_initialize writes for param `index`. */
cnnb_status cnnb_param_initialize(const cnnb_param *p, int32_t index, uint64_t seed, float *dst);

/* The fans used by the scaling initializers, from p's dims (see above). */
void cnnb_param_fans(const cnnb_param *p, double *fan_in, double *fan_out);

#endif
