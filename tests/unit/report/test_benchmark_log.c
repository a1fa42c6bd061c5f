/* test_benchmark_log.c — the benchmark log's file and records apart from a run (the run
 * record and the step loop are cli/benchmark_log.sh's): the directory made with its
 * parents and the file named by rank; every record a whole line on disk as soon as it
 * is written; NaN as null, floats as their shortest decimal, non-UTF-8 text kept as
 * ASCII; the summary's extras, its own keys winning; one summary, written at close when
 * nobody did; an unwritable directory refused naming it; a NULL log doing nothing. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/benchmark_log.h"

static char dir[256];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/cnnb_test_benchmark_log.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ctx = cnnb_ctx_create("test", NULL);
  ck_assert_ptr_nonnull(ctx);
}

static void teardown(void) {
  char command[512];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(command), 0);
  cnnb_ctx_destroy(ctx);
}

/* The file's lines, parsed: each must be one JSON object ending in a newline. */
static size_t read_lines(const char *path, json_t **records, size_t max) {
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  char *line = NULL;
  size_t cap = 0, n = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    ck_assert_int_eq(line[len - 1], '\n');
    ck_assert_uint_lt(n, max);
    json_error_t error;
    records[n] = json_loads(line, 0, &error);
    ck_assert_msg(json_is_object(records[n]), "line %zu: %s", n + 1, line);
    n++;
  }
  free(line);
  fclose(f);
  return n;
}

static void free_lines(json_t **records, size_t n) {
  for (size_t i = 0; i < n; i++) json_decref(records[i]);
}

static const char *kind(const json_t *record) {
  return json_string_value(json_object_get(record, "record"));
}

/* Under Slurm the file carries the job (and restart), so a requeued job keeps the first
 * run's log beside its own. */
START_TEST(slurm_job_names_the_file) {
  cnnb_benchmark_log *log = NULL;
  ck_assert_int_eq(cnnb_benchmark_log_open(ctx, dir, "job123.restart1", 2, &log), CNNB_OK);
  char want[400];
  snprintf(want, sizeof want, "%s/benchmark_run.job123.restart1.rank2.jsonl", dir);
  ck_assert_str_eq(cnnb_benchmark_log_path(log), want);
  cnnb_benchmark_log_close(log);
  ck_assert_int_eq(access(want, F_OK), 0);
}
END_TEST

START_TEST(records_are_whole_lines_at_once) {
  char logs[320];
  snprintf(logs, sizeof logs, "%s/a/b", dir);
  cnnb_benchmark_log *log = NULL;
  ck_assert_int_eq(cnnb_benchmark_log_open(ctx, logs, NULL, 3, &log), CNNB_OK);
  char want[400];
  snprintf(want, sizeof want, "%s/benchmark_run.rank3.jsonl", logs);
  ck_assert_str_eq(cnnb_benchmark_log_path(log), want);

  cnnb_benchmark_log_step step = {.step = 1,
                                  .global_step = 6,
                                  .images_per_sec = 100,
                                  .images_per_sec_uncertainty = 0,
                                  .jitter = 0,
                                  .loss = 7.5,
                                  .top1 = NAN,
                                  .top5 = NAN,
                                  .learning_rate = 0.1f,
                                  .loss_scale = 128,
                                  .step_seconds = 0.25};
  ck_assert_int_eq(cnnb_benchmark_log_step_record(log, &step), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_eval(log, 10, 15, 0.25, 0.5, 40), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_checkpoint(log, 10, "/ckpt/model-\xff.safetensors", 1.5),
                   CNNB_OK);

  /* On disk before the log is closed: a killed run leaves these lines. */
  json_t *r[8];
  size_t n = read_lines(want, r, 8);
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(kind(r[0]), "step");
  ck_assert_int_eq(json_integer_value(json_object_get(r[0], "rank")), 3);
  ck_assert(json_number_value(json_object_get(r[0], "time")) > 1e9);
  ck_assert(json_is_null(json_object_get(r[0], "top1")));
  ck_assert(json_is_null(json_object_get(r[0], "top5")));
  ck_assert_int_eq(json_integer_value(json_object_get(r[0], "global_step")), 6);
  ck_assert_double_eq(json_number_value(json_object_get(r[0], "loss_scale")), 128);
  ck_assert_str_eq(kind(r[1]), "eval");
  ck_assert_int_eq(json_integer_value(json_object_get(r[1], "examples")), 40);
  ck_assert_int_eq(json_integer_value(json_object_get(r[1], "global_step")), 15);
  ck_assert_double_eq(json_number_value(json_object_get(r[1], "top5")), 0.5);
  ck_assert_str_eq(kind(r[2]), "checkpoint");
  ck_assert_str_eq(json_string_value(json_object_get(r[2], "path")), "/ckpt/model-?.safetensors");
  ck_assert_double_eq(json_number_value(json_object_get(r[2], "seconds")), 1.5);
  free_lines(r, n);

  /* The float 0.1f is written as 0.1, not as the double it widens to. */
  FILE *f = fopen(want, "r");
  char text[1024] = "";
  ck_assert_ptr_nonnull(fgets(text, sizeof text, f));
  fclose(f);
  ck_assert_ptr_nonnull(strstr(text, "\"learning_rate\":0.1,"));

  cnnb_benchmark_log_close(log);
}
END_TEST

START_TEST(summary_once_with_extras) {
  cnnb_benchmark_log *log = NULL;
  ck_assert_int_eq(cnnb_benchmark_log_open(ctx, dir, NULL, 0, &log), CNNB_OK);
  cnnb_benchmark_log_total(log, 312.4, 640, 2.05, 20);
  json_t *extras = json_pack("{s:f, s:s}", "time_to_accuracy_seconds", 12.5, "status", "not mine");
  ck_assert_int_eq(cnnb_benchmark_log_summary_extras(log, extras), CNNB_OK);
  json_decref(extras);
  json_t *more = json_pack("{s:f}", "time_to_accuracy_seconds", 11.0);
  ck_assert_int_eq(cnnb_benchmark_log_summary_extras(log, more), CNNB_OK);
  json_decref(more);
  json_t *array = json_array();
  ck_assert_int_eq(cnnb_benchmark_log_summary_extras(log, array), CNNB_EINVAL);
  json_decref(array);
  ck_assert_int_eq(cnnb_benchmark_log_summary(log, NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_summary(log, "late"), CNNB_OK); /* once only */
  char path[400];
  snprintf(path, sizeof path, "%s", cnnb_benchmark_log_path(log));
  cnnb_benchmark_log_close(log);

  json_t *r[4];
  size_t n = read_lines(path, r, 4);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(kind(r[0]), "summary");
  ck_assert_str_eq(json_string_value(json_object_get(r[0], "status")), "ok");
  ck_assert_double_eq(json_number_value(json_object_get(r[0], "images_per_sec")), 312.4);
  ck_assert_int_eq(json_integer_value(json_object_get(r[0], "images")), 640);
  ck_assert_int_eq(json_integer_value(json_object_get(r[0], "steps")), 20);
  ck_assert_double_eq(json_number_value(json_object_get(r[0], "time_to_accuracy_seconds")), 11.0);
  free_lines(r, n);
}
END_TEST

START_TEST(close_without_summary_says_so) {
  cnnb_benchmark_log *log = NULL;
  ck_assert_int_eq(cnnb_benchmark_log_open(ctx, dir, NULL, 1, &log), CNNB_OK);
  char path[400];
  snprintf(path, sizeof path, "%s", cnnb_benchmark_log_path(log));
  cnnb_benchmark_log_close(log);
  json_t *r[4];
  size_t n = read_lines(path, r, 4);
  ck_assert_uint_eq(n, 1);
  ck_assert_str_eq(kind(r[0]), "summary");
  ck_assert_str_ne(json_string_value(json_object_get(r[0], "status")), "ok");
  ck_assert(json_is_null(json_object_get(r[0], "images_per_sec")));
  ck_assert(json_is_null(json_object_get(r[0], "steps")));
  free_lines(r, n);
}
END_TEST

START_TEST(unwritable_directory_named) {
  char file[320], logs[400];
  snprintf(file, sizeof file, "%s/regular", dir);
  FILE *f = fopen(file, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  snprintf(logs, sizeof logs, "%s/logs", file);
  cnnb_benchmark_log *log = (cnnb_benchmark_log *)1;
  ck_assert_int_eq(cnnb_benchmark_log_open(ctx, logs, NULL, 0, &log), CNNB_EIO);
  ck_assert_ptr_null(log);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "--benchmark_log_dir="));
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), file));
}
END_TEST

START_TEST(null_log_does_nothing) {
  cnnb_benchmark_log_step step = {.step = 1};
  ck_assert_int_eq(cnnb_benchmark_log_step_record(NULL, &step), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_eval(NULL, 1, 1, 0, 0, 1), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_checkpoint(NULL, 1, "x", 0), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_summary_extras(NULL, NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_summary(NULL, NULL), CNNB_OK);
  ck_assert_int_eq(cnnb_benchmark_log_run(NULL, NULL, NULL, NULL), CNNB_OK);
  cnnb_benchmark_log_total(NULL, 1, 1, 1, 1);
  cnnb_benchmark_log_close(NULL);
  ck_assert_str_eq(cnnb_benchmark_log_path(NULL), "");
}
END_TEST

int main(void) {
  Suite *s = suite_create("benchmark_log");
  TCase *tc = tcase_create("benchmark_log");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, records_are_whole_lines_at_once);
  tcase_add_test(tc, slurm_job_names_the_file);
  tcase_add_test(tc, summary_once_with_extras);
  tcase_add_test(tc, close_without_summary_says_so);
  tcase_add_test(tc, unwritable_directory_named);
  tcase_add_test(tc, null_log_does_nothing);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
