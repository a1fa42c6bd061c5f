/* line_file.h — a file of whole lines, for the logs a reader may open at any moment and
 * a full disk may stop (--benchmark_log_dir's files): each write is one buffer of whole
 * lines, formatted by the caller and sent by one write(2) loop (write_all.h), and a
 * buffer the file system took only part of (ENOSPC, EFBIG, EIO) is cut off again with
 * ftruncate, so the file ends at the end of its last whole line. Not atomic_file.h: a
 * log grows in place, line by line, and is never replaced whole. Host-internal. */
#ifndef CNNB_LINE_FILE_H
#define CNNB_LINE_FILE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cnnb_line_file cnnb_line_file;

/* Opens `path` for writing, created when missing: emptied first, or (`append`) written
 * after what it holds. NULL with errno set when it cannot be opened (a path that is no
 * regular file is refused: base/output_file.h; cnnb_output_strerror names errno). */
cnnb_line_file *cnnb_line_file_open(const char *path, bool append);
/* Writes `size` bytes of whole lines (each ending in '\n'). 0 when all went out; else the
 * errno of the write that stopped, and the file is cut back to where it ended before
 * this call, so no part of these lines stays (should that ftruncate fail too, the file
 * may end in a torn line: cnnb_line_file_torn says so). */
int cnnb_line_file_write(cnnb_line_file *f, const char *text, size_t size);
/* Whether a failed write left part of a line that could not be cut off. */
bool cnnb_line_file_torn(const cnnb_line_file *f);
/* Closes and frees the file (NULL: nothing). 0, or close's errno. */
int cnnb_line_file_close(cnnb_line_file *f);

#endif
