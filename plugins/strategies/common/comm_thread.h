/* comm_thread.h — a strategy's communication thread: jobs posted from the step thread run
 * on it one after another, in order, while the step thread goes on with backward (as
 * Horovod's background thread does). The first failing job's status is kept and later
 * jobs are skipped until wait(), which returns it.
 *
 * Errors: a job records its message with cnnb_error on the ctx it is given. The SDK
 * gives a plugin no ctx of its own to hand a thread, so that is the ctx given to start
 * (the strategy's) and the message is there when wait() returns. cnnb_error on one ctx
 * must not race, so while jobs may run the step thread records no error on that ctx:
 * it calls wait() first. (Were the SDK to export a child ctx, each thread would get its
 * own and wait() would copy the message over; the rule would then go away.)
 *
 * Threading: post() and wait() from one thread (the step thread); jobs run on the
 * communication thread and must not touch what the step thread uses until wait(). */
#ifndef CNNB_STRATEGY_COMM_THREAD_H
#define CNNB_STRATEGY_COMM_THREAD_H

#include <cnnb/cnnb.h>

typedef struct comm_thread comm_thread;
/* A job; ctx is where it records its error (cnnb_error), the ctx given to start. */
typedef cnnb_status (*comm_job_fn)(void *arg, cnnb_ctx *ctx);

/* ctx: the strategy's; jobs' errors end up in it. `name` names the thread (top -H). */
cnnb_status comm_thread_start(cnnb_ctx *ctx, const char *name, comm_thread **out);
/* Joins the thread (after the queued jobs ran). NULL is a no-op. */
void comm_thread_stop(comm_thread *t);
/* Queues fn(arg); fails (CNNB_ENOMEM, after waiting for the jobs queued) only when the
 * queue cannot grow. */
cnnb_status comm_thread_post(comm_thread *t, comm_job_fn fn, void *arg);
/* Waits until every job posted so far ran; returns the first failure since the last
 * wait, its message recorded in the ctx given to start. */
cnnb_status comm_thread_wait(comm_thread *t);

#endif
