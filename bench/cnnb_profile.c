/* cnnb_profile.c — where one training step's time goes, per node and per op kind.
 *
 * A small driver over libcnnb's host-internal API (core/src): it takes cnnbench's own
 * flags (--model, --batch_size, --precision, --optimizer, --device,
 * --num_intra_threads, --num_warmup_batches, --num_batches), builds the model's graph
 * the way cnnbench does, runs it on one device instance with the executor's profile
 * option on (it synchronizes the device after every node and times it), and applies the
 * optimizer update after each step as cnnbench's run loop does. Warm-up steps are run
 * and then their times are subtracted, so the table covers only the timed steps.
 *
 * It prints, per timed step on average:
 *   - the wall time of a whole step, the sum of the nodes' forward and backward, the
 *     optimizer update, and what is left (input upload, gradient accumulation, ...);
 *   - one row per op kind: count, forward / backward seconds, share of the step, and
 *     for conv2d and dense the achieved GFLOP/s (forward FLOPs from the model report,
 *     backward counted as twice forward: backward-data plus backward-weights);
 *   - the --top=N (default 25) most expensive nodes.
 * Lines a script can read start with "profile:" (see print_summary).
 *
 * Build: bench/CMakeLists.txt (target cnnb_profile), or by hand:
 *   cc -O2 -std=c11 -I core/src -I sdk/include bench/cnnb_profile.c \
 *      -L BUILD/lib -Wl,-rpath,BUILD/lib -lcnnb -o BUILD/bin/cnnb_profile
 * The plugins are found as cnnbench finds them (next to libcnnb in the build tree). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchmark_setup.h"
#include "executor.h"
#include "host.h"
#include "loader.h"
#include "model_info.h"
#include "trainer.h"

typedef struct op_sum {
  char op[40]; /* op kind, "+relu" when a ReLU is fused into it */
  int count;
  double fwd_s, bwd_s;
  double flops; /* forward matmul FLOPs of the whole batch */
} op_sum;

typedef struct node_row {
  int32_t node;
  double fwd_s, bwd_s;
} node_row;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_total_desc(const void *a, const void *b) {
  const node_row *x = a, *y = b;
  double tx = x->fwd_s + x->bwd_s, ty = y->fwd_s + y->bwd_s;
  return (tx < ty) - (tx > ty);
}

static int op_by_total_desc(const void *a, const void *b) {
  const op_sum *x = a, *y = b;
  double tx = x->fwd_s + x->bwd_s, ty = y->fwd_s + y->bwd_s;
  return (tx < ty) - (tx > ty);
}

/* xorshift: the images' values do not matter to the timing, only that they are not
 * zeros or denormals. */
static uint32_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (uint32_t)(*s >> 32);
}

typedef struct session {
  cnnb_run run;
  cnnb_ctx *device_ctx;
  void *device;
  cnnb_executor *ex;
  cnnb_trainer *tr;
  float *images;
  int32_t *labels;
} session;

static cnnb_status setup(session *s) {
  cnnb_run *run = &s->run;
  const cnnb_flags *flags = run->flags;
  s->device_ctx = cnnb_ctx_create(run->device_name, flags);
  if (!s->device_ctx) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_device_config dcfg = {
      .struct_size = sizeof dcfg,
      .device_index = 0,
      .num_threads = (int32_t)cnnb_flags_int(flags, "num_intra_threads"),
      .precision = run->precision,
      .training = run->training,
      .seed = (uint32_t)cnnb_flags_int(flags, "seed"),
  };
  cnnb_status st = run->device->create(s->device_ctx, run->device_name, &dcfg, &s->device);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, s->device_ctx, "--device");
  cnnb_executor_config ecfg = {
      .training = run->training,
      .bucket_bytes = (int64_t)(cnnb_flags_float(flags, "gradient_bucket_mb") * (1 << 20)),
      .device_ctx = s->device_ctx,
      .profile = true,
  };
  st = cnnb_executor_create(run->ctx, run->device, s->device, run->graph, &ecfg, &s->ex);
  if (st != CNNB_OK) return st;
  if ((st = cnnb_executor_init_params(s->ex, (uint64_t)cnnb_flags_int(flags, "seed"))) != CNNB_OK)
    return st;
  if (run->training) {
    cnnb_trainer_model lr_model = {
        .name = run->model_name,
        .learning_rate = run->model->struct_size > offsetof(cnnb_model_vtable, learning_rate)
                             ? run->model->learning_rate : NULL,
        .default_learning_rate = run->info.default_learning_rate,
    };
    st = cnnb_trainer_create(run->ctx, flags, s->ex, &lr_model, run->examples_per_epoch,
                             run->batch_size, &s->tr);
    if (st != CNNB_OK) return st;
  }
  size_t pixels = (size_t)run->batch_size * 3 * run->image_size * run->image_size;
  s->images = malloc(pixels * sizeof *s->images);
  s->labels = malloc((size_t)run->batch_size * sizeof *s->labels);
  if (!s->images || !s->labels) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < pixels; i++) s->images[i] = (float)next_rand(&seed) / 4294967296.0f - 0.5f;
  for (int32_t i = 0; i < run->batch_size; i++)
    s->labels[i] = 1 + (int32_t)(next_rand(&seed) % (uint32_t)(run->num_classes - 1));
  return CNNB_OK;
}

/* One step as cnnbench's loop runs it; *update_s gets the optimizer's share. */
static cnnb_status step(session *s, int64_t i, double *update_s) {
  cnnb_status st = cnnb_executor_step(s->ex, s->images, s->labels, 1.0f, (uint64_t)i);
  if (st != CNNB_OK) return st;
  double t0 = now_s();
  if (s->tr && (st = cnnb_trainer_apply(s->tr, i, NULL, NULL)) != CNNB_OK) return st;
  if ((st = s->run.device->synchronize(s->device)) != CNNB_OK)
    return cnnb_run_fail(&s->run, st, s->device_ctx, "synchronize");
  *update_s += now_s() - t0;
  return CNNB_OK;
}

static void print_summary(session *s, const node_row *warm, int64_t steps, double wall_s,
                          double update_s, int top) {
  const cnnb_graph *g = s->run.graph;
  int32_t n = cnnb_graph_num_nodes(g);
  cnnb_model_report rep;
  if (cnnb_model_info_compute(g, &rep) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: cannot compute the model report\n");
    return;
  }
  node_row *rows = calloc((size_t)n, sizeof *rows);
  op_sum *ops = calloc((size_t)n, sizeof *ops);
  if (!rows || !ops) {
    fprintf(stderr, "cnnb_profile: out of memory\n");
    free(rows);
    free(ops);
    cnnb_model_report_free(&rep);
    return;
  }
  const cnnb_plan *plan = cnnb_executor_plan(s->ex);
  int nops = 0, fused = 0;
  double nodes_s = 0, batch = s->run.batch_size;
  for (int32_t i = 0; i < n; i++) {
    double f, b;
    cnnb_executor_node_time(s->ex, i, &f, &b);
    rows[i] = (node_row){i, (f - warm[i].fwd_s) / (double)steps, (b - warm[i].bwd_s) / (double)steps};
    nodes_s += rows[i].fwd_s + rows[i].bwd_s;
    /* A ReLU fused into its producer never runs (plan alias); the producer is shown as
     * "conv2d+relu" / "batch_norm+relu" so fused and plain kinds read apart. */
    const cnnb_node *node = cnnb_graph_node(g, i);
    if (plan && plan->alias && plan->alias[i] >= 0) {
      fused++;
      continue;
    }
    char kind[sizeof ops->op];
    snprintf(kind, sizeof kind, "%s%s", rep.layers[i].op, node->fused_relu ? "+relu" : "");
    int k = 0;
    while (k < nops && strcmp(ops[k].op, kind) != 0) k++;
    if (k == nops) memcpy(ops[nops++].op, kind, sizeof kind);
    ops[k].count++;
    ops[k].fwd_s += rows[i].fwd_s;
    ops[k].bwd_s += rows[i].bwd_s;
    ops[k].flops += (double)rep.layers[i].flops_matmul * batch;
  }
  double step_s = wall_s / (double)steps, upd = update_s / (double)steps;
  printf("\nprofile: model %s batch %d precision %s, %lld timed steps\n", s->run.model_name,
         s->run.batch_size, cnnb_flags_string(s->run.flags, "precision"), (long long)steps);
  printf("profile: step %.3f s = nodes %.3f s (%.1f%%) + optimizer update %.3f s (%.1f%%) + other %.3f s (%.1f%%)\n",
         step_s, nodes_s, 100 * nodes_s / step_s, upd, 100 * upd / step_s,
         step_s - nodes_s - upd, 100 * (step_s - nodes_s - upd) / step_s);
  double train_flops = 3.0 * (double)rep.flops_matmul * batch;
  printf("profile: images/sec %.2f, achieved %.1f GFLOP/s (3 x forward conv+dense FLOPs)\n",
         batch / step_s, train_flops / step_s * 1e-9);

  qsort(ops, (size_t)nops, sizeof *ops, op_by_total_desc);
  printf("\n%-20s %5s %9s %9s %9s %7s %9s %9s\n", "op", "nodes", "fwd ms", "bwd ms", "total ms",
         "% step", "fwd GF/s", "bwd GF/s");
  for (int k = 0; k < nops; k++) {
    double tot = ops[k].fwd_s + ops[k].bwd_s;
    char fg[16] = "", bg[16] = "";
    if (ops[k].flops > 0 && ops[k].fwd_s > 0) snprintf(fg, sizeof fg, "%.1f", ops[k].flops / ops[k].fwd_s * 1e-9);
    if (ops[k].flops > 0 && ops[k].bwd_s > 0) snprintf(bg, sizeof bg, "%.1f", 2 * ops[k].flops / ops[k].bwd_s * 1e-9);
    printf("%-20s %5d %9.1f %9.1f %9.1f %7.1f %9s %9s\n", ops[k].op, ops[k].count,
           ops[k].fwd_s * 1e3, ops[k].bwd_s * 1e3, tot * 1e3, 100 * tot / step_s, fg, bg);
  }
  printf("%-20s %5s %9s %9s %9.1f %7.1f\n", "(optimizer)", "", "", "", upd * 1e3, 100 * upd / step_s);
  printf("%-20s %5s %9s %9s %9.1f %7.1f\n", "(other)", "", "", "",
         (step_s - nodes_s - upd) * 1e3, 100 * (step_s - nodes_s - upd) / step_s);
  if (fused) printf("(%d ReLUs fused into their producer: not run, not listed)\n", fused);

  qsort(rows, (size_t)n, sizeof *rows, by_total_desc);
  if (top > n) top = n;
  printf("\ntop %d nodes by time (per step)\n%-44s %-16s %-16s %9s %9s %7s %9s\n", top, "node",
         "op", "output", "fwd ms", "bwd ms", "% step", "fwd GF/s");
  for (int k = 0; k < top; k++) {
    const cnnb_model_layer *l = &rep.layers[rows[k].node];
    char shape[48], gf[16] = "";
    snprintf(shape, sizeof shape, "%dx%dx%d", l->shape.c, l->shape.h, l->shape.w);
    if (l->flops_matmul > 0 && rows[k].fwd_s > 0)
      snprintf(gf, sizeof gf, "%.1f", (double)l->flops_matmul * batch / rows[k].fwd_s * 1e-9);
    printf("%-44.44s %-16s %-16s %9.1f %9.1f %7.1f %9s\n", l->name, l->op, shape,
           rows[k].fwd_s * 1e3, rows[k].bwd_s * 1e3,
           100 * (rows[k].fwd_s + rows[k].bwd_s) / step_s, gf);
  }
  free(rows);
  free(ops);
  cnnb_model_report_free(&rep);
}

/* Takes --top=N out of argv (cnnbench's flag table does not know it). */
static int take_top(int *argc, char **argv) {
  int top = 25, j = 1;
  for (int i = 1; i < *argc; i++) {
    if (strncmp(argv[i], "--top=", 6) == 0) top = atoi(argv[i] + 6);
    else argv[j++] = argv[i];
  }
  *argc = j;
  return top > 0 ? top : 25;
}

int main(int argc, char **argv) {
  static char err[8192];
  int top = take_top(&argc, argv);
  cnnb_flags *flags = cnnb_flags_create();
  cnnb_loader *loader = cnnb_loader_create();
  if (!flags || !loader || cnnb_flags_declare_core(flags) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: out of memory\n");
    return 1;
  }
  cnnb_status st = cnnb_loader_discover(loader, "", err, sizeof err);
  if (st != CNNB_OK) fprintf(stderr, "cnnb_profile: %s\n", err);
  cnnb_loader_register_flags(loader, flags);
  if (cnnb_flags_parse(flags, argc, argv, err, sizeof err) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", err);
    return 2;
  }

  session s;
  memset(&s, 0, sizeof s);
  s.run.flags = flags;
  s.run.ctx = cnnb_ctx_create("cnnb_profile", flags);
  int64_t warmup = cnnb_flags_int(flags, "num_warmup_batches");
  int64_t steps = cnnb_flags_int(flags, "num_batches");
  if (warmup < 0) warmup = 1;
  if (!s.run.ctx) return 1;
  if ((st = cnnb_run_resolve(&s.run, loader)) != CNNB_OK ||
      (st = cnnb_run_resolve_runtime(&s.run, loader)) != CNNB_OK ||
      (st = cnnb_run_build_graph(&s.run)) != CNNB_OK || (st = setup(&s)) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", cnnb_error_message(s.run.ctx));
    return 1;
  }

  int32_t n = cnnb_graph_num_nodes(s.run.graph);
  node_row *warm = calloc((size_t)n, sizeof *warm);
  double update_s = 0;
  if (!warm) return 1;
  for (int64_t i = 0; i < warmup && st == CNNB_OK; i++) st = step(&s, i, &update_s);
  for (int32_t i = 0; i < n; i++) cnnb_executor_node_time(s.ex, i, &warm[i].fwd_s, &warm[i].bwd_s);
  update_s = 0;
  double t0 = now_s();
  for (int64_t i = 0; i < steps && st == CNNB_OK; i++) {
    double ts = now_s();
    st = step(&s, warmup + i, &update_s);
    printf("step %lld: %.3f s, %.2f images/sec\n", (long long)(i + 1), now_s() - ts,
           s.run.batch_size / (now_s() - ts));
    fflush(stdout);
  }
  double wall = now_s() - t0;
  if (st != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", cnnb_error_message(s.run.ctx));
    return 1;
  }
  print_summary(&s, warm, steps, wall, update_s, top);

  free(warm);
  free(s.images);
  free(s.labels);
  cnnb_trainer_destroy(s.tr);
  cnnb_executor_destroy(s.ex);
  if (s.device) s.run.device->destroy(s.device);
  cnnb_ctx_destroy(s.device_ctx);
  cnnb_run_teardown(&s.run);
  cnnb_ctx_destroy(s.run.ctx);
  cnnb_loader_destroy(loader);
  cnnb_flags_destroy(flags);
  return 0;
}
