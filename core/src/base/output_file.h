/* output_file.h — opening a file a run writes because a flag named it (--trace_file,
 * --graph_file, the --benchmark_log_dir logs): only a regular file or a new one, as
 * --train_dir takes only a directory. A FIFO would block the open until some reader came
 * (the run hung in its setup, before anything could say why); a device such as /dev/full
 * takes the open and fails the run's last write, after the whole run. So the open never
 * waits (O_NONBLOCK, cleared once open), and what it opened is refused unless it is a
 * regular file. Host-internal. */
#ifndef CNNB_OUTPUT_FILE_H
#define CNNB_OUTPUT_FILE_H

#include <stdio.h>

/* errno of an open refused because the path is not a regular file: outside the
 * kernel's range, so cnnb_output_strerror can name it. */
enum { CNNB_OUTPUT_ENOTREG = 0x10000 };

/* Opens `path` for writing, created (0666 less umask) when missing: emptied first
 * (`append` false) or written after what it holds. The descriptor (O_CLOEXEC), or -1
 * with errno set: CNNB_OUTPUT_ENOTREG for a path that is not a regular file. */
int cnnb_output_open(const char *path, int append);

/* The same, as a stdio stream opened "w". */
FILE *cnnb_output_fopen(const char *path);

/* strerror, and for CNNB_OUTPUT_ENOTREG a sentence saying what is refused. */
const char *cnnb_output_strerror(int err);

#endif
