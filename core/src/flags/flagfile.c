/* flagfile.c — each flagfile read once, kept by its argument (flagfile.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "flags/flagfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct flagfile {
  char *path; /* the argument as written: the same words name the same file in both passes */
  char *text; /* NULL when refused */
  size_t len;
  bool regular; /* a regular file: opened again, the same bytes */
  char *error;  /* why it was refused, when text is NULL */
} flagfile;

struct cnnb_flagfiles {
  flagfile *v;
  size_t n, cap;
};

cnnb_flagfiles *cnnb_flagfiles_create(void) { return calloc(1, sizeof(cnnb_flagfiles)); }

void cnnb_flagfiles_destroy(cnnb_flagfiles *files) {
  if (!files) return;
  for (size_t i = 0; i < files->n; i++) {
    free(files->v[i].path);
    free(files->v[i].text);
    free(files->v[i].error);
  }
  free(files->v);
  free(files);
}

/* Reads the whole file, stopping one byte past the limit: a file that long, or an endless
 * one, is refused by its size without reading (or keeping) the rest. */
static cnnb_status read_whole(const char *path, char **text, size_t *len, bool *regular, char *err,
                              size_t err_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, err_size, "--flagfile=%s: cannot open: %s", path, strerror(errno));
    return CNNB_EINVAL;
  }
  struct stat info;
  *regular = fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  cnnb_status st = buf ? CNNB_OK : CNNB_ENOMEM;
  while (st == CNNB_OK) {
    if (n == cap) {
      size_t grown_cap = cap * 2 > (size_t)CNNB_FLAGFILE_MAX_BYTES + 1
                             ? (size_t)CNNB_FLAGFILE_MAX_BYTES + 1
                             : cap * 2;
      char *grown = realloc(buf, grown_cap + 1);
      if (!grown) {
        st = CNNB_ENOMEM;
        break;
      }
      buf = grown, cap = grown_cap;
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      snprintf(err, err_size, "--flagfile=%s: read failed: %s", path, strerror(errno));
      st = CNNB_EINVAL;
    } else if (got == 0) {
      break;
    } else if ((n += (size_t)got) > CNNB_FLAGFILE_MAX_BYTES) {
      snprintf(err, err_size,
               "--flagfile=%s: larger than %d bytes (1 MiB), the most a flagfile may hold; "
               "is it the file you meant?",
               path, CNNB_FLAGFILE_MAX_BYTES);
      st = CNNB_EINVAL;
    }
  }
  close(fd);
  if (st == CNNB_ENOMEM) snprintf(err, err_size, "--flagfile=%s: out of memory", path);
  if (st != CNNB_OK) {
    free(buf);
    return st;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return CNNB_OK;
}

cnnb_status cnnb_flagfiles_get(cnnb_flagfiles *files, const char *path, const char **text,
                               size_t *len, char *err, size_t err_size) {
  for (size_t i = 0; i < files->n; i++) {
    const flagfile *f = &files->v[i];
    if (strcmp(f->path, path) != 0) continue;
    if (!f->text) {
      snprintf(err, err_size, "%s", f->error);
      return CNNB_EINVAL;
    }
    *text = f->text, *len = f->len;
    return CNNB_OK;
  }
  if (files->n == files->cap) {
    size_t cap = files->cap ? files->cap * 2 : 4;
    flagfile *grown = realloc(files->v, cap * sizeof *grown);
    if (!grown) {
      snprintf(err, err_size, "--flagfile=%s: out of memory", path);
      return CNNB_ENOMEM;
    }
    files->v = grown, files->cap = cap;
  }
  flagfile f = {.path = strdup(path)};
  if (!f.path) {
    snprintf(err, err_size, "--flagfile=%s: out of memory", path);
    return CNNB_ENOMEM;
  }
  cnnb_status st = read_whole(path, &f.text, &f.len, &f.regular, err, err_size);
  /* Out of memory is not kept (the next ask says it again); every other refusal is. */
  if (st == CNNB_EINVAL) f.error = strdup(err);
  if (st != CNNB_OK && !f.error) {
    free(f.path);
    return st;
  }
  files->v[files->n++] = f;
  if (st != CNNB_OK) return st;
  *text = f.text, *len = f.len;
  return CNNB_OK;
}

const char *cnnb_flagfiles_unrepeatable(const cnnb_flagfiles *files) {
  for (size_t i = 0; files && i < files->n; i++)
    if (files->v[i].text && !files->v[i].regular) return files->v[i].path;
  return NULL;
}
