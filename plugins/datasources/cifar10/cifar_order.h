/* cifar_order.h — which example an instance reads next, and how it is augmented.
 *
 * Each epoch visits the split in an order every shard computes alike: the identity for
 * evaluation, for training a permutation drawn from the seed and the epoch number. Shard
 * `rank` of `world` reads the positions p of that order with p % world == rank, so the
 * shards of one epoch are disjoint and together cover it exactly once; after its last
 * position a shard goes on with the next epoch. A training example's random crop and
 * flip are drawn from (seed, epoch, example) alone, so they do not depend on how many
 * shards there are or which one reads it. */
#ifndef CIFAR_ORDER_H
#define CIFAR_ORDER_H

#include <stdint.h>

typedef struct cifar_order {
  int64_t count; /* examples in the split */
  int32_t rank, world;
  uint64_t seed;
  int shuffle;
  uint32_t *perm; /* [count] this epoch's order (shuffle only) */
  int64_t epoch;
  int64_t position; /* the next position of the epoch's order this shard reads */
} cifar_order;

/* 0, or -1 when out of memory. Needs 0 <= rank < world <= count. */
int cifar_order_init(cifar_order *o, int64_t count, int32_t rank, int32_t world, uint64_t seed,
                     int shuffle);
void cifar_order_free(cifar_order *o);
/* The next example's index into the split; *epoch (may be NULL) says in which epoch. */
int64_t cifar_order_next(cifar_order *o, int64_t *epoch);
/* Moves on by `examples` calls of cifar_order_next at once (a resumed run): every epoch
 * of a shard has as many, so the epoch and the position are computed, and only the
 * epoch reached draws its permutation. */
void cifar_order_skip(cifar_order *o, int64_t examples);

/* Padding of 4 pixels on each side, a random 32x32 crop of the 40x40 (offsets 0..8),
 * and a left-right flip with probability 1/2: tf_cnn_benchmarks'
 * Cifar10ImagePreprocessor._distort_image. */
typedef struct cifar_augment {
  int32_t dx, dy; /* the crop's corner in the padded image, 0..8 */
  int32_t flip;   /* 1: mirror left-right */
} cifar_augment;
cifar_augment cifar_order_augment(uint64_t seed, int64_t epoch, int64_t example);

#endif
