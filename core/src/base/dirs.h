/* dirs.h — making an output directory and its missing parents (mkdir -p), for everything
 * a run writes into a directory it is given: checkpoints, the benchmark log, TensorBoard
 * event files. One place, so each refusal reads the same way. Host-internal. */
#ifndef CNNB_DIRS_H
#define CNNB_DIRS_H

#include <cnnb/ctx.h>

/* Creates every missing component of `dir`, in order, and checks each is a directory.
 * `label` opens each message: "--benchmark_log_dir=/x/y" gives "--benchmark_log_dir=/x/y:
 * cannot create directory /x: Permission denied" or "...: /x is not a directory"
 * (CNNB_EIO); an empty `dir` is CNNB_EINVAL ("<label>: the directory is empty"). */
cnnb_status cnnb_make_dirs(cnnb_ctx *ctx, const char *label, const char *dir);

#endif
