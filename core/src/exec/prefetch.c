/* prefetch.c — a bounded producer/consumer queue of batches filled by one thread.
 *
 * Slots form a ring of depth + 1: the producer fills up to `depth` ahead while the
 * consumer holds one (the batch the model is using). The consumer gives its slot back on
 * its next call, so no batch is copied. A pipeline carries fp32 batches (next_batch) or
 * uint8 ones (the datasource's CNNB_EXT_DATASOURCE_UINT8), fixed at creation. Depth 0 has
 * no thread and one slot: each take reads its batch there and then, on the caller's
 * thread (tf's --nodatasets_use_prefetch). */
#define _POSIX_C_SOURCE 200809L /* pthread */
#include "exec/prefetch.h"

#include "base/crash_guard.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
  void *images;
  int32_t *labels;
} slot;

struct cnnb_prefetch {
  const cnnb_datasource_vtable *vt;   /* fp32 batches: next_batch */
  const cnnb_datasource_uint8 *uint8; /* uint8 batches: next_batch_uint8 (vt NULL) */
  void *datasource;
  cnnb_ctx *ctx;
  const char *crash_label;
  int32_t num_slots;
  slot *slots;
  pthread_t thread;
  bool thread_started;

  pthread_mutex_t lock;
  pthread_cond_t changed;
  int32_t head;   /* next slot the consumer takes */
  int32_t filled; /* slots ready for the consumer */
  bool holding;   /* the consumer holds slots[head - 1] */
  bool stop;
  cnnb_status failure; /* the producer's error, after the batches before it */
};

static void *produce(void *arg) {
  cnnb_prefetch *p = arg;
  /* This thread only ever runs the datasource's code. */
  cnnb_crash_enter(p->crash_label, p->uint8 ? "next_batch_uint8" : "next_batch", NULL);
  pthread_mutex_lock(&p->lock);
  for (;;) {
    /* Free slots: all but those filled and the one the consumer holds. */
    while (!p->stop && p->filled + (p->holding ? 1 : 0) >= p->num_slots)
      pthread_cond_wait(&p->changed, &p->lock);
    if (p->stop) break;
    int32_t index = (p->head + p->filled) % p->num_slots;
    pthread_mutex_unlock(&p->lock);
    cnnb_status st = p->uint8 ? p->uint8->next_batch_uint8(p->datasource, p->slots[index].images,
                                                           p->slots[index].labels)
                              : p->vt->next_batch(p->datasource, p->slots[index].images,
                                                  p->slots[index].labels);
    pthread_mutex_lock(&p->lock);
    if (st != CNNB_OK) {
      p->failure = st;
      pthread_cond_broadcast(&p->changed);
      break;
    }
    p->filled++;
    pthread_cond_broadcast(&p->changed);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static cnnb_status create(const cnnb_datasource_vtable *vt, const cnnb_datasource_uint8 *uint8,
                          void *datasource, cnnb_ctx *ctx, const char *crash_label,
                          size_t image_bytes, int32_t batch, int32_t depth, cnnb_prefetch **out) {
  *out = NULL;
  if (depth < 0) depth = 0;
  cnnb_prefetch *p = calloc(1, sizeof *p);
  if (!p) return cnnb_error(ctx, CNNB_ENOMEM, "input pipeline: out of memory");
  p->vt = vt;
  p->uint8 = uint8;
  p->datasource = datasource;
  p->ctx = ctx;
  p->crash_label = crash_label;
  p->num_slots = depth + 1;
  p->slots = calloc((size_t)p->num_slots, sizeof *p->slots);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->changed, NULL);
  bool ok = p->slots != NULL;
  for (int32_t i = 0; ok && i < p->num_slots; i++) {
    p->slots[i].images = malloc(image_bytes ? image_bytes : 1);
    p->slots[i].labels = malloc((size_t)batch * sizeof(int32_t));
    ok = p->slots[i].images && p->slots[i].labels;
  }
  if (!ok) {
    cnnb_prefetch_destroy(p);
    return cnnb_error(ctx, CNNB_ENOMEM, "input pipeline: out of memory for %d batches of %zu bytes",
                      depth + 1, image_bytes);
  }
  if (depth == 0) { /* read on demand, by cnnb_prefetch_take */
    *out = p;
    return CNNB_OK;
  }
  int rc = pthread_create(&p->thread, NULL, produce, p);
  if (rc != 0) {
    cnnb_prefetch_destroy(p);
    return cnnb_error(ctx, CNNB_ENOMEM,
                      "input pipeline: cannot start its thread: %s (out of memory for its "
                      "stack, or at the limit of threads)",
                      strerror(rc));
  }
  p->thread_started = true;
  *out = p;
  return CNNB_OK;
}

cnnb_status cnnb_prefetch_create(const cnnb_datasource_vtable *vt, void *datasource, cnnb_ctx *ctx,
                                 const char *crash_label, size_t image_floats, int32_t batch,
                                 int32_t depth, cnnb_prefetch **out) {
  return create(vt, NULL, datasource, ctx, crash_label, image_floats * sizeof(float), batch, depth,
                out);
}

cnnb_status cnnb_prefetch_create_uint8(const cnnb_datasource_uint8 *ext, void *datasource,
                                       cnnb_ctx *ctx, const char *crash_label, size_t image_bytes,
                                       int32_t batch, int32_t depth, cnnb_prefetch **out) {
  return create(NULL, ext, datasource, ctx, crash_label, image_bytes, batch, depth, out);
}

cnnb_status cnnb_prefetch_next(cnnb_prefetch *p, const float **images, const int32_t **labels) {
  if (p->uint8)
    return cnnb_error(p->ctx, CNNB_EINTERNAL,
                      "input pipeline: its batches are uint8, read as fp32 (a host bug)");
  cnnb_batch batch;
  cnnb_status st = cnnb_prefetch_take(p, &batch);
  if (st == CNNB_OK) {
    *images = batch.images;
    *labels = batch.labels;
  }
  return st;
}

/* Depth 0: the batch read now, into the one slot (the caller has finished with it). */
static cnnb_status take_now(cnnb_prefetch *p, cnnb_batch *batch) {
  if (p->failure != CNNB_OK) return p->failure;
  slot *s = &p->slots[0];
  cnnb_status st;
  CNNB_GUARDED(p->crash_label, p->uint8 ? "next_batch_uint8" : "next_batch", NULL,
               st = p->uint8 ? p->uint8->next_batch_uint8(p->datasource, s->images, s->labels)
                             : p->vt->next_batch(p->datasource, s->images, s->labels));
  if (st != CNNB_OK) return p->failure = st;
  *batch = (cnnb_batch){.images = p->uint8 ? NULL : s->images,
                        .images_uint8 = p->uint8 ? s->images : NULL,
                        .labels = s->labels};
  return CNNB_OK;
}

cnnb_status cnnb_prefetch_take(cnnb_prefetch *p, cnnb_batch *batch) {
  if (!p->thread_started) return take_now(p, batch);
  pthread_mutex_lock(&p->lock);
  if (p->holding) { /* give back the batch the model has finished with */
    p->holding = false;
    pthread_cond_broadcast(&p->changed);
  }
  while (p->filled == 0 && p->failure == CNNB_OK) pthread_cond_wait(&p->changed, &p->lock);
  cnnb_status st = CNNB_OK;
  if (p->filled == 0) {
    st = p->failure;
  } else {
    const slot *taken = &p->slots[p->head];
    *batch = (cnnb_batch){.images = p->uint8 ? NULL : taken->images,
                          .images_uint8 = p->uint8 ? taken->images : NULL,
                          .labels = taken->labels};
    p->head = (p->head + 1) % p->num_slots;
    p->filled--;
    p->holding = true;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

cnnb_status cnnb_prefetch_drain(cnnb_prefetch *p) {
  if (!p->thread_started) return p->failure; /* nothing is read ahead */
  pthread_mutex_lock(&p->lock);
  if (p->holding) {
    p->holding = false;
    pthread_cond_broadcast(&p->changed);
  }
  while (p->filled < p->num_slots && p->failure == CNNB_OK)
    pthread_cond_wait(&p->changed, &p->lock);
  cnnb_status st = p->failure;
  p->head = (p->head + p->filled) % p->num_slots;
  p->filled = 0;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
  return st;
}

void cnnb_prefetch_destroy(cnnb_prefetch *p) {
  if (!p) return;
  if (p->thread_started) {
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
  }
  for (int32_t i = 0; p->slots && i < p->num_slots; i++) {
    free(p->slots[i].images);
    free(p->slots[i].labels);
  }
  free(p->slots);
  pthread_cond_destroy(&p->changed);
  pthread_mutex_destroy(&p->lock);
  free(p);
}
