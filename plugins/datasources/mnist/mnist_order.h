/* mnist_order.h — which example an instance reads next, and how it is augmented.
 *
 * As the cifar10 datasource's cifar_order.h, whose rules it keeps: each epoch visits the
 * split in an order every shard computes alike (the identity for evaluation, for training
 * a permutation drawn from the seed and the epoch number); shard `rank` of `world` reads
 * the positions p of that order with p % world == rank, so the shards of one epoch are
 * disjoint and together cover it exactly once; after its last position a shard goes on
 * with the next epoch. A training example's crop and flip are drawn from (seed, epoch,
 * example) alone, so they do not depend on how many shards there are or which one reads
 * it, and a resumed run (mnist_order_skip) draws them again alike. */
#ifndef MNIST_ORDER_H
#define MNIST_ORDER_H

#include <stdint.h>

typedef struct mnist_order {
  int64_t count; /* examples in the split */
  int32_t rank, world;
  uint64_t seed;
  int shuffle;
  uint32_t *perm; /* [count] this epoch's order (shuffle only) */
  int64_t epoch;
  int64_t position; /* the next position of the epoch's order this shard reads */
} mnist_order;

/* 0, or -1 when out of memory. Needs 0 <= rank < world <= count <= UINT32_MAX. */
int mnist_order_init(mnist_order *o, int64_t count, int32_t rank, int32_t world, uint64_t seed,
                     int shuffle);
void mnist_order_free(mnist_order *o);
/* The next example's index into the split; *epoch (may be NULL) says in which epoch. */
int64_t mnist_order_next(mnist_order *o, int64_t *epoch);
/* Moves on by `examples` calls of mnist_order_next at once: every epoch of a shard has as
 * many, so the epoch and the position are computed, and only the epoch reached draws its
 * permutation. */
void mnist_order_skip(mnist_order *o, int64_t examples);

/* Padding of 4 background pixels on each side, a random 28x28 crop of the 36x36 (corner
 * 0..8 in each direction), and, when flips are on, a left-right flip with probability
 * 1/2: torchvision's RandomCrop(28, padding=4) and RandomHorizontalFlip(). */
typedef struct mnist_augment {
  int32_t dx, dy; /* the crop's corner in the padded image, 0..8 */
  int32_t flip;   /* 1: mirror left-right */
} mnist_augment;
mnist_augment mnist_order_augment(uint64_t seed, int64_t epoch, int64_t example);

#endif
