/* pipeline.h — the decode pipeline of one datasource instance: a reader thread walks the
 * example stream (file I/O, record parsing, shuffling) into a ring of slots, decoder
 * threads turn each slot's JPEG into the model's input, and the host's input thread
 * (next_batch) takes finished slots strictly in stream order.
 *
 * Order and randomness do not depend on threads: the stream is sequential, each
 * example's augmentation is seeded by its position in the stream, and batches are filled
 * in stream order. So a run is repeatable for a given --seed whatever
 * --datasets_num_private_threads is. A bad image is skipped when its turn comes: the
 * batch takes the next good one, and the count grows. */
#ifndef IMAGENET_PIPELINE_H
#define IMAGENET_PIPELINE_H

#include <stdint.h>
#include <cnnb/cnnb.h>
#include "example_stream.h"
#include "preprocess.h"

typedef struct pipeline_config {
  stream_config stream;
  preprocess_config preprocess;
  int32_t num_threads; /* decoders */
  int32_t ring_slots;  /* examples in flight (read, decoding, decoded) */
  uint64_t seed;       /* of the augmentations */
  int64_t max_skipped; /* < 0: no limit */
  int64_t max_named;   /* bad examples named in warnings; the rest are counted */
  cnnb_ctx *ctx;       /* the input thread's (the instance's own) */
} pipeline_config;

typedef struct pipeline pipeline;

/* Prepares the pipeline; its threads start with the first batch, whose form (fp32 or
 * uint8) is then kept. CNNB_OK, or an error recorded on cfg->ctx. */
cnnb_status pipeline_create(const pipeline_config *cfg, pipeline **out);
/* [input-thread] The next batch of `batch` examples: images [batch, 3, H, W] (or, with
 * `uint8_out`, [batch, H, W, 3] bytes), labels [batch]. Every call asks for the same
 * form as the first. */
cnnb_status pipeline_next_batch(pipeline *p, int32_t batch, void *images, int uint8_out,
                                int32_t *labels);
/* [main-thread] Before the first batch: continues as if `examples` examples had been
 * taken (bad ones counted as taken): the stream moves on (stream_skip) and the next
 * example gets the augmentation seed of its place in the whole stream. *epoch: the
 * epoch it is in. Once per pipeline; CNNB_OK, or an error recorded on cfg->ctx. */
cnnb_status pipeline_skip(pipeline *p, int64_t examples, int64_t *epoch);
int64_t pipeline_skipped(const pipeline *p);
/* Stops and joins every thread. */
void pipeline_destroy(pipeline *p);

#endif
