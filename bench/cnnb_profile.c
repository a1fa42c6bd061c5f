/* cnnb_profile.c — where one training step's time goes, per node and per op kind.
 *
 * A small driver over the host's internal API (core/src, linked statically): it takes
 * cnnbench's own flags (--model, --batch_size, --precision, --optimizer, --device,
 * --num_intra_threads, --num_warmup_batches, --num_batches), sets the run up exactly as
 * cnnbench does (one replica; the executor's profile option on, so it synchronizes the
 * device after every node and times it), and runs cnnbench's steps: a batch from the
 * datasource, forward and backward, the optimizer update. Warm-up steps are run and then
 * their times are subtracted, so the table covers only the timed steps.
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
 * Build: bench/CMakeLists.txt (target cnnb_profile). The plugins are found as cnnbench
 * finds them (the build tree's plugin directory, CNNB_PLUGIN_PATH). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "config/core_flags.h"
#include "config/run_config.h"
#include "exec/executor.h"
#include "exec/trainer.h"
#include "flags/flags.h"
#include "graph/model_info.h"
#include "loader/loader.h"
#include "run/replica.h"
#include "run/setup.h"

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

/* One step as cnnbench's loop runs it; *update_s gets the optimizer's share. */
static cnnb_status step(cnnb_run *run, int64_t i, double *update_s) {
  cnnb_replica *r = &run->replicas[0];
  cnnb_batch batch;
  cnnb_status st = cnnb_prefetch_take(r->input, &batch);
  if (st != CNNB_OK)
    return cnnb_plugin_failed(run->ctx, &run->facts.datasource, st, r->datasource_ctx,
                              "reading a batch");
  if ((st = cnnb_replica_step(r, &batch, 1.0f, i)) != CNNB_OK) return st;
  double t0 = cnnb_now_seconds();
  if (r->trainer && (st = cnnb_trainer_apply(r->trainer, i, NULL, NULL)) != CNNB_OK) return st;
  if ((st = run->facts.device.vt.device->synchronize(r->device)) != CNNB_OK)
    return cnnb_plugin_failed(run->ctx, &run->facts.device, st, r->device_ctx, "synchronize");
  *update_s += cnnb_now_seconds() - t0;
  return CNNB_OK;
}

static void print_summary(const cnnb_run *run, const node_row *warm, int64_t steps, double wall_s,
                          double update_s, int top) {
  const cnnb_graph *g = run->graph;
  const cnnb_executor *ex = run->replicas[0].executor;
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
  const cnnb_plan *plan = cnnb_executor_plan(ex);
  int nops = 0, fused = 0;
  double nodes_s = 0, batch = run->facts.batch_size;
  for (int32_t i = 0; i < n; i++) {
    double f, b;
    cnnb_executor_node_time(ex, i, &f, &b);
    rows[i] = (node_row){i, (f - warm[i].fwd_s) / (double)steps,
                         (b - warm[i].bwd_s) / (double)steps};
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
  printf("\nprofile: model %s batch %d precision %s, %lld timed steps\n", run->facts.model.name,
         run->facts.batch_size, cnnb_precision_name(run->cfg->precision), (long long)steps);
  printf("profile: step %.3f s = nodes %.3f s (%.1f%%) + optimizer update %.3f s (%.1f%%) + other "
         "%.3f s (%.1f%%)\n",
         step_s, nodes_s, 100 * nodes_s / step_s, upd, 100 * upd / step_s, step_s - nodes_s - upd,
         100 * (step_s - nodes_s - upd) / step_s);
  double train_flops = 3.0 * (double)rep.flops_matmul * batch;
  printf("profile: images/sec %.2f, achieved %.1f GFLOP/s (3 x forward conv+dense FLOPs)\n",
         batch / step_s, train_flops / step_s * 1e-9);

  qsort(ops, (size_t)nops, sizeof *ops, op_by_total_desc);
  printf("\n%-20s %5s %9s %9s %9s %7s %9s %9s\n", "op", "nodes", "fwd ms", "bwd ms", "total ms",
         "% step", "fwd GF/s", "bwd GF/s");
  for (int k = 0; k < nops; k++) {
    double tot = ops[k].fwd_s + ops[k].bwd_s;
    char fg[16] = "", bg[16] = "";
    if (ops[k].flops > 0 && ops[k].fwd_s > 0)
      snprintf(fg, sizeof fg, "%.1f", ops[k].flops / ops[k].fwd_s * 1e-9);
    if (ops[k].flops > 0 && ops[k].bwd_s > 0)
      snprintf(bg, sizeof bg, "%.1f", 2 * ops[k].flops / ops[k].bwd_s * 1e-9);
    printf("%-20s %5d %9.1f %9.1f %9.1f %7.1f %9s %9s\n", ops[k].op, ops[k].count,
           ops[k].fwd_s * 1e3, ops[k].bwd_s * 1e3, tot * 1e3, 100 * tot / step_s, fg, bg);
  }
  printf("%-20s %5s %9s %9s %9.1f %7.1f\n", "(optimizer)", "", "", "", upd * 1e3,
         100 * upd / step_s);
  printf("%-20s %5s %9s %9s %9.1f %7.1f\n", "(other)", "", "", "", (step_s - nodes_s - upd) * 1e3,
         100 * (step_s - nodes_s - upd) / step_s);
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
           rows[k].fwd_s * 1e3, rows[k].bwd_s * 1e3, 100 * (rows[k].fwd_s + rows[k].bwd_s) / step_s,
           gf);
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
  char err[8192];
  int top = take_top(&argc, argv);
  cnnb_flags *flags = cnnb_flags_create();
  cnnb_ctx *root = flags ? cnnb_ctx_create("cnnb_profile", flags) : NULL;
  cnnb_loader *loader = root ? cnnb_loader_create(root) : NULL;
  if (!loader || cnnb_flags_declare_core(flags) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: out of memory\n");
    return 1;
  }
  cnnb_status st = cnnb_loader_discover(loader, "", err, sizeof err);
  if (st != CNNB_OK) fprintf(stderr, "cnnb_profile: %s\n", err);
  cnnb_loader_register_flags(loader, flags);
  cnnb_run_config cfg;
  if (cnnb_flags_parse(flags, argc, argv, err, sizeof err) != CNNB_OK ||
      cnnb_run_config_from_flags(flags, &cfg, err, sizeof err) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", err);
    return 2;
  }
  cfg.num_replicas = 1; /* the table is one device's */
  cnnb_run run = {.profile = true};
  if ((st = cnnb_run_open(&run, &cfg, root, loader)) != CNNB_OK ||
      (st = cnnb_run_prepare(&run, loader)) != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", run.ctx ? cnnb_error_message(run.ctx) : "out of memory");
    return 1;
  }

  int64_t warmup = cfg.num_warmup_batches, steps = run.facts.num_batches;
  int32_t n = cnnb_graph_num_nodes(run.graph);
  node_row *warm = calloc((size_t)n, sizeof *warm);
  double update_s = 0;
  if (!warm) return 1;
  for (int64_t i = 0; i < warmup && st == CNNB_OK; i++) st = step(&run, i, &update_s);
  for (int32_t i = 0; i < n; i++)
    cnnb_executor_node_time(run.replicas[0].executor, i, &warm[i].fwd_s, &warm[i].bwd_s);
  update_s = 0;
  double t0 = cnnb_now_seconds();
  for (int64_t i = 0; i < steps && st == CNNB_OK; i++) {
    double ts = cnnb_now_seconds();
    st = step(&run, warmup + i, &update_s);
    printf("step %lld: %.3f s, %.2f images/sec\n", (long long)(i + 1), cnnb_now_seconds() - ts,
           run.facts.batch_size / (cnnb_now_seconds() - ts));
    fflush(stdout);
  }
  double wall = cnnb_now_seconds() - t0;
  if (st != CNNB_OK) {
    fprintf(stderr, "cnnb_profile: %s\n", cnnb_error_message(run.ctx));
    return 1;
  }
  print_summary(&run, warm, steps, wall, update_s, top);

  free(warm);
  cnnb_run_close(&run);
  cnnb_loader_destroy(loader);
  cnnb_ctx_destroy(root);
  cnnb_flags_destroy(flags);
  return 0;
}
