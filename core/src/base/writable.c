/* writable.c — a test file created, synced and removed (writable.h). */
#define _POSIX_C_SOURCE 200809L
#include "base/writable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cnnb_status cnnb_check_writable(cnnb_ctx *ctx, const char *flag_name, const char *dir) {
  size_t size = strlen(dir) + 64;
  char *path = malloc(size);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "%s=%s: out of memory", flag_name, dir);
  snprintf(path, size, "%s/.cnnbench-write-test.%ld", dir, (long)getpid());
  static const char bytes[] = "cnnbench checks that it can write here\n";
  const char *step = "creating";
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  int err = 0;
  if (fd < 0) goto fail;
  step = "writing";
  ssize_t n = write(fd, bytes, sizeof bytes - 1);
  if (n != (ssize_t)(sizeof bytes - 1)) {
    if (n >= 0) errno = ENOSPC; /* a short write on a regular file: no room */
    goto fail;
  }
  step = "fsync of";
  if (fsync(fd) != 0) goto fail;
  step = "closing";
  int rc = close(fd);
  fd = -1;
  if (rc != 0) goto fail;
  step = "removing";
  if (unlink(path) != 0) goto fail;
  free(path);
  return CNNB_OK;
fail:
  err = errno;
  if (fd >= 0) close(fd);
  if (strcmp(step, "creating") != 0 && strcmp(step, "removing") != 0) unlink(path);
  cnnb_status st = cnnb_error(ctx, CNNB_EIO,
                              "%s=%s: cannot write there: %s the test file %s failed: %s",
                              flag_name, dir, step, path, strerror(err));
  free(path);
  return st;
}
