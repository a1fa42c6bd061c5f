/* comm_thread.h — a strategy's communication thread: jobs posted from the step thread run
 * on it one after another, in order, while the step thread goes on with backward (as
 * Horovod's background thread does). The first failing job's status is kept (its message
 * in the thread's own ctx) and later jobs are skipped; wait() returns it.
 *
 * Threading: post() and wait() from one thread (the step thread); jobs run on the
 * communication thread and must not touch what the step thread uses until wait(). */
#ifndef CNNB_STRATEGY_COMM_THREAD_H
#define CNNB_STRATEGY_COMM_THREAD_H

#include <cnnb/cnnb.h>

typedef struct comm_thread comm_thread;
/* A job; ctx is the thread's own ctx (record errors there with cnnb_error). */
typedef cnnb_status (*comm_job_fn)(void *arg, cnnb_ctx *ctx);

/* ctx: the strategy's; errors of jobs are copied into it by wait(). */
cnnb_status comm_thread_start(cnnb_ctx *ctx, const char *name, comm_thread **out);
/* Joins the thread (after the queued jobs ran). NULL is a no-op. */
void comm_thread_stop(comm_thread *t);
/* Queues fn(arg); returns CNNB_ENOMEM only when the queue cannot grow. */
cnnb_status comm_thread_post(comm_thread *t, comm_job_fn fn, void *arg);
/* Waits until every job posted so far ran; the first failure since the last wait, with
 * its message recorded in the ctx given to start. */
cnnb_status comm_thread_wait(comm_thread *t);

#endif
