/* test_checkpoint_dir.c — a --train_dir's checkpoints (core/src/store/checkpoint_dir.c): saves
 * keep the newest max_keep and the index names them (oldest first, the newest as latest),
 * and only files the index named are ever deleted; resuming finds the newest checkpoint,
 * skips a torn or corrupt one with a warning naming it and falls back to the one before,
 * still finds the newest with the index gone or garbled, has none in an empty or missing
 * directory, and returns a `check` refusal as the error instead of trying older ones;
 * preparing the directory removes the temporary files of killed saves, and no others.
 * Issue 23: the newest file wins over an index left behind by a failed update, and the
 * index is rebuilt; files that do not read back whole are never deleted or saved over. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/checkpoint_dir.h"
#include "flags/flags.h"

static char dir[256];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_checkpoint_dir.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ctx = cnnb_ctx_create("checkpoint", NULL);
}
static void teardown(void) {
  cnnb_ctx_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

static void ckpt_path(char *buf, size_t size, int64_t step) {
  ck_assert_uint_ge(size, sizeof dir + 64);
  char name[64];
  cnnb_checkpoint_file_name(step, name, sizeof name);
  snprintf(buf, size, "%s/%s", dir, name);
}
static bool exists(const char *path) { return access(path, F_OK) == 0; }
static bool step_exists(int64_t step) {
  char p[400];
  ckpt_path(p, sizeof p, step);
  return exists(p);
}

/* A checkpoint of `step`: its step and values derived from it, so which one was read
 * shows. */
static void save(int64_t step, int32_t max_keep) {
  float w[4];
  for (int i = 0; i < 4; i++) w[i] = (float)step + (float)i;
  cnnb_st_tensor t[] = {{"global_step", CNNB_ST_I64, 0, {0}, &step, 8},
                        {"w", CNNB_ST_F32, 1, {4}, w, sizeof w}};
  char *path = NULL;
  cnnb_clear_error(ctx);
  ck_assert_msg(cnnb_checkpoint_dir_save(ctx, dir, step, max_keep, t, 2, NULL, 0, &path) == CNNB_OK,
                "%s", cnnb_error_message(ctx));
  char want[400];
  ckpt_path(want, sizeof want, step);
  ck_assert_str_eq(path, want);
  free(path);
}

/* The step of the checkpoint latest() finds (-1: none); `log` gets what it printed. */
static int64_t latest_step(char **log) {
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  dup2(fileno(tmp), 2);
  cnnb_safetensors *f = (cnnb_safetensors *)1;
  char *path = (char *)1;
  cnnb_clear_error(ctx);
  cnnb_status st = cnnb_checkpoint_dir_latest(ctx, dir, NULL, NULL, &f, &path);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long size = ftell(tmp);
  *log = calloc((size_t)size + 1, 1);
  rewind(tmp);
  ck_assert_uint_eq(fread(*log, 1, (size_t)size, tmp), (size_t)size);
  fclose(tmp);
  ck_assert_msg(st == CNNB_OK, "%s", cnnb_error_message(ctx));
  if (!f) {
    ck_assert_ptr_null(path);
    return -1;
  }
  const cnnb_st_tensor *s = cnnb_safetensors_find(f, "global_step");
  ck_assert_ptr_nonnull(s);
  int64_t step;
  memcpy(&step, s->data, 8);
  char want[400];
  ckpt_path(want, sizeof want, step);
  ck_assert_str_eq(path, want);
  const cnnb_st_tensor *w = cnnb_safetensors_find(f, "w");
  float v[4];
  memcpy(v, w->data, sizeof v);
  for (int i = 0; i < 4; i++) ck_assert_float_eq(v[i], (float)step + (float)i);
  cnnb_safetensors_close(f);
  free(path);
  return step;
}

static json_t *load_index(void) {
  char p[300];
  snprintf(p, sizeof p, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  json_error_t err;
  json_t *j = json_load_file(p, 0, &err);
  ck_assert_msg(j != NULL, "%s", err.text);
  return j;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(file_names) {
  char buf[64];
  cnnb_checkpoint_file_name(100, buf, sizeof buf);
  ck_assert_str_eq(buf, "model.ckpt-0000000100.safetensors");
  cnnb_checkpoint_file_name(0, buf, sizeof buf);
  ck_assert_str_eq(buf, "model.ckpt-0000000000.safetensors");
  cnnb_checkpoint_file_name(12345678901LL, buf, sizeof buf);
  ck_assert_str_eq(buf, "model.ckpt-12345678901.safetensors");
}
END_TEST

START_TEST(save_keeps_newest) {
  /* Files the index never named stay, whatever their names. */
  char stray[400], notes[300];
  ckpt_path(stray, sizeof stray, 50);
  write_text(stray, "not even a checkpoint");
  snprintf(notes, sizeof notes, "%s/notes.txt", dir);
  write_text(notes, "mine");

  for (int64_t step = 100; step <= 400; step += 100) save(step, 2);
  ck_assert(!step_exists(100));
  ck_assert(!step_exists(200));
  ck_assert(step_exists(300));
  ck_assert(step_exists(400));
  ck_assert(exists(stray));
  ck_assert(exists(notes));
  json_t *j = load_index();
  ck_assert_str_eq(json_string_value(json_object_get(j, "latest")),
                   "model.ckpt-0000000400.safetensors");
  json_t *all = json_object_get(j, "all");
  ck_assert_uint_eq(json_array_size(all), 2);
  ck_assert_str_eq(json_string_value(json_array_get(all, 0)), "model.ckpt-0000000300.safetensors");
  ck_assert_str_eq(json_string_value(json_array_get(all, 1)), "model.ckpt-0000000400.safetensors");
  json_decref(j);

  /* The stray file under a checkpoint's name does not read back whole: said, and kept. */
  char *log;
  ck_assert_int_eq(latest_step(&log), 400);
  ck_assert_msg(strstr(log, "an older checkpoint does not read back whole: ") &&
                    strstr(log, stray) && strstr(log, "never deleted"),
                "%s", log);
  free(log);

  /* Saving a step again replaces it without listing it twice. */
  save(400, 2);
  j = load_index();
  ck_assert_uint_eq(json_array_size(json_object_get(j, "all")), 2);
  json_decref(j);
  ck_assert(step_exists(300));

  /* A smaller max_keep later drops the extra ones at the next save. */
  save(500, 1);
  ck_assert(!step_exists(300));
  ck_assert(!step_exists(400));
  ck_assert(step_exists(500));
  ck_assert(exists(stray));
  /* No temporary files left from any of it. */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
  ck_assert_int_ne(system(cmd), 0);
}
END_TEST

START_TEST(save_refuses) {
  float v = 0;
  cnnb_st_tensor t = {"v", CNNB_ST_F32, 0, {0}, &v, 4};
  ck_assert_int_eq(cnnb_checkpoint_dir_save(ctx, dir, 1, 0, &t, 1, NULL, 0, NULL), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "at least 1"));
  cnnb_clear_error(ctx);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  ck_assert_int_eq(cnnb_checkpoint_dir_save(ctx, missing, 1, 1, &t, 1, NULL, 0, NULL), CNNB_EIO);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), missing));
}
END_TEST

/* An index naming files outside the checkpoint names deletes nothing. */
START_TEST(garbled_index_deletes_nothing) {
  char victim[300], index[300];
  snprintf(victim, sizeof victim, "%s/victim", dir);
  write_text(victim, "keep me");
  snprintf(index, sizeof index, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  write_text(index, "{\"latest\": \"model.ckpt-0000000001.safetensors\", \"all\": [\"victim\", "
                    "\"../victim\", \"model.ckpt-0000000001.safetensors\"]}");
  fflush(stderr);
  save(2, 1); /* warns that the index is not one, writes a new one */
  ck_assert(exists(victim));
  json_t *j = load_index();
  ck_assert_uint_eq(json_array_size(json_object_get(j, "all")), 1);
  json_decref(j);
}
END_TEST

static void corrupt(int64_t step, int how) {
  char p[400];
  ckpt_path(p, sizeof p, step);
  if (how == 0) { /* torn: cut inside the data */
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(truncate(p, sb.st_size - 3), 0);
  } else { /* a header byte flipped: the JSON's opening brace, or the header size by 8 */
    long at = how == 1 ? 8 : 0;
    FILE *f = fopen(p, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ (how == 1 ? 0x20 : 0x08), f);
    ck_assert_int_eq(fclose(f), 0);
  }
}

START_TEST(corrupt_newest_falls_back) {
  save(100, 3);
  save(200, 3);
  save(300, 3);
  corrupt(300, _i);
  char *log;
  ck_assert_int_eq(latest_step(&log), 200);
  char p[400];
  ckpt_path(p, sizeof p, 300);
  ck_assert_msg(strstr(log, "warning: skipping a checkpoint that does not read back whole: ") &&
                    strstr(log, p),
                "%s", log);
  ck_assert_msg(strstr(log, _i == 0 ? "run past" : "header"), "%s", log);
  free(log);
  /* Two broken: the oldest; each file tried once (one warning each). */
  corrupt(200, 0);
  ck_assert_int_eq(latest_step(&log), 100);
  char *second = strstr(log, "skipping");
  ck_assert_ptr_nonnull(second);
  second = strstr(second + 1, "skipping");
  ck_assert_ptr_nonnull(second);
  ck_assert_ptr_null(strstr(second + 1, "skipping"));
  free(log);
  /* All broken: none, said so. */
  corrupt(100, 1);
  ck_assert_int_eq(latest_step(&log), -1);
  ck_assert_ptr_nonnull(strstr(log, "none of its 3 checkpoint file(s) reads back whole"));
  free(log);
}
END_TEST

START_TEST(without_index_scans_dir) {
  save(9, 5);
  save(10, 5); /* 10 > 9 though "...09" and "...10" sort the same way: steps compare */
  save(8, 5);  /* the index's latest is now 8 (the last saved), but 10 is newer */
  char *log;
  ck_assert_int_eq(latest_step(&log), 10);
  free(log);
  char index[300];
  snprintf(index, sizeof index, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  ck_assert_int_eq(unlink(index), 0);
  ck_assert_int_eq(latest_step(&log), 10);
  ck_assert_str_eq(log, "");
  free(log);
  /* Checkpoints past 10 digits, temporary files and look-alikes are handled by name. */
  char p[400];
  snprintf(p, sizeof p, "%s/model.ckpt-99999999999.safetensors.tmp.123", dir);
  write_text(p, "half a file");
  snprintf(p, sizeof p, "%s/model.ckpt-12x.safetensors", dir);
  write_text(p, "x");
  ck_assert_int_eq(latest_step(&log), 10);
  free(log);
  /* A garbled index warns and the scan still finds the newest. */
  write_text(index, "{\"latest\": ");
  corrupt(10, 0);
  ck_assert_int_eq(latest_step(&log), 9);
  ck_assert_msg(strstr(log, index) && strstr(log, "not valid JSON"), "%s", log);
  free(log);
}
END_TEST

START_TEST(empty_or_missing_dir) {
  char *log;
  ck_assert_int_eq(latest_step(&log), -1);
  ck_assert_str_eq(log, "");
  free(log);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/not/there", dir);
  cnnb_safetensors *f = (cnnb_safetensors *)1;
  char *path = (char *)1;
  ck_assert_int_eq(cnnb_checkpoint_dir_latest(ctx, missing, NULL, NULL, &f, &path), CNNB_OK);
  ck_assert_ptr_null(f);
  ck_assert_ptr_null(path);
  /* prepare makes it, parents included, and is happy when it exists. */
  ck_assert_int_eq(cnnb_checkpoint_dir_prepare(ctx, missing), CNNB_OK);
  ck_assert_int_eq(cnnb_checkpoint_dir_prepare(ctx, missing), CNNB_OK);
  struct stat sb;
  ck_assert_int_eq(stat(missing, &sb), 0);
  ck_assert(S_ISDIR(sb.st_mode));
  /* A file where the directory should be. */
  char file[300];
  snprintf(file, sizeof file, "%s/file", dir);
  write_text(file, "x");
  ck_assert_int_eq(cnnb_checkpoint_dir_prepare(ctx, file), CNNB_EIO);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "not a directory"));
  cnnb_clear_error(ctx);
  char under[320];
  snprintf(under, sizeof under, "%s/sub", file);
  ck_assert_int_eq(cnnb_checkpoint_dir_prepare(ctx, under), CNNB_EIO);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), under));
}
END_TEST

/* prepare removes temporary files of saves whose process is gone, and only those. */
START_TEST(prepare_removes_stale_tmp) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ck_assert_int_gt(child, 0);
  ck_assert_int_eq(waitpid(child, NULL, 0), child); /* reaped: its pid names no process */
  char dead_ckpt[400], dead_index[300], live[400], mine[400], other[300];
  snprintf(dead_ckpt, sizeof dead_ckpt, "%s/model.ckpt-0000000001.safetensors.tmp.%ld", dir,
           (long)child);
  snprintf(dead_index, sizeof dead_index, "%s/checkpoint.tmp.%ld", dir, (long)child);
  snprintf(live, sizeof live, "%s/model.ckpt-0000000001.safetensors.tmp.%ld", dir, (long)getppid());
  snprintf(mine, sizeof mine, "%s/model.ckpt-0000000002.safetensors.tmp.%ld", dir, (long)getpid());
  snprintf(other, sizeof other, "%s/notes.tmp.%ld", dir, (long)child);
  const char *all[] = {dead_ckpt, dead_index, live, mine, other};
  for (int i = 0; i < 5; i++) write_text(all[i], "x");
  fflush(stderr);
  ck_assert_int_eq(cnnb_checkpoint_dir_prepare(ctx, dir), CNNB_OK);
  ck_assert(!exists(dead_ckpt));
  ck_assert(!exists(dead_index));
  ck_assert(exists(live));
  ck_assert(exists(mine));
  ck_assert(exists(other));
}
END_TEST

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  ck_assert_ptr_nonnull(in);
  ck_assert_ptr_nonnull(out);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
}

static const char *index_all(json_t *j, size_t i) {
  return json_string_value(json_array_get(json_object_get(j, "all"), i));
}

/* What a run's rank 0 does before its first save: find, then rebuild the index; returns
 * the step found (-1: none) and *unreadable the files that do not read back whole. */
static int64_t find_and_reindex(size_t *unreadable) {
  cnnb_checkpoint_found *f;
  cnnb_clear_error(ctx);
  ck_assert_msg(cnnb_checkpoint_dir_find(ctx, dir, NULL, NULL, &f) == CNNB_OK, "%s",
                cnnb_error_message(ctx));
  const char *path = cnnb_checkpoint_found_path(f);
  int64_t step = -1;
  if (path) ck_assert_int_eq(sscanf(strrchr(path, '-') + 1, "%" SCNd64, &step), 1);
  *unreadable = cnnb_checkpoint_found_unreadable(f);
  ck_assert_msg(cnnb_checkpoint_dir_reindex(ctx, dir, f) == CNNB_OK, "%s", cnnb_error_message(ctx));
  cnnb_checkpoint_found_free(f);
  return step;
}

/* Issue 23, finding 2: the index could not be written after step 22 was saved (a full
 * disk), so it still names step 20 as the latest. The newest file that reads back whole is
 * resumed (22, not 20, which would overwrite 22), and the index is rebuilt to list it. */
START_TEST(index_behind_resumes_newest) {
  save(16, 5);
  save(18, 5);
  save(20, 5);
  char index[300], copy[300];
  snprintf(index, sizeof index, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  snprintf(copy, sizeof copy, "%s/index.at20", dir);
  copy_file(index, copy);
  save(22, 5);
  copy_file(copy, index); /* as if writing the index after 22 had failed */
  char *log;
  ck_assert_int_eq(latest_step(&log), 22);
  free(log);
  size_t bad;
  fflush(stderr);
  ck_assert_int_eq(find_and_reindex(&bad), 22);
  ck_assert_uint_eq(bad, 0);
  json_t *j = load_index();
  ck_assert_str_eq(json_string_value(json_object_get(j, "latest")),
                   "model.ckpt-0000000022.safetensors");
  ck_assert_uint_eq(json_array_size(json_object_get(j, "all")), 4);
  ck_assert_str_eq(index_all(j, 0), "model.ckpt-0000000016.safetensors");
  json_decref(j);
  /* The next save rotates by the rebuilt index: 22 is kept, 16 and 18 go. */
  save(24, 3);
  ck_assert(!step_exists(16) && !step_exists(18));
  ck_assert(step_exists(20) && step_exists(22) && step_exists(24));
}
END_TEST

/* Issue 23, finding 1: files that do not read back whole (here 70 trailing bytes, a cut,
 * a bad header) are none found; the index that listed them is removed (it knew nothing
 * whole), later saves never delete them, and a save under one's name moves it aside
 * instead of replacing it. */
START_TEST(unreadable_files_are_kept) {
  save(1, 5);
  save(2, 5);
  save(3, 5);
  char p3[400], kept[420];
  ckpt_path(p3, sizeof p3, 3);
  FILE *f = fopen(p3, "ab");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 70; i++) fputc('x', f);
  ck_assert_int_eq(fclose(f), 0);
  struct stat sb;
  ck_assert_int_eq(stat(p3, &sb), 0);
  off_t size3 = sb.st_size;
  corrupt(2, 0);
  corrupt(1, 1);
  cnnb_checkpoint_found *found;
  ck_assert_int_eq(cnnb_checkpoint_dir_find(ctx, dir, NULL, NULL, &found), CNNB_OK);
  ck_assert_ptr_null(cnnb_checkpoint_found_path(found));
  ck_assert_uint_eq(cnnb_checkpoint_found_unreadable(found), 3);
  int64_t step = -1;
  const char *why = cnnb_checkpoint_found_why(found, 0, &step);
  ck_assert_int_eq(step, 3);
  ck_assert_msg(strstr(why, p3) && strstr(why, "70 trailing bytes"), "%s", why);
  ck_assert_ptr_null(cnnb_checkpoint_found_why(found, 3, NULL));
  fflush(stderr);
  ck_assert_int_eq(cnnb_checkpoint_dir_reindex(ctx, dir, found), CNNB_OK);
  cnnb_checkpoint_found_free(found);
  char index[300];
  snprintf(index, sizeof index, "%s/%s", dir, CNNB_CHECKPOINT_INDEX);
  ck_assert(!exists(index));
  /* Starting over anyway: step 3 again moves the unreadable one aside, whole. */
  save(3, 1);
  snprintf(kept, sizeof kept, "%s.kept", p3);
  ck_assert_int_eq(stat(kept, &sb), 0);
  ck_assert_int_eq(sb.st_size, size3);
  save(4, 1);
  save(5, 1);
  ck_assert(step_exists(1) && step_exists(2) && exists(kept));
  ck_assert(!step_exists(3) && !step_exists(4) && step_exists(5));
}
END_TEST

/* A file the index lists that no longer reads back whole leaves the index at rotation
 * but is not deleted. */
START_TEST(rotation_keeps_unreadable) {
  save(1, 2);
  save(2, 2);
  corrupt(1, 0);
  fflush(stderr);
  save(3, 2);
  ck_assert(step_exists(1));
  json_t *j = load_index();
  ck_assert_uint_eq(json_array_size(json_object_get(j, "all")), 2);
  ck_assert_str_eq(index_all(j, 0), "model.ckpt-0000000002.safetensors");
  json_decref(j);
  save(4, 2);
  ck_assert(step_exists(1) && !step_exists(2));
}
END_TEST

typedef struct seen {
  int calls;
  char last[400];
  bool refuse;
} seen;

static cnnb_status check_model(void *user, cnnb_ctx *c, const cnnb_safetensors *f,
                               const char *path) {
  seen *s = user;
  s->calls++;
  snprintf(s->last, sizeof s->last, "%s", path);
  ck_assert_ptr_nonnull(cnnb_safetensors_find(f, "w"));
  if (s->refuse) return cnnb_error(c, CNNB_EINVAL, "%s: wrong model", path);
  return CNNB_OK;
}

START_TEST(check_refusal_is_an_error) {
  save(1, 3);
  save(2, 3);
  save(3, 3);
  corrupt(3, 1);
  cnnb_safetensors *f;
  char *path;
  char want[400];
  ckpt_path(want, sizeof want, 2);
  /* Accepted: asked about the first valid candidate only (the corrupt one never). */
  seen s = {0};
  fflush(stderr);
  ck_assert_int_eq(cnnb_checkpoint_dir_latest(ctx, dir, check_model, &s, &f, &path), CNNB_OK);
  ck_assert_int_eq(s.calls, 1);
  ck_assert_str_eq(s.last, want);
  ck_assert_str_eq(path, want);
  cnnb_safetensors_close(f);
  free(path);
  /* Refused: the refusal comes back, no older checkpoint is tried. */
  seen r = {.refuse = true};
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_checkpoint_dir_latest(ctx, dir, check_model, &r, &f, &path), CNNB_EINVAL);
  ck_assert_int_eq(r.calls, 1);
  ck_assert_ptr_null(f);
  ck_assert_ptr_null(path);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "wrong model"));
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), want));
}
END_TEST

int main(void) {
  Suite *s = suite_create("checkpoint_dir");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, file_names);
  tcase_add_test(tc, save_keeps_newest);
  tcase_add_test(tc, save_refuses);
  tcase_add_test(tc, garbled_index_deletes_nothing);
  tcase_add_loop_test(tc, corrupt_newest_falls_back, 0, 3);
  tcase_add_test(tc, without_index_scans_dir);
  tcase_add_test(tc, empty_or_missing_dir);
  tcase_add_test(tc, check_refusal_is_an_error);
  tcase_add_test(tc, prepare_removes_stale_tmp);
  tcase_add_test(tc, index_behind_resumes_newest);
  tcase_add_test(tc, unreadable_files_are_kept);
  tcase_add_test(tc, rotation_keeps_unreadable);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
