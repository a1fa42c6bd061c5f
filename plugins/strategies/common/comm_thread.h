/* comm_thread.h — a strategy's communication thread: jobs posted from the step thread run
 * on it one after another, in order, while the step thread goes on with backward (as
 * Horovod's background thread does). The first failing job's status is kept and later
 * jobs are skipped until wait(), which returns it.
 *
 * Errors: the thread has a ctx of its own, a child of the strategy's (cnnb/ctx.h, ABI
 * 1.4: the same flags and log settings, its own error), and that is the ctx a job is
 * given and records its message in. cnnb_error on one ctx must not race; with two ctxs
 * the step thread may record errors in the strategy's ctx while jobs run. wait() copies
 * the first failure's message into the strategy's ctx (after whatever the step thread
 * recorded there, as context) and clears the thread's, so it is there when wait()
 * returns and the next failure starts afresh.
 *
 * Threading: post() and wait() from one thread (the step thread); jobs run on the
 * communication thread and must not touch what the step thread uses until wait(). */
#ifndef CNNB_STRATEGY_COMM_THREAD_H
#define CNNB_STRATEGY_COMM_THREAD_H

#include <cnnb/cnnb.h>

typedef struct comm_thread comm_thread;
/* A job; ctx is where it records its error (cnnb_error): the communication thread's own,
 * never the strategy's. Whatever the job calls that records errors (mpi_world's
 * collectives) takes this ctx too. */
typedef cnnb_status (*comm_job_fn)(void *arg, cnnb_ctx *ctx);

/* ctx: the strategy's; jobs' errors end up in it at wait(). `name` names the thread (top
 * -H) and its ctx (log lines of jobs say "NAME comm thread"). */
cnnb_status comm_thread_start(cnnb_ctx *ctx, const char *name, comm_thread **out);
/* Joins the thread (after the queued jobs ran). NULL is a no-op. */
void comm_thread_stop(comm_thread *t);
/* Queues fn(arg); fails (CNNB_ENOMEM, after waiting for the jobs queued) only when the
 * queue cannot grow. */
cnnb_status comm_thread_post(comm_thread *t, comm_job_fn fn, void *arg);
/* Waits until every job posted so far ran; returns the first failure since the last
 * wait, its message copied into the ctx given to start. */
cnnb_status comm_thread_wait(comm_thread *t);

#endif
