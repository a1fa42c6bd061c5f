/* example_stream.h — one shard's endless, deterministic sequence of encoded examples:
 * the split's files in a per-epoch order (the same on every shard), this shard's share
 * of them, and for training a shuffle buffer, epoch after epoch.
 *
 * TFRecord files are read `interleave` at a time, one record from each in turn, as tf.data's
 * parallel_interleave (the epoch's file order fills the slots; a file that ends gives its
 * slot to the next one).
 *
 * Sharding: with at least as many TFRecord files as shards, shard s reads files
 * s, s + n, ... (no file is read twice across shards, as tf.data's shard() on files);
 * with fewer files every shard reads every file and keeps records s, s + n, ... of the
 * epoch. Folders are random access: every epoch is one permutation of all images, and
 * shard s takes positions s, s + n, .... Either way the shards of one epoch are disjoint
 * and together cover the split.
 *
 * Runs on one thread (the reader). A bad record or file comes out as a bad item (see
 * stream_item) for the pipeline to count in order. */
#ifndef IMAGENET_EXAMPLE_STREAM_H
#define IMAGENET_EXAMPLE_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <cnnb/cnnb.h>
#include "image_box.h"
#include "layout.h"

typedef struct stream_item {
  uint8_t *data; /* the encoded image (owned, reused) */
  size_t size, capacity;
  int32_t label;
  image_box boxes[IMAGE_MAX_BOXES];
  int num_boxes;
  char origin[384]; /* "FILE" or "FILE, record at byte N": for messages */
  /* A bad example travels through the pipeline like a good one, so that it is counted
   * when its turn comes (in stream order, however far the reader runs ahead): bad is 1
   * and why says what is wrong with it. */
  int bad;
  char why[1024];
  int64_t epoch; /* of this shard's stream, counted from 0 */
  /* Which example of the split this is, the same in every epoch and on every shard, for
   * counting distinct unreadable ones: a folder's image index; a counted shard set's
   * record (its file's first record + its place in the file), or examples + file index
   * for a file's lost framing; the file's index for shards of a known size (not
   * counted). */
  int64_t unit;
  /* A lost framing (the rest of a file cannot be read): the bytes not read, and about how
   * many records they held, at the average size of the file's records before the damage
   * (-1 when there were none). 0 / 0 for any other item. */
  uint64_t lost_bytes;
  int64_t lost_records;
} stream_item;

void stream_item_free(stream_item *item);

typedef struct stream_config {
  const dataset_layout *layout;
  int32_t shard, num_shards;
  int shuffle;            /* training: shuffled file order and a shuffle buffer */
  int64_t shuffle_buffer; /* examples held for shuffling (TFRecord only; >= 1) */
  uint64_t seed;
  int32_t num_classes; /* labels must lie in [0, num_classes) */
  /* TFRecord files read at once, a record from each in turn (tf.data's parallel_interleave,
   * block length 1: tf's --datasets_parallel_interleave_cycle_length, 10 there); 0 or 1:
   * one file after another. */
  int32_t interleave;
  int cache;        /* 1: each file (TFRecord) or image (folder) kept in memory once read,
                       later epochs read from there (--datasets_use_caching) */
  int repeat_first; /* 1: the first readable example, then it again forever
                       (--datasets_repeat_cached_sample: input at memory speed) */
} stream_config;

typedef struct example_stream example_stream;

/* 0, or -1 with err (out of memory). The config's pointers must outlive the stream. */
int stream_create(const stream_config *cfg, example_stream **out, char *err, size_t err_size);
/* The next example into item. 0; or -1 with err on what cannot be skipped: an
 * unreadable file (I/O), a label outside the model's classes, or a whole epoch without a
 * single readable example. */
int stream_next(example_stream *stream, stream_item *item, char *err, size_t err_size);
/* Moves a fresh stream (no stream_next yet) on by `count` examples, as if stream_next had
 * been called that often, without decoding anything: whole epochs are counted (folders,
 * and record sharding, in one step; sharding by file sums this shard's files of each
 * epoch's order), the rest of the last one is walked reading only record headers, and
 * the shuffle buffer is replayed on positions, reading only the records it still holds.
 * Records are counted by their headers; a record whose data fails its CRC counts as one
 * item, as reading it does. *epoch: the
 * epoch of the next example. 0; or -1 with err as stream_next's (a shard that cannot be
 * read; a whole epoch without examples). */
int stream_skip(example_stream *stream, int64_t count, int64_t *epoch, char *err, size_t err_size);
/* Whether the last -1 of stream_next or stream_skip was the machine's failure rather than
 * the data's: a file that cannot be opened or read (an I/O error, a file gone since the
 * listing), or out of memory or file descriptors. The datasource then fails with
 * CNNB_EIO (exit status 1), not CNNB_EDATA (2): the data may be fine. */
int stream_failed_io(const example_stream *stream);
void stream_destroy(example_stream *stream);

#endif
