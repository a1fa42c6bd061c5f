/* test_comm_thread.c — the strategies' communication thread (plugins/strategies/common/
 * comm_thread.c, built into this test by tests/CMakeLists.txt): jobs run in the order
 * posted, also past the ring's first capacity; a job records its error in the thread's
 * own ctx, never the strategy's, so the step thread can record one of its own meanwhile;
 * wait() returns the first failure, with its message added to the strategy's ctx after
 * whatever the step thread recorded there, skips the jobs after it, and starts afresh. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "comm_thread.h"
#include "flags/flags.h"

enum { MANY = 100 }; /* past the ring's first 16 */

typedef struct record {
  int order[MANY];
  int ran;
  cnnb_ctx *seen_ctx; /* the ctx the jobs were given */
} record;

typedef struct job_arg {
  record *rec;
  int index;
  cnnb_status fail_with; /* CNNB_OK: succeed */
  bool note_and_succeed; /* record an error, then succeed anyway */
  /* When set, the job waits until `go`, so the test controls when it fails. */
  pthread_mutex_t *lock;
  pthread_cond_t *cond;
  bool *go, *started;
} job_arg;

static cnnb_status job(void *arg, cnnb_ctx *ctx) {
  job_arg *a = arg;
  if (a->lock) {
    pthread_mutex_lock(a->lock);
    *a->started = true;
    pthread_cond_broadcast(a->cond);
    while (!*a->go) pthread_cond_wait(a->cond, a->lock);
    pthread_mutex_unlock(a->lock);
  }
  a->rec->order[a->rec->ran++] = a->index;
  a->rec->seen_ctx = ctx;
  if (a->note_and_succeed) cnnb_error(ctx, CNNB_EIO, "a hiccup job %d got over", a->index);
  if (a->fail_with != CNNB_OK) return cnnb_error(ctx, a->fail_with, "job %d failed", a->index);
  return CNNB_OK;
}

START_TEST(jobs_run_in_order) {
  cnnb_ctx *ctx = cnnb_ctx_create("strategy", NULL);
  comm_thread *t;
  ck_assert_int_eq(comm_thread_start(ctx, "test", &t), CNNB_OK);
  record rec = {0};
  job_arg args[MANY];
  for (int i = 0; i < MANY; i++) {
    args[i] = (job_arg){.rec = &rec, .index = i};
    ck_assert_int_eq(comm_thread_post(t, job, &args[i]), CNNB_OK);
  }
  ck_assert_int_eq(comm_thread_wait(t), CNNB_OK);
  ck_assert_int_eq(rec.ran, MANY);
  for (int i = 0; i < MANY; i++) ck_assert_int_eq(rec.order[i], i);
  ck_assert_ptr_nonnull(rec.seen_ctx);
  ck_assert_ptr_ne(rec.seen_ctx, ctx);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  comm_thread_stop(t);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(failure_reaches_the_strategy_ctx_at_wait) {
  cnnb_ctx *ctx = cnnb_ctx_create("strategy", NULL);
  comm_thread *t;
  ck_assert_int_eq(comm_thread_start(ctx, "test", &t), CNNB_OK);
  record rec = {0};
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  bool go = false, started = false;
  job_arg first = {.rec = &rec,
                   .index = 0,
                   .fail_with = CNNB_ECOMM,
                   .lock = &lock,
                   .cond = &cond,
                   .go = &go,
                   .started = &started};
  job_arg skipped = {.rec = &rec, .index = 1};
  ck_assert_int_eq(comm_thread_post(t, job, &first), CNNB_OK);
  ck_assert_int_eq(comm_thread_post(t, job, &skipped), CNNB_OK);
  /* While the job runs, the step thread records an error of its own in its ctx. */
  pthread_mutex_lock(&lock);
  while (!started) pthread_cond_wait(&cond, &lock);
  cnnb_error(ctx, CNNB_EIO, "the step thread's copy failed");
  go = true;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  ck_assert_str_eq(cnnb_error_message(ctx), "the step thread's copy failed");
  ck_assert_int_eq(comm_thread_wait(t), CNNB_ECOMM);
  ck_assert_str_eq(cnnb_error_message(ctx), "the step thread's copy failed: job 0 failed");
  ck_assert_int_eq(rec.ran, 1); /* the job after the failure was skipped */
  ck_assert_ptr_ne(rec.seen_ctx, ctx);

  /* Afresh: what the thread recorded is gone, the next failure is its own message. */
  cnnb_clear_error(ctx);
  job_arg fine = {.rec = &rec, .index = 2};
  ck_assert_int_eq(comm_thread_post(t, job, &fine), CNNB_OK);
  ck_assert_int_eq(comm_thread_wait(t), CNNB_OK);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  job_arg again = {.rec = &rec, .index = 3, .fail_with = CNNB_ENOMEM};
  ck_assert_int_eq(comm_thread_post(t, job, &again), CNNB_OK);
  ck_assert_int_eq(comm_thread_wait(t), CNNB_ENOMEM);
  ck_assert_str_eq(cnnb_error_message(ctx), "job 3 failed");
  ck_assert_int_eq(rec.ran, 3);
  comm_thread_stop(t);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(an_error_got_over_is_not_carried) {
  cnnb_ctx *ctx = cnnb_ctx_create("strategy", NULL);
  comm_thread *t;
  ck_assert_int_eq(comm_thread_start(ctx, "test", &t), CNNB_OK);
  record rec = {0};
  job_arg noted = {.rec = &rec, .index = 0, .note_and_succeed = true};
  ck_assert_int_eq(comm_thread_post(t, job, &noted), CNNB_OK);
  ck_assert_int_eq(comm_thread_wait(t), CNNB_OK);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  job_arg failing = {.rec = &rec, .index = 1, .fail_with = CNNB_ECOMM};
  ck_assert_int_eq(comm_thread_post(t, job, &failing), CNNB_OK);
  ck_assert_int_eq(comm_thread_wait(t), CNNB_ECOMM);
  ck_assert_str_eq(cnnb_error_message(ctx), "job 1 failed");
  comm_thread_stop(t);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(stop_runs_what_is_queued) {
  cnnb_ctx *ctx = cnnb_ctx_create("strategy", NULL);
  comm_thread *t;
  ck_assert_int_eq(comm_thread_start(ctx, "test", &t), CNNB_OK);
  record rec = {0};
  job_arg args[20];
  for (int i = 0; i < 20; i++) {
    args[i] = (job_arg){.rec = &rec, .index = i};
    ck_assert_int_eq(comm_thread_post(t, job, &args[i]), CNNB_OK);
  }
  comm_thread_stop(t);
  ck_assert_int_eq(rec.ran, 20);
  comm_thread_stop(NULL);
  cnnb_ctx_destroy(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("comm_thread");
  TCase *tc = tcase_create("comm_thread");
  tcase_add_test(tc, jobs_run_in_order);
  tcase_add_test(tc, failure_reaches_the_strategy_ctx_at_wait);
  tcase_add_test(tc, an_error_got_over_is_not_carried);
  tcase_add_test(tc, stop_runs_what_is_queued);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
