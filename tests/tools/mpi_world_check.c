/* mpi_world_check.c — drives plugins/strategies/common/mpi_world.c directly, for
 * tests/cli/mpi_world.sh. Run alone it checks the world of one; under mpirun every
 * collective against values each rank can compute for itself:
 *   mpi_world_check                 every collective, whole and split into small MPI calls,
 *                                   the hierarchical allreduce beside the flat one
 *   mpi_world_check --ranks-per-node K   the same with the ranks regrouped into nodes of
 *                                   K (mpi_world_set_ranks_per_node), so the hierarchical
 *                                   allreduce crosses "nodes" on one machine
 *   mpi_world_check --stop-rank R   rank R stops itself (SIGSTOP) before an allreduce; the
 *                                   others must fail within --collective_timeout_s naming
 *                                   exactly rank R, in the ctx the allreduce was given (a
 *                                   thread's own), not the open's (exit 3 when they do);
 *                                   with --hierarchical (and --ranks-per-node) in the
 *                                   hierarchical allreduce
 * Built twice: with MPI (mpi_world_check) and as a build without MPI would be
 * (mpi_world_check_nompi), which must refuse a launcher's environment with a message.
 * Prints one line per failed check; exits 0 when all passed, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compact16.h"
#include "flags/flags.h"
#include "mpi_world.h"

static int failures;
static int32_t my_rank;

#define CHECK(cond, ...)                                                           \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "[rank %d] FAIL %s:%d: ", (int)my_rank, __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fputc('\n', stderr);                                                         \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

#define CALL(ctx, expr)                                              \
  do {                                                               \
    cnnb_status st_ = (expr);                                        \
    CHECK(st_ == CNNB_OK, "%s: %s", #expr, cnnb_error_message(ctx)); \
  } while (0)

/* Rank r's value at i, small integers: every partial sum is exact in fp32, bf16
 * (integers to 256) and fp16 (to 2048) for up to 4 ranks, whatever order MPI adds in. */
static float small_value(int32_t r, int64_t i) { return (float)((r + 1) * (i % 16)); }

/* A value with a full fp32 mantissa, for the rounding bounds. */
static float rough_value(int32_t r, int64_t i) {
  return (float)sin((double)(i + 1) * 0.37 + r) * (float)(1 + (i % 7));
}

/* Every rank's copy of buf must be bit for bit the same. */
static void check_same_everywhere(cnnb_ctx *ctx, mpi_world *w, const float *buf, int64_t n,
                                  const char *what) {
  uint64_t hash = 1469598103934665603ull;
  const unsigned char *bytes = (const unsigned char *)buf;
  for (int64_t i = 0; i < n * (int64_t)sizeof(float); i++)
    hash = (hash ^ bytes[i]) * 1099511628211ull;
  int32_t size = mpi_world_size(w);
  uint64_t *all = calloc((size_t)size, sizeof *all);
  CALL(ctx, mpi_world_allgather(w, ctx, &hash, all, sizeof hash, "hashes"));
  for (int32_t r = 1; r < size; r++)
    CHECK(all[r] == all[0], "%s: rank %d's result differs from rank 0's", what, (int)r);
  free(all);
}

static cnnb_status allreduce(mpi_world *w, cnnb_ctx *ctx, float *buf, int64_t n, uint32_t compact16,
                             bool hierarchical, const char *what) {
  return hierarchical ? mpi_world_allreduce_sum_hierarchical(w, ctx, buf, n, compact16, what)
                      : mpi_world_allreduce_sum(w, ctx, buf, n, compact16, what);
}

static void check_allreduce(cnnb_ctx *ctx, mpi_world *w, uint32_t compact16, int64_t n,
                            bool hierarchical) {
  int32_t size = mpi_world_size(w), rank = mpi_world_rank(w);
  char name[32];
  snprintf(name, sizeof name, "%s%s", hierarchical ? "hierarchical " : "",
           compact16 == COMPACT16_FP16 ? "fp16"
           : compact16                 ? "bf16"
                                       : "fp32");
  float *buf = malloc((size_t)n * sizeof *buf);
  /* Exact: small integers. */
  for (int64_t i = 0; i < n; i++) buf[i] = small_value(rank, i);
  CALL(ctx, allreduce(w, ctx, buf, n, compact16, hierarchical, "small integers"));
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = 0;
    for (int32_t r = 0; r < size; r++) want += small_value(r, i);
    bad += buf[i] != want;
  }
  CHECK(bad == 0, "%s allreduce of %lld small integers: %lld wrong", name, (long long)n,
        (long long)bad);
  /* Rounded: packing each rank's value and each of the size - 1 additions round by at
   * most the format's half ulp (2^-9 relative for bf16, 2^-11 for fp16, 2^-24 for fp32)
   * of at most the sum of magnitudes: under 2 * size half ulps in all, plus fp16's
   * subnormal spacing (2^-24) near zero. */
  double unit = compact16 == COMPACT16_FP16 ? 0x1p-10 : compact16 ? 0x1p-8 : 0x1p-23;
  double floor = compact16 == COMPACT16_FP16 ? 0x1p-24 : 0;
  for (int64_t i = 0; i < n; i++) buf[i] = rough_value(rank, i);
  CALL(ctx, allreduce(w, ctx, buf, n, compact16, hierarchical, "rough values"));
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double exact = 0, magnitude = 0;
    for (int32_t r = 0; r < size; r++) {
      exact += rough_value(r, i);
      magnitude += fabs(rough_value(r, i));
    }
    double err = fabs(buf[i] - exact) / ((magnitude * unit + floor) * size);
    if (!(err <= worst)) worst = err;
  }
  CHECK(worst <= 1.0, "%s allreduce: error %.3g of the bound", name, worst);
  check_same_everywhere(ctx, w, buf, n, name);
  free(buf);
}

static void check_others(cnnb_ctx *ctx, mpi_world *w) {
  int32_t size = mpi_world_size(w), rank = mpi_world_rank(w);
  enum { N = 100003 };
  /* bcast from the last rank */
  int32_t root = size - 1;
  unsigned char *bytes = malloc(N);
  for (int i = 0; i < N; i++) bytes[i] = (unsigned char)(rank == root ? i * 7 : 0xee);
  CALL(ctx, mpi_world_bcast(w, ctx, bytes, N, root, "bytes"));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += bytes[i] != (unsigned char)(i * 7);
  CHECK(bad == 0, "bcast from rank %d: %d bytes wrong", (int)root, bad);
  free(bytes);
  /* allgather */
  int64_t per = 3001;
  unsigned char *send = malloc((size_t)per), *recv = malloc((size_t)(per * size));
  for (int64_t i = 0; i < per; i++) send[i] = (unsigned char)(rank * 31 + i);
  CALL(ctx, mpi_world_allgather(w, ctx, send, recv, per, "bytes"));
  bad = 0;
  for (int32_t r = 0; r < size; r++)
    for (int64_t i = 0; i < per; i++) bad += recv[r * per + i] != (unsigned char)(r * 31 + i);
  CHECK(bad == 0, "allgather: %d bytes wrong", bad);
  free(send);
  free(recv);
  /* reduce to the last rank; the others keep their values */
  float *buf = malloc(N * sizeof *buf);
  for (int i = 0; i < N; i++) buf[i] = small_value(rank, i);
  CALL(ctx, mpi_world_reduce_sum(w, ctx, buf, N, root, "small integers"));
  bad = 0;
  for (int i = 0; i < N; i++) {
    float want = 0;
    for (int32_t r = 0; r < size; r++) want += small_value(r, i);
    bad += buf[i] != (rank == root ? want : small_value(rank, i));
  }
  CHECK(bad == 0, "reduce to rank %d: %d wrong", (int)root, bad);
  free(buf);
  CALL(ctx, mpi_world_barrier(w, ctx, "the checks"));
}

/* The nodes as mpi_world reports them: per_node > 0 when the test regrouped them, else
 * what MPI says (on one machine, one node), checked against every rank's report. */
static void check_nodes(cnnb_ctx *ctx, mpi_world *w, int32_t per_node) {
  int32_t size = mpi_world_size(w), rank = mpi_world_rank(w);
  int32_t local = mpi_world_local_rank(w), local_size = mpi_world_local_size(w);
  CHECK(local_size >= 1 && local >= 0 && local < local_size, "local rank %d of %d", (int)local,
        (int)local_size);
  if (per_node > 0) {
    int32_t first = rank / per_node * per_node;
    int32_t want_size = size - first < per_node ? size - first : per_node;
    CHECK(local == rank - first && local_size == want_size,
          "regrouped by %d: local rank %d of %d, want %d of %d", (int)per_node, (int)local,
          (int)local_size, (int)(rank - first), (int)want_size);
    CHECK(mpi_world_num_nodes(w) == (size + per_node - 1) / per_node, "%d nodes",
          (int)mpi_world_num_nodes(w));
    CHECK(mpi_world_node_leader(w) == first, "regrouped by %d: node leader %d, want %d",
          (int)per_node, (int)mpi_world_node_leader(w), (int)first);
  }
  /* The leader is the node's first rank; its local rank is 0 (every rank agrees). */
  int32_t leader = mpi_world_node_leader(w);
  CHECK(leader >= 0 && leader <= rank && leader < size, "node leader %d of rank %d", (int)leader,
        (int)rank);
  int32_t *leaders_of = calloc((size_t)size, sizeof *leaders_of);
  CALL(ctx, mpi_world_allgather(w, ctx, &leader, leaders_of, sizeof leader, "node leaders"));
  CHECK(leaders_of[leader] == leader, "rank %d's leader %d names %d as its own", (int)rank,
        (int)leader, (int)leaders_of[leader]);
  CHECK(mpi_world_num_nodes(w) > 1 || leader == 0, "one node, yet rank %d's leader is %d",
        (int)rank, (int)leader);
  free(leaders_of);
  /* The leaders counted are the ranks with local rank 0. */
  int32_t *locals = calloc((size_t)size, sizeof *locals);
  CALL(ctx, mpi_world_allgather(w, ctx, &local, locals, sizeof local, "local ranks"));
  int32_t leaders = 0;
  for (int32_t r = 0; r < size; r++) leaders += locals[r] == 0;
  CHECK(leaders == mpi_world_num_nodes(w), "%d ranks of local rank 0, %d nodes", (int)leaders,
        (int)mpi_world_num_nodes(w));
  free(locals);
}

static void check_all(cnnb_ctx *ctx, mpi_world *w, int32_t per_node) {
  int32_t size = mpi_world_size(w);
  CHECK(size >= 1 && mpi_world_rank(w) >= 0 && mpi_world_rank(w) < size, "rank %d of %d",
        (int)mpi_world_rank(w), (int)size);
  check_nodes(ctx, w, per_node);
  static const uint32_t formats[] = {0, COMPACT16_BF16, COMPACT16_FP16};
  for (int h = 0; h < 2; h++)
    for (int f = 0; f < 3; f++) check_allreduce(ctx, w, formats[f], 300007, h);
  check_others(ctx, w);
  /* The same through many small MPI calls: the path buffers beyond INT_MAX take. */
  mpi_world_set_max_count(w, 1000);
  for (int h = 0; h < 2; h++)
    for (int f = 0; f < 3; f++) check_allreduce(ctx, w, formats[f], 30011, h);
  check_others(ctx, w);
  mpi_world_set_max_count(w, 0);
}

/* Rank `stopped` stops; the others must report exactly it. */
static int check_stop(cnnb_ctx *ctx, mpi_world *w, int32_t stopped, bool hierarchical,
                      double timeout_s) {
  float x[16] = {0};
  CALL(ctx, mpi_world_barrier(w, ctx, "the start"));
  if (mpi_world_rank(w) == stopped) raise(SIGSTOP);
  struct timespec start, end;
  /* As a communication thread calls: with a ctx of its own, which gets the message. */
  cnnb_ctx *thread_ctx = cnnb_ctx_create_child(ctx, "comm thread");
  clock_gettime(CLOCK_MONOTONIC, &start);
  cnnb_status st = allreduce(w, thread_ctx, x, 16, 0, hierarchical, "bucket 1 of step 1");
  clock_gettime(CLOCK_MONOTONIC, &end);
  double took = (double)(end.tv_sec - start.tv_sec) + 1e-9 * (double)(end.tv_nsec - start.tv_nsec);
  CHECK(!*cnnb_error_message(ctx), "the error went to the open's ctx: %s", cnnb_error_message(ctx));
  cnnb_error(ctx, st, "%s", cnnb_error_message(thread_ctx));
  cnnb_ctx_destroy(thread_ctx);
  const char *msg = cnnb_error_message(ctx);
  printf("[rank %d] after %.1f s: %s\n", (int)mpi_world_rank(w), took, msg);
  char want[64];
  snprintf(want, sizeof want, "rank %d stopped answering", (int)stopped);
  CHECK(st == CNNB_ECOMM, "status %d, not CNNB_ECOMM", (int)st);
  CHECK(strstr(msg, want) && strstr(msg, "bucket 1 of step 1"), "message does not say \"%s\"",
        want);
  /* Once broken, at once. */
  CHECK(mpi_world_barrier(w, ctx, "after") == CNNB_ECOMM, "a broken world still waits");
  /* The first rank to exit non-zero makes mpirun end the job, and a live rank whose
   * deadline fell later (a busy machine skews them by up to a timeout and a probe
   * window) would be killed before it printed: linger that long first. */
  fflush(stdout);
  double linger = 2 * timeout_s + 2;
  struct timespec pause = {(time_t)linger, 0};
  nanosleep(&pause, NULL);
  return failures ? 1 : 3;
}

int main(int argc, char **argv) {
  int32_t stop_rank = -1, per_node = 0;
  double timeout = 20;
  bool hierarchical = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--stop-rank") == 0 && i + 1 < argc) stop_rank = atoi(argv[++i]);
    else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) timeout = atof(argv[++i]);
    else if (strcmp(argv[i], "--ranks-per-node") == 0 && i + 1 < argc) per_node = atoi(argv[++i]);
    else if (strcmp(argv[i], "--hierarchical") == 0) hierarchical = true;
    else {
      fprintf(stderr, "usage: mpi_world_check [--ranks-per-node K] "
                      "[--stop-rank R [--hierarchical]] [--timeout S]\n");
      return 2;
    }
  }
  cnnb_ctx *ctx = cnnb_ctx_create("mpi_world_check", NULL);
  mpi_world *w = NULL;
  cnnb_status st = mpi_world_open(ctx, "mpi_world_check", timeout, &w);
  if (st != CNNB_OK) {
    printf("open: %s\n", cnnb_error_message(ctx));
    cnnb_ctx_destroy(ctx);
    return 4;
  }
  my_rank = mpi_world_rank(w);
  if (per_node > 0) CALL(ctx, mpi_world_set_ranks_per_node(w, ctx, per_node));
  int code;
  if (stop_rank >= 0) {
    code = check_stop(ctx, w, stop_rank, hierarchical, timeout);
  } else {
    check_all(ctx, w, per_node);
    printf("[rank %d of %d, local %d of %d, %d nodes] %s\n", (int)my_rank, (int)mpi_world_size(w),
           (int)mpi_world_local_rank(w), (int)mpi_world_local_size(w), (int)mpi_world_num_nodes(w),
           failures ? "FAILED" : "all checks passed");
    code = failures ? 1 : 0;
  }
  mpi_world_close(w);
  cnnb_ctx_destroy(ctx);
  return code;
}
