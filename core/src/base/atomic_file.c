/* atomic_file.c — write to a temporary file, fsync, rename, fsync the directory
 * (atomic_file.h). Plain write(2) on a file descriptor rather than stdio: the parts are
 * already large buffers (a checkpoint's tensors), so a stdio buffer would only add a copy,
 * and every call's errno is then the one that failed. */
#define _POSIX_C_SOURCE 200809L
#include "base/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/write_all.h"

/* fsync of the directory holding `path`, so the rename into it survives a power loss. */
static int sync_dir_of(const char *path, char *dir, size_t dir_size) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, dir_size, ".");
  else if (slash == path) snprintf(dir, dir_size, "/");
  else snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc;
}

cnnb_status cnnb_atomic_write(cnnb_ctx *ctx, const char *path, const cnnb_atomic_part *parts,
                              size_t num_parts) {
  size_t tmp_size = strlen(path) + 32;
  char *tmp = malloc(tmp_size);
  if (!tmp) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
  snprintf(tmp, tmp_size, "%s.tmp.%ld", path, (long)getpid());

  const char *step = "creating";
  int saved_errno = 0;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) goto fail;
  step = "writing";
  for (size_t i = 0; i < num_parts; i++)
    if (parts[i].size && cnnb_write_all(fd, parts[i].data, parts[i].size, NULL) != 0) goto fail;
  /* The data must be on disk before the rename makes it the file's contents: without
   * this a crash after the rename can leave `path` naming a file of zeros or holes. */
  step = "fsync of";
  if (fsync(fd) != 0) goto fail;
  step = "closing";
  int rc = close(fd);
  fd = -1;
  if (rc != 0) goto fail;
  step = "renaming";
  if (rename(tmp, path) != 0) goto fail;
  free(tmp);
  /* The new file is in place; what remains is its durability across a power loss. */
  char dir[4096];
  if (sync_dir_of(path, dir, sizeof dir) != 0)
    return cnnb_error(ctx, CNNB_EIO, "%s: fsync of its directory %s failed: %s", path, dir,
                      strerror(errno));
  return CNNB_OK;

fail:
  saved_errno = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  cnnb_status st = cnnb_error(ctx, CNNB_EIO, "%s: %s the temporary file %s failed: %s", path, step,
                              tmp, strerror(saved_errno));
  free(tmp);
  return st;
}
