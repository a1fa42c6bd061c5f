/* checkpoint_writer.c — saves checkpoints in a loop so a test can kill -9 it mid-write
 * and then check that the directory still resumes from an intact checkpoint
 * (cli/checkpoint_atomic.sh). Never installed.
 *
 *   checkpoint_writer write DIR [MB] [MAX_KEEP]
 *       saves steps latest+1, latest+2, ... (1 in a new DIR) forever, each one tensor of
 *       MB MiB (default 64) whose values derive from the step, keeping MAX_KEEP (2);
 *       prints "saved STEP" after each save.
 *   checkpoint_writer verify DIR
 *       every file with a checkpoint's name (model.ckpt-N.safetensors, in the index or
 *       not: only a temporary file may ever be partial) opens and holds exactly its step's
 *       values, the index parses, and cnnb_checkpoint_dir_latest returns the newest file
 *       (no fallback to an older one was needed), which is the index's latest or, killed
 *       between a checkpoint's rename and its index's, newer than all the index lists
 *       (with no index yet, the one checkpoint the first save left). The writer, like a
 *       run, rebuilds the index from the files before saving. Prints
 *       "ok step N (K in the index, F files)" or "none" (killed before the first save finished);
 *       exits 1 naming what is wrong. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/checkpoint_dir.h"
#include "flags/flags.h"

/* Value i of step's tensor: exact in a float (< 2^24), different for every step and
 * position, so a block of another step's data or of zeros shows. */
static float value(int64_t step, uint64_t i) {
  return (float)((i * 2654435761u + (uint64_t)step * 40503u + 1) & 0xffffff);
}

static int64_t read_step(const cnnb_safetensors *f) {
  const cnnb_st_tensor *s = cnnb_safetensors_find(f, "global_step");
  int64_t step = -1;
  if (s && s->dtype == CNNB_ST_I64 && s->ndims == 0) memcpy(&step, s->data, 8);
  return step;
}

/* Checks f is step's checkpoint, every value; prints the first problem. */
static int check_contents(const cnnb_safetensors *f, const char *path, int64_t step) {
  if (read_step(f) != step) {
    fprintf(stderr, "%s: global_step %" PRId64 ", its name says %" PRId64 "\n", path, read_step(f),
            step);
    return 1;
  }
  const char *meta = cnnb_safetensors_meta(f, "step");
  char want[32];
  snprintf(want, sizeof want, "%" PRId64, step);
  if (!meta || strcmp(meta, want) != 0) {
    fprintf(stderr, "%s: metadata step \"%s\", want \"%s\"\n", path, meta ? meta : "(none)", want);
    return 1;
  }
  const cnnb_st_tensor *w = cnnb_safetensors_find(f, "w");
  if (!w || w->dtype != CNNB_ST_F32 || w->ndims != 1) {
    fprintf(stderr, "%s: no 1-D F32 tensor \"w\"\n", path);
    return 1;
  }
  const unsigned char *p = w->data;
  for (uint64_t i = 0; i < (uint64_t)w->dims[0]; i++) {
    float v;
    memcpy(&v, p + 4 * i, 4);
    if (v != value(step, i)) {
      fprintf(stderr, "%s: w[%" PRIu64 "] = %g, want %g\n", path, i, v, value(step, i));
      return 1;
    }
  }
  return 0;
}

static int write_loop(cnnb_ctx *ctx, const char *dir, int64_t mb, int32_t max_keep) {
  if (cnnb_checkpoint_dir_prepare(ctx, dir) != CNNB_OK) return 1;
  cnnb_checkpoint_found *found;
  if (cnnb_checkpoint_dir_find(ctx, dir, NULL, NULL, &found) != CNNB_OK) return 1;
  cnnb_checkpoint_found_warn(ctx, found);
  cnnb_status st = cnnb_checkpoint_dir_reindex(ctx, dir, found);
  cnnb_safetensors *f;
  char *path;
  cnnb_checkpoint_found_take(found, &f, &path);
  cnnb_checkpoint_found_free(found);
  if (st != CNNB_OK) return 1;
  int64_t step = f ? read_step(f) + 1 : 1;
  cnnb_safetensors_close(f);
  free(path);
  uint64_t n = (uint64_t)mb * (1u << 20) / 4;
  float *w = malloc(n * sizeof *w);
  if (!w) return 1;
  for (;; step++) {
    for (uint64_t i = 0; i < n; i++) w[i] = value(step, i);
    char s[32];
    snprintf(s, sizeof s, "%" PRId64, step);
    cnnb_st_meta meta[] = {{"format", "pt"}, {"step", s}};
    cnnb_st_tensor t[] = {{"global_step", CNNB_ST_I64, 0, {0}, &step, 8},
                          {"w", CNNB_ST_F32, 1, {(int64_t)n}, w, n * sizeof *w}};
    if (cnnb_checkpoint_dir_save(ctx, dir, step, max_keep, t, 2, meta, 2, NULL) != CNNB_OK) {
      free(w);
      return 1;
    }
    printf("saved %" PRId64 "\n", step);
    fflush(stdout);
  }
}

/* Every file under a checkpoint's name in dir, the index's and any other, holds its
 * step's values; *files counts them. */
static int check_files(cnnb_ctx *ctx, const char *dir, size_t *files) {
  int bad = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    int64_t s;
    int end = 0;
    if (sscanf(e->d_name, "model.ckpt-%" SCNd64 ".safetensors%n", &s, &end) != 1 ||
        e->d_name[end] != '\0' || end == 0)
      continue;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    cnnb_safetensors *g;
    (*files)++;
    if (cnnb_safetensors_open(ctx, p, &g) != CNNB_OK) {
      fprintf(stderr, "%s: %s\n", p, cnnb_error_message(ctx));
      cnnb_clear_error(ctx);
      bad = 1;
      continue;
    }
    bad |= check_contents(g, p, s);
    cnnb_safetensors_close(g);
  }
  if (d) closedir(d);
  return bad;
}

static int verify(cnnb_ctx *ctx, const char *dir) {
  char index_path[4096];
  snprintf(index_path, sizeof index_path, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  json_error_t jerr;
  json_t *index = json_load_file(index_path, 0, &jerr);
  cnnb_safetensors *f;
  char *path;
  if (cnnb_checkpoint_dir_latest(ctx, dir, NULL, NULL, &f, &path) != CNNB_OK) {
    json_decref(index);
    return 1;
  }
  if (!f) {
    /* Only before the first save completed: then no index was written either. */
    if (index) {
      fprintf(stderr, "%s exists but no checkpoint was found\n", index_path);
      json_decref(index);
      return 1;
    }
    size_t files = 0;
    if (check_files(ctx, dir, &files) || files) {
      fprintf(stderr, "%zu checkpoint file(s) but none valid\n", files);
      return 1;
    }
    printf("none\n");
    return 0;
  }
  int bad = 0;
  int64_t step = read_step(f);
  char want[64], want_path[4200];
  cnnb_checkpoint_file_name(step, want, sizeof want);
  snprintf(want_path, sizeof want_path, "%s/%s", dir, want);
  if (strcmp(path, want_path) != 0) {
    fprintf(stderr, "%s holds step %" PRId64 "\n", path, step);
    bad = 1;
  }
  bad |= check_contents(f, path, step);
  cnnb_safetensors_close(f);
  if (!index) {
    /* Killed between the first checkpoint's rename and its index's: the scan found it. A
     * torn index (not merely a missing one) is an error. */
    FILE *exists = fopen(index_path, "rb");
    if (exists) {
      fclose(exists);
      fprintf(stderr, "%s: %s\n", index_path, jerr.text);
      bad = 1;
    }
    size_t files = 0;
    bad |= check_files(ctx, dir, &files);
    if (!bad) printf("ok step %" PRId64 " (no index yet, %zu files)\n", step, files);
    free(path);
    return bad;
  }
  const char *latest = json_string_value(json_object_get(index, "latest"));
  json_t *all = json_object_get(index, "all");
  size_t i;
  json_t *v;
  bool listed = false, newer_listed = false;
  json_array_foreach(all, i, v) {
    const char *name = json_string_value(v);
    int64_t s = -1;
    listed |= strcmp(name, want) == 0;
    if (sscanf(name, "model.ckpt-%" SCNd64, &s) == 1 && s > step) newer_listed = true;
  }
  if (!latest || newer_listed || (strcmp(want, latest) != 0 && listed)) {
    fprintf(stderr, "resumed from %s, but the index's latest is %s\n", path,
            latest ? latest : "(none)");
    bad = 1;
  }
  json_array_foreach(all, i, v) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, json_string_value(v));
    FILE *exists = fopen(p, "rb");
    if (!exists) {
      fprintf(stderr, "the index names %s, which is gone\n", p);
      bad = 1;
    } else {
      fclose(exists);
    }
  }
  size_t files = 0;
  bad |= check_files(ctx, dir, &files);
  if (!bad)
    printf("ok step %" PRId64 " (%zu in the index, %zu files)\n", step, json_array_size(all),
           files);
  json_decref(index);
  free(path);
  return bad;
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "verify"))) {
    fprintf(stderr, "usage: checkpoint_writer write DIR [MB] [MAX_KEEP] | verify DIR\n");
    return 2;
  }
  cnnb_ctx *ctx = cnnb_ctx_create("checkpoint_writer", NULL);
  int rc;
  if (strcmp(argv[1], "write") == 0)
    rc = write_loop(ctx, argv[2], argc > 3 ? atoll(argv[3]) : 64,
                    argc > 4 ? (int32_t)atoi(argv[4]) : 2);
  else rc = verify(ctx, argv[2]);
  if (rc && *cnnb_error_message(ctx))
    fprintf(stderr, "checkpoint_writer: %s\n", cnnb_error_message(ctx));
  cnnb_ctx_destroy(ctx);
  return rc;
}
