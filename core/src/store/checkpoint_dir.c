/* checkpoint_dir.c — a --train_dir's checkpoints: saving with an index and a limit on how
 * many are kept, finding the newest one that reads back whole to resume from, and the
 * index rebuilt when it disagrees with the files (checkpoint_dir.h).
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

int64_t cnnb_checkpoint_dir_newest_step(const char *dir) {
  int64_t newest = -1, step;
  DIR *d = opendir(dir);
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (parse_file_name(e->d_name, &step) && step > newest) newest = step;
  closedir(d);
  return newest;
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

cnnb_status cnnb_checkpoint_dir_make(cnnb_ctx *ctx, const char *dir) {
  if (!dir || !*dir) return cnnb_error(ctx, CNNB_EINVAL, "checkpoint directory: empty path");
  char label[64 + PATH_MAX];
  snprintf(label, sizeof label, "checkpoint directory %s", dir);
  cnnb_status st = cnnb_make_dirs(ctx, label, dir);
  if (st != CNNB_OK) return st;
  return CNNB_OK;
}

void cnnb_checkpoint_dir_tidy(cnnb_ctx *ctx, const char *dir) { remove_stale_tmp(ctx, dir); }

cnnb_status cnnb_checkpoint_dir_prepare(cnnb_ctx *ctx, const char *dir) {
  cnnb_status st = cnnb_checkpoint_dir_make(ctx, dir);
  if (st == CNNB_OK) remove_stale_tmp(ctx, dir);
  return st;
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

/* The step a checkpoint name stands for (names here were all checked by parse_file_name). */
static int64_t step_of(const char *name) {
  int64_t step = -1;
  parse_file_name(name, &step);
  return step;
}

static int cmp_names_by_step(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  int64_t sx = step_of(x), sy = step_of(y);
  return sx < sy ? -1 : sx > sy ? 1 : strcmp(x, y);
}

static bool names_equal(const names *a, const names *b) {
  if (a->n != b->n) return false;
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->v[i], b->v[i]) != 0) return false;
  return true;
}

/* ---- saving ------------------------------------------------------------------- */

/* `name` is about to be saved over, but the index does not list it: a file this
 * directory's runs did not save, or one that did not read back whole when the run began
 * (a resume skipped it). Never overwritten: renamed to "<name>.kept" (".kept.2", ...: the
 * first free name), which no checkpoint code opens or deletes. */
static cnnb_status keep_aside(cnnb_ctx *ctx, const char *dir, const char *name, const char *path) {
  size_t size = strlen(path) + 32;
  char *aside = malloc(size);
  if (!aside) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
  struct stat sb;
  for (int i = 1;; i++) {
    if (i == 1) snprintf(aside, size, "%s.kept", path);
    else snprintf(aside, size, "%s.kept.%d", path, i);
    if (lstat(aside, &sb) != 0 && errno == ENOENT) break;
    if (i == 1000) {
      free(aside);
      return cnnb_error(ctx, CNNB_EIO,
                        "%s exists and is not in the index, and %s.kept to "
                        "%s.kept.1000 all exist too: not saving over it",
                        path, path, path);
    }
  }
  cnnb_status st = CNNB_OK;
  if (rename(path, aside) != 0)
    st = cnnb_error(ctx, CNNB_EIO,
                    "%s exists and is not in the index; it cannot be moved aside to %s (%s), "
                    "and is not saved over",
                    path, aside, strerror(errno));
  else
    cnnb_log(ctx, CNNB_LOG_WARN,
             "%s: %s was there but not in the index (a file that did not read back whole, or "
             "one this directory's runs did not save): kept as %s, not saved over",
             dir, name, aside);
  free(aside);
  return st;
}

/* Whether the file just written at `path` reads back whole, as a resume would judge it
 * (its header against its size: cnnb_safetensors_check_file). The rotation deletes older
 * checkpoints only after this. */
static cnnb_status read_back(cnnb_ctx *ctx, const char *path) {
  cnnb_status st = cnnb_safetensors_check_file(ctx, path);
  if (st != CNNB_OK)
    return cnnb_error(ctx, st == CNNB_ENOMEM ? st : CNNB_EIO,
                      "the checkpoint %s was written but does not read back whole", path);
  return CNNB_OK;
}

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

  names list, kept = {0}, doomed = {0};
  index_result r = read_index(ctx, dir, &list);
  if (r == INDEX_BAD) {
    /* Its files are no longer tracked (so never deleted); the new index starts afresh. */
    cnnb_log(ctx, CNNB_LOG_WARN, "%s; writing a new index", cnnb_error_message(ctx));
    cnnb_clear_error(ctx);
  }
  cnnb_status st = CNNB_OK;
  struct stat sb;
  if (lstat(path, &sb) == 0 && !names_has(&list, name) &&
      (st = keep_aside(ctx, dir, name, path)) != CNNB_OK)
    goto done;
  if ((st = cnnb_safetensors_write(ctx, path, tensors, num_tensors, meta, num_meta)) != CNNB_OK ||
      (st = read_back(ctx, path)) != CNNB_OK)
    goto done;

  /* The newest max_keep (by step) stay in the index. The rest, older than this one, which
   * reads back whole, are deleted once the index no longer lists them; one that does not
   * read back whole itself is left where it is (and leaves the index all the same). */
  if (!names_push(&list, name)) goto oom;
  qsort(list.v, list.n, sizeof *list.v, cmp_names_by_step);
  size_t drop = list.n > (size_t)max_keep ? list.n - (size_t)max_keep : 0;
  for (size_t i = 0; i < list.n; i++) {
    bool old = i < drop && step_of(list.v[i]) < step;
    if (!old) {
      if (!names_push(&kept, list.v[i])) goto oom;
      continue;
    }
    char *old_path = join(dir, list.v[i]);
    if (!old_path) goto oom;
    if (access(old_path, F_OK) == 0) {
      if (cnnb_safetensors_check_file(ctx, old_path) == CNNB_OK) {
        if (!names_push(&doomed, old_path)) {
          free(old_path);
          goto oom;
        }
      } else {
        cnnb_log(ctx, CNNB_LOG_WARN,
                 "not deleting the old checkpoint %s, which does not read back whole (%s): "
                 "it leaves the index and stays",
                 old_path, cnnb_error_message(ctx));
        cnnb_clear_error(ctx);
      }
    }
    free(old_path);
  }
  if ((st = write_index(ctx, dir, &kept)) != CNNB_OK) {
    cnnb_error(ctx, st, "the checkpoint %s was written but is not in the index", path);
    goto done;
  }
  for (size_t i = 0; i < doomed.n; i++)
    if (unlink(doomed.v[i]) != 0 && errno != ENOENT)
      /* Training goes on: a file left behind costs disk space, not correctness. */
      cnnb_log(ctx, CNNB_LOG_WARN, "cannot delete the old checkpoint %s: %s", doomed.v[i],
               strerror(errno));
  goto done;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory updating the checkpoint index", dir);
done:
  names_free(&doomed);
  names_free(&kept);
  names_free(&list);
  if (st == CNNB_OK && path_out) *path_out = path;
  else free(path);
  return st;
}

/* ---- what the directory holds ------------------------------------------------- */

/* One checkpoint name, from the index, the directory, or both. */
typedef struct entry {
  char *name;
  int64_t step;
  bool on_disk, indexed;
  bool whole; /* on disk and reads back whole */
  char *why;  /* on disk and not whole: the reason, naming the file */
} entry;

struct cnnb_checkpoint_found {
  entry *v; /* newest step first */
  size_t n, cap;
  names index; /* as the index lists them (oldest first, latest last) */
  index_result index_state;
  char *index_problem; /* INDEX_BAD: what is wrong with it */
  cnnb_safetensors *file;
  char *path;
  int64_t step; /* of file; -1: none */
};

void cnnb_checkpoint_found_free(cnnb_checkpoint_found *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) {
    free(f->v[i].name);
    free(f->v[i].why);
  }
  free(f->v);
  names_free(&f->index);
  free(f->index_problem);
  cnnb_safetensors_close(f->file);
  free(f->path);
  free(f);
}

static entry *entry_get(cnnb_checkpoint_found *f, const char *name) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->v[i].name, name) == 0) return &f->v[i];
  if (f->n == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 16;
    entry *v = realloc(f->v, cap * sizeof *v);
    if (!v) return NULL;
    f->v = v;
    f->cap = cap;
  }
  entry *e = &f->v[f->n];
  *e = (entry){.name = strdup(name), .step = step_of(name)};
  if (!e->name) return NULL;
  f->n++;
  return e;
}

static int cmp_entry_desc(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

/* The directory's checkpoint files into f. A missing directory holds none. */
static cnnb_status scan_dir(cnnb_ctx *ctx, const char *dir, cnnb_checkpoint_found *f) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return CNNB_OK;
    return cnnb_error(ctx, CNNB_EIO, "checkpoint directory %s: %s", dir, strerror(errno));
  }
  cnnb_status st = CNNB_OK;
  struct dirent *e;
  for (errno = 0; (e = readdir(d)) != NULL; errno = 0) {
    int64_t step;
    if (!parse_file_name(e->d_name, &step)) continue;
    entry *x = entry_get(f, e->d_name);
    if (!x) {
      st = cnnb_error(ctx, CNNB_ENOMEM, "checkpoint directory %s: out of memory", dir);
      break;
    }
    x->on_disk = true;
  }
  if (st == CNNB_OK && errno != 0)
    st = cnnb_error(ctx, CNNB_EIO, "checkpoint directory %s: %s", dir, strerror(errno));
  closedir(d);
  return st;
}

/* Whether entry e's file reads back whole (e->whole, or e->why); CNNB_ENOMEM only. */
static cnnb_status check_entry(cnnb_ctx *ctx, const char *dir, entry *e) {
  char *path = join(dir, e->name);
  if (!path) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
  cnnb_status st = cnnb_safetensors_check_file(ctx, path);
  free(path);
  if (st == CNNB_OK) {
    e->whole = true;
    return CNNB_OK;
  }
  if (st == CNNB_ENOMEM) return st;
  if (!(e->why = strdup(cnnb_error_message(ctx))))
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
  cnnb_clear_error(ctx);
  return CNNB_OK;
}

cnnb_status cnnb_checkpoint_dir_find(cnnb_ctx *ctx, const char *dir,
                                     cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                          const cnnb_safetensors *f,
                                                          const char *path),
                                     void *user, cnnb_checkpoint_found **out) {
  *out = NULL;
  cnnb_checkpoint_found *f = calloc(1, sizeof *f);
  if (!f) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
  f->step = -1;
  cnnb_status st = CNNB_OK;
  f->index_state = read_index(ctx, dir, &f->index);
  if (f->index_state == INDEX_BAD) {
    if (!(f->index_problem = strdup(cnnb_error_message(ctx)))) goto oom;
    cnnb_log(ctx, CNNB_LOG_WARN, "%s; looking for checkpoints in the directory instead",
             f->index_problem);
    cnnb_clear_error(ctx);
  }
  for (size_t i = 0; i < f->index.n; i++) {
    entry *e = entry_get(f, f->index.v[i]);
    if (!e) goto oom;
    e->indexed = true;
  }
  if ((st = scan_dir(ctx, dir, f)) != CNNB_OK) goto fail;
  if (f->n) qsort(f->v, f->n, sizeof *f->v, cmp_entry_desc); /* v is NULL when n is 0 */
  for (size_t i = 0; i < f->n; i++)
    if (f->v[i].on_disk && (st = check_entry(ctx, dir, &f->v[i])) != CNNB_OK) goto fail;

  /* The newest that reads back whole, index or not: a save whose index update failed is
   * newer than the index's latest, and is what the run reached. */
  for (size_t i = 0; i < f->n && !f->file; i++) {
    entry *e = &f->v[i];
    if (!e->whole) continue;
    char *path = join(dir, e->name);
    if (!path) goto oom;
    cnnb_safetensors *file;
    if ((st = cnnb_safetensors_open(ctx, path, &file)) != CNNB_OK) {
      free(path);
      if (st == CNNB_ENOMEM) goto fail; /* not the file's fault: another would fail the same */
      e->whole = false;                 /* its header read back, the rest did not */
      if (!(e->why = strdup(cnnb_error_message(ctx)))) goto oom;
      cnnb_clear_error(ctx);
      st = CNNB_OK;
      continue;
    }
    if (check && (st = check(user, ctx, file, path)) != CNNB_OK) {
      cnnb_safetensors_close(file);
      free(path);
      goto fail;
    }
    f->file = file;
    f->path = path;
    f->step = e->step;
  }
  *out = f;
  return CNNB_OK;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
fail:
  cnnb_checkpoint_found_free(f);
  return st;
}

const char *cnnb_checkpoint_found_path(const cnnb_checkpoint_found *f) { return f->path; }

void cnnb_checkpoint_found_take(cnnb_checkpoint_found *f, cnnb_safetensors **file, char **path) {
  *file = f->file;
  *path = f->path;
  f->file = NULL;
  f->path = NULL;
}

size_t cnnb_checkpoint_found_unreadable(const cnnb_checkpoint_found *f) {
  size_t n = 0;
  for (size_t i = 0; i < f->n; i++) n += f->v[i].on_disk && !f->v[i].whole;
  return n;
}

const char *cnnb_checkpoint_found_why(const cnnb_checkpoint_found *f, size_t k, int64_t *step) {
  for (size_t i = 0; i < f->n; i++) {
    if (!f->v[i].on_disk || f->v[i].whole) continue;
    if (k-- == 0) {
      if (step) *step = f->v[i].step;
      return f->v[i].why;
    }
  }
  return NULL;
}

void cnnb_checkpoint_found_warn(cnnb_ctx *ctx, const cnnb_checkpoint_found *f) {
  int64_t step;
  const char *why;
  for (size_t k = 0; (why = cnnb_checkpoint_found_why(f, k, &step)) != NULL; k++)
    cnnb_log(ctx, CNNB_LOG_WARN, "%s: %s (the file is kept, never deleted)",
             step > f->step ? "skipping a checkpoint that does not read back whole"
                            : "an older checkpoint does not read back whole",
             why);
}

/* ---- the index rebuilt ---------------------------------------------------------- */

cnnb_status cnnb_checkpoint_dir_reindex(cnnb_ctx *ctx, const char *dir,
                                        const cnnb_checkpoint_found *f) {
  /* What the index should list: its own entries that read back whole, and files newer
   * than anything it lists (saves whose index update failed). Any other file is one this
   * directory's index never knew (copied in, or from before the index was lost): used to
   * resume, never deleted, so never listed. */
  bool usable = f->index_state == INDEX_OK;
  int64_t newest_listed = -1;
  for (size_t i = 0; i < f->index.n; i++)
    if (step_of(f->index.v[i]) > newest_listed) newest_listed = step_of(f->index.v[i]);
  names want = {0};
  size_t gone = 0, broken = 0, added = 0, unknown = 0;
  cnnb_status st = CNNB_OK;
  for (size_t i = f->n; i-- > 0;) { /* oldest first */
    const entry *e = &f->v[i];
    if (e->indexed && !e->on_disk) gone++;
    if (e->indexed && e->on_disk && !e->whole) broken++;
    bool adopt = usable && !e->indexed && e->step > newest_listed;
    if (e->whole && !e->indexed && !adopt) unknown++;
    if (!e->whole || !(e->indexed || adopt)) continue;
    added += adopt;
    if (!names_push(&want, e->name)) {
      st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
      goto done;
    }
  }
  if (unknown)
    cnnb_log(ctx, CNNB_LOG_INFO,
             "%s: %zu checkpoint file(s) there are not in its index (copied in, or saved "
             "before the index was lost): they can be resumed from, and are never deleted",
             dir, unknown);
  if (usable && names_equal(&want, &f->index)) goto done;
  if (f->index_state == INDEX_MISSING && want.n == 0) goto done;
  char *path = join(dir, CNNB_CHECKPOINT_INDEX);
  if (!path) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", dir);
    goto done;
  }
  char reasons[512];
  if (!usable) snprintf(reasons, sizeof reasons, "it was not a usable index");
  else
    snprintf(reasons, sizeof reasons,
             "it listed %zu file(s) that are gone and %zu that do not read back whole, and "
             "missed %zu newer one(s) (a save whose index update failed)%s",
             gone, broken, added, gone + broken + added ? "" : "; its order was not the steps'");
  if (want.n == 0) {
    if (unlink(path) == 0)
      cnnb_log(ctx, CNNB_LOG_INFO,
               "removed the checkpoint index %s: %s, and no checkpoint it knew reads back whole",
               path, reasons);
  } else if ((st = write_index(ctx, dir, &want)) == CNNB_OK) {
    cnnb_log(ctx, CNNB_LOG_INFO, "rebuilt the checkpoint index %s from the files: %s", path,
             reasons);
  }
  free(path);
done:
  names_free(&want);
  return st;
}

/* ---- the newest, for tools ---------------------------------------------------------- */

cnnb_status cnnb_checkpoint_dir_latest(cnnb_ctx *ctx, const char *dir,
                                       cnnb_status (*check)(void *user, cnnb_ctx *ctx,
                                                            const cnnb_safetensors *f,
                                                            const char *path),
                                       void *user, cnnb_safetensors **out, char **path_out) {
  *out = NULL;
  *path_out = NULL;
  cnnb_checkpoint_found *f;
  cnnb_status st = cnnb_checkpoint_dir_find(ctx, dir, check, user, &f);
  if (st != CNNB_OK) return st;
  cnnb_checkpoint_found_warn(ctx, f);
  size_t bad = cnnb_checkpoint_found_unreadable(f);
  if (!f->file && bad)
    cnnb_log(ctx, CNNB_LOG_WARN, "%s: none of its %zu checkpoint file(s) reads back whole (above)",
             dir, bad);
  cnnb_checkpoint_found_take(f, out, path_out);
  cnnb_checkpoint_found_free(f);
  return CNNB_OK;
}
