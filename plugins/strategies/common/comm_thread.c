/* comm_thread.c — a strategy's communication thread (comm_thread.h): a pthread that runs
 * posted jobs in order from a growable ring buffer, recording their errors in a ctx of
 * its own that wait() hands over to the strategy's. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "comm_thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
  comm_job_fn fn;
  void *arg;
} job;

struct comm_thread {
  cnnb_ctx *ctx;        /* the strategy's: the step thread's */
  cnnb_ctx *thread_ctx; /* the jobs': written only by the thread, read after wait */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t posted;  /* a job arrived, or stop */
  pthread_cond_t drained; /* the queue ran empty */
  job *jobs;              /* ring of cap; count from head */
  size_t cap, head, count;
  bool running; /* a job is out of the ring and running */
  bool stopping;
  cnnb_status failed; /* the first failure since the last wait */
};

static void *run(void *arg) {
  comm_thread *t = arg;
  pthread_mutex_lock(&t->lock);
  for (;;) {
    while (t->count == 0 && !t->stopping) pthread_cond_wait(&t->posted, &t->lock);
    if (t->count == 0) break; /* stopping, and every job ran */
    job next = t->jobs[t->head];
    t->head = (t->head + 1) % t->cap;
    t->count--;
    t->running = true;
    bool skip = t->failed != CNNB_OK;
    pthread_mutex_unlock(&t->lock);
    cnnb_status st = skip ? CNNB_OK : next.fn(next.arg, t->thread_ctx);
    pthread_mutex_lock(&t->lock);
    if (t->failed == CNNB_OK) t->failed = st;
    t->running = false;
    if (t->count == 0) pthread_cond_broadcast(&t->drained);
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

cnnb_status comm_thread_start(cnnb_ctx *ctx, const char *name, comm_thread **out) {
  *out = NULL;
  comm_thread *t = calloc(1, sizeof *t);
  if (!t) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for the communication thread");
  t->ctx = ctx;
  t->cap = 16;
  char component[96];
  snprintf(component, sizeof component, "%s comm thread", name);
  t->jobs = calloc(t->cap, sizeof *t->jobs);
  t->thread_ctx = cnnb_ctx_create_child(ctx, component);
  if (!t->jobs || !t->thread_ctx) {
    cnnb_ctx_destroy(t->thread_ctx);
    free(t->jobs);
    free(t);
    return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for the communication thread");
  }
  pthread_mutex_init(&t->lock, NULL);
  pthread_cond_init(&t->posted, NULL);
  pthread_cond_init(&t->drained, NULL);
  int rc = pthread_create(&t->thread, NULL, run, t);
  if (rc != 0) {
    pthread_cond_destroy(&t->drained);
    pthread_cond_destroy(&t->posted);
    pthread_mutex_destroy(&t->lock);
    cnnb_ctx_destroy(t->thread_ctx);
    free(t->jobs);
    free(t);
    return cnnb_error(ctx, rc == EAGAIN ? CNNB_ENOMEM : CNNB_EINTERNAL,
                      "cannot start the communication thread: %s", strerror(rc));
  }
  /* Shown by top -H and gdb; a name too long for the kernel's 16 bytes is cut. */
  char label[16];
  snprintf(label, sizeof label, "cnnb-%s", name);
  pthread_setname_np(t->thread, label);
  *out = t;
  return CNNB_OK;
}

void comm_thread_stop(comm_thread *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->stopping = true;
  pthread_cond_signal(&t->posted);
  pthread_mutex_unlock(&t->lock);
  pthread_join(t->thread, NULL);
  pthread_cond_destroy(&t->drained);
  pthread_cond_destroy(&t->posted);
  pthread_mutex_destroy(&t->lock);
  cnnb_ctx_destroy(t->thread_ctx);
  free(t->jobs);
  free(t);
}

/* Doubles the ring, unrolling it so the oldest job is first. */
static bool grow(comm_thread *t) {
  job *bigger = malloc(2 * t->cap * sizeof *bigger);
  if (!bigger) return false;
  for (size_t i = 0; i < t->count; i++) bigger[i] = t->jobs[(t->head + i) % t->cap];
  free(t->jobs);
  t->jobs = bigger;
  t->head = 0;
  t->cap *= 2;
  return true;
}

cnnb_status comm_thread_post(comm_thread *t, comm_job_fn fn, void *arg) {
  pthread_mutex_lock(&t->lock);
  if (t->count == t->cap && !grow(t)) {
    size_t queued = t->count;
    pthread_mutex_unlock(&t->lock);
    /* The jobs already queued still run, so what they fail with comes first. */
    cnnb_status st = comm_thread_wait(t);
    if (st != CNNB_OK) return st;
    return cnnb_error(t->ctx, CNNB_ENOMEM, "out of memory queueing communication (%zu jobs)",
                      queued);
  }
  t->jobs[(t->head + t->count) % t->cap] = (job){fn, arg};
  t->count++;
  pthread_cond_signal(&t->posted);
  pthread_mutex_unlock(&t->lock);
  return CNNB_OK;
}

cnnb_status comm_thread_wait(comm_thread *t) {
  pthread_mutex_lock(&t->lock);
  while (t->count > 0 || t->running) pthread_cond_wait(&t->drained, &t->lock);
  cnnb_status st = t->failed;
  t->failed = CNNB_OK;
  pthread_mutex_unlock(&t->lock);
  /* The thread is idle until the next post (on this thread), and the lock ordered its
   * last writes to its ctx before these reads. */
  if (st != CNNB_OK) {
    const char *why = cnnb_error_message(t->thread_ctx);
    cnnb_error(t->ctx, st, "%s", *why ? why : "a communication job failed saying nothing");
  }
  cnnb_clear_error(t->thread_ctx); /* also what a job recorded and then got over */
  return st;
}
