/* write_all.c — write(2) in a loop (write_all.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/write_all.h"

#include <errno.h>
#include <unistd.h>

/* write(2) moves at most ~2 GiB per call on Linux; chunks keep each call well below. */
#define CHUNK ((size_t)1 << 28)

int cnnb_write_all(int fd, const void *data, size_t size, size_t *written) {
  const unsigned char *p = data;
  size_t done = 0;
  int rc = 0;
  while (done < size) {
    size_t left = size - done;
    ssize_t n = write(fd, p + done, left < CHUNK ? left : CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO; /* a regular file never does this; do not loop forever */
      rc = -1;
      break;
    }
    done += (size_t)n;
  }
  if (written) *written = done;
  return rc;
}
