/* output_file.c — regular files only, opened without waiting (output_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cnnb_output_open(const char *path, int append) {
  /* O_NONBLOCK: a FIFO without a reader fails the open (ENXIO) instead of blocking it;
   * one with a reader opens and is refused below with the rest. */
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : 0);
  int fd = open(path, flags, 0666);
  if (fd < 0) {
    int e = errno;
    struct stat st;
    /* Name the real reason: the kernel's ENXIO ("No such device or address") for a FIFO
     * says nothing useful. */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
      e = CNNB_OUTPUT_ENOTREG;
    errno = e;
    return -1;
  }
  struct stat st;
  int e = 0;
  if (fstat(fd, &st) != 0) e = errno;
  else if (!S_ISREG(st.st_mode)) e = CNNB_OUTPUT_ENOTREG;
  /* Emptied only once known to be a regular file: O_TRUNC in the open would act first. */
  else if (!append && ftruncate(fd, 0) != 0) e = errno;
  else if (fcntl(fd, F_SETFL, flags & (O_APPEND)) != 0) e = errno;
  if (e) {
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

FILE *cnnb_output_fopen(const char *path) {
  int fd = cnnb_output_open(path, 0);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

const char *cnnb_output_strerror(int err) {
  if (err == CNNB_OUTPUT_ENOTREG)
    return "it is not a regular file (a FIFO, a device or a socket): cnnbench writes its "
           "output only to a regular file or a new one";
  return strerror(err);
}
