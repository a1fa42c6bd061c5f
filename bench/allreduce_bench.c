/* allreduce_bench.c — the all-reduce microbenchmark, in nccl-tests' terms: for each size
 * (bytes per replica, 4 KiB .. 256 MiB, x4 steps) the mean time of an in-place float sum,
 * algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (the traffic a ring's busiest link
 * carries, so algorithms and replica counts compare), and #wrong, the elements that
 * differ from the exact sum in a checked run before the timed ones.
 *
 *   allreduce_bench local [--replicas=2,4] [--min_bytes=4096] [--max_bytes=268435456]
 *       the replicated strategy's local algorithms (plugins/strategies/common/
 *       local_reduce.c, compiled in): xring and pscpu among n host buffers of one process,
 *       on one thread, as the strategy's communication thread runs them;
 *   mpirun -np N allreduce_bench mpi [--min_bytes=..] [--max_bytes=..]
 *       MPI_Allreduce (MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) across the ranks; the time is
 *       the slowest rank's. Only in a build with MPI.
 *
 * Iterations per size: 256 MiB / size, at least 5 and at most 500, after 2 untimed. The
 * timed runs sum zeros (the checked run's integers would grow without bound; zeros keep
 * every add the same cost, no denormals). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef CNNB_BENCH_MPI
#include <mpi.h>
#endif

#include "local_reduce.h"

enum { MAX_REPLICAS = 64, WARMUP = 2 };

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t iterations(int64_t bytes) {
  int64_t n = ((int64_t)256 << 20) / bytes;
  return n < 5 ? 5 : n > 500 ? 500 : n;
}

/* The checked run's inputs: small integers, so every float sum is exact. */
static float input(int64_t i, int32_t who) { return (float)((i + who) % 8); }

static void header(const char *title) {
  printf("# %s\n#\n", title);
  printf("# %12s %12s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "time",
         "algbw", "busbw", "#wrong");
  printf("# %12s %12s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
         "(GB/s)", "");
}

static void row(int64_t bytes, double seconds, int32_t n, int64_t wrong) {
  double algbw = (double)bytes / seconds / 1e9;
  double busbw = algbw * 2.0 * (n - 1) / n;
  printf("  %12lld %12lld %6s %6s %10.1f %8.2f %8.2f %7lld\n", (long long)bytes,
         (long long)(bytes / (int64_t)sizeof(float)), "float", "sum", seconds * 1e6, algbw, busbw,
         (long long)wrong);
  fflush(stdout);
}

/* ---- local ------------------------------------------------------------------------ */

static void run_local(local_reduce_alg alg, int32_t n, int64_t min_bytes, int64_t max_bytes,
                      float *const *buffers, float *scratch) {
  char title[160];
  snprintf(title, sizeof title, "local %s, %d buffers in one process, one thread (in place)",
           local_reduce_alg_name(alg), (int)n);
  header(title);
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int64_t count = bytes / (int64_t)sizeof(float);
    for (int32_t r = 0; r < n; r++)
      for (int64_t i = 0; i < count; i++) buffers[r][i] = input(i, r);
    local_reduce(alg, buffers, n, count, 1, scratch);
    int64_t wrong = 0;
    for (int32_t r = 0; r < n; r++)
      for (int64_t i = 0; i < count; i++) {
        float want = 0;
        for (int32_t q = 0; q < n; q++) want += input(i, q);
        wrong += buffers[r][i] != want;
      }
    for (int32_t r = 0; r < n; r++) memset(buffers[r], 0, (size_t)bytes);
    int64_t iters = iterations(bytes);
    for (int w = 0; w < WARMUP; w++) local_reduce(alg, buffers, n, count, 1, scratch);
    double t0 = now_seconds();
    for (int64_t it = 0; it < iters; it++) local_reduce(alg, buffers, n, count, 1, scratch);
    row(bytes, (now_seconds() - t0) / (double)iters, n, wrong);
  }
  printf("\n");
}

static int bench_local(const int32_t *replicas, int32_t num_replicas, int64_t min_bytes,
                       int64_t max_bytes) {
  int32_t most = 0;
  for (int32_t k = 0; k < num_replicas; k++) most = replicas[k] > most ? replicas[k] : most;
  float *buffers[MAX_REPLICAS] = {0};
  float *scratch = malloc((size_t)LOCAL_REDUCE_PSCPU_BLOCK * sizeof(float));
  int code = 0;
  for (int32_t r = 0; r < most && scratch; r++)
    if (!(buffers[r] = malloc((size_t)max_bytes))) break;
  if (!scratch || !buffers[most - 1]) {
    fprintf(stderr, "allreduce_bench: out of memory for %d buffers of %lld bytes\n", (int)most,
            (long long)max_bytes);
    code = 1;
  }
  for (int32_t k = 0; k < num_replicas && code == 0; k++) {
    run_local(LOCAL_REDUCE_XRING, replicas[k], min_bytes, max_bytes, buffers, scratch);
    run_local(LOCAL_REDUCE_PSCPU, replicas[k], min_bytes, max_bytes, buffers, scratch);
  }
  for (int32_t r = 0; r < most; r++) free(buffers[r]);
  free(scratch);
  return code;
}

/* ---- MPI -------------------------------------------------------------------------- */

static int bench_mpi(int64_t min_bytes, int64_t max_bytes) {
#ifdef CNNB_BENCH_MPI
  MPI_Init(NULL, NULL);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float *buffer = malloc((size_t)max_bytes);
  int ok = buffer != NULL, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0)
      fprintf(stderr, "allreduce_bench: out of memory for %lld bytes\n", (long long)max_bytes);
    free(buffer);
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) {
    char title[160];
    snprintf(title, sizeof title,
             "MPI_Allreduce across %d ranks (MPI_IN_PLACE); time of the slowest rank", size);
    header(title);
  }
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int count = (int)(bytes / (int64_t)sizeof(float));
    for (int i = 0; i < count; i++) buffer[i] = input(i, rank);
    MPI_Allreduce(MPI_IN_PLACE, buffer, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long long wrong = 0, all_wrong = 0;
    for (int i = 0; i < count; i++) {
      float want = 0;
      for (int q = 0; q < size; q++) want += input(i, q);
      wrong += buffer[i] != want;
    }
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    memset(buffer, 0, (size_t)bytes);
    int64_t iters = iterations(bytes);
    for (int w = 0; w < WARMUP; w++)
      MPI_Allreduce(MPI_IN_PLACE, buffer, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int64_t it = 0; it < iters; it++)
      MPI_Allreduce(MPI_IN_PLACE, buffer, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / (double)iters, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) row(bytes, slowest, size, all_wrong);
  }
  free(buffer);
  MPI_Finalize();
  return 0;
#else
  (void)min_bytes;
  (void)max_bytes;
  fprintf(stderr, "allreduce_bench: built without MPI: 'mpi' is not available (configure "
                  "with MPI: apt-get install libopenmpi-dev)\n");
  return 2;
#endif
}

/* ---- command line ------------------------------------------------------------------ */

static bool parse_bytes(const char *text, int64_t *out) {
  char *end = NULL;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end || v < (long long)sizeof(float) || v % (long long)sizeof(float))
    return false;
  *out = v;
  return true;
}

static bool parse_replicas(const char *text, int32_t *out, int32_t *num) {
  *num = 0;
  for (const char *p = text; *p;) {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > MAX_REPLICAS || *num == MAX_REPLICAS) return false;
    out[(*num)++] = (int32_t)v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return false;
  }
  return *num > 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "allreduce_bench: %s\nusage: allreduce_bench local [--replicas=2,4] "
          "[--min_bytes=4096] [--max_bytes=268435456]\n       mpirun -np N allreduce_bench mpi "
          "[--min_bytes=..] [--max_bytes=..]\n(bytes: a multiple of 4; sizes go up x4)\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "local") != 0 && strcmp(argv[1], "mpi") != 0))
    return usage("say 'local' or 'mpi'");
  int64_t min_bytes = 4096, max_bytes = (int64_t)256 << 20;
  int32_t replicas[MAX_REPLICAS] = {2, 4}, num_replicas = 2;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    bool ok;
    if (strncmp(a, "--min_bytes=", 12) == 0) ok = parse_bytes(a + 12, &min_bytes);
    else if (strncmp(a, "--max_bytes=", 12) == 0) ok = parse_bytes(a + 12, &max_bytes);
    else if (strncmp(a, "--replicas=", 11) == 0)
      ok = parse_replicas(a + 11, replicas, &num_replicas);
    else ok = false;
    if (!ok) {
      char why[256];
      snprintf(why, sizeof why, "bad argument '%s'", a);
      return usage(why);
    }
  }
  if (max_bytes < min_bytes) return usage("--max_bytes is below --min_bytes");
  if (max_bytes / (int64_t)sizeof(float) > INT32_MAX)
    return usage("--max_bytes: MPI counts are int: at most 8 GiB");
  if (strcmp(argv[1], "mpi") == 0) return bench_mpi(min_bytes, max_bytes);
  return bench_local(replicas, num_replicas, min_bytes, max_bytes);
}
