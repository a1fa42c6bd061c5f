/* trace_idle_bench.c — what an event site costs while --trace_file's recorder is open but
 * outside its traced steps (trace_overhead.sh): the ns of one cnnb_trace_active call on a
 * plugin's ctx, and of one cnnb_trace_event call (which reads the same flag and returns).
 * A step passes about 15 such sites with one replica, plus one per gradient bucket and a
 * few per replica (trace_overhead.sh prints the product). Links the core statically. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "flags/flags.h"
#include "base/trace.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000000L;
  if (n < 1) n = 1;
  cnnb_ctx *root = cnnb_ctx_create("cnnbench", NULL);
  cnnb_ctx *plugin = cnnb_ctx_create_child(root, "strategy");
  cnnb_trace_info info = {"none", "none", "none", 1, 0, 1, NULL};
  cnnb_trace *trace = NULL;
  if (!root || !plugin || cnnb_trace_open(root, "/dev/null", &info, &trace) != CNNB_OK) {
    fprintf(stderr, "trace_idle_bench: %s\n", cnnb_error_message(root));
    return 1;
  }
  cnnb_trace_attach(root, trace); /* open, never begun: the idle state */
  volatile long sink = 0;
  double t0 = now_s();
  for (long i = 0; i < n; i++) sink += cnnb_trace_active(plugin);
  double t1 = now_s();
  for (long i = 0; i < n; i++)
    cnnb_trace_event(plugin, "allreduce bucket 1", "allreduce", 0, 1, NULL);
  double t2 = now_s();
  printf(
      "cnnb_trace_active: %.2f ns a call; cnnb_trace_event (idle): %.2f ns a call (%ld calls%s)\n",
      1e9 * (t1 - t0) / (double)n, 1e9 * (t2 - t1) / (double)n, n, sink ? ", active?!" : "");
  cnnb_trace_attach(root, NULL);
  cnnb_trace_finish(trace, root);
  cnnb_trace_free(trace);
  cnnb_ctx_destroy(plugin);
  cnnb_ctx_destroy(root);
  return 0;
}
