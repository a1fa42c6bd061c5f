/* dir_lock.c — flock on a lock file that names its holder (dir_lock.h). */
#define _DEFAULT_SOURCE /* flock, gethostname */
#include "base/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct cnnb_dir_lock {
  int fd;
  char *path;
};

/* Tries to open and lock a path that a releasing holder may remove between our open and
 * our flock: the lock must be on the file that is at `path` now, so a lock on a removed
 * file is dropped and taken again. */
enum { MAX_ATTEMPTS = 8 };

/* "pid 123 on host h" from the file's "pid=123 host=h", or the text as it is. */
static void describe_holder(const char *text, char *buf, size_t size) {
  long pid = 0;
  char host[256] = "";
  if (sscanf(text, "pid=%ld host=%255s", &pid, host) == 2 && pid > 0)
    snprintf(buf, size, "pid %ld on host %s", pid, host);
  else if (*text) snprintf(buf, size, "a process whose lock file reads '%.100s'", text);
  else snprintf(buf, size, "a process that has not written its pid yet");
}

/* The lock file's text (its first line), into buf. */
static void read_holder(int fd, char *buf, size_t size) {
  ssize_t n = pread(fd, buf, size - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
}

cnnb_status cnnb_dir_lock_take(cnnb_ctx *ctx, const char *flag_name, const char *dir,
                               cnnb_dir_lock **out) {
  *out = NULL;
  size_t size = strlen(dir) + sizeof CNNB_DIR_LOCK_FILE + 2;
  char *path = malloc(size);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "%s=%s: out of memory", flag_name, dir);
  snprintf(path, size, "%s/%s", dir, CNNB_DIR_LOCK_FILE);
  char text[512], who[400];
  cnnb_status st = CNNB_OK;
  int fd = -1;
  for (int attempt = 0;; attempt++) {
    if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
      st = cnnb_error(ctx, CNNB_EIO, "%s=%s: cannot open its lock file %s: %s", flag_name, dir,
                      path, strerror(errno));
      goto fail;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      if (err == EWOULDBLOCK) {
        read_holder(fd, text, sizeof text);
        describe_holder(text, who, sizeof who);
        st = cnnb_error(ctx, CNNB_EIO,
                        "%s=%s is in use by another run: %s holds its lock %s (one run writes "
                        "a directory at a time): wait for that run to end, or give another %s",
                        flag_name, dir, who, path, flag_name);
      } else {
        st = cnnb_error(ctx, CNNB_EIO, "%s=%s: cannot lock %s: %s", flag_name, dir, path,
                        strerror(err));
      }
      goto fail;
    }
    struct stat held, now;
    if (fstat(fd, &held) == 0 && stat(path, &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino)
      break;
    close(fd); /* its holder removed the file as we locked it: lock the one there now */
    fd = -1;
    if (attempt + 1 == MAX_ATTEMPTS) {
      st = cnnb_error(ctx, CNNB_EIO, "%s=%s: its lock file %s keeps being replaced", flag_name, dir,
                      path);
      goto fail;
    }
  }
  /* Text left in the file is a holder that ended without removing it (killed): say so. */
  read_holder(fd, text, sizeof text);
  if (*text) {
    describe_holder(text, who, sizeof who);
    cnnb_log(ctx, CNNB_LOG_WARN,
             "%s=%s: taking over its lock %s, left by %s, which is gone (a run that ended "
             "without releasing it)",
             flag_name, dir, path, who);
  }
  char host[256] = "unknown";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  int len = snprintf(text, sizeof text, "pid=%ld host=%s\n", (long)getpid(), host);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != (ssize_t)len) {
    st = cnnb_error(ctx, CNNB_EIO, "%s=%s: cannot write its lock file %s: %s", flag_name, dir, path,
                    strerror(errno));
    goto fail;
  }
  cnnb_dir_lock *lock = malloc(sizeof *lock);
  if (!lock) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "%s=%s: out of memory", flag_name, dir);
    goto fail;
  }
  *lock = (cnnb_dir_lock){fd, path};
  *out = lock;
  return CNNB_OK;
fail:
  if (fd >= 0) close(fd);
  free(path);
  return st;
}

void cnnb_dir_lock_release(cnnb_dir_lock *lock) {
  if (!lock) return;
  /* Removed while still held, so no other run can have locked it meanwhile; only ours (a
   * file someone replaced by hand belongs to whoever locked that one). */
  struct stat held, now;
  if (fstat(lock->fd, &held) == 0 && stat(lock->path, &now) == 0 && held.st_dev == now.st_dev &&
      held.st_ino == now.st_ino)
    unlink(lock->path);
  close(lock->fd);
  free(lock->path);
  free(lock);
}
