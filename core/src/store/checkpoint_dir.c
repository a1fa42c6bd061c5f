/* checkpoint_dir.c — a --train_dir's checkpoints: saving with an index and a limit on how
 * many are kept, and finding the newest valid one to resume from (checkpoint_dir.h).
 *
 * Only files whose names are checkpoint names (model.ckpt-<digits>.safetensors) are ever
 * opened or deleted from what the index lists, so an edited or foreign index cannot make
 * a save delete anything else in the directory. */
#define _POSIX_C_SOURCE 200809L
#include "store/checkpoint_dir.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/dirs.h"

#define PREFIX "model.ckpt-"
#define SUFFIX ".safetensors"

void cnnb_checkpoint_file_name(int64_t step, char *buf, size_t size) {
  snprintf(buf, size, PREFIX "%010" PRId64 SUFFIX, step);
}

/* True when `name` is PREFIX digits SUFFIX; *step gets the digits' value. */
static bool parse_file_name(const char *name, int64_t *step) {
  size_t len = strlen(name), pre = strlen(PREFIX), suf = strlen(SUFFIX);
  if (len <= pre + suf || strncmp(name, PREFIX, pre) != 0 || strcmp(name + len - suf, SUFFIX) != 0)
    return false;
  int64_t v = 0;
  for (size_t i = pre; i < len - suf; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
    if (v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (name[i] - '0');
  }
  *step = v;
  return true;
}

static char *join(const char *dir, const char *name) {
  size_t size = strlen(dir) + strlen(name) + 2;
  char *p = malloc(size);
  if (p) snprintf(p, size, "%s/%s", dir, name);
  return p;
}

/* True for "<checkpoint or index name>.tmp.<pid>" (atomic_file.c's temporary names) whose
 * process is gone: a save killed mid-write left it, and nothing will ever rename it. A
 * live pid's (another run on this train_dir, or on another host sharing it) is kept. */
static bool stale_tmp(const char *name) {
  const char *tmp = strstr(name, ".tmp.");
  if (!tmp) return false;
  char base[256];
  int64_t step;
  if ((size_t)(tmp - name) >= sizeof base) return false;
  snprintf(base, sizeof base, "%.*s", (int)(tmp - name), name);
  if (strcmp(base, CNNB_CHECKPOINT_INDEX) != 0 && !parse_file_name(base, &step)) return false;
  char *end;
  long pid = strtol(tmp + 5, &end, 10);
  if (*end || pid <= 0 || pid == (long)getpid()) return false;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes the temporary files of saves that were killed (stale_tmp): a checkpoint's can
 * be hundreds of MB per crash. */
static void remove_stale_tmp(cnnb_ctx *ctx, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!stale_tmp(e->d_name)) continue;
    char *p = join(dir, e->d_name);
    if (p && unlink(p) == 0)
      cnnb_log(ctx, CNNB_LOG_INFO, "removed %s, left by a save that did not finish", p);
    free(p);
  }
  closedir(d);
}

cnnb_status cnnb_checkpoint_dir_prepare(cnnb_ctx *ctx, const char *dir) {
  if (!dir || !*dir) return cnnb_error(ctx, CNNB_EINVAL, "checkpoint directory: empty path");
  char label[64 + PATH_MAX];
  snprintf(label, sizeof label, "checkpoint directory %s", dir);
  cnnb_status st = cnnb_make_dirs(ctx, label, dir);
  if (st != CNNB_OK) return st;
  remove_stale_tmp(ctx, dir);
  return CNNB_OK;
}

/* ---- the index ---------------------------------------------------------------- */

/* The index's checkpoint names, oldest first (its "all", with "latest" moved to the end:
 * the newest, whatever "all" says). */
typedef struct names {
  char **v;
  size_t n;
} names;

static void names_free(names *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}
static bool names_has(const names *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i], name) == 0) return true;
  return false;
}
static void names_remove(names *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->v[i], name) == 0) {
      free(l->v[i]);
      memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
      l->n--;
      return;
    }
}
/* Appends a copy of name (moved to the end when already there); false when out of memory. */
static bool names_push(names *l, const char *name) {
  names_remove(l, name);
  char **v = realloc(l->v, (l->n + 1) * sizeof *v);
  if (!v) return false;
  l->v = v;
  if (!(l->v[l->n] = strdup(name))) return false;
  l->n++;
  return true;
}

typedef enum { INDEX_OK, INDEX_MISSING, INDEX_BAD } index_result;

/* Reads DIR/checkpoint. INDEX_BAD: unreadable or not what this file writes, with the
 * reason in ctx's error; a name that is not a checkpoint file name makes it bad too. */
static index_result read_index(cnnb_ctx *ctx, const char *dir, names *out) {
  out->v = NULL;
  out->n = 0;
  char *path = join(dir, CNNB_CHECKPOINT_INDEX);
  if (!path) {
    cnnb_error(ctx, CNNB_ENOMEM, "out of memory");
    return INDEX_BAD;
  }
  if (access(path, F_OK) != 0 && errno == ENOENT) {
    free(path);
    return INDEX_MISSING;
  }
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  index_result r = INDEX_BAD;
  if (!root) {
    cnnb_error(ctx, CNNB_EDATA, "%s: not valid JSON (line %d, column %d): %s", path, jerr.line,
               jerr.column, jerr.text);
    goto done;
  }
  json_t *latest = json_object_get(root, "latest"), *all = json_object_get(root, "all");
  int64_t step;
  if (!json_is_string(latest) || !json_is_array(all) ||
      !parse_file_name(json_string_value(latest), &step)) {
    cnnb_error(ctx, CNNB_EDATA,
               "%s: not a checkpoint index (want {\"latest\": \"" PREFIX "<step>" SUFFIX
               "\", \"all\": [...]})",
               path);
    goto done;
  }
  size_t i;
  json_t *v;
  json_array_foreach(all, i, v) {
    if (!json_is_string(v) || !parse_file_name(json_string_value(v), &step)) {
      cnnb_error(ctx, CNNB_EDATA, "%s: \"all\"[%zu] is not a checkpoint file name", path, i);
      goto done;
    }
    if (!names_push(out, json_string_value(v))) goto oom;
  }
  if (!names_push(out, json_string_value(latest))) goto oom;
  r = INDEX_OK;
  goto done;
oom:
  cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
done:
  if (r != INDEX_OK) names_free(out);
  json_decref(root);
  free(path);
  return r;
}

static cnnb_status write_index(cnnb_ctx *ctx, const char *dir, const names *l) {
  char *path = join(dir, CNNB_CHECKPOINT_INDEX);
  json_t *all = json_array();
  json_t *root = json_object();
  char *text = NULL;
  cnnb_status st = CNNB_OK;
  if (!path || !all || !root) goto oom;
  for (size_t i = 0; i < l->n; i++)
    if (json_array_append_new(all, json_string(l->v[i])) != 0) goto oom;
  if (json_object_set_new(root, "latest", json_string(l->v[l->n - 1])) != 0 ||
      json_object_set(root, "all", all) != 0)
    goto oom;
  /* Indented: people read this file to see what a run has. */
  if (!(text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER))) goto oom;
  cnnb_atomic_part parts[2] = {{text, strlen(text)}, {"\n", 1}};
  st = cnnb_atomic_write(ctx, path, parts, 2);
  goto done;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory writing the checkpoint index", dir);
done:
  free(text);
  json_decref(root);
  json_decref(all);
  free(path);
  return st;
}

/* ---- saving ------------------------------------------------------------------- */

cnnb_status cnnb_checkpoint_dir_save(cnnb_ctx *ctx, const char *dir, int64_t step, int32_t max_keep,
                                     const cnnb_st_tensor *tensors, size_t num_tensors,
                                     const cnnb_st_meta *meta, size_t num_meta, char **path_out) {
  if (path_out) *path_out = NULL;
  if (max_keep < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: keeping %d checkpoints: at least 1 must be kept", dir,
                      (int)max_keep);
  if (step < 0)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: a checkpoint of step %" PRId64 " (< 0)", dir, step);
  char name[64];
  cnnb_checkpoint_file_name(step, name, sizeof name);
  char *path = join(dir, name);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
  cnnb_status st = cnnb_safetensors_write(ctx, path, tensors, num_tensors, meta, num_meta);
  if (st != CNNB_OK) {
    free(path);
    return st;
  }

  names list;
  index_result r = read_index(ctx, dir, &list);
  if (r == INDEX_BAD) {
    /* Its files are no longer tracked (so never deleted); the new index starts afresh. */
    cnnb_log(ctx, CNNB_LOG_WARN, "%s; writing a new index", cnnb_error_message(ctx));
    cnnb_clear_error(ctx);
  }
  if (!names_push(&list, name)) goto oom;
  /* The newest max_keep stay in the index; the rest are deleted once it is written. */
  size_t drop = list.n > (size_t)max_keep ? list.n - (size_t)max_keep : 0;
  names kept = {0};
  for (size_t i = drop; i < list.n; i++)
    if (!names_push(&kept, list.v[i])) goto oom_kept;
  if ((st = write_index(ctx, dir, &kept)) != CNNB_OK) {
    cnnb_error(ctx, st, "the checkpoint %s was written but is not in the index", path);
  } else {
    for (size_t i = 0; i < drop; i++) {
      if (names_has(&kept, list.v[i])) continue;
      char *old_path = join(dir, list.v[i]);
      if (old_path && unlink(old_path) != 0 && errno != ENOENT)
        /* Training goes on: a file left behind costs disk space, not correctness. */
        cnnb_log(ctx, CNNB_LOG_WARN, "cannot delete the old checkpoint %s: %s", old_path,
                 strerror(errno));
      free(old_path);
    }
  }
  names_free(&kept);
  names_free(&list);
  if (st == CNNB_OK && path_out) *path_out = path;
  else free(path);
  return st;

oom_kept:
  names_free(&kept);
oom:
  names_free(&list);
  free(path);
  return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory updating the checkpoint index", dir);
}

/* ---- finding the one to resume from ------------------------------------------- */

typedef struct found {
  int64_t step;
  char *name;
} found;

static int cmp_step_desc(const void *a, const void *b) {
  const found *x = a, *y = b;
  return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* The directory's checkpoint files, newest step first, appended to `candidates` unless
 * already there. A missing directory adds none. */
static cnnb_status scan_dir(cnnb_ctx *ctx, const char *dir, names *candidates) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return CNNB_OK;
    return cnnb_error(ctx, CNNB_EIO, "checkpoint directory %s: %s", dir, strerror(errno));
  }
  found *v = NULL;
  size_t n = 0, cap = 0;
  cnnb_status st = CNNB_OK;
  struct dirent *e;
  for (errno = 0; (e = readdir(d)) != NULL; errno = 0) {
    int64_t step;
    if (!parse_file_name(e->d_name, &step)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      found *nv = realloc(v, cap * sizeof *v);
      if (!nv) goto oom;
      v = nv;
    }
    if (!(v[n].name = strdup(e->d_name))) goto oom;
    v[n++].step = step;
  }
  if (errno != 0) {
    st = cnnb_error(ctx, CNNB_EIO, "checkpoint directory %s: %s", dir, strerror(errno));
    goto done;
  }
  if (n) qsort(v, n, sizeof *v, cmp_step_desc); /* v is NULL when n is 0 */
  for (size_t i = 0; i < n; i++)
    if (!names_has(candidates, v[i].name) && !names_push(candidates, v[i].name)) goto oom;
  goto done;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "checkpoint directory %s: out of memory", dir);
done:
  for (size_t i = 0; i < n; i++) free(v[i].name);
  free(v);
  closedir(d);
  return st;
}

cnnb_status cnnb_checkpoint_dir_latest(cnnb_ctx *ctx, const char *dir,
                                       cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                            const cnnb_safetensors *f,
                                                            const char *path),
                                       void *user, cnnb_safetensors **out, char **path_out) {
  *out = NULL;
  *path_out = NULL;
  /* Candidates newest first: the index's (latest, then "all" backwards), then the rest
   * of the directory by step. */
  names candidates = {0}, index;
  index_result r = read_index(ctx, dir, &index);
  if (r == INDEX_BAD) {
    cnnb_log(ctx, CNNB_LOG_WARN, "%s; looking for checkpoints in the directory instead",
             cnnb_error_message(ctx));
    cnnb_clear_error(ctx);
  }
  cnnb_status st = CNNB_OK;
  for (size_t i = index.n; i-- > 0;)
    if (!names_push(&candidates, index.v[i])) {
      st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
      goto done;
    }
  if ((st = scan_dir(ctx, dir, &candidates)) != CNNB_OK) goto done;

  size_t skipped = 0;
  for (size_t i = 0; i < candidates.n; i++) {
    char *path = join(dir, candidates.v[i]);
    if (!path) {
      st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
      goto done;
    }
    cnnb_safetensors *f;
    if ((st = cnnb_safetensors_open(ctx, path, &f)) != CNNB_OK) {
      if (st == CNNB_ENOMEM) { /* not the file's fault: another one would fail the same */
        free(path);
        goto done;
      }
      /* The message names the file. */
      cnnb_log(ctx, CNNB_LOG_WARN, "skipping an invalid checkpoint: %s", cnnb_error_message(ctx));
      cnnb_clear_error(ctx);
      free(path);
      skipped++;
      st = CNNB_OK;
      continue;
    }
    if (check && (st = check(user, ctx, f, path)) != CNNB_OK) {
      cnnb_safetensors_close(f);
      free(path);
      goto done;
    }
    *out = f;
    *path_out = path;
    goto done;
  }
  if (skipped)
    cnnb_log(ctx, CNNB_LOG_WARN, "%s: none of its %zu checkpoint file(s) is valid (above)", dir,
             skipped);
done:
  names_free(&index);
  names_free(&candidates);
  return st;
}
