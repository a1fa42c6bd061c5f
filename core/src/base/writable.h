/* writable.h — whether a run will be able to write into a directory, asked before its
 * first step rather than learnt at its first save (or last: a read-only --train_dir used
 * to train the whole run and fail at the final checkpoint). Host-internal. */
#ifndef CNNB_WRITABLE_H
#define CNNB_WRITABLE_H

#include <cnnb/ctx.h>

/* Creates "<dir>/.cnnbench-write-test.<pid>" (O_EXCL: never an existing file), writes a
 * few bytes, fsyncs and closes it, and removes it, so a read-only mount, a directory
 * without write permission, a full disk that refuses the bytes and a file system that
 * fails fsync are all found. On failure: CNNB_EIO, the message naming `flag_name` (for
 * example "--train_dir"), the directory, the test file, the step that failed and errno's
 * text. */
cnnb_status cnnb_check_writable(cnnb_ctx *ctx, const char *flag_name, const char *dir);

#endif
