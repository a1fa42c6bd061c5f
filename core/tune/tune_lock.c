/* tune_lock.c — one cnnbench-tune per --out, as one cnnbench per --train_dir
 * (core/src/base/dir_lock.c). Two tuners on one directory would share runs/, each
 * reading the other's half-written logs as failures of its own candidates, and
 * results.jsonl would keep those false failures for every later call; report.md and the
 * flagfiles would hold whichever finished last. The second is refused at once instead,
 * told the first's pid.
 *
 * An advisory flock on OUT/.cnnbench-tune.lock, held until the process ends (the kernel
 * drops it however the process ends, so a tuner killed with -9 leaves nothing that
 * blocks the next). The file stays: removing it would let a third tuner lock a new file
 * while the second still held the old one. It holds "pid=<pid> host=<host>" of the
 * last tuner that took it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "tune.h"

int tune_lock_out(const char *out_dir, char *err, size_t err_size) {
  char *path = tune_format("%s/" TUNE_LOCK_FILE, out_dir);
  /* O_CLOEXEC: a child cnnbench (or an mpirun rank left behind) must not hold it. */
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    snprintf(err, err_size, "--out=%s: cannot open its lock file %s: %s", out_dir, path,
             strerror(errno));
    free(path);
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    char holder[256];
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    holder[n > 0 ? n : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
    long pid = 0;
    char host[200] = "?";
    if (e != EWOULDBLOCK)
      snprintf(err, err_size, "--out=%s: cannot lock %s: %s", out_dir, path, strerror(e));
    else if (sscanf(holder, "pid=%ld host=%199s", &pid, host) == 2 && pid > 0)
      snprintf(err, err_size,
               "--out=%s is in use by another cnnbench-tune: pid %ld on host %s holds its "
               "lock %s (one tuner writes a directory at a time): wait for it to end, or "
               "give another --out",
               out_dir, pid, host, path);
    else
      snprintf(err, err_size,
               "--out=%s is in use by another cnnbench-tune, which holds its lock %s and "
               "has not written its pid yet: wait for it to end, or give another --out",
               out_dir, path);
    close(fd);
    free(path);
    return -1;
  }
  char host[200] = "unknown", text[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  int len = snprintf(text, sizeof text, "pid=%ld host=%s\n", (long)getpid(), host);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != (ssize_t)len) {
    snprintf(err, err_size, "--out=%s: cannot write its lock file %s: %s", out_dir, path,
             strerror(errno));
    close(fd);
    free(path);
    return -1;
  }
  free(path);
  return fd;
}
