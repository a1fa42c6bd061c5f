/* ps_async.c — the asynchronous parameter server across ranks (ps_async.h).
 *
 * A push is one message per PS rank: a header (this rank's step and the updates the host
 * handed over: hyperparameters per run of parameters), then the rank's mean gradient of
 * that PS rank's shard, packed. The PS rank's server thread applies it at once and
 * answers with its shard's current values; the pushing rank waits only for that answer.
 * A rank whose update was skipped (inf/NaN under dynamic loss scaling) pushes no update
 * and only pulls. When a rank is done it says so to every PS rank, and a server thread
 * ends once every rank has. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "ps_async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_apply.h"

#if CNNB_HAVE_MPI
#include <mpi.h>
#include <pthread.h>
#include <time.h>

enum { TAG_PUSH = 1, TAG_PULL = 2, TAG_DONE = 3 };

typedef struct push_header {
  int64_t step;
  int64_t num_updates; /* ps_update records follow, then the packed gradients */
} push_header;

struct ps_async {
  ps *s;
  MPI_Comm comm;
  /* The pushing side (step thread). */
  char **push; /* [num_ps] message buffers */
  size_t *push_size;
  float **pull;      /* [num_ps] packed shard values */
  MPI_Request *reqs; /* [2 * num_ps] */
  /* The serving side (PS ranks; the server thread's once started). */
  bool serving;
  pthread_t thread;
  cnnb_ctx *server_ctx; /* its own errors */
  float *server_vars;   /* [count]: the shard's truth */
  float *server_grads;  /* [count]: a push's gradients, at their arena positions */
  float *reply;         /* [shard count] */
  char *message;
  size_t message_size;
  int64_t pushes_applied;
  bool *done;    /* [world] ranks that said they are done */
  double *heard; /* [world] when each rank last pushed or said it is done */
  int num_done;
  volatile int server_failed; /* the server thread ended on an error (in server_ctx) */
  bool failure_reported;      /* ... and the step thread returned it */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polling, not spinning: the step thread on the same core computes. */
static void nap(int *polls) {
  if (++*polls < 256) return;
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

static cnnb_status mpi_error(cnnb_ctx *ctx, int rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
  return cnnb_error(ctx, CNNB_ECOMM, "parameter_server: %s: MPI reported \"%s\"", what, text);
}

/* Waits for reqs[n] until the deadline: 1 done, 0 timed out (*rc: MPI's status). */
static int wait_all(MPI_Request *reqs, int n, double deadline, int *rc) {
  int polls = 0;
  for (;;) {
    int all = 0;
    *rc = MPI_Testall(n, reqs, &all, MPI_STATUSES_IGNORE);
    if (*rc != MPI_SUCCESS || all) return all;
    if (now_s() >= deadline) return 0;
    nap(&polls);
  }
}

/* ---- serving (PS ranks) ------------------------------------------------------------ */

static cnnb_status serve_push(ps_async *a, int source, int bytes) {
  ps *s = a->s;
  const ps_shard *shard = &s->shards.shards[s->rank];
  if ((size_t)bytes > a->message_size) {
    char *grown = realloc(a->message, (size_t)bytes);
    if (!grown) return cnnb_error(a->server_ctx, CNNB_ENOMEM, "parameter_server: out of memory");
    a->message = grown, a->message_size = (size_t)bytes;
  }
  MPI_Request req;
  int rc = MPI_Irecv(a->message, bytes, MPI_BYTE, source, TAG_PUSH, a->comm, &req);
  if (rc == MPI_SUCCESS && !wait_all(&req, 1, now_s() + s->timeout_s, &rc) && rc == MPI_SUCCESS)
    return cnnb_error(a->server_ctx, CNNB_ECOMM,
                      "rank %d stopped answering: its push to "
                      "parameter server %d stopped half way (nothing more within %g s, "
                      "--collective_timeout_s)",
                      source, (int)s->rank, s->timeout_s);
  if (rc != MPI_SUCCESS) return mpi_error(a->server_ctx, rc, "receiving a push");
  push_header h;
  memcpy(&h, a->message, sizeof h);
  size_t expected = sizeof h + (size_t)h.num_updates * sizeof(ps_update) +
                    (size_t)shard->count * sizeof(float);
  if (h.num_updates < 0 || (size_t)bytes != expected)
    return cnnb_error(a->server_ctx, CNNB_EINTERNAL,
                      "parameter_server: a push from rank %d has "
                      "%d bytes for %lld updates, expected %zu",
                      source, bytes, (long long)h.num_updates, expected);
  const char *at = a->message + sizeof h;
  float *grads = malloc((size_t)(shard->count ? shard->count : 1) * sizeof *grads);
  if (!grads) return cnnb_error(a->server_ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  memcpy(grads, at + (size_t)h.num_updates * sizeof(ps_update),
         (size_t)shard->count * sizeof *grads);
  ps_shard_unpack(shard, grads, a->server_grads);
  free(grads);
  cnnb_status st = CNNB_OK;
  pthread_mutex_lock(&s->slots_lock); /* a checkpoint may be reading them */
  for (int64_t i = 0; i < h.num_updates && st == CNNB_OK; i++) {
    ps_update u;
    memcpy(&u, at + (size_t)i * sizeof u, sizeof u);
    st = ps_apply_to_shard(s, a->server_ctx, s->rank, a->server_vars, a->server_grads, u.offset,
                           &u.update);
  }
  pthread_mutex_unlock(&s->slots_lock);
  if (st != CNNB_OK) return st;
  if (h.num_updates > 0) a->pushes_applied++;
  ps_shard_pack(shard, a->server_vars, a->reply);
  rc = MPI_Isend(a->reply, (int)shard->count, MPI_FLOAT, source, TAG_PULL, a->comm, &req);
  if (rc == MPI_SUCCESS && !wait_all(&req, 1, now_s() + s->timeout_s, &rc) && rc == MPI_SUCCESS)
    return cnnb_error(a->server_ctx, CNNB_ECOMM,
                      "rank %d stopped answering: it does not take "
                      "the values it pulled from parameter server %d (nothing within %g s, "
                      "--collective_timeout_s)",
                      source, (int)s->rank, s->timeout_s);
  if (rc != MPI_SUCCESS) return mpi_error(a->server_ctx, rc, "answering a push");
  return CNNB_OK;
}

/* Serves pushes until every rank said it is done, or one falls silent. */
/* The ranks that have neither pushed nor said they are done for longer than the timeout:
 * in asynchronous mode nobody else waits for them, so the server is who notices. */
static cnnb_status check_silence(ps_async *a) {
  ps *s = a->s;
  double now = now_s();
  char silent[256] = "";
  size_t len = 0;
  int count = 0;
  for (int32_t r = 0; r < s->world_size; r++) {
    if (a->done[r] || now - a->heard[r] <= s->timeout_s) continue;
    if (len < sizeof silent)
      len += (size_t)snprintf(silent + len, sizeof silent - len, "%s%d", count ? ", " : "", (int)r);
    count++;
  }
  if (!count) return CNNB_OK;
  return cnnb_error(a->server_ctx, CNNB_ECOMM,
                    "%s %s stopped answering: no push to parameter "
                    "server %d within %g s (--collective_timeout_s)",
                    count == 1 ? "rank" : "ranks", silent, (int)s->rank, s->timeout_s);
}

static void *serve(void *arg) {
  ps_async *a = arg;
  ps *s = a->s;
  for (int32_t r = 0; r < s->world_size; r++) a->heard[r] = now_s();
  int polls = 0;
  cnnb_status st = CNNB_OK;
  while (st == CNNB_OK && a->num_done < s->world_size) {
    int arrived = 0;
    MPI_Status status;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, a->comm, &arrived, &status);
    if (rc != MPI_SUCCESS) {
      st = mpi_error(a->server_ctx, rc, "waiting for pushes");
      break;
    }
    if (!arrived) {
      st = check_silence(a);
      nap(&polls);
      continue;
    }
    polls = 0;
    a->heard[status.MPI_SOURCE] = now_s();
    if (status.MPI_TAG == TAG_DONE) {
      int unused;
      MPI_Recv(&unused, 1, MPI_INT, status.MPI_SOURCE, TAG_DONE, a->comm, MPI_STATUS_IGNORE);
      if (!a->done[status.MPI_SOURCE]) a->done[status.MPI_SOURCE] = true, a->num_done++;
      continue;
    }
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    st = serve_push(a, status.MPI_SOURCE, bytes);
    if (st == CNNB_OK) st = check_silence(a);
  }
  if (st != CNNB_OK) a->server_failed = 1;
  else
    cnnb_log(a->server_ctx, CNNB_LOG_INFO, "parameter server %d: applied %lld pushes from %d ranks",
             (int)s->rank, (long long)a->pushes_applied, (int)s->world_size);
  return NULL;
}

/* ---- the pushing side ------------------------------------------------------------- */

cnnb_status ps_async_open(ps *s) {
  ps_async *a = calloc(1, sizeof *a);
  if (!a) return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  s->async = a;
  a->s = s;
  a->comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &a->comm);
  if (rc != MPI_SUCCESS) return mpi_error(s->ctx, rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(a->comm, MPI_ERRORS_RETURN);
  int32_t n = s->num_ps;
  a->push = calloc((size_t)n, sizeof *a->push);
  a->push_size = calloc((size_t)n, sizeof *a->push_size);
  a->pull = calloc((size_t)n, sizeof *a->pull);
  a->reqs = calloc(2 * (size_t)n, sizeof *a->reqs);
  if (!a->push || !a->push_size || !a->pull || !a->reqs)
    return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  for (int32_t p = 0; p < n; p++)
    if (!(a->pull[p] = malloc((size_t)(s->shards.shards[p].count + 1) * sizeof(float))))
      return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  if (s->rank >= s->num_ps) return CNNB_OK;
  size_t arena = (size_t)(s->count ? s->count : 1) * sizeof(float);
  a->server_ctx = cnnb_ctx_create_child(s->ctx, "parameter_server");
  a->done = calloc((size_t)s->world_size, sizeof *a->done);
  a->heard = calloc((size_t)s->world_size, sizeof *a->heard);
  if (!a->server_ctx || !a->done || !a->heard || !(a->server_vars = malloc(arena)) ||
      !(a->server_grads = calloc(1, arena)) ||
      !(a->reply = malloc((size_t)(s->shards.shards[s->rank].count + 1) * sizeof(float))))
    return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
  return CNNB_OK;
}

cnnb_status ps_async_start(ps *s) {
  ps_async *a = s->async;
  if (s->rank >= s->num_ps) return CNNB_OK;
  memcpy(a->server_vars, s->vars, (size_t)s->count * sizeof(float));
  if (pthread_create(&a->thread, NULL, serve, a) != 0)
    return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: cannot start the server thread");
  a->serving = true;
  return CNNB_OK;
}

/* The server thread ended on a lost rank: this rank stops too, and never finalises MPI
 * (which would wait for the lost rank). */
static cnnb_status server_failure(ps *s) {
  s->async->failure_reported = true;
  mpi_world_abandon(s->world);
  return cnnb_error(s->ctx, CNNB_ECOMM, "%s", cnnb_error_message(s->async->server_ctx));
}

cnnb_status ps_async_push_pull(ps *s) {
  ps_async *a = s->async;
  if (a->server_failed) return server_failure(s);
  int32_t n = s->num_ps;
  size_t updates = (size_t)s->num_updates * sizeof(ps_update);
  for (int32_t p = 0; p < n; p++) {
    const ps_shard *shard = &s->shards.shards[p];
    size_t bytes = sizeof(push_header) + updates + (size_t)shard->count * sizeof(float);
    if (bytes > (size_t)INT32_MAX)
      return cnnb_error(s->ctx, CNNB_EUNSUPPORTED,
                        "parameter_server: a push of %zu bytes to "
                        "parameter server %d is more than one MPI message carries: use more "
                        "--num_ps_ranks",
                        bytes, (int)p);
    if (bytes > a->push_size[p]) {
      char *grown = realloc(a->push[p], bytes);
      if (!grown) return cnnb_error(s->ctx, CNNB_ENOMEM, "parameter_server: out of memory");
      a->push[p] = grown, a->push_size[p] = bytes;
    }
    push_header h = {s->step, s->num_updates};
    memcpy(a->push[p], &h, sizeof h);
    memcpy(a->push[p] + sizeof h, s->updates, updates);
    ps_shard_pack(shard, s->grads, (float *)(void *)(a->push[p] + sizeof h + updates));
    int rc = MPI_Irecv(a->pull[p], (int)shard->count, MPI_FLOAT, p, TAG_PULL, a->comm,
                       &a->reqs[2 * p]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(a->push[p], (int)bytes, MPI_BYTE, p, TAG_PUSH, a->comm, &a->reqs[2 * p + 1]);
    if (rc != MPI_SUCCESS) return mpi_error(s->ctx, rc, "starting a push");
  }
  int rc = MPI_SUCCESS;
  double deadline = now_s() + s->timeout_s;
  int polls = 0;
  for (;;) { /* wait, noticing our own server's failure (it may be the one not answering) */
    if (wait_all(a->reqs, 2 * n, now_s() + 0.05, &rc) || rc != MPI_SUCCESS) break;
    if (a->server_failed) return server_failure(s);
    if (now_s() >= deadline) {
      for (int32_t p = 0; p < n; p++) {
        int done = 0;
        MPI_Test(&a->reqs[2 * p], &done, MPI_STATUS_IGNORE);
        if (!done) {
          mpi_world_abandon(s->world);
          return cnnb_error(s->ctx, CNNB_ECOMM,
                            "parameter server rank %d stopped answering: no "
                            "reply to the push of step %lld within %g s (--collective_timeout_s)",
                            (int)p, (long long)s->step, s->timeout_s);
        }
      }
    }
    nap(&polls);
  }
  if (rc != MPI_SUCCESS) {
    mpi_world_abandon(s->world);
    return mpi_error(s->ctx, rc, "pushing gradients");
  }
  for (int32_t p = 0; p < n; p++) ps_shard_unpack(&s->shards.shards[p], a->pull[p], s->vars);
  return CNNB_OK;
}

void ps_async_close(ps *s) {
  ps_async *a = s ? s->async : NULL;
  if (!a) return;
  /* Done: every PS rank may stop waiting for this one. */
  static const int done = 1;
  bool delivered = a->comm != MPI_COMM_NULL && a->reqs;
  for (int32_t p = 0; delivered && p < s->num_ps; p++) {
    MPI_Request req;
    int rc = MPI_Isend(&done, 1, MPI_INT, p, TAG_DONE, a->comm, &req);
    delivered = rc == MPI_SUCCESS && wait_all(&req, 1, now_s() + s->timeout_s, &rc) &&
                rc == MPI_SUCCESS;
  }
  if (a->serving) {
    pthread_join(a->thread, NULL); /* it ends when every rank is done, or falls silent */
    if (a->server_failed) {
      mpi_world_abandon(s->world);
      if (!a->failure_reported) /* the run ended before the step thread saw it */
        cnnb_log(s->ctx, CNNB_LOG_ERROR, "%s", cnnb_error_message(a->server_ctx));
    }
  }
  if (!delivered) mpi_world_abandon(s->world);
  if (a->comm != MPI_COMM_NULL && delivered && !a->server_failed) MPI_Comm_free(&a->comm);
  for (int32_t p = 0; a->push && p < s->num_ps; p++) free(a->push[p]);
  for (int32_t p = 0; a->pull && p < s->num_ps; p++) free(a->pull[p]);
  free(a->push);
  free(a->push_size);
  free(a->pull);
  free(a->reqs);
  free(a->server_vars);
  free(a->server_grads);
  free(a->reply);
  free(a->message);
  free(a->done);
  free(a->heard);
  cnnb_ctx_destroy(a->server_ctx);
  free(a);
  s->async = NULL;
}

#else /* !CNNB_HAVE_MPI: asynchronous mode needs ranks, which need MPI */

cnnb_status ps_async_open(ps *s) {
  return cnnb_error(s->ctx, CNNB_EUNSUPPORTED, "parameter_server: built without MPI");
}
cnnb_status ps_async_start(ps *s) {
  (void)s;
  return CNNB_OK;
}
cnnb_status ps_async_push_pull(ps *s) {
  return cnnb_error(s->ctx, CNNB_EUNSUPPORTED, "parameter_server: built without MPI");
}
void ps_async_close(ps *s) { (void)s; }

#endif
