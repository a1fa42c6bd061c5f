/* pipeline.c — reader, decoders and in-order batches (pipeline.h).
 *
 * The ring: slot k holds example k mod ring_slots. Its state moves
 *   EMPTY --reader--> READ --decoder--> DECODING --> DONE | FAILED --next_batch--> EMPTY
 * and three counters walk the stream in order: next_read (reader), next_decode
 * (decoders claim in order), next_take (next_batch). One mutex guards states and
 * counters; the heavy work (I/O, decoding, copying out) happens outside it, on a slot
 * that only its current owner touches. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_tally.h"
#include "prep_rng.h"

typedef enum slot_state { EMPTY, READ, DECODING, DONE, FAILED } slot_state;

typedef struct slot {
  slot_state state;
  stream_item item;
  void *image;      /* the decoded example: fp32 [3, H, W] or uint8 [H, W, 3] */
  char error[1500]; /* FAILED: where and why */
} slot;

struct pipeline {
  pipeline_config cfg;
  example_stream *stream;
  size_t image_values; /* 3 * H * W */
  int uint8_out;
  bool started;
  bool stream_moved; /* pipeline_skip ran */

  slot *slots;
  int64_t num_slots;
  int64_t next_read, next_decode, next_take;
  bool stop;
  bool reader_failed;
  bool reader_io; /* its failure was I/O or memory (stream_failed_io): CNNB_EIO */
  char reader_error[1100];

  pthread_mutex_t lock;
  pthread_cond_t changed;
  pthread_t reader;
  pthread_t *decoders;
  int32_t decoders_started;
  bool reader_started;
  _Atomic int64_t skipped;
  bad_tally tally; /* when nothing more can be read; framing losses (next_batch's thread) */
};

static slot *slot_of(pipeline *p, int64_t index) { return &p->slots[index % p->num_slots]; }

static void *read_examples(void *arg) {
  pipeline *p = arg;
  char err[1024];
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && slot_of(p, p->next_read)->state != EMPTY)
      pthread_cond_wait(&p->changed, &p->lock);
    if (p->stop) break;
    slot *s = slot_of(p, p->next_read);
    pthread_mutex_unlock(&p->lock);
    int rc = stream_next(p->stream, &s->item, err, sizeof err);
    pthread_mutex_lock(&p->lock);
    if (rc != 0) {
      p->reader_failed = true;
      p->reader_io = stream_failed_io(p->stream);
      snprintf(p->reader_error, sizeof p->reader_error, "%s", err);
      pthread_cond_broadcast(&p->changed);
      break;
    }
    s->state = READ;
    p->next_read++;
    pthread_cond_broadcast(&p->changed);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* Mixes the run's seed and an example's place in the stream into its own seed. */
static uint64_t example_seed(uint64_t seed, int64_t index) {
  prep_rng r = prep_rng_stream(seed, (uint64_t)index);
  return prep_rng_next(&r);
}

static void *decode_examples(void *arg) {
  pipeline *p = arg;
  preprocess_scratch *scratch = preprocess_scratch_create();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->next_decode >= p->next_read) pthread_cond_wait(&p->changed, &p->lock);
    if (p->stop) break;
    int64_t index = p->next_decode++;
    slot *s = slot_of(p, index);
    s->state = DECODING;
    pthread_mutex_unlock(&p->lock);
    const stream_item *item = &s->item;
    uint64_t seed = example_seed(p->cfg.seed, index);
    int rc;
    char why[1024];
    if (!scratch) {
      snprintf(why, sizeof why, "out of memory for the decoder's buffers");
      rc = -1;
    } else if (item->bad) {
      snprintf(why, sizeof why, "%s", item->why);
      rc = -1;
    } else if (p->uint8_out) {
      rc = preprocess_image_uint8(&p->cfg.preprocess, scratch, item->data, item->size, item->boxes,
                                  item->num_boxes, seed, s->image, why, sizeof why);
    } else {
      rc = preprocess_image(&p->cfg.preprocess, scratch, item->data, item->size, item->boxes,
                            item->num_boxes, seed, s->image, why, sizeof why);
    }
    if (rc != 0) snprintf(s->error, sizeof s->error, "%s: %s", item->origin, why);
    pthread_mutex_lock(&p->lock);
    s->state = rc == 0 ? DONE : FAILED;
    pthread_cond_broadcast(&p->changed);
  }
  pthread_mutex_unlock(&p->lock);
  preprocess_scratch_destroy(scratch);
  return NULL;
}

static cnnb_status start_threads(pipeline *p) {
  size_t bytes = p->image_values * (p->uint8_out ? 1 : sizeof(float));
  for (int64_t i = 0; i < p->num_slots; i++)
    if (!(p->slots[i].image = malloc(bytes)))
      return cnnb_error(p->cfg.ctx, CNNB_ENOMEM,
                        "imagenet: out of memory for %lld decoded images of %zu bytes",
                        (long long)p->num_slots, bytes);
  int rc = pthread_create(&p->reader, NULL, read_examples, p);
  if (rc != 0)
    return cnnb_error(p->cfg.ctx, CNNB_ENOMEM, "imagenet: cannot start the reader thread: %s",
                      strerror(rc));
  p->reader_started = true;
  for (int32_t i = 0; i < p->cfg.num_threads; i++) {
    rc = pthread_create(&p->decoders[i], NULL, decode_examples, p);
    if (rc != 0)
      return cnnb_error(p->cfg.ctx, CNNB_ENOMEM,
                        "imagenet: cannot start decoder thread %d of %d: %s", (int)i + 1,
                        (int)p->cfg.num_threads, strerror(rc));
    p->decoders_started++;
  }
  return CNNB_OK;
}

cnnb_status pipeline_create(const pipeline_config *cfg, pipeline **out) {
  *out = NULL;
  pipeline *p = calloc(1, sizeof *p);
  if (!p) return cnnb_error(cfg->ctx, CNNB_ENOMEM, "imagenet: out of memory");
  p->cfg = *cfg;
  p->image_values = (size_t)3 * (size_t)cfg->preprocess.height * (size_t)cfg->preprocess.width;
  p->num_slots = cfg->ring_slots > cfg->num_threads ? cfg->ring_slots : cfg->num_threads + 1;
  p->slots = calloc((size_t)p->num_slots, sizeof *p->slots);
  p->decoders = calloc((size_t)cfg->num_threads, sizeof *p->decoders);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->changed, NULL);
  /* Distinct examples of the split: a folder's images; a counted shard set's records,
   * and a unit per file for its lost framing; else whole files, when each is read whole
   * by one share (example_stream.c gives the same units). */
  const dataset_layout *layout = cfg->stream.layout;
  int64_t slots = 0, units = 0;
  bool file_units = false;
  if (layout->kind == LAYOUT_FOLDER) {
    slots = units = (int64_t)layout->folder.count;
  } else if (layout->file_records) {
    slots = layout->examples + (int64_t)layout->num_files;
    units = layout->examples + (int64_t)layout->damaged_files;
  } else if (layout->num_files >= (size_t)cfg->stream.num_shards) {
    slots = units = (int64_t)layout->num_files;
    file_units = true;
  }
  bool same_share = !cfg->stream.shuffle || cfg->stream.num_shards == 1;
  if (!p->slots || !p->decoders ||
      bad_tally_init(&p->tally, same_share, slots, units, file_units) != 0) {
    pipeline_destroy(p);
    return cnnb_error(cfg->ctx, CNNB_ENOMEM, "imagenet: out of memory");
  }
  char err[1024];
  if (stream_create(&p->cfg.stream, &p->stream, err, sizeof err) != 0) {
    pipeline_destroy(p);
    return cnnb_error(cfg->ctx, CNNB_EINVAL, "imagenet: %s", err);
  }
  *out = p;
  return CNNB_OK;
}

/* Takes the next finished example, in stream order: 1 with *s DONE, 0 when it failed
 * (counted; named the first few times), -1 when the reader stopped for good. */
static int take(pipeline *p, slot **out) {
  pthread_mutex_lock(&p->lock);
  slot *s = slot_of(p, p->next_take);
  while (!(p->next_take < p->next_read && (s->state == DONE || s->state == FAILED)) &&
         !(p->reader_failed && p->next_take >= p->next_read))
    pthread_cond_wait(&p->changed, &p->lock);
  int rc = p->next_take < p->next_read ? (s->state == DONE ? 1 : 0) : -1;
  pthread_mutex_unlock(&p->lock);
  *out = s;
  return rc;
}

static void give_back(pipeline *p, slot *s) {
  pthread_mutex_lock(&p->lock);
  s->state = EMPTY;
  p->next_take++;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
}

cnnb_status pipeline_next_batch(pipeline *p, int32_t batch, void *images, int uint8_out,
                                int32_t *labels) {
  if (!p->started) {
    p->started = true;
    p->uint8_out = uint8_out;
    cnnb_status st = start_threads(p);
    if (st != CNNB_OK) return st;
  } else if (p->uint8_out != uint8_out) {
    return cnnb_error(p->cfg.ctx, CNNB_EINTERNAL, "imagenet: batches asked as %s after %s",
                      uint8_out ? "uint8" : "fp32", p->uint8_out ? "uint8" : "fp32");
  }
  size_t image_bytes = p->image_values * (uint8_out ? 1 : sizeof(float));
  for (int32_t i = 0; i < batch;) {
    slot *s;
    int rc = take(p, &s);
    if (rc < 0)
      return cnnb_error(p->cfg.ctx, p->reader_io ? CNNB_EIO : CNNB_EDATA, "imagenet: %s",
                        p->reader_error);
    char why[256];
    const stream_item *item = &s->item;
    if (bad_tally_take(&p->tally, item->epoch, item->unit, rc == 0, item->lost_bytes,
                       item->lost_records, why, sizeof why) != 0) {
      cnnb_status st = cnnb_error(p->cfg.ctx, CNNB_EDATA,
                                  "imagenet: %s: %s: no image here can be read (the last: %s)",
                                  p->cfg.stream.layout->where, why,
                                  rc == 0 ? s->error : item->origin);
      give_back(p, s);
      return st;
    }
    if (rc == 0) {
      /* The slot goes back to the reader below: its message is read before that. */
      int64_t n = atomic_fetch_add(&p->skipped, 1) + 1;
      if (n <= p->cfg.max_named)
        cnnb_log(p->cfg.ctx, CNNB_LOG_WARN, "skipped %s%s", s->error,
                 n == p->cfg.max_named ? " (further bad examples are counted, not named)" : "");
      cnnb_status st = CNNB_OK;
      if (p->cfg.max_skipped >= 0 && n > p->cfg.max_skipped)
        st = cnnb_error(p->cfg.ctx, CNNB_EDATA,
                        "imagenet: %lld unreadable examples, more than --max_skipped_examples=%lld "
                        "allows; the last: %s",
                        (long long)n, (long long)p->cfg.max_skipped, s->error);
      give_back(p, s);
      if (st != CNNB_OK) return st;
      continue;
    }
    memcpy((uint8_t *)images + (size_t)i * image_bytes, s->image, image_bytes);
    labels[i] = s->item.label;
    give_back(p, s);
    i++;
  }
  return CNNB_OK;
}

cnnb_status pipeline_skip(pipeline *p, int64_t examples, int64_t *epoch) {
  if (p->started || p->stream_moved)
    return cnnb_error(p->cfg.ctx, CNNB_EINVAL,
                      "imagenet: the stream can be skipped only once, before its first batch");
  p->stream_moved = true;
  char err[1024];
  if (stream_skip(p->stream, examples, epoch, err, sizeof err) != 0)
    return cnnb_error(p->cfg.ctx, stream_failed_io(p->stream) ? CNNB_EIO : CNNB_EDATA,
                      "imagenet: continuing the stream after %lld examples: %s",
                      (long long)examples, err);
  /* No thread runs yet: the counters are the seeds' indices, and slot k % ring_slots is
   * as empty as any. */
  p->next_read = p->next_decode = p->next_take = examples;
  if (examples > 0) bad_tally_resumed(&p->tally);
  return CNNB_OK;
}

int64_t pipeline_skipped(const pipeline *p) { return atomic_load(&((pipeline *)p)->skipped); }

/* What lost framings cost, once at the end: the skipped count has one example for each,
 * though each stood for the rest of a file. */
static void report_lost_framing(const pipeline *p) {
  const bad_tally *t = &p->tally;
  if (t->framing_losses == 0) return;
  char records[160] = "";
  if (t->unknown_records == 0)
    snprintf(records, sizeof records, ", about %lld records", (long long)t->lost_records);
  else if (t->lost_records > 0)
    snprintf(records, sizeof records, ", about %lld records and an unknown number more",
             (long long)t->lost_records);
  cnnb_log(p->cfg.ctx, CNNB_LOG_WARN,
           "imagenet: shard %d of %d: %lld damaged file tails were met (a file's framing "
           "lost, so the rest of it unread, each time an epoch reaches it): %llu bytes not "
           "read%s, each tail counted as one skipped example",
           (int)p->cfg.stream.shard, (int)p->cfg.stream.num_shards, (long long)t->framing_losses,
           (unsigned long long)t->lost_bytes, records);
}

void pipeline_destroy(pipeline *p) {
  if (!p) return;
  report_lost_framing(p);
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
  if (p->reader_started) pthread_join(p->reader, NULL);
  for (int32_t i = 0; i < p->decoders_started; i++) pthread_join(p->decoders[i], NULL);
  for (int64_t i = 0; p->slots && i < p->num_slots; i++) {
    stream_item_free(&p->slots[i].item);
    free(p->slots[i].image);
  }
  stream_destroy(p->stream);
  bad_tally_free(&p->tally);
  free(p->slots);
  free(p->decoders);
  pthread_cond_destroy(&p->changed);
  pthread_mutex_destroy(&p->lock);
  free(p);
}
