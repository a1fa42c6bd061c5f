/* mpi_allreduce.c — how long the strategies' MPI layer takes to sum a buffer over the
 * ranks: mpi_world_allreduce_sum in fp32 and compact16 (bf16, fp16), and the
 * hierarchical sum (mpi_world_allreduce_sum_hierarchical, fp32 and bf16 between nodes),
 * beside a plain blocking MPI_Allreduce of the same fp32 buffer (what the layer's polling
 * and deadline cost). Run under mpirun:
 *   mpirun -np 2 build/bin/mpi_allreduce [--mib=100] [--reps=5] [--ranks-per-node=K]
 * --ranks-per-node regroups the ranks into nodes of K (mpi_world_set_ranks_per_node), so
 * the hierarchical rows cross "nodes" on one machine.
 * Rank 0 prints the median of the repetitions per row, with nccl-tests' algbw
 * (fp32 bytes / time, so compact rows compare on what the user's gradients are) and
 * busbw (algbw x 2(n-1)/n). Not a test. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compact16.h"
#include "flags/flags.h"
#include "mpi_world.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  double mib = 100;
  int reps = 5, per_node = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--mib=", 6) == 0) mib = atof(argv[i] + 6);
    else if (strncmp(argv[i], "--reps=", 7) == 0) reps = atoi(argv[i] + 7);
    else if (strncmp(argv[i], "--ranks-per-node=", 17) == 0) per_node = atoi(argv[i] + 17);
    else {
      fprintf(stderr, "usage: mpi_allreduce [--mib=100] [--reps=5] [--ranks-per-node=K]\n");
      return 2;
    }
  }
  if (!(mib > 0) || reps < 1 || reps > 1000) {
    fprintf(stderr, "mpi_allreduce: --mib must be > 0 and --reps in [1, 1000]\n");
    return 2;
  }
  cnnb_ctx *ctx = cnnb_ctx_create("mpi_allreduce", NULL);
  mpi_world *w = NULL;
  if (mpi_world_open(ctx, "mpi_allreduce", 600, &w) != CNNB_OK) {
    fprintf(stderr, "%s\n", cnnb_error_message(ctx));
    return 1;
  }
  if (per_node > 0 && mpi_world_set_ranks_per_node(w, ctx, per_node) != CNNB_OK) {
    fprintf(stderr, "%s\n", cnnb_error_message(ctx));
    return 1;
  }
  int64_t count = (int64_t)(mib * (1 << 20) / sizeof(float));
  int32_t size = mpi_world_size(w), rank = mpi_world_rank(w);
  float *buf = malloc((size_t)count * sizeof *buf);
  double *times = malloc((size_t)reps * sizeof *times);
  enum { ROWS = 6, FIRST_HIERARCHICAL = 4 };
  static const char *const names[ROWS] = {"MPI_Allreduce (blocking)", "mpi_world fp32",
                                          "mpi_world bf16",           "mpi_world fp16",
                                          "hierarchical fp32",        "hierarchical bf16"};
  static const uint32_t formats[ROWS] = {0, 0, COMPACT16_BF16, COMPACT16_FP16, 0, COMPACT16_BF16};
  if (rank == 0)
    printf("%d ranks on %d node%s, %.0f MiB of fp32 (%lld values), median of %d\n"
           "%-26s %10s %12s %12s\n",
           (int)size, (int)mpi_world_num_nodes(w), mpi_world_num_nodes(w) == 1 ? "" : "s", mib,
           (long long)count, reps, "", "time ms", "algbw GB/s", "busbw GB/s");
  for (int row = 0; row < ROWS; row++) {
    for (int rep = 0; rep < reps; rep++) {
      for (int64_t i = 0; i < count; i++) buf[i] = (float)((i + rank) % 97) * 0.01f;
      mpi_world_barrier(w, ctx, "the start");
      double start = now_s();
      cnnb_status st = CNNB_OK;
      if (row == 0) {
        for (int64_t at = 0; at < count; at += 1 << 30) {
          int n = count - at < (1 << 30) ? (int)(count - at) : 1 << 30;
          MPI_Allreduce(MPI_IN_PLACE, buf + at, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
      } else if (row < FIRST_HIERARCHICAL) {
        st = mpi_world_allreduce_sum(w, ctx, buf, count, formats[row], "the buffer");
      } else {
        st = mpi_world_allreduce_sum_hierarchical(w, ctx, buf, count, formats[row], "the buffer");
      }
      times[rep] = now_s() - start;
      if (st != CNNB_OK) {
        fprintf(stderr, "%s\n", cnnb_error_message(ctx));
        return 1;
      }
    }
    qsort(times, (size_t)reps, sizeof *times, by_value);
    double t = times[reps / 2], algbw = (double)count * sizeof(float) / t / 1e9;
    if (rank == 0)
      printf("%-26s %10.1f %12.2f %12.2f\n", names[row], 1e3 * t, algbw,
             algbw * 2.0 * (size - 1) / size);
  }
  free(times);
  free(buf);
  mpi_world_close(w);
  cnnb_ctx_destroy(ctx);
  return 0;
}
