/* local_reduce.h — all-reduce (sum) of one range over the n replicas of this process, on
 * their host views: every views[r][0, count) ends holding the sum over r, and every
 * replica holds exactly the same floats (a value is summed once and then copied, never
 * summed again in another order elsewhere). The caller scales (a mean divides by the
 * number of replicas of the whole world, which only the caller knows).
 *
 * The two algorithms are tf_cnn_benchmarks' local ones, done on one host's memory:
 *   xring  the ring of NCCL and tf's xring: the range is cut into n chunks; n - 1
 *          reduce-scatter steps pass each chunk along the ring, each replica adding its
 *          own (chunk c is summed in the order c, c+1, ..., c+n-1 mod n), then n - 1
 *          all-gather steps pass the finished chunks on. Each replica reads and writes
 *          2 (n-1)/n of the range, the traffic busbw measures.
 *   pscpu  tf's parameter server on the CPU: a host accumulator takes the sum of every
 *          replica (in replica order), then the sum is copied to every replica. Done a
 *          block at a time so the accumulator stays in cache between sum and copies.
 * `shards` (tf's alg#shards) cuts the range into that many pieces reduced one after the
 * other, as tf's multi-ring xring#N and sharded pscpu#N do; on one host it changes the
 * order of the work (and for xring where chunks start), not what is computed.
 *
 * Threading: pure functions of their arguments; the views must not change meanwhile. */
#ifndef CNNB_STRATEGY_LOCAL_REDUCE_H
#define CNNB_STRATEGY_LOCAL_REDUCE_H

#include <stdint.h>

typedef enum local_reduce_alg { LOCAL_REDUCE_XRING = 1, LOCAL_REDUCE_PSCPU = 2 } local_reduce_alg;

/* Floats of the scratch local_reduce_pscpu needs (256 KiB: fits a core's L2). */
#define LOCAL_REDUCE_PSCPU_BLOCK ((int64_t)64 * 1024)

/* Sums views[0..n)[0, count) into every view, by the ring. */
void local_reduce_xring(float *const *views, int32_t n, int64_t count);
/* The same by a host accumulator: scratch holds LOCAL_REDUCE_PSCPU_BLOCK floats. */
void local_reduce_pscpu(float *const *views, int32_t n, int64_t count, float *scratch);
/* `alg` over `shards` (>= 1) consecutive pieces of the range, one after the other.
 * scratch as local_reduce_pscpu's (unused by xring: may be NULL then). */
void local_reduce(local_reduce_alg alg, float *const *views, int32_t n, int64_t count,
                  int32_t shards, float *scratch);
/* "xring", "pscpu". */
const char *local_reduce_alg_name(local_reduce_alg alg);

#endif
