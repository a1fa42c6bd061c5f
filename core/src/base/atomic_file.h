/* atomic_file.h — replacing a file so that a crash at any moment (kill -9, power loss)
 * leaves either the old file or the whole new one, never a mix or a torn prefix: the
 * bytes go to "<path>.tmp.<pid>" in the same directory (rename is atomic only within
 * one file system), are fsync'ed, the file is renamed over `path`, and the directory is
 * fsync'ed so the rename itself is durable. Checkpoints (safetensors.c) and their index
 * (checkpoint_dir.c) are written this way. Host-internal. */
#ifndef CNNB_ATOMIC_FILE_H
#define CNNB_ATOMIC_FILE_H

#include <stddef.h>
#include <cnnb/ctx.h>

/* One piece of the file's contents; the pieces are written back to back. */
typedef struct cnnb_atomic_part {
  const void *data;
  size_t size;
} cnnb_atomic_part;

/* Writes the parts to `path` atomically (above). On failure the temporary file is
 * removed, `path` is untouched, and the error (CNNB_EIO) names the path, the step that
 * failed (open, write, fsync, rename, ...) and errno's text. */
cnnb_status cnnb_atomic_write(cnnb_ctx *ctx, const char *path, const cnnb_atomic_part *parts,
                              size_t num_parts);

#endif
