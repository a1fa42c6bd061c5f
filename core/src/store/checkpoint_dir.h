/* checkpoint_dir.h — the checkpoints of one --train_dir: file names, the index naming the
 * latest, how many to keep, and which one a run resumes from. Host-internal.
 *
 * Layout (TensorFlow's "checkpoint" file, as JSON):
 *   DIR/model.ckpt-<global step, 10 digits>.safetensors   one per save
 *   DIR/checkpoint    {"latest": "model.ckpt-0000000100.safetensors",
 *                      "all": ["model.ckpt-...", ...]}    oldest first, written atomically
 *                                                         after the checkpoint itself
 * Saving moves aside a file already under the new name that the index does not list
 * (never saving over it), writes the checkpoint (safetensors.h: atomic), reads it back,
 * then writes the index, then deletes the files that fell out of the newest max_keep. So a
 * crash leaves the previous index valid (naming files that exist) or the new one. Only a
 * file the index lists, older than the checkpoint just saved and read back, is deleted,
 * and never one that does not read back whole itself: files the index does not list are
 * never deleted.
 *
 * Finding the one to resume from: the newest file (by step) that reads back whole, in the
 * index or not (a save whose index update failed is newer than the index's latest). Files
 * that do not read back whole are skipped, each with its reason; what to do when none
 * does is the caller's (a run refuses to start over them). A missing or empty directory
 * has none (not an error). When the index disagrees with the files, the run's rank 0
 * rebuilds it (cnnb_checkpoint_dir_reindex) before its first save. */
#ifndef CNNB_CHECKPOINT_DIR_H
#define CNNB_CHECKPOINT_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "store/safetensors.h"

#define CNNB_CHECKPOINT_INDEX "checkpoint"

/* Creates dir (and missing parents) when needed; CNNB_EIO naming it when it cannot. */
cnnb_status cnnb_checkpoint_dir_make(cnnb_ctx *ctx, const char *dir);
/* Removes the temporary files ("<name>.tmp.<pid>") that saves killed mid-write left, when
 * their process is gone (each can be as big as a checkpoint). Only the directory's one
 * writer may (base/dir_lock.h): another host's live pid looks gone from here. */
void cnnb_checkpoint_dir_tidy(cnnb_ctx *ctx, const char *dir);
/* make, then tidy: for tools that are the directory's only writer. */
cnnb_status cnnb_checkpoint_dir_prepare(cnnb_ctx *ctx, const char *dir);

/* Saves one checkpoint of global step `step` (safetensors_write), updates the index and
 * keeps the newest max_keep (>= 1). *path_out (may be NULL) receives the file's path,
 * malloc'ed. */
cnnb_status cnnb_checkpoint_dir_save(cnnb_ctx *ctx, const char *dir, int64_t step, int32_t max_keep,
                                     const cnnb_st_tensor *tensors, size_t num_tensors,
                                     const cnnb_st_meta *meta, size_t num_meta, char **path_out);

/* What dir holds: every checkpoint file, whether it reads back whole (and why not), the
 * index, and the newest file that reads back whole, opened. `check` (may be NULL) is asked
 * about that candidate once its file opens (the model's own tests: its name, its
 * tensors' shapes); a candidate it refuses (non-OK, message in ctx) is not skipped but
 * refused: the error is returned, since an older checkpoint of the wrong model is no
 * better. Errors otherwise only for a directory that cannot be listed, or no memory. */
typedef struct cnnb_checkpoint_found cnnb_checkpoint_found;
cnnb_status cnnb_checkpoint_dir_find(cnnb_ctx *ctx, const char *dir,
                                     cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                          const cnnb_safetensors *f,
                                                          const char *path),
                                     void *user, cnnb_checkpoint_found **out);
/* The newest checkpoint that reads back whole; NULL: none. */
const char *cnnb_checkpoint_found_path(const cnnb_checkpoint_found *f);
/* Hands over the file and its path (both NULL: none); the found keeps neither. */
void cnnb_checkpoint_found_take(cnnb_checkpoint_found *f, cnnb_safetensors **file, char **path);
/* How many checkpoint files dir holds that do not read back whole; the k-th's reason
 * (naming the file; NULL past the last), *step (may be NULL) its step. */
size_t cnnb_checkpoint_found_unreadable(const cnnb_checkpoint_found *f);
const char *cnnb_checkpoint_found_why(const cnnb_checkpoint_found *f, size_t k, int64_t *step);
/* A warning for each of them: skipped (newer than the one found) or older. */
void cnnb_checkpoint_found_warn(cnnb_ctx *ctx, const cnnb_checkpoint_found *f);
void cnnb_checkpoint_found_free(cnnb_checkpoint_found *f);

/* The largest step among dir's checkpoint file names, without opening any (the cheap
 * look --eval_interval_secs polls with; whether the file reads back whole is the run's to
 * find); -1: none, or dir cannot be listed. */
int64_t cnnb_checkpoint_dir_newest_step(const char *dir);

/* Rewrites dir's index when it disagrees with the files `f` found: it lists its own
 * entries that read back whole, and the files newer than all it listed (saves whose index
 * update failed), oldest first; entries that are gone or do not read back whole leave it
 * (the files stay). A line says what changed. Files it never listed stay out of it, so
 * they are never deleted. Only the directory's writer calls it, before its first save. */
cnnb_status cnnb_checkpoint_dir_reindex(cnnb_ctx *ctx, const char *dir,
                                        const cnnb_checkpoint_found *f);

/* For tools: find, a warning for each file that does not read back whole (and one when
 * none does), and the newest that does: *out opened, *path_out its path (malloc'ed), or
 * both NULL. */
cnnb_status cnnb_checkpoint_dir_latest(cnnb_ctx *ctx, const char *dir,
                                       cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                            const cnnb_safetensors *f,
                                                            const char *path),
                                       void *user, cnnb_safetensors **out, char **path_out);

/* "model.ckpt-0000000100.safetensors" for step 100 into buf. */
void cnnb_checkpoint_file_name(int64_t step, char *buf, size_t size);

#endif
