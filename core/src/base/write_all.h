/* write_all.h — write(2) until every byte is out, so a caller sees one result for a
 * buffer: all of it written, or the errno of the call that stopped (a short write is
 * retried, and the retry names why the rest could not go: ENOSPC, EFBIG, EIO).
 * Host-internal. */
#ifndef CNNB_WRITE_ALL_H
#define CNNB_WRITE_ALL_H

#include <stddef.h>
#include <sys/types.h>

/* 0 when all `size` bytes were written; else -1 with errno set, and *written (when not
 * NULL) the bytes that did go out before the failure. EINTR is retried. */
int cnnb_write_all(int fd, const void *data, size_t size, size_t *written);

#endif
