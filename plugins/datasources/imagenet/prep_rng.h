/* prep_rng.h — the preprocessing's random numbers: splitmix64 (Steele, Lea, Flood 2014),
 * seeded from the example's seed. Each kind of choice (crop, flip, resize method, colour)
 * draws from its own stream, so how many crop attempts one example took does not shift its
 * flip or colours, and the same seed gives the same image on any thread. */
#ifndef IMAGENET_PREP_RNG_H
#define IMAGENET_PREP_RNG_H

#include <stdint.h>

typedef struct prep_rng {
  uint64_t state;
} prep_rng;

static inline uint64_t prep_rng_next(prep_rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Moves r on by `draws` calls of prep_rng_next at once: splitmix64's state only counts. */
static inline void prep_rng_advance(prep_rng *r, uint64_t draws) {
  r->state += draws * 0x9E3779B97F4A7C15ULL;
}

/* The stream `tag` of an example: its seed and the tag mixed, so nearby seeds and tags
 * start far apart. */
static inline prep_rng prep_rng_stream(uint64_t seed, uint64_t tag) {
  prep_rng r = {seed ^ (tag * 0xD1B54A32D192ED03ULL)};
  r.state = prep_rng_next(&r);
  return r;
}

/* Uniform in [0, 1) with float's 24 bits, as TensorFlow's RandFloat. */
static inline float prep_rng_float(prep_rng *r) {
  return (float)(prep_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform in [0, n) for n >= 1 (Lemire's multiply-high; the bias is below 2^-32). */
static inline uint32_t prep_rng_below(prep_rng *r, uint32_t n) {
  return (uint32_t)(((prep_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [lo, hi). */
static inline float prep_rng_range(prep_rng *r, float lo, float hi) {
  return lo + (hi - lo) * prep_rng_float(r);
}

enum { RNG_CROP = 1, RNG_FLIP = 2, RNG_RESIZE = 3, RNG_COLOR = 4 };

#endif
