/* mpi_world.c — the MPI job a strategy plugin joins, with every wait bounded
 * (mpi_world.h).
 *
 * Built with CNNB_HAVE_MPI=1 (CMake defines it; mpi_world.cmake) it speaks MPI; built
 * without, a world of one still works and a launch by mpirun is refused with a message.
 *
 * Why every collective is non-blocking: a blocking MPI_Allreduce waits forever for a
 * rank that was SIGSTOPped, and on shared memory nothing tells it that a killed one is
 * gone. Started with MPI_I* and polled with MPI_Test, a wait can end at a deadline; the
 * polling also answers the liveness probes other ranks send on a second communicator,
 * so at a timeout each rank can tell which ranks still answer and name the others.
 *
 * Sub-communicators (a node's ranks, and the nodes' leaders) serve the hierarchical
 * allreduce. Their collectives are waited on the same way; the probes still go to every
 * rank of the world on the control communicator, so a rank lost on another node is
 * named too, whichever communicator the wait was on. */
#define _GNU_SOURCE /* dladdr */
#include "mpi_world.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compact16.h"
#include "mpi_watchdog.h"

#if CNNB_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#endif

/* Bytes one allreduce call carries at most. OpenMPI 4.1's non-blocking in-place
 * allreduce reduces through a temporary buffer of the whole message: at 32 MiB and more
 * glibc maps it fresh every time (page faults on every byte) and the 100 MiB allreduce
 * took 110-120 ms where the blocking call takes 50-70. In 1 MiB pieces the buffer stays
 * in the heap and in cache: 45-50 ms (np=2 on this machine, bench/mpi_allreduce). */
#define PIECE_BYTES ((int64_t)1 << 20)
/* After a timeout, how long the live ranks get to answer a probe: they answer within a
 * poll (well under a millisecond) when they are waiting in a collective, as every live
 * rank of a stuck job soon is. */
#define PROBE_WINDOW_S 3.0

struct mpi_world {
  /* Where errors are recorded: the ctx given to open, then, from each collective on, the
   * ctx its caller passed (the calling thread's own: calls never overlap, so neither do
   * the uses of this field). */
  cnnb_ctx *ctx;
  cnnb_ctx *home_ctx; /* the ctx given to open: close reports there (the strategy's own) */
  bool multithreaded; /* MPI_THREAD_MULTIPLE asked for (mpi_world_open_multithreaded) */
  char who[64];
  double timeout_s;
  int32_t rank, size, local_rank, local_size;
  int32_t node_leader; /* the world rank of this node's local rank 0 */
  int32_t num_nodes;
  int32_t max_count; /* elements (or bytes) one MPI call carries */
  bool broken;       /* a rank was lost: every call fails, close does not finalise */
  uint16_t *staging; /* compact16's pieces */
  int64_t staging_count;
#if CNNB_HAVE_MPI
  bool joined;   /* MPI is in use (launched); only then are the fields below set */
  bool owns_mpi; /* this world initialised MPI, so it finalises it */
  MPI_Comm data, control;
  MPI_Comm node;    /* this node's ranks (MPI_COMM_TYPE_SHARED), ordered by world rank */
  MPI_Comm leaders; /* every node's local rank 0; MPI_COMM_NULL on the other ranks */
  MPI_Op sum_bf16, sum_fp16;
  MPI_Request probe_in; /* the standing receive of other ranks' probes */
  int probe_buf;
  int *acks;              /* [size] replies to this rank's probes */
  MPI_Request *probes;    /* [2 * size] this rank's probes and their replies */
  MPI_Request *node_reqs; /* [local_size] the hierarchical sum's messages within the node */
  MPI_Status *statuses;   /* [local_size] theirs */
  float *node_sums;       /* the leader's: a piece from every other rank of its node */
  int64_t node_sums_count;
#endif
};

bool mpi_world_launched(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

static const char *launcher_variable(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv(names[i])) return names[i];
  return "";
}

static void host_name(char *name, size_t size) {
  if (gethostname(name, size) != 0) snprintf(name, size, "?");
  name[size - 1] = '\0';
}

int32_t mpi_world_rank(const mpi_world *w) { return w->rank; }
int32_t mpi_world_size(const mpi_world *w) { return w->size; }
int32_t mpi_world_local_size(const mpi_world *w) { return w->local_size; }
int32_t mpi_world_local_rank(const mpi_world *w) { return w->local_rank; }
int32_t mpi_world_node_leader(const mpi_world *w) { return w->node_leader; }
int32_t mpi_world_num_nodes(const mpi_world *w) { return w->num_nodes; }

void mpi_world_set_max_count(mpi_world *w, int32_t max_count) {
  w->max_count = max_count > 0 ? max_count : INT_MAX;
}

static cnnb_status check_usable(mpi_world *w, const char *doing, const char *what) {
  if (!w->broken) return CNNB_OK;
  return cnnb_error(w->ctx, CNNB_ECOMM, "not %s %s: the MPI job already lost a rank", doing, what);
}

#if CNNB_HAVE_MPI

enum { TAG_PROBE = 1, TAG_ACK = 2 };
static const int ping = 1;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- joining ------------------------------------------------------------------- */

/* OpenMPI loads its components (transports, collectives) with dlopen, and many of them
 * use libmpi's symbols without linking libmpi: they find them only when libmpi is in
 * the process's global scope. The host dlopens this plugin RTLD_LOCAL, so libmpi, loaded
 * as the plugin's dependency, is not. Debian's OpenMPI 4.1.4 happens to work anyway
 * (checked with LD_DEBUG=scopes: components loaded before pml_ob1, such as bml_r2, link
 * libmpi and are opened RTLD_GLOBAL, which drags libmpi into the global scope), but that
 * is an accident of load order and of Debian's linking: OpenMPI's documentation asks a
 * program that dlopens libmpi to do it RTLD_GLOBAL, and where the components miss
 * libmpi's symbols MPI_Init fails with "mca_base_component_repository_open: unable to
 * open mca_...: undefined symbol". So libmpi is promoted to global before MPI_Init, as
 * mpi4py does for the OpenMPI builds that need it: found by the address of one of its
 * functions, reopened RTLD_NOLOAD (no second copy) with RTLD_GLOBAL. The handle is
 * kept: libmpi stays loaded as long as this plugin anyway. */
static void promote_libmpi(mpi_world *w) {
  Dl_info info;
  if (!dladdr((const void *)MPI_Init_thread, &info) || !info.dli_fname) return;
  if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
    cnnb_log(w->ctx, CNNB_LOG_DEBUG, "%s: could not make %s global: %s", w->who, info.dli_fname,
             dlerror());
}

static cnnb_status mpi_failed(mpi_world *w, int rc, const char *doing) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
  return cnnb_error(w->ctx, CNNB_ECOMM, "%s: %s failed: %s", w->who, doing, text);
}

static void user_sum_bf16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  compact16_add(COMPACT16_BF16, in, inout, *len);
}

static void user_sum_fp16(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  compact16_add(COMPACT16_FP16, in, inout, *len);
}

/* Takes `node` (this rank's node, a split of the data communicator every rank made) as
 * the node communicator and makes the leaders' from it. Blocks as MPI does: set-up. */
static cnnb_status adopt_node(mpi_world *w, MPI_Comm node) {
  int rc, local_rank = 0, local_size = 1, leader, nodes = 1;
  w->node = node;
  MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  w->local_rank = local_rank;
  w->local_size = local_size;
  /* The leader's world rank, by translating ranks between the groups (no message). */
  MPI_Group node_group, world_group;
  int zero = 0, leader_rank = w->rank;
  if (MPI_Comm_group(node, &node_group) == MPI_SUCCESS) {
    if (MPI_Comm_group(w->data, &world_group) == MPI_SUCCESS) {
      MPI_Group_translate_ranks(node_group, 1, &zero, world_group, &leader_rank);
      MPI_Group_free(&world_group);
    }
    MPI_Group_free(&node_group);
  }
  w->node_leader = leader_rank;
  free(w->node_reqs);
  free(w->statuses);
  w->node_reqs = calloc((size_t)local_size, sizeof *w->node_reqs);
  w->statuses = calloc((size_t)local_size, sizeof *w->statuses);
  if (!w->node_reqs || !w->statuses)
    return cnnb_error(w->ctx, CNNB_ENOMEM, "%s: out of memory", w->who);
  leader = local_rank == 0;
  if ((rc = MPI_Comm_split(w->data, leader ? 0 : MPI_UNDEFINED, w->rank, &w->leaders)) !=
      MPI_SUCCESS)
    return mpi_failed(w, rc, "MPI_Comm_split (the nodes' leaders)");
  if (w->leaders != MPI_COMM_NULL) MPI_Comm_set_errhandler(w->leaders, MPI_ERRORS_RETURN);
  if ((rc = MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, w->data)) != MPI_SUCCESS)
    return mpi_failed(w, rc, "MPI_Allreduce (counting the nodes)");
  w->num_nodes = nodes;
  return CNNB_OK;
}

static void free_nodes(mpi_world *w) {
  if (w->node != MPI_COMM_NULL) MPI_Comm_free(&w->node);
  if (w->leaders != MPI_COMM_NULL) MPI_Comm_free(&w->leaders);
}

/* This process's rank as the launcher gave it, before MPI says it: "?" when none does. */
static const char *launcher_rank(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (getenv(names[i])) return getenv(names[i]);
  return "?";
}

/* For the tests of a rank lost as the job ends, a moment a test cannot hit with a kill
 * from outside: CNNB_FAULT_SIGSTOP_AT=mpi_finalize (before the barrier of leaving) or
 * mpi_finalize_call (after it, before MPI_Finalize) stops this process there with
 * SIGSTOP, as a user's kill -STOP at that moment would. Nothing else reads it. */
static void stop_here_if_asked(const char *point) {
  const char *at = getenv("CNNB_FAULT_SIGSTOP_AT");
  if (at && strcmp(at, point) == 0) raise(SIGSTOP);
}

/* The watchdog's deadline: timeout_s, but never under WATCHDOG_MIN_S. Starting a job
 * (loading MPI's components, PMIx's exchange of addresses) and ending one take seconds
 * on a loaded machine: MPI_Init_thread took over 5 s in CI's fresh root while its tests
 * ran two at a time, so a --collective_timeout_s short enough for the collectives must
 * not fail a slow start. */
#define WATCHDOG_MIN_S 30.0
static double watchdog_seconds(const mpi_world *w) {
  return w->timeout_s > WATCHDOG_MIN_S ? w->timeout_s : WATCHDOG_MIN_S;
}

/* A watchdog (mpi_watchdog.h) on a call that waits for every rank with no deadline of
 * its own; a warning when no thread could be had for it. */
static mpi_watchdog *guard(mpi_world *w, const char *message) {
  mpi_watchdog *dog = mpi_watchdog_start(watchdog_seconds(w), message);
  if (!dog)
    cnnb_log(w->ctx, CNNB_LOG_WARN,
             "%s: no thread to bound a wait for every rank: a rank that stops there keeps "
             "this one waiting",
             w->who);
  return dog;
}

static cnnb_status join_unguarded(mpi_world *w) {
  promote_libmpi(w);
  int initialized = 0, finalized = 0, provided = 0, rc;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return cnnb_error(w->ctx, CNNB_EUNSUPPORTED,
                      "%s: MPI was already finalised in this process and cannot start again",
                      w->who);
  if (!initialized) {
    int level = w->multithreaded ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    if ((rc = MPI_Init_thread(NULL, NULL, level, &provided)) != MPI_SUCCESS)
      return mpi_failed(w, rc, "MPI_Init_thread");
    w->owns_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  w->joined = true; /* from here close() tidies up */
  if (w->multithreaded && provided < MPI_THREAD_MULTIPLE)
    return cnnb_error(w->ctx, CNNB_EUNSUPPORTED,
                      "%s: this MPI offers thread level %d, below MPI_THREAD_MULTIPLE (%d), which "
                      "a thread of this strategy needs to talk while the step thread does",
                      w->who, provided, MPI_THREAD_MULTIPLE);
  if (provided < MPI_THREAD_SERIALIZED)
    return cnnb_error(w->ctx, CNNB_EUNSUPPORTED,
                      "%s: this MPI offers thread level %d, below MPI_THREAD_SERIALIZED (%d): the "
                      "strategy's communication thread needs to call MPI",
                      w->who, provided, MPI_THREAD_SERIALIZED);
  /* Own communicators, so no message of ours meets another library's; errors return so
   * a dead peer is a status to report, not an abort. */
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &w->data)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &w->control)) != MPI_SUCCESS)
    return mpi_failed(w, rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(w->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(w->control, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(w->data, &rank);
  MPI_Comm_size(w->data, &size);
  w->rank = rank;
  w->size = size;
  MPI_Comm node;
  if ((rc = MPI_Comm_split_type(w->data, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node)) !=
      MPI_SUCCESS)
    return mpi_failed(w, rc, "MPI_Comm_split_type");
  cnnb_status st = adopt_node(w, node);
  if (st != CNNB_OK) return st;
  w->acks = calloc((size_t)size, sizeof *w->acks);
  w->probes = calloc(2 * (size_t)size, sizeof *w->probes);
  if (!w->acks || !w->probes) return cnnb_error(w->ctx, CNNB_ENOMEM, "%s: out of memory", w->who);
  MPI_Op_create(user_sum_bf16, 1, &w->sum_bf16);
  MPI_Op_create(user_sum_fp16, 1, &w->sum_fp16);
  if ((rc = MPI_Irecv(&w->probe_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_PROBE, w->control,
                      &w->probe_in)) != MPI_SUCCESS)
    return mpi_failed(w, rc, "MPI_Irecv");
  return CNNB_OK;
}

/* Joining blocks until every rank of the job has joined (MPI_Init_thread's exchange of
 * addresses, then the communicators' set-up): bounded by the watchdog, so a rank stopped
 * before it joined ends the job instead of keeping every other one waiting. */
static cnnb_status join_job(mpi_world *w) {
  char message[512];
  snprintf(message, sizeof message,
           "cnnbench: error: [rank %s] %s: the MPI job was not joined within %g s (the "
           "longer of --collective_timeout_s=%g and %g s): some rank never joined it (stopped, "
           "or far slower to start?); this rank gives up",
           launcher_rank(), w->who, watchdog_seconds(w), w->timeout_s, WATCHDOG_MIN_S);
  mpi_watchdog *dog = guard(w, message);
  cnnb_status st = join_unguarded(w);
  mpi_watchdog_stop(dog);
  return st;
}

static cnnb_status barrier_mpi(mpi_world *w, const char *what);

/* MPI_Finalize waits for every rank to finalise too, with no deadline. So the ranks first
 * meet at a barrier bounded as every collective (a rank stopped after the run's last
 * exchange is found there and named), and the rest is bounded by the watchdog (a rank
 * that stops between the two). A rank lost here ends this process with exit status 1 at
 * once: the run's results are out (the host closes its files before the strategy), and
 * destroy has no status to return. */
static void leave_job(mpi_world *w) {
  if (!w->joined || w->broken) return; /* finalising would wait for the lost rank */
  stop_here_if_asked("mpi_finalize");
  w->ctx = w->home_ctx; /* the last collective's ctx may be a thread's, gone by now */
  if (w->size > 1 && barrier_mpi(w, "every rank to leave the job") != CNNB_OK) {
    fflush(NULL);
    fprintf(stderr, "cnnbench: error: [rank %d] %s: %s; this rank leaves without it\n",
            (int)w->rank, w->who, cnnb_error_message(w->ctx));
    fflush(stderr);
    _exit(1);
  }
  stop_here_if_asked("mpi_finalize_call");
  char message[512];
  snprintf(message, sizeof message,
           "cnnbench: error: [rank %d] %s: MPI_Finalize did not return within %g s (the "
           "longer of --collective_timeout_s=%g and %g s): a rank stopped answering as the job "
           "ended; this rank leaves without it",
           (int)w->rank, w->who, watchdog_seconds(w), w->timeout_s, WATCHDOG_MIN_S);
  mpi_watchdog *dog = guard(w, message);
  if (w->probe_in != MPI_REQUEST_NULL) {
    MPI_Cancel(&w->probe_in);
    MPI_Wait(&w->probe_in, MPI_STATUS_IGNORE);
  }
  if (w->sum_bf16 != MPI_OP_NULL) MPI_Op_free(&w->sum_bf16);
  if (w->sum_fp16 != MPI_OP_NULL) MPI_Op_free(&w->sum_fp16);
  free_nodes(w);
  if (w->data != MPI_COMM_NULL) MPI_Comm_free(&w->data);
  if (w->control != MPI_COMM_NULL) MPI_Comm_free(&w->control);
  if (w->owns_mpi) MPI_Finalize();
  mpi_watchdog_stop(dog);
}

/* ---- waiting -------------------------------------------------------------------- */

/* Between polls: 2048 polls back to back (about a millisecond: one piece of a large
 * allreduce, or a small one, completes within them once every rank is there), then
 * sleeps growing to 50 µs (plus the kernel's timer slack), so waiting for a rank that is
 * still computing costs a few percent of a core, which the step thread computing
 * backward needs. Measured on the 100 MiB allreduce, np=2: 256 polls and 100 µs sleeps
 * took 65-75 ms, these 45-55. */
static void pause_between_polls(int *polls, long *sleep_ns) {
  if (++*polls < 2048) return;
  *sleep_ns = *sleep_ns ? (*sleep_ns < 50000 ? *sleep_ns * 2 : 50000) : 1000;
  struct timespec ts = {0, *sleep_ns};
  nanosleep(&ts, NULL);
}

/* Answers every probe that arrived: a live rank says so. */
static int answer_probes(mpi_world *w) {
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    int rc = MPI_Test(&w->probe_in, &arrived, &status);
    if (rc != MPI_SUCCESS || !arrived) return rc;
    MPI_Request reply;
    /* Eager-sized, so it leaves at once even to a rank that stopped reading; freed
     * unwaited, as nothing is waiting for it here. */
    if ((rc = MPI_Isend(&ping, 1, MPI_INT, status.MPI_SOURCE, TAG_ACK, w->control, &reply)) ==
        MPI_SUCCESS)
      MPI_Request_free(&reply);
    rc = MPI_Irecv(&w->probe_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_PROBE, w->control, &w->probe_in);
    if (rc != MPI_SUCCESS) return rc;
  }
}

/* Probes every other rank and waits up to PROBE_WINDOW_S for their replies; silent[r]
 * says who did not reply. Returns how many. Leaves the world broken: a probe's reply
 * may still arrive, so these requests are never waited on again. */
static int find_silent_ranks(mpi_world *w, bool *silent) {
  int n = w->size, pending = 0;
  for (int r = 0; r < n; r++) {
    silent[r] = false;
    w->probes[2 * r] = w->probes[2 * r + 1] = MPI_REQUEST_NULL;
    if (r == w->rank) continue;
    silent[r] = true;
    if (MPI_Irecv(&w->acks[r], 1, MPI_INT, r, TAG_ACK, w->control, &w->probes[2 * r + 1]) !=
            MPI_SUCCESS ||
        MPI_Isend(&ping, 1, MPI_INT, r, TAG_PROBE, w->control, &w->probes[2 * r]) != MPI_SUCCESS)
      continue; /* cannot even reach it: silent */
    pending++;
  }
  double window = w->timeout_s < PROBE_WINDOW_S ? w->timeout_s : PROBE_WINDOW_S;
  double deadline = now_s() + window;
  while (pending > 0 && now_s() < deadline) {
    for (int r = 0; r < n; r++) {
      int done = 0;
      if (w->probes[2 * r + 1] == MPI_REQUEST_NULL || !silent[r]) continue;
      if (MPI_Test(&w->probes[2 * r + 1], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
        silent[r] = false;
        pending--;
      }
    }
    answer_probes(w); /* other live ranks are probing too */
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  w->broken = true;
  int count = 0;
  for (int r = 0; r < n; r++) count += silent[r];
  return count;
}

/* "rank 1", "ranks 1 and 3", "ranks 1, 2 and 3". */
static void name_ranks(const bool *which, int n, int count, char *out, size_t size) {
  size_t len = (size_t)snprintf(out, size, "%s", count == 1 ? "rank" : "ranks");
  int named = 0;
  for (int r = 0; r < n && len < size; r++) {
    if (!which[r]) continue;
    const char *sep = named == 0 ? " " : named + 1 == count ? " and " : ", ";
    len += (size_t)snprintf(out + len, size - len, "%s%d", sep, r);
    named++;
  }
}

/* After a timeout (timed_out) or an error MPI reported (failure says which), names the
 * ranks that no longer answer. */
static cnnb_status report_lost(mpi_world *w, const char *failure, bool timed_out, const char *doing,
                               const char *what) {
  bool *silent = calloc((size_t)w->size, sizeof *silent);
  int count = silent ? find_silent_ranks(w, silent) : 0;
  w->broken = true;
  char names[256], option[64] = "";
  if (count > 0) name_ranks(silent, w->size, count, names, sizeof names);
  free(silent);
  if (timed_out) snprintf(option, sizeof option, " (--collective_timeout_s=%g)", w->timeout_s);
  if (count > 0)
    return cnnb_error(w->ctx, CNNB_ECOMM, "%s stopped answering: %s while %s %s%s", names, failure,
                      doing, what, option);
  if (timed_out)
    return cnnb_error(w->ctx, CNNB_ECOMM,
                      "%s while %s %s, yet every rank still answers a probe: "
                      "some rank has not reached this collective (is one far slower, or running "
                      "a different configuration?)%s",
                      failure, doing, what, option);
  return cnnb_error(w->ctx, CNNB_ECOMM, "%s while %s %s (every rank still answers a probe)",
                    failure, doing, what);
}

/* The first error among statuses[n] after MPI_Testall said MPI_ERR_IN_STATUS. */
static int error_in_statuses(const MPI_Status *statuses, int n, int rc) {
  for (int i = 0; i < n; i++)
    if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING)
      return statuses[i].MPI_ERROR;
  return rc;
}

/* Polls reqs[n] until all completed, answering probes meanwhile; past the deadline or on
 * a peer error, names the ranks that stopped answering and breaks the world. */
static cnnb_status wait_all(mpi_world *w, int n, MPI_Request *reqs, const char *doing,
                            const char *what) {
  double deadline = now_s() + w->timeout_s;
  int polls = 0;
  long sleep_ns = 0;
  for (;;) {
    int done = 0;
    int rc = n == 1 ? MPI_Test(reqs, &done, w->statuses) : MPI_Testall(n, reqs, &done, w->statuses);
    if (rc == MPI_ERR_IN_STATUS) rc = error_in_statuses(w->statuses, n, rc);
    if (rc == MPI_SUCCESS && done) return CNNB_OK;
    if (rc == MPI_SUCCESS) rc = answer_probes(w);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING], failure[MPI_MAX_ERROR_STRING + 64];
      int len = 0;
      if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
      snprintf(failure, sizeof failure, "MPI reported \"%s\"", text);
      return report_lost(w, failure, false, doing, what);
    }
    if (now_s() >= deadline) {
      char failure[64];
      snprintf(failure, sizeof failure, "no reply within %g s", w->timeout_s);
      return report_lost(w, failure, true, doing, what);
    }
    pause_between_polls(&polls, &sleep_ns);
  }
}

static cnnb_status wait_for(mpi_world *w, MPI_Request *req, const char *doing, const char *what) {
  return wait_all(w, 1, req, doing, what);
}

/* Starting a collective fails only on bad arguments or a communicator already broken. */
static cnnb_status check_start(mpi_world *w, int rc, const char *doing, const char *what) {
  if (rc == MPI_SUCCESS) return CNNB_OK;
  w->broken = true;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
  return cnnb_error(w->ctx, CNNB_ECOMM, "MPI refused to start %s %s: %s", doing, what, text);
}

static cnnb_status started(mpi_world *w, int rc, MPI_Request *req, const char *doing,
                           const char *what) {
  cnnb_status st = check_start(w, rc, doing, what);
  return st != CNNB_OK ? st : wait_for(w, req, doing, what);
}

/* ---- collectives ------------------------------------------------------------------ */

static cnnb_status grow_staging(mpi_world *w, int64_t count) {
  if (count <= w->staging_count) return CNNB_OK;
  uint16_t *grown = realloc(w->staging, (size_t)count * sizeof *grown);
  if (!grown)
    return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory for %lld 16-bit gradients to send",
                      (long long)count);
  w->staging = grown;
  w->staging_count = count;
  return CNNB_OK;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Elements of fp32 one call carries: PIECE_BYTES, or fewer for tests. */
static int64_t fp32_piece(const mpi_world *w) {
  return min64(PIECE_BYTES / (int64_t)sizeof(float), w->max_count);
}

/* fp32 over comm: piece by piece, each summed in place. */
static cnnb_status allreduce_fp32(mpi_world *w, MPI_Comm comm, float *buf, int64_t count,
                                  const char *doing, const char *what) {
  int64_t piece = fp32_piece(w);
  cnnb_status st = CNNB_OK;
  for (int64_t at = 0; st == CNNB_OK && at < count; at += piece) {
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + at, (int)min64(piece, count - at), MPI_FLOAT,
                            MPI_SUM, comm, &req);
    st = started(w, rc, &req, doing, what);
  }
  return st;
}

/* 16-bit: pieces packed into two staging halves in turn, so this rank packs the next
 * piece and unpacks the last while the current one travels (and another rank adds). */
static cnnb_status allreduce_compact(mpi_world *w, MPI_Comm comm, float *buf, int64_t count,
                                     uint32_t format, const char *doing, const char *what) {
  MPI_Op op = format == COMPACT16_FP16 ? w->sum_fp16 : w->sum_bf16;
  int64_t piece = min64(min64(PIECE_BYTES / (int64_t)sizeof(uint16_t), w->max_count), count);
  int64_t pieces = (count + piece - 1) / piece;
  cnnb_status st = grow_staging(w, 2 * piece);
  if (st != CNNB_OK) return st;
  uint16_t *half[2] = {w->staging, w->staging + piece};
  MPI_Request req;
  compact16_pack(format, buf, half[0], min64(piece, count));
  st = check_start(w,
                   MPI_Iallreduce(MPI_IN_PLACE, half[0], (int)min64(piece, count), MPI_UINT16_T, op,
                                  comm, &req),
                   doing, what);
  for (int64_t k = 0; st == CNNB_OK && k < pieces; k++) {
    int64_t at = k * piece, next = at + piece;
    if (next < count)
      compact16_pack(format, buf + next, half[(k + 1) % 2], min64(piece, count - next));
    if ((st = wait_for(w, &req, doing, what)) != CNNB_OK) break;
    if (next < count)
      st = check_start(w,
                       MPI_Iallreduce(MPI_IN_PLACE, half[(k + 1) % 2],
                                      (int)min64(piece, count - next), MPI_UINT16_T, op, comm,
                                      &req),
                       doing, what);
    compact16_unpack(format, half[k % 2], buf + at, min64(piece, count - at));
  }
  return st;
}

static cnnb_status allreduce_in(mpi_world *w, MPI_Comm comm, float *buf, int64_t count,
                                uint32_t compact16, const char *doing, const char *what) {
  return compact16 ? allreduce_compact(w, comm, buf, count, compact16, doing, what)
                   : allreduce_fp32(w, comm, buf, count, doing, what);
}

static cnnb_status allreduce_mpi(mpi_world *w, float *buf, int64_t count, uint32_t compact16,
                                 const char *what) {
  return allreduce_in(w, w->data, buf, count, compact16, "all-reducing", what);
}

/* One call's sum over comm into its rank `root`; `me` is this rank's rank in comm. */
static cnnb_status reduce_piece(mpi_world *w, MPI_Comm comm, int32_t me, float *buf, int n,
                                int32_t root, const char *doing, const char *what) {
  MPI_Request req;
  int rc = me == root ? MPI_Ireduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, root, comm, &req)
                      : MPI_Ireduce(buf, NULL, n, MPI_FLOAT, MPI_SUM, root, comm, &req);
  return started(w, rc, &req, doing, what);
}

static cnnb_status reduce_mpi(mpi_world *w, float *buf, int64_t count, int32_t root,
                              const char *what) {
  int64_t piece = fp32_piece(w); /* as allreduce */
  cnnb_status st = CNNB_OK;
  for (int64_t at = 0; st == CNNB_OK && at < count; at += piece)
    st = reduce_piece(w, w->data, w->rank, buf + at, (int)min64(piece, count - at), root,
                      "reducing", what);
  return st;
}

/* dst[i] += src[i], in blocks gcc vectorises at -O2. */
static void add_into(float *restrict dst, const float *restrict src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; k++) dst[i + k] += src[i + k];
  for (; i < n; i++) dst[i] += src[i];
}

/* Within the node, by messages rather than MPI_Ireduce and MPI_Ibcast: OpenMPI 4.1's
 * non-blocking reduce of 2 to 4 ranks is a chain of small segments, each of which
 * advances only when both ranks poll, and a rank waiting here sleeps between polls so
 * as not to take the core backward needs: 100 MiB took 1.5 s instead of 60 ms (np=2,
 * this machine). One message a rank and piece moves the piece in one go. */
enum { TAG_NODE_REDUCE = 3, TAG_NODE_BCAST = 4 };

/* The leader receives every other rank's piece and adds them in local-rank order (the
 * sum is the same floats however the messages arrive). */
static cnnb_status node_reduce(mpi_world *w, float *buf, int n, const char *what) {
  static const char doing[] = "reducing within the node";
  if (w->local_rank != 0) {
    int rc = MPI_Isend(buf, n, MPI_FLOAT, 0, TAG_NODE_REDUCE, w->node, &w->node_reqs[0]);
    return started(w, rc, &w->node_reqs[0], doing, what);
  }
  int others = w->local_size - 1;
  for (int r = 0; r < others; r++) {
    int rc = MPI_Irecv(w->node_sums + (int64_t)r * n, n, MPI_FLOAT, r + 1, TAG_NODE_REDUCE, w->node,
                       &w->node_reqs[r]);
    cnnb_status st = check_start(w, rc, doing, what);
    if (st != CNNB_OK) return st;
  }
  cnnb_status st = wait_all(w, others, w->node_reqs, doing, what);
  for (int r = 0; st == CNNB_OK && r < others; r++) add_into(buf, w->node_sums + (int64_t)r * n, n);
  return st;
}

static cnnb_status node_bcast(mpi_world *w, float *buf, int n, const char *what) {
  static const char doing[] = "broadcasting within the node";
  if (w->local_rank != 0) {
    int rc = MPI_Irecv(buf, n, MPI_FLOAT, 0, TAG_NODE_BCAST, w->node, &w->node_reqs[0]);
    return started(w, rc, &w->node_reqs[0], doing, what);
  }
  int others = w->local_size - 1;
  for (int r = 0; r < others; r++) {
    int rc = MPI_Isend(buf, n, MPI_FLOAT, r + 1, TAG_NODE_BCAST, w->node, &w->node_reqs[r]);
    cnnb_status st = check_start(w, rc, doing, what);
    if (st != CNNB_OK) return st;
  }
  return wait_all(w, others, w->node_reqs, doing, what);
}

/* Piece by piece, so a wait never spans more than one piece's trip between nodes: the
 * node's ranks add theirs into the leader's (local rank 0), the leaders all-reduce it
 * (16-bit when asked: the links between nodes are the slow ones), and each leader sends
 * the sum back to its node. Every rank ends with its leader's floats, and the leaders
 * with the same ones (one allreduce). Only leaders send between nodes, and each sends
 * the range once instead of once per rank of its node. */
static cnnb_status hierarchical_mpi(mpi_world *w, float *buf, int64_t count, uint32_t compact16,
                                    const char *what) {
  int64_t piece = min64(fp32_piece(w), count);
  bool leader = w->local_rank == 0;
  int64_t sums = leader ? piece * (w->local_size - 1) : 0;
  if (sums > w->node_sums_count) {
    float *grown = realloc(w->node_sums, (size_t)sums * sizeof *grown);
    if (!grown)
      return cnnb_error(w->ctx, CNNB_ENOMEM,
                        "out of memory for the node's %d pieces of %lld gradients",
                        (int)(w->local_size - 1), (long long)piece);
    w->node_sums = grown;
    w->node_sums_count = sums;
  }
  cnnb_status st = CNNB_OK;
  for (int64_t at = 0; st == CNNB_OK && at < count; at += piece) {
    int n = (int)min64(piece, count - at);
    if (w->local_size > 1) st = node_reduce(w, buf + at, n, what);
    if (st == CNNB_OK && leader && w->num_nodes > 1)
      st = allreduce_in(w, w->leaders, buf + at, n, compact16, "all-reducing across the nodes",
                        what);
    if (st == CNNB_OK && w->local_size > 1) st = node_bcast(w, buf + at, n, what);
  }
  return st;
}

/* For tests: nodes of `per_node` consecutive ranks. */
static cnnb_status regroup_nodes(mpi_world *w, int32_t per_node) {
  free_nodes(w);
  MPI_Comm node;
  int rc = MPI_Comm_split(w->data, w->rank / per_node, w->rank, &node);
  if (rc != MPI_SUCCESS) return mpi_failed(w, rc, "MPI_Comm_split (test nodes)");
  return adopt_node(w, node);
}

static cnnb_status bcast_mpi(mpi_world *w, void *buf, int64_t bytes, int32_t root,
                             const char *what) {
  cnnb_status st = CNNB_OK;
  for (int64_t at = 0; st == CNNB_OK && at < bytes; at += w->max_count) {
    int n = bytes - at < w->max_count ? (int)(bytes - at) : w->max_count;
    MPI_Request req;
    int rc = MPI_Ibcast((char *)buf + at, n, MPI_BYTE, root, w->data, &req);
    st = started(w, rc, &req, "broadcasting", what);
  }
  return st;
}

/* Each rank's `bytes` in one call when they fit; otherwise piece by piece through a
 * buffer holding one piece of every rank. */
static cnnb_status allgather_mpi(mpi_world *w, const void *send, void *recv, int64_t bytes,
                                 const char *what) {
  static const char doing[] = "all-gathering";
  MPI_Request req;
  if (bytes <= w->max_count) {
    int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, w->data, &req);
    return started(w, rc, &req, doing, what);
  }
  char *pieces = malloc((size_t)w->max_count * (size_t)w->size);
  if (!pieces) return cnnb_error(w->ctx, CNNB_ENOMEM, "out of memory %s %s", doing, what);
  cnnb_status st = CNNB_OK;
  for (int64_t at = 0; st == CNNB_OK && at < bytes; at += w->max_count) {
    int n = bytes - at < w->max_count ? (int)(bytes - at) : w->max_count;
    int rc = MPI_Iallgather((const char *)send + at, n, MPI_BYTE, pieces, n, MPI_BYTE, w->data,
                            &req);
    if ((st = started(w, rc, &req, doing, what)) != CNNB_OK) break;
    for (int32_t r = 0; r < w->size; r++)
      memcpy((char *)recv + (int64_t)r * bytes + at, pieces + (int64_t)r * n, (size_t)n);
  }
  free(pieces);
  return st;
}

static cnnb_status barrier_mpi(mpi_world *w, const char *what) {
  MPI_Request req;
  return started(w, MPI_Ibarrier(w->data, &req), &req, "waiting at a barrier for", what);
}

#else /* !CNNB_HAVE_MPI: a world of one needs none of these */

static cnnb_status join_job(mpi_world *w) {
  return cnnb_error(w->ctx, CNNB_EUNSUPPORTED,
                    "%s: this plugin was built without MPI, yet it was started by an MPI "
                    "launcher (%s is set): rebuild cnnbench with MPI (apt-get install "
                    "libopenmpi-dev openmpi-bin, then configure again: cmake says \"component "
                    "MPI: on\"), or run it without mpirun as one process",
                    w->who, launcher_variable());
}
static void leave_job(mpi_world *w) { (void)w; }
/* Unreachable (the world is always of one), but the calls below must compile. */
#define NO_MPI(...) (cnnb_error(w->ctx, CNNB_EINTERNAL, "%s: no MPI in this build", w->who))
#define allreduce_mpi(w, buf, count, compact16, what) NO_MPI()
#define hierarchical_mpi(w, buf, count, compact16, what) NO_MPI()
#define regroup_nodes(w, per_node) NO_MPI()
#define reduce_mpi(w, buf, count, root, what) NO_MPI()
#define bcast_mpi(w, buf, bytes, root, what) NO_MPI()
#define allgather_mpi(w, send, recv, bytes, what) NO_MPI()
#define barrier_mpi(w, what) NO_MPI()

#endif

/* ---- the world ------------------------------------------------------------------- */

static cnnb_status open_world(cnnb_ctx *ctx, const char *who, double timeout_s, bool multithreaded,
                              mpi_world **out) {
  *out = NULL;
  mpi_world *w = calloc(1, sizeof *w);
  if (!w) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", who);
  w->ctx = w->home_ctx = ctx;
  w->multithreaded = multithreaded;
  snprintf(w->who, sizeof w->who, "%s", who);
  w->timeout_s = timeout_s > 0 ? timeout_s : 60;
  w->size = w->local_size = w->num_nodes = 1;
  w->max_count = INT_MAX;
#if CNNB_HAVE_MPI
  w->data = w->control = w->node = w->leaders = MPI_COMM_NULL;
  w->sum_bf16 = w->sum_fp16 = MPI_OP_NULL;
  w->probe_in = MPI_REQUEST_NULL;
#endif
  char host[256];
  host_name(host, sizeof host);
  const char *srun_tasks = getenv("SLURM_STEP_NUM_TASKS");
  if (!mpi_world_launched() && getenv("SLURM_STEP_ID") && srun_tasks && atoi(srun_tasks) > 1) {
    /* srun without a PMI (--mpi=none, Slurm's usual MpiDefault): each task would run as
     * a world of one, training alone on the same --train_dir. */
    free(w);
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: srun started %s tasks (SLURM_STEP_NUM_TASKS) without a PMI, so MPI "
                      "cannot join them into one job and each would train alone: run srun "
                      "--mpi=pmix (OpenMPI speaks PMIx; `srun --mpi=list` names what this Slurm "
                      "has), or MpiDefault=pmix in slurm.conf",
                      who, srun_tasks);
  }
  if (mpi_world_launched()) {
    cnnb_status st = join_job(w);
    if (st != CNNB_OK) {
      mpi_world_close(w);
      return st;
    }
  }
  cnnb_log(ctx, CNNB_LOG_DEBUG, "%s: rank %d of %d on %s (%d of %d on this node; %s%s)", w->who,
           (int)w->rank, (int)w->size, host, (int)w->local_rank, (int)w->local_size,
           mpi_world_launched() ? "MPI, launcher variable " : "no launcher, so no MPI",
           launcher_variable());
  *out = w;
  return CNNB_OK;
}

cnnb_status mpi_world_open(cnnb_ctx *ctx, const char *who, double timeout_s, mpi_world **out) {
  return open_world(ctx, who, timeout_s, false, out);
}

cnnb_status mpi_world_open_multithreaded(cnnb_ctx *ctx, const char *who, double timeout_s,
                                         mpi_world **out) {
  return open_world(ctx, who, timeout_s, true, out);
}

void mpi_world_abandon(mpi_world *w) {
  if (w) w->broken = true;
}

void mpi_world_close(mpi_world *w) {
  if (!w) return;
  leave_job(w);
#if CNNB_HAVE_MPI
  free(w->acks);
  free(w->probes);
  free(w->node_reqs);
  free(w->statuses);
  free(w->node_sums);
#endif
  free(w->staging);
  free(w);
}

cnnb_status mpi_world_allgather(mpi_world *w, cnnb_ctx *ctx, const void *send, void *recv,
                                int64_t bytes, const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "all-gathering", what);
  if (st != CNNB_OK || bytes <= 0) return st;
  if (w->size == 1) {
    if (recv != send) memmove(recv, send, (size_t)bytes);
    return CNNB_OK;
  }
  return allgather_mpi(w, send, recv, bytes, what);
}

cnnb_status mpi_world_bcast(mpi_world *w, cnnb_ctx *ctx, void *buf, int64_t bytes, int32_t root,
                            const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "broadcasting", what);
  if (st != CNNB_OK) return st;
  if (root < 0 || root >= w->size)
    return cnnb_error(w->ctx, CNNB_EINTERNAL, "broadcasting %s from rank %d of %d", what, (int)root,
                      (int)w->size);
  if (w->size == 1 || bytes <= 0) return CNNB_OK;
  return bcast_mpi(w, buf, bytes, root, what);
}

cnnb_status mpi_world_allreduce_sum(mpi_world *w, cnnb_ctx *ctx, float *buf, int64_t count,
                                    uint32_t compact16, const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "all-reducing", what);
  if (st != CNNB_OK) return st;
  if (compact16 && compact16 != COMPACT16_BF16 && compact16 != COMPACT16_FP16)
    return cnnb_error(w->ctx, CNNB_EINTERNAL, "all-reducing %s: no 16-bit format %u", what,
                      (unsigned)compact16);
  if (w->size == 1 || count <= 0) return CNNB_OK;
  return allreduce_mpi(w, buf, count, compact16, what);
}

cnnb_status mpi_world_allreduce_sum_hierarchical(mpi_world *w, cnnb_ctx *ctx, float *buf,
                                                 int64_t count, uint32_t compact16,
                                                 const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "all-reducing", what);
  if (st != CNNB_OK) return st;
  if (compact16 && compact16 != COMPACT16_BF16 && compact16 != COMPACT16_FP16)
    return cnnb_error(w->ctx, CNNB_EINTERNAL, "all-reducing %s: no 16-bit format %u", what,
                      (unsigned)compact16);
  if (w->size == 1 || count <= 0) return CNNB_OK;
  return hierarchical_mpi(w, buf, count, compact16, what);
}

cnnb_status mpi_world_set_ranks_per_node(mpi_world *w, cnnb_ctx *ctx, int32_t per_node) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "regrouping", "the nodes");
  if (st != CNNB_OK) return st;
  if (per_node < 1) return cnnb_error(w->ctx, CNNB_EINTERNAL, "%d ranks per node", (int)per_node);
  if (w->size == 1) return CNNB_OK;
  return regroup_nodes(w, per_node);
}

cnnb_status mpi_world_reduce_sum(mpi_world *w, cnnb_ctx *ctx, float *buf, int64_t count,
                                 int32_t root, const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "reducing", what);
  if (st != CNNB_OK) return st;
  if (root < 0 || root >= w->size)
    return cnnb_error(w->ctx, CNNB_EINTERNAL, "reducing %s to rank %d of %d", what, (int)root,
                      (int)w->size);
  if (w->size == 1 || count <= 0) return CNNB_OK;
  return reduce_mpi(w, buf, count, root, what);
}

cnnb_status mpi_world_barrier(mpi_world *w, cnnb_ctx *ctx, const char *what) {
  w->ctx = ctx;
  cnnb_status st = check_usable(w, "waiting at a barrier for", what);
  if (st != CNNB_OK || w->size == 1) return st;
  return barrier_mpi(w, what);
}
