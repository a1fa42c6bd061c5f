/* flagfile.h — the contents of each --flagfile, read once per process and kept (core
 * private). cnnbench parses its command line twice (cli.c: a forgiving first pass for
 * --help, --plugin and --log_level, then the strict one), and a flagfile may be a pipe, a
 * process substitution, /dev/stdin or a FIFO: opened a second time, such a file is empty
 * or blocks forever. So both passes ask this cache, keyed by the argument as written, and
 * only the first ask opens the file; a refusal (too big, unreadable) is kept as well, so
 * the strict pass reports what the first one met without trying again.
 *
 * A flagfile is text of at most CNNB_FLAGFILE_MAX_BYTES: reading stops there, so an
 * endless file (/dev/zero, `yes`) is refused at once instead of filling memory. */
#ifndef CNNB_FLAGS_FLAGFILE_H
#define CNNB_FLAGS_FLAGFILE_H

#include <stddef.h>
#include <cnnb/cnnb.h>

enum {
  CNNB_FLAGFILE_MAX_BYTES = 1 << 20, /* 1 MiB: a hand-written or tuned file is a few KiB */
  CNNB_FLAGFILE_MAX_LINE = 1 << 14,  /* 16 KiB: the longest value tf users write is a
                                        schedule or a list of a few hundred characters */
};

typedef struct cnnb_flagfiles cnnb_flagfiles;

cnnb_flagfiles *cnnb_flagfiles_create(void); /* NULL when out of memory */
void cnnb_flagfiles_destroy(cnnb_flagfiles *files);

/* The contents of flagfile `path`: read on the first ask, the same bytes on every later
 * one. *text is NUL-terminated after *len bytes (it may hold NULs of its own: the parser
 * refuses them, naming the line) and lives as long as `files`. On failure: CNNB_EINVAL
 * with "--flagfile=PATH: why" in err, the same on every ask. */
cnnb_status cnnb_flagfiles_get(cnnb_flagfiles *files, const char *path, const char **text,
                               size_t *len, char *err, size_t err_size);

/* The first flagfile read that a second open would not read the same (a pipe, a FIFO, a
 * character device), or NULL when every one is a regular file: a process that restarts
 * itself with the same argv (--mkl) reads its flags again. */
const char *cnnb_flagfiles_unrepeatable(const cnnb_flagfiles *files);

#endif
