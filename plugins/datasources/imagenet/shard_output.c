/* shard_output.c — cnnbench-mkrecords' output directory, changed whole or not at all
 * (shard_output.h). */
#define _POSIX_C_SOURCE 200809L
#include "shard_output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shard_set.h"

enum { NAMED_OLD = 5 };

static char *format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

static void free_list(char **list, size_t n) {
  if (!list) return;
  for (size_t i = 0; i < n; i++) free(list[i]);
  free(list);
}

static int by_strcmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shards of `name` in dir, sorted (so messages name them in order): 0, or -1 with
 * errno. A dir that does not exist holds none. */
static int list_old(shard_output *o, const char *name) {
  DIR *d = opendir(o->dir);
  if (!d) return errno == ENOENT ? 0 : -1;
  size_t cap = 0;
  struct dirent *e;
  int rc = 0;
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    long index, total;
    if (shard_set_parse_name(e->d_name, name, &index, &total) != 0) continue;
    if (o->num_old == cap) {
      cap = cap ? 2 * cap : 16;
      char **grown = realloc(o->old, cap * sizeof *grown);
      if (!grown) {
        rc = -1;
        break;
      }
      o->old = grown;
    }
    if (!(o->old[o->num_old] = format("%s/%s", o->dir, e->d_name))) {
      rc = -1;
      break;
    }
    o->num_old++;
    errno = 0;
  }
  if (rc == 0 && errno != 0) rc = -1;
  int saved = rc ? (errno ? errno : ENOMEM) : 0;
  closedir(d);
  if (o->num_old > 1) qsort(o->old, o->num_old, sizeof *o->old, by_strcmp);
  errno = saved;
  return rc;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Refusal of what dir holds: the first few old shards by name, and what would go. */
static void describe_old(const shard_output *o, const char *name, char *err, size_t err_size) {
  int n = snprintf(err, err_size,
                   "--output_dir=%s already holds %zu shard%s named %s-*-of-*: ", o->dir,
                   o->num_old, o->num_old == 1 ? "" : "s", name);
  for (size_t i = 0; i < o->num_old && i < NAMED_OLD && n >= 0 && (size_t)n < err_size; i++)
    n += snprintf(err + n, err_size - (size_t)n, "%s%s", i ? ", " : "", base_name(o->old[i]));
  if (o->num_old > NAMED_OLD && n >= 0 && (size_t)n < err_size)
    n += snprintf(err + n, err_size - (size_t)n, " and %zu more", o->num_old - NAMED_OLD);
  if (n >= 0 && (size_t)n < err_size)
    snprintf(err + n, err_size - (size_t)n,
             "; --overwrite replaces them all with the new set (another --output_dir or "
             "--name keeps them)");
}

int shard_output_open(shard_output *o, const char *dir, const char *name, long num_shards,
                      int overwrite, char *err, size_t err_size) {
  memset(o, 0, sizeof *o);
  o->num_shards = num_shards;
  o->dir = strdup(dir);
  o->name = strdup(name);
  o->final = calloc((size_t)num_shards, sizeof *o->final);
  o->temp = calloc((size_t)num_shards, sizeof *o->temp);
  if (!o->dir || !o->name || !o->final || !o->temp) goto out_of_memory;
  /* The pid keeps two runs into one directory off each other's temporaries. */
  long pid = (long)getpid();
  for (long i = 0; i < num_shards; i++) {
    o->final[i] = format("%s/%s-%05ld-of-%05ld", dir, name, i, num_shards);
    o->temp[i] = format("%s/.%s-%05ld-of-%05ld.tmp-%ld", dir, name, i, num_shards, pid);
    if (!o->final[i] || !o->temp[i]) goto out_of_memory;
  }

  if (list_old(o, name) != 0) {
    snprintf(err, err_size, "--output_dir=%s: %s", dir, strerror(errno));
    return SHARD_OUTPUT_FAILED;
  }
  if (o->num_old && !overwrite) {
    describe_old(o, name, err, err_size);
    return SHARD_OUTPUT_REFUSED;
  }
  /* rename() cannot put a file over a directory: refused now, before the work, rather
   * than at the end with the set half in place. */
  for (size_t i = 0; i < o->num_old; i++) {
    struct stat st;
    if (lstat(o->old[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      snprintf(err, err_size, "--output_dir=%s: %s is a directory, not a shard to overwrite", dir,
               base_name(o->old[i]));
      return SHARD_OUTPUT_REFUSED;
    }
  }

  if (mkdir(dir, 0777) == 0) {
    o->made_dir = 1;
  } else if (errno != EEXIST) {
    snprintf(err, err_size, "--output_dir=%s: %s", dir, strerror(errno));
    return SHARD_OUTPUT_FAILED;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, err_size, "--output_dir=%s: not a directory", dir);
    return SHARD_OUTPUT_FAILED;
  }
  return 0;

out_of_memory:
  snprintf(err, err_size, "out of memory naming %ld shards", num_shards);
  return SHARD_OUTPUT_FAILED;
}

/* Is path one of the new set's names, so a rename already replaced it? The exact name:
 * "train-0-of-4" claims the same shard as "train-00000-of-00004" but is another file. */
static int in_new_set(const shard_output *o, const char *path) {
  long index, total;
  return shard_set_parse_name(base_name(path), o->name, &index, &total) == 0 &&
         index < o->num_shards && strcmp(path, o->final[index]) == 0;
}

int shard_output_commit(shard_output *o, char *err, size_t err_size) {
  /* New names first, old leftovers after: a crash between the two leaves the whole new
   * set beside shards of another count, which readers refuse as a mix (shard_set.h),
   * never a set that reads as whole but is part old. */
  for (long i = 0; i < o->num_shards; i++) {
    if (rename(o->temp[i], o->final[i]) != 0) {
      snprintf(err, err_size,
               "rename %s to %s: %s (%ld of the %ld new shards were already in place)", o->temp[i],
               o->final[i], strerror(errno), i, o->num_shards);
      return -1;
    }
  }
  for (size_t i = 0; i < o->num_old; i++) {
    if (in_new_set(o, o->old[i])) continue;
    if (unlink(o->old[i]) != 0 && errno != ENOENT) {
      snprintf(err, err_size, "removing %s of the set replaced: %s", o->old[i], strerror(errno));
      return -1;
    }
  }
  int fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0) {
    snprintf(err, err_size, "--output_dir=%s: syncing the directory: %s", o->dir, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

void shard_output_abandon(shard_output *o) {
  if (o->temp)
    for (long i = 0; i < o->num_shards; i++)
      if (o->temp[i]) unlink(o->temp[i]);
  /* Only when empty: rmdir never takes anything another process put there meanwhile. */
  if (o->made_dir) rmdir(o->dir);
}

void shard_output_free(shard_output *o) {
  free_list(o->final, o->final ? (size_t)o->num_shards : 0);
  free_list(o->temp, o->temp ? (size_t)o->num_shards : 0);
  free_list(o->old, o->num_old);
  free(o->dir);
  free(o->name);
  memset(o, 0, sizeof *o);
}
