/* mpi_world.h — the MPI job a strategy plugin joins, with every wait bounded.
 *
 * Shared by the strategies that span processes (cnnb_strategy_mpi, linked into each plugin; the
 * host links no MPI). A plugin opens the world in create() and closes it in destroy().
 *
 * - Launched by mpirun (OpenMPI's OMPI_COMM_WORLD_SIZE, or PMI/PMIx variables), the
 *   world is every process of the job; MPI is initialised here (MPI_THREAD_SERIALIZED:
 *   any thread may call, one at a time) and finalised by close. Run without a launcher,
 *   the world is this one process and MPI is never initialised (no singleton daemon).
 * - Every collective is started non-blocking and waited on with a deadline of
 *   timeout_s. Joining (MPI_Init_thread and the communicators' set-up) and MPI_Finalize
 *   take no deadline in MPI: a watchdog thread bounds them (mpi_watchdog.h) to timeout_s
 *   or 30 s, whichever is longer (a job starts slowly on a loaded machine), and close
 *   first meets every rank at a bounded barrier, so a rank stopped before it joined or
 *   after the last exchange ends this process too (exit status 1, the message on
 *   stderr naming what; close has no status to return). A rank that died
 *   (kill -9) or stopped answering (SIGSTOP) ends the wait with CNNB_ECOMM and a
 *   message naming it: on timeout the live ranks probe each other on a control
 *   communicator spanning the world, and those that do not answer are named. From then on the
 *   world is broken: every call fails at once and close does not finalise (finalising
 *   waits for the lost rank); the process then exits non-zero and mpirun ends the job.
 * - Not thread-safe: one call at a time per world (a strategy with a communication
 *   thread makes every MPI call from it while the step runs, and the step thread calls
 *   only once that thread is idle: after comm_thread_wait). Errors are recorded in the
 *   ctx each collective is given, which must be the calling thread's own: the
 *   strategy's on the step thread, the communication thread's in a job (comm_thread.h),
 *   so a failing collective never races the step thread recording an error of its own.
 *   open records its errors in the ctx it is given and logs there.
 * - Built without MPI (CNNB_HAVE_MPI=0, see mpi_world.cmake), a world of one works the
 *   same and open under a launcher fails, saying the plugin was built without MPI.
 * - Buffers of any size: counts beyond MPI's int are sent in several calls. */
#ifndef CNNB_STRATEGY_MPI_WORLD_H
#define CNNB_STRATEGY_MPI_WORLD_H

#include <stdbool.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

typedef struct mpi_world mpi_world;

/* True when this process was started by an MPI launcher (mpirun, srun with PMI). */
bool mpi_world_launched(void);

/* Joins the job (or a world of one). `who` names the strategy in messages ("horovod");
 * timeout_s is --collective_timeout_s. Logs "rank R of N on HOST" at debug level. */
cnnb_status mpi_world_open(cnnb_ctx *ctx, const char *who, double timeout_s, mpi_world **out);
/* As open, for a strategy with a thread of its own that talks MPI on its own
 * communicator while the step thread uses the world (an asynchronous parameter
 * server's server thread): MPI_THREAD_MULTIPLE, refused with a message when this MPI
 * lacks it. The world's own calls stay one at a time. */
cnnb_status mpi_world_open_multithreaded(cnnb_ctx *ctx, const char *who, double timeout_s,
                                         mpi_world **out);
/* A strategy's own communication (on a communicator of its own) lost a rank: the world
 * counts as broken from now on, so close does not finalise (which would wait for it). */
void mpi_world_abandon(mpi_world *w);
/* Leaves the job: a bounded barrier, then MPI_Finalize under the watchdog (above); neither
 * when the world is broken. A rank lost here ends the process, exit status 1. NULL is a
 * no-op. */
void mpi_world_close(mpi_world *w);

int32_t mpi_world_rank(const mpi_world *w);
int32_t mpi_world_size(const mpi_world *w);
/* Processes on this rank's node, and this rank's index among them (MPI_Comm_split_type
 * shared, ordered by rank); 1 and 0 in a world of one. */
int32_t mpi_world_local_size(const mpi_world *w);
int32_t mpi_world_local_rank(const mpi_world *w);
/* The world rank of this node's local rank 0 (its leader); 0 in a world of one. */
int32_t mpi_world_node_leader(const mpi_world *w);
/* Nodes in the job (1 in a world of one). */
int32_t mpi_world_num_nodes(const mpi_world *w);

/* The collectives. ctx: where a failure's message goes (the calling thread's own ctx).
 * `what` says what travels, for messages ("bucket 3 of step 12"). In a world of one they
 * return at once (allgather copies send to recv). */
cnnb_status mpi_world_allgather(mpi_world *w, cnnb_ctx *ctx, const void *send, void *recv,
                                int64_t bytes, const char *what);
cnnb_status mpi_world_bcast(mpi_world *w, cnnb_ctx *ctx, void *buf, int64_t bytes, int32_t root,
                            const char *what);
/* Sums buf[count] over every rank, in place. compact16: CNNB_PRECISION_BF16 or
 * CNNB_PRECISION_FP16 sends 16-bit values (rounded to nearest even) and adds each pair
 * in fp32; 0 sends fp32. */
cnnb_status mpi_world_allreduce_sum(mpi_world *w, cnnb_ctx *ctx, float *buf, int64_t count,
                                    uint32_t compact16, const char *what);
/* The same sum in three moves, for jobs whose nodes are joined by slower links than
 * their ranks (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE): each node's ranks reduce into
 * its leader (local rank 0), the leaders alone all-reduce across the nodes, and each
 * leader broadcasts the sum to its node, piece by piece. Only one rank a node sends
 * between nodes, once: a node of L ranks puts 1/L of a flat allreduce's bytes on its
 * link. compact16 applies between the nodes only (within a node the values travel as
 * fp32: 16 bits do not pay over shared memory). Every rank ends with the same floats.
 * On one node it is a reduce and a broadcast; with one rank a node, the flat allreduce.
 * Every wait is bounded as above, and a timeout names the lost ranks of the whole world,
 * whatever part (node or leaders) the wait was in. */
cnnb_status mpi_world_allreduce_sum_hierarchical(mpi_world *w, cnnb_ctx *ctx, float *buf,
                                                 int64_t count, uint32_t compact16,
                                                 const char *what);
/* Sums buf[count] over every rank into root's buf (other ranks' buf is left as it was). */
cnnb_status mpi_world_reduce_sum(mpi_world *w, cnnb_ctx *ctx, float *buf, int64_t count,
                                 int32_t root, const char *what);
/* Waits until every rank got here (the end of setup, tests). */
cnnb_status mpi_world_barrier(mpi_world *w, cnnb_ctx *ctx, const char *what);

/* For tests: the most elements (bytes for allgather and bcast) one MPI call carries;
 * INT_MAX, MPI's int count, unless set. Larger buffers go in several calls, so a small
 * limit runs that path on small buffers. */
void mpi_world_set_max_count(mpi_world *w, int32_t max_count);
/* For tests: regroups the ranks into nodes of `per_node` consecutive ranks (the last
 * node may have fewer), as if the job spanned several machines, so the hierarchical
 * allreduce's steps between nodes run on one machine. Every rank must call it, with the
 * same value; it blocks as MPI's communicator set-up does. */
cnnb_status mpi_world_set_ranks_per_node(mpi_world *w, cnnb_ctx *ctx, int32_t per_node);

#endif
