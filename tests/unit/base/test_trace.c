/* test_trace.c — the --trace_file recorder (core/src/base/trace.c) and the SDK calls plugins
 * make (cnnb/trace.h): active only inside the window and for the whole ctx family;
 * events outside it, with end < start or without a track are dropped; a plugin's args
 * that are not a JSON object are dropped (the event kept); one tid per track with its
 * thread_name; appends from several threads all land; the file is the JSON Object Format
 * with otherData; the per-rank file name; a path that cannot be created fails by name. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags/flags.h"
#include "base/trace.h"

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/cnnb_test_trace_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static const cnnb_trace_info info = {"lenet", "cpu", "replicated", 2, 0, 1, NULL};

/* The events named `name` in the file's traceEvents. */
static size_t count_named(json_t *doc, const char *name) {
  size_t i, n = 0;
  json_t *e;
  json_array_foreach(json_object_get(doc, "traceEvents"), i, e)
      n += strcmp(json_string_value(json_object_get(e, "name")), name) == 0;
  return n;
}

static json_t *find_named(json_t *doc, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(doc, "traceEvents"), i,
                     e) if (strcmp(json_string_value(json_object_get(e, "name")), name) ==
                            0) return e;
  return NULL;
}

START_TEST(window_family_and_drops) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/t.json", dir);
  cnnb_ctx *root = cnnb_ctx_create("cnnbench", NULL);
  cnnb_ctx *plugin = cnnb_ctx_create_child(root, "horovod");
  cnnb_ctx *other = cnnb_ctx_create("elsewhere", NULL); /* another family */
  cnnb_trace *t = NULL;
  ck_assert_int_eq(cnnb_trace_open(root, path, &info, &t), CNNB_OK);
  cnnb_trace_attach(root, t);
  ck_assert_int_eq(cnnb_trace_active(plugin), 0);
  cnnb_trace_event(plugin, "allreduce bucket 1", "before the window", 1, 2, NULL);

  cnnb_trace_begin(t);
  ck_assert_int_eq(cnnb_trace_active(root), 1);
  ck_assert_int_eq(cnnb_trace_active(plugin), 1);
  ck_assert_int_eq(cnnb_trace_active(other), 0);
  ck_assert_int_eq(cnnb_trace_active(NULL), 0);
  double a = cnnb_trace_now_us(), b = cnnb_trace_now_us();
  ck_assert(b >= a);
  cnnb_trace_event(plugin, "allreduce bucket 1", "allreduce", 10, 20.5, "{\"bytes\": 4096}");
  cnnb_trace_event(plugin, "allreduce bucket 2", "not an object", 30, 40, "[1, 2]");
  cnnb_trace_event(plugin, "allreduce bucket 2", "not json", 40, 50, "{bytes: 1");
  cnnb_trace_event(plugin, "allreduce bucket 1", "backwards", 60, 50, NULL);
  cnnb_trace_event(plugin, NULL, "no track", 60, 70, NULL);
  cnnb_trace_event(other, "allreduce bucket 1", "other family", 60, 70, NULL);
  cnnb_trace_host_event(root, "step", "step 1", "host", 5, 80, json_pack("{s:i}", "step", 1));
  cnnb_trace_end(t);

  ck_assert_int_eq(cnnb_trace_active(plugin), 0);
  cnnb_trace_event(plugin, "allreduce bucket 1", "after the window", 90, 95, NULL);
  ck_assert_int_eq(cnnb_trace_finish(t, root), CNNB_OK);
  cnnb_trace_attach(root, NULL);
  cnnb_trace_free(t);

  json_error_t error;
  json_t *doc = json_load_file(path, 0, &error);
  ck_assert_msg(doc != NULL, "not JSON: %s", error.text);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "displayTimeUnit")), "ms");
  json_t *other_data = json_object_get(doc, "otherData");
  ck_assert_str_eq(json_string_value(json_object_get(other_data, "model")), "lenet");
  ck_assert_str_eq(json_string_value(json_object_get(other_data, "strategy")), "replicated");
  ck_assert_int_eq(json_integer_value(json_object_get(other_data, "steps")), 2);

  ck_assert_uint_eq(count_named(doc, "before the window"), 0);
  ck_assert_uint_eq(count_named(doc, "after the window"), 0);
  ck_assert_uint_eq(count_named(doc, "backwards"), 0);
  ck_assert_uint_eq(count_named(doc, "no track"), 0);
  ck_assert_uint_eq(count_named(doc, "other family"), 0);
  json_t *e = find_named(doc, "allreduce");
  ck_assert_ptr_nonnull(e);
  ck_assert_str_eq(json_string_value(json_object_get(e, "ph")), "X");
  ck_assert_double_eq_tol(json_number_value(json_object_get(e, "ts")), 10, 1e-9);
  ck_assert_double_eq_tol(json_number_value(json_object_get(e, "dur")), 10.5, 1e-9);
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(e, "args"), "bytes")), 4096);
  /* Bad args: the event stays, its args go. */
  ck_assert_ptr_null(json_object_get(find_named(doc, "not an object"), "args"));
  ck_assert_ptr_null(json_object_get(find_named(doc, "not json"), "args"));
  ck_assert_ptr_nonnull(find_named(doc, "not json"));
  e = find_named(doc, "step 1");
  ck_assert_str_eq(json_string_value(json_object_get(e, "cat")), "host");

  /* Tracks: one tid each, named once; the two buckets apart, the process "rank 0". */
  size_t i;
  json_t *m;
  int tid1 = -1, tid2 = -1, names = 0;
  json_array_foreach(json_object_get(doc, "traceEvents"), i, m) {
    if (strcmp(json_string_value(json_object_get(m, "name")), "thread_name") != 0) continue;
    names++;
    const char *track = json_string_value(json_object_get(json_object_get(m, "args"), "name"));
    int tid = (int)json_integer_value(json_object_get(m, "tid"));
    if (strcmp(track, "allreduce bucket 1") == 0) tid1 = tid;
    if (strcmp(track, "allreduce bucket 2") == 0) tid2 = tid;
  }
  ck_assert_int_eq(names, 3); /* bucket 1, bucket 2, step */
  ck_assert_int_gt(tid1, 0);
  ck_assert_int_gt(tid2, 0);
  ck_assert_int_ne(tid1, tid2);
  ck_assert_int_eq((int)json_integer_value(json_object_get(find_named(doc, "allreduce"), "tid")),
                   tid1);
  ck_assert_str_eq(json_string_value(json_object_get(
                       json_object_get(find_named(doc, "process_name"), "args"), "name")),
                   "rank 0");
  json_decref(doc);
  cnnb_ctx_destroy(plugin);
  cnnb_ctx_destroy(root);
  cnnb_ctx_destroy(other);
  unlink(path);
  rmdir(dir);
}
END_TEST

enum { THREADS = 4, PER_THREAD = 500 };

static void *append(void *arg) {
  cnnb_ctx *ctx = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    char track[32];
    snprintf(track, sizeof track, "track %d", i % 7);
    cnnb_trace_event(ctx, track, "work", i, i + 1, "{\"i\": 1}");
  }
  return NULL;
}

START_TEST(threads_all_land) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/threads.json", dir);
  cnnb_ctx *root = cnnb_ctx_create("cnnbench", NULL);
  cnnb_ctx *children[THREADS];
  cnnb_trace *t = NULL;
  ck_assert_int_eq(cnnb_trace_open(root, path, &info, &t), CNNB_OK);
  cnnb_trace_attach(root, t);
  cnnb_trace_begin(t);
  pthread_t threads[THREADS];
  for (int k = 0; k < THREADS; k++) {
    children[k] = cnnb_ctx_create_child(root, "comm");
    ck_assert_int_eq(pthread_create(&threads[k], NULL, append, children[k]), 0);
  }
  for (int k = 0; k < THREADS; k++) pthread_join(threads[k], NULL);
  cnnb_trace_end(t);
  ck_assert_int_eq(cnnb_trace_finish(t, root), CNNB_OK);
  cnnb_trace_free(t);
  json_t *doc = json_load_file(path, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  ck_assert_uint_eq(count_named(doc, "work"), THREADS * PER_THREAD);
  ck_assert_uint_eq(count_named(doc, "thread_name"), 7);
  json_decref(doc);
  for (int k = 0; k < THREADS; k++) cnnb_ctx_destroy(children[k]);
  cnnb_ctx_destroy(root);
  unlink(path);
  rmdir(dir);
}
END_TEST

START_TEST(paths_and_bad_path) {
  char out[256];
  cnnb_trace_path("t.json", 0, 1, out, sizeof out);
  ck_assert_str_eq(out, "t.json");
  cnnb_trace_path("t.json", 1, 2, out, sizeof out);
  ck_assert_str_eq(out, "t.rank1.json");
  cnnb_trace_path("trace", 0, 4, out, sizeof out);
  ck_assert_str_eq(out, "trace.rank0.json");
  cnnb_ctx *ctx = cnnb_ctx_create("cnnbench", NULL);
  cnnb_trace *t = (cnnb_trace *)&out; /* must come back NULL */
  ck_assert_int_eq(cnnb_trace_open(ctx, "/nonexistent-dir/t.json", &info, &t), CNNB_EIO);
  ck_assert_ptr_null(t);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "--trace_file=/nonexistent-dir/t.json"));
  cnnb_ctx_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("trace");
  TCase *tc = tcase_create("trace");
  tcase_add_test(tc, window_family_and_drops);
  tcase_add_test(tc, threads_all_land);
  tcase_add_test(tc, paths_and_bad_path);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}
