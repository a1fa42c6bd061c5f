/* ds_order.c — per-epoch orders, shards and crop draws (ds_order.h).
 *
 * splitmix64 makes every draw: seedable, the same on every platform, and cheap enough to
 * reseed per epoch and per example, which is what keeps shards agreeing without talking. */
#include "ds_order.h"

#include <stdlib.h>

static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t next_random(uint64_t *state) { return mix(*state += 0x9E3779B97F4A7C15ull); }

/* The epoch's order: Fisher-Yates over the identity, from (seed, salt, epoch). */
static void draw_permutation(ds_order *o) {
  uint64_t state = mix(o->seed * 0x9E3779B97F4A7C15ull + o->salt) ^ mix((uint64_t)o->epoch + 1);
  for (int64_t i = 0; i < o->count; i++) o->perm[i] = (uint32_t)i;
  for (int64_t i = o->count - 1; i > 0; i--) {
    int64_t j = (int64_t)(next_random(&state) % (uint64_t)(i + 1));
    uint32_t t = o->perm[i];
    o->perm[i] = o->perm[j];
    o->perm[j] = t;
  }
}

int ds_order_init(ds_order *o, int64_t count, int32_t rank, int32_t world, uint64_t seed,
                  uint64_t salt, int shuffle) {
  *o = (ds_order){.count = count,
                  .rank = rank,
                  .world = world,
                  .seed = seed,
                  .salt = salt,
                  .shuffle = shuffle,
                  .position = rank};
  if (shuffle) {
    o->perm = malloc((size_t)count * sizeof *o->perm);
    if (!o->perm) return -1;
    draw_permutation(o);
  }
  return 0;
}

void ds_order_free(ds_order *o) {
  free(o->perm);
  o->perm = NULL;
}

int64_t ds_order_next(ds_order *o, int64_t *epoch) {
  if (o->position >= o->count) {
    o->epoch++;
    o->position = o->rank;
    if (o->shuffle) draw_permutation(o);
  }
  int64_t p = o->position;
  o->position += o->world;
  if (epoch) *epoch = o->epoch;
  return o->shuffle ? (int64_t)o->perm[p] : p;
}

void ds_order_skip(ds_order *o, int64_t examples) {
  if (examples <= 0) return;
  int64_t per_epoch = (o->count - o->rank + o->world - 1) / o->world;
  /* Where this epoch's walk stands, as a count of examples taken in it. Right after an
   * epoch's last example the position is past the end: that is per_epoch taken. */
  int64_t taken = (o->position - o->rank) / o->world + examples;
  int64_t epochs = taken / per_epoch;
  o->position = o->rank + (taken % per_epoch) * o->world;
  if (epochs > 0) {
    o->epoch += epochs;
    if (o->shuffle) draw_permutation(o);
  }
}

ds_crop ds_order_crop(uint64_t salt, uint64_t seed, int64_t epoch, int64_t example, int32_t pad) {
  uint64_t state = mix(seed ^ salt) ^ mix(((uint64_t)epoch << 32) ^ (uint64_t)example);
  uint64_t r = next_random(&state);
  uint64_t span = 2 * (uint64_t)pad + 1;
  return (ds_crop){.dx = (int32_t)(r % span),
                   .dy = (int32_t)((r >> 16) % span),
                   .flip = (int32_t)((r >> 40) & 1)};
}
