/* ps_async.h — tf's asynchronous parameter server (--cross_replica_sync=false) across the
 * ranks of an mpirun job: each rank pushes its own mean gradient to every PS rank as soon
 * as its step is done and pulls the values back, without waiting for the other ranks;
 * each PS rank's server thread applies every push as it arrives (with the pushing rank's
 * learning rate and step), so ranks train on values a few updates old, as tf's
 * asynchronous workers do.
 *
 * The server thread talks on a communicator of its own while the step thread uses the
 * world (MPI_THREAD_MULTIPLE); it owns its shard's variables and slots from the first
 * push on. Every wait is bounded by --collective_timeout_s: a PS rank that does not
 * answer, or a worker that falls silent before saying it is done, is named. */
#ifndef CNNB_PS_ASYNC_H
#define CNNB_PS_ASYNC_H

#include "parameter_server.h"

/* Every rank, in create, once the world is open (duplicating the communicator is
 * collective). A world of one needs no messages: pushes apply in place. */
cnnb_status ps_async_open(ps *s);
/* After the initial values are in s->vars: PS ranks start serving. */
cnnb_status ps_async_start(ps *s);
/* Pushes this rank's mean gradient (s->grads) with this step's updates to every PS
 * rank and pulls their shards into s->vars. */
cnnb_status ps_async_push_pull(ps *s);
/* Tells every PS rank this rank is done, waits (bounded) for this rank's server to have
 * heard from every rank, and frees. NULL-safe. The first failure goes to s->ctx's log
 * (destroy cannot return it). */
void ps_async_close(ps *s);

#endif
