/* checkpoint_dir.h — the checkpoints of one --train_dir: file names, the index naming the
 * latest, how many to keep, and which one a run resumes from. Host-internal.
 *
 * Layout (TensorFlow's "checkpoint" file, as JSON):
 *   DIR/model.ckpt-<global step, 10 digits>.safetensors   one per save
 *   DIR/checkpoint    {"latest": "model.ckpt-0000000100.safetensors",
 *                      "all": ["model.ckpt-...", ...]}    oldest first, written atomically
 *                                                         after the checkpoint itself
 * Saving writes the checkpoint (safetensors.h: atomic), then the index, then deletes the
 * files that fell out of the newest max_keep. So a crash leaves the previous index valid
 * (naming files that exist) or the new one.
 *
 * Finding the one to resume from: the index's latest if it opens and checks; else, with
 * a warning naming the file and what is wrong, the next newest of the index, then any
 * model.ckpt-*.safetensors in the directory (newest step first: an index lost or torn
 * still resumes). A missing or empty directory has none (not an error). */
#ifndef CNNB_CHECKPOINT_DIR_H
#define CNNB_CHECKPOINT_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "store/safetensors.h"

#define CNNB_CHECKPOINT_INDEX "checkpoint"

/* Creates dir (and missing parents) when needed; CNNB_EIO naming it when it cannot. Also
 * removes the temporary files ("<name>.tmp.<pid>") that saves killed mid-write left, when
 * their process is gone (each can be as big as a checkpoint). Call it once, before the
 * first save. */
cnnb_status cnnb_checkpoint_dir_prepare(cnnb_ctx *ctx, const char *dir);

/* Saves one checkpoint of global step `step` (safetensors_write), updates the index and
 * keeps the newest max_keep (>= 1). *path_out (may be NULL) receives the file's path,
 * malloc'ed. */
cnnb_status cnnb_checkpoint_dir_save(cnnb_ctx *ctx, const char *dir, int64_t step, int32_t max_keep,
                                     const cnnb_st_tensor *tensors, size_t num_tensors,
                                     const cnnb_st_meta *meta, size_t num_meta, char **path_out);

/* The newest valid checkpoint (above): *out opened, *path_out its path (malloc'ed), or
 * both NULL when dir holds none. `check` (may be NULL) is asked about each candidate after
 * its file checks out (the model's own tests: its name, its tensors' shapes); a candidate
 * it refuses (non-OK, message in ctx) is not skipped but refused: the error is returned,
 * since an older checkpoint of the wrong model is no better. A candidate whose file is
 * torn or corrupt is skipped with a warning. */
cnnb_status cnnb_checkpoint_dir_latest(cnnb_ctx *ctx, const char *dir,
                                       cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                            const cnnb_safetensors *f,
                                                            const char *path),
                                       void *user, cnnb_safetensors **out, char **path_out);

/* "model.ckpt-0000000100.safetensors" for step 100 into buf. */
void cnnb_checkpoint_file_name(int64_t step, char *buf, size_t size);

#endif
