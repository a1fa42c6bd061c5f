/* ds_order.h — which example a labelled-image datasource's instance reads next, and the
 * random crop and flip of each training example.
 *
 * Each epoch visits the split in an order every shard computes alike: the identity for
 * evaluation, for training a permutation drawn from the seed and the epoch number. Shard
 * `rank` of `world` reads the positions p of that order with p % world == rank, so the
 * shards of one epoch are disjoint and together cover it exactly once; after its last
 * position a shard goes on with the next epoch. A training example's crop and flip are
 * drawn from (seed, epoch, example) alone, so they do not depend on how many shards there
 * are or which one reads it, and a resumed run (ds_order_skip) draws them again alike.
 *
 * Each datasource passes salts of its own: they keep its streams what they were when it
 * had its own copy of this code, so runs and checkpoints stay comparable across versions. */
#ifndef DS_ORDER_H
#define DS_ORDER_H

#include <stdint.h>

typedef struct ds_order {
  int64_t count; /* examples in the split */
  int32_t rank, world;
  uint64_t seed, salt;
  int shuffle;
  uint32_t *perm; /* [count] this epoch's order (shuffle only) */
  int64_t epoch;
  int64_t position; /* the next position of the epoch's order this shard reads */
} ds_order;

/* 0, or -1 when out of memory. Needs 0 <= rank < world <= count <= UINT32_MAX. `salt`
 * is the datasource's own, mixed into every epoch's permutation. */
int ds_order_init(ds_order *o, int64_t count, int32_t rank, int32_t world, uint64_t seed,
                  uint64_t salt, int shuffle);
void ds_order_free(ds_order *o);
/* The next example's index into the split; *epoch (may be NULL) says in which epoch. */
int64_t ds_order_next(ds_order *o, int64_t *epoch);
/* Moves on by `examples` calls of ds_order_next at once (a resumed run): every epoch of a
 * shard has as many, so the epoch and the position are computed, and only the epoch
 * reached draws its permutation. */
void ds_order_skip(ds_order *o, int64_t examples);

/* A crop of the image padded by `pad` pixels on each side back to its own size (the
 * corner 0..2*pad in each direction), and a left-right flip with probability 1/2:
 * tf_cnn_benchmarks' Cifar10ImagePreprocessor._distort_image, torchvision's
 * RandomCrop(padding=pad) and RandomHorizontalFlip(). */
typedef struct ds_crop {
  int32_t dx, dy; /* the crop's corner in the padded image, 0..2*pad */
  int32_t flip;   /* 1: mirror left-right */
} ds_crop;
/* The draw of (seed, epoch, example), with the datasource's own salt; pad 0..127. */
ds_crop ds_order_crop(uint64_t salt, uint64_t seed, int64_t epoch, int64_t example, int32_t pad);

#endif
