/* cnnb/datasource.h — what a datasource plugin provides: batches of images and labels.
 *
 * Threading: next_batch() is called from the host's input thread(s), never concurrently
 * on one instance unless the plugin sets `thread_safe`. Images are fp32, logical NCHW,
 * already normalized as the model expects (tf_cnn_benchmarks scales to [-1, 1]). */
#ifndef CNNB_DATASOURCE_H
#define CNNB_DATASOURCE_H

#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnb_datasource_config {
  uint32_t struct_size;
  int32_t batch_size;      /* per replica */
  int32_t channels, height, width;
  int32_t num_classes;
  int32_t rank, world_size;/* shard the data across ranks */
  int32_t training;        /* 1: training (augment, shuffle); 0: evaluation */
  uint64_t seed;
  const char *data_dir;    /* --data_dir, may be NULL for synthetic */
} cnnb_datasource_config;

typedef struct cnnb_datasource_vtable {
  uint32_t struct_size;
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg,
                        void **datasource);
  void (*destroy)(void *datasource);
  /* Fills images [batch, C, H, W] and labels [batch]. */
  cnnb_status (*next_batch)(void *datasource, float *images, int32_t *labels);
  /* Examples in one epoch, for schedules in epochs; 0 when unknown or infinite. */
  int64_t (*examples_per_epoch)(void *datasource);
} cnnb_datasource_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_datasource_config) == 56, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_datasource_vtable) == 40, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
