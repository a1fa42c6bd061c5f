/* prefetch.h — the input pipeline: a thread per datasource instance that reads batches
 * ahead of the model into a bounded queue, so decoding and augmentation overlap compute
 * (docs/architecture.md, "One step"). Host-internal. */
#ifndef CNNB_PREFETCH_H
#define CNNB_PREFETCH_H

#include <cnnb/datasource.h>

typedef struct cnnb_prefetch cnnb_prefetch;

/* One batch as the pipeline hands it over: exactly one of the image pointers is set,
 * by how the pipeline was created. */
typedef struct cnnb_batch {
  const float *images;         /* fp32 [N, C, H, W], normalized (next_batch) */
  const uint8_t *images_uint8; /* uint8 [N, H, W, C], for the device to normalize */
  const int32_t *labels;       /* [N] */
} cnnb_batch;

/* Starts a thread calling vt->next_batch(datasource, ...) into `depth` batches of
 * `image_floats` floats and `batch` labels (depth 0: no thread; each take reads its batch
 * on the caller's thread). `ctx` is the datasource's (its message is
 * read when a batch fails); `crash_label` names the plugin if next_batch crashes the
 * process (crash_guard.h; kept, not copied; may be NULL). */
cnnb_status cnnb_prefetch_create(const cnnb_datasource_vtable *vt, void *datasource, cnnb_ctx *ctx,
                                 const char *crash_label, size_t image_floats, int32_t batch,
                                 int32_t depth, cnnb_prefetch **out);
/* The same with uint8 batches: the thread calls ext->next_batch_uint8 into batches of
 * `image_bytes` bytes (CNNB_EXT_DATASOURCE_UINT8). */
cnnb_status cnnb_prefetch_create_uint8(const cnnb_datasource_uint8 *ext, void *datasource,
                                       cnnb_ctx *ctx, const char *crash_label, size_t image_bytes,
                                       int32_t batch, int32_t depth, cnnb_prefetch **out);
/* The next batch, waiting for it if the thread is behind. Its pointers stay valid until
 * the next call. A datasource failure is returned here (once the batches read before it
 * are used), with its message in `ctx`. */
cnnb_status cnnb_prefetch_take(cnnb_prefetch *p, cnnb_batch *batch);
/* cnnb_prefetch_take for a pipeline of fp32 batches (CNNB_EINTERNAL on a uint8 one). */
cnnb_status cnnb_prefetch_next(cnnb_prefetch *p, const float **images, const int32_t **labels);
/* Waits until the thread has filled every slot (or failed), then throws those batches
 * away, so that the next cnnb_prefetch_next waits for a batch read from then on:
 * --input_only times the pipeline, not batches queued during its warm-up. Returns the
 * datasource's failure, if it failed. */
cnnb_status cnnb_prefetch_drain(cnnb_prefetch *p);
/* Stops the thread (after the batch it is reading) and frees the queue. NULL is fine. */
void cnnb_prefetch_destroy(cnnb_prefetch *p);

#endif
