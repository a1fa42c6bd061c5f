/* line_file.c — whole lines or nothing (line_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/line_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/output_file.h"
#include "base/write_all.h"

struct cnnb_line_file {
  int fd;
  off_t whole; /* the file's size after its last whole write */
  bool torn;
};

cnnb_line_file *cnnb_line_file_open(const char *path, bool append) {
  cnnb_line_file *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  /* O_CLOEXEC: not inherited by a plugin's child processes; a regular file only. */
  f->fd = cnnb_output_open(path, append);
  if (f->fd < 0 || (f->whole = lseek(f->fd, 0, SEEK_END)) < 0) {
    int e = errno;
    if (f->fd >= 0) close(f->fd);
    free(f);
    errno = e;
    return NULL;
  }
  return f;
}

int cnnb_line_file_write(cnnb_line_file *f, const char *text, size_t size) {
  size_t written = 0;
  if (cnnb_write_all(f->fd, text, size, &written) == 0) {
    f->whole += (off_t)size;
    return 0;
  }
  int e = errno;
  /* The part that went out is a torn line for every reader: cut it off. A full file
   * system still shrinks a file (it frees blocks), so this holds where it matters. */
  if (written > 0 && (ftruncate(f->fd, f->whole) != 0 || lseek(f->fd, f->whole, SEEK_SET) < 0))
    f->torn = true;
  return e ? e : EIO;
}

bool cnnb_line_file_torn(const cnnb_line_file *f) { return f && f->torn; }

int cnnb_line_file_close(cnnb_line_file *f) {
  if (!f) return 0;
  int rc = close(f->fd) == 0 ? 0 : errno;
  free(f);
  return rc;
}
