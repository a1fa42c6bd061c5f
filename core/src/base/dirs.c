/* dirs.c — mkdir -p with messages that name the path at fault (dirs.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "base/dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

cnnb_status cnnb_make_dirs(cnnb_ctx *ctx, const char *label, const char *dir) {
  if (!dir || !*dir) return cnnb_error(ctx, CNNB_EINVAL, "%s: the directory is empty", label);
  char *path = strdup(dir);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", label);
  cnnb_status st = CNNB_OK;
  /* Each prefix ending before a '/', then the whole path ("/a/b": "/a", "/a/b"). */
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char end = *p;
    *p = '\0';
    struct stat sb;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      st = cnnb_error(ctx, CNNB_EIO, "%s: cannot create directory %s: %s", label, path,
                      strerror(errno));
      break;
    }
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      st = cnnb_error(ctx, CNNB_EIO, "%s: %s is not a directory", label, path);
      break;
    }
    *p = end;
    if (!end) break;
  }
  free(path);
  return st;
}
