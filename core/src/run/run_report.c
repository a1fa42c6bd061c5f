/* run_report.c — a run's report pieces (run_report.h). */
#include "run/run_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/output_file.h"
#include "graph/model_info.h"
#include "report/benchmark_log.h"
#include "report/report.h"
#include "run/evaluation.h"
#include "run/interrupted.h"
#include "run/recipe.h"
#include "run/replica.h"
#include "run/world.h"

cnnb_status cnnb_run_print_model_info(cnnb_run *run, FILE *out) {
  cnnb_model_report report;
  cnnb_status st = cnnb_model_info_compute(run->graph, &report);
  if (st != CNNB_OK)
    return cnnb_error(run->ctx, st, "--model_info: %s", cnnb_graph_error(run->graph));
  fprintf(out, "Model: %s (%s, %dx%d, %d classes)\n", run->facts.model.name,
          run->cfg->dataset->name, run->facts.image_size, run->facts.image_size,
          run->facts.num_classes);
  cnnb_model_info_print(run->graph, &report, out);
  cnnb_recipe_print(&run->info, out);
  cnnb_model_report_free(&report);
  return CNNB_OK;
}

cnnb_status cnnb_run_write_graph_file(cnnb_run *run) {
  const char *path = run->cfg->graph_file;
  if (!path || !*path || run->facts.world.rank != 0) return CNNB_OK;
  FILE *f = cnnb_output_fopen(path);
  if (!f)
    return cnnb_error(run->ctx, CNNB_EIO, "--graph_file=%s: %s", path, cnnb_output_strerror(errno));
  cnnb_status st = cnnb_run_print_model_info(run, f);
  if (fclose(f) != 0 && st == CNNB_OK)
    st = cnnb_error(run->ctx, CNNB_EIO, "--graph_file=%s: %s", path, strerror(errno));
  return st;
}

/* tf's print_info shows "AllReduce:" for the strategies that all-reduce (replicated and
 * its distributed names), "None" when no --all_reduce_spec was given; others show it only
 * when a spec was given (it then says what they were told). */
static const char *all_reduce_line(const cnnb_run *run) {
  const char *spec = run->cfg->all_reduce_spec;
  const char *name = run->facts.strategy.name;
  static const char *const all_reducing[] = {"replicated", "distributed_all_reduce",
                                             "collective_all_reduce"};
  for (size_t i = 0; i < sizeof all_reducing / sizeof all_reducing[0]; i++)
    if (name && strcmp(name, all_reducing[i]) == 0) return spec ? spec : "";
  return spec && *spec ? spec : NULL;
}

void cnnb_run_print_header(const cnnb_run *run, FILE *out) {
  const cnnb_run_config *cfg = run->cfg;
  const cnnb_run_facts *f = &run->facts;
  char dataset[256];
  /* tf_cnn_benchmarks shows "imagenet (synthetic)"; the datasource's name says the same
   * for every datasource. */
  snprintf(dataset, sizeof dataset, "%s (%s)", cfg->dataset->name, f->datasource.name);
  enum { MAX_SHOWN = 64, NAME_SIZE = 96 };
  char names[MAX_SHOWN][NAME_SIZE];
  const char *devices[MAX_SHOWN];
  size_t shown = f->replicas < MAX_SHOWN ? (size_t)f->replicas : MAX_SHOWN;
  for (size_t i = 0; i < shown; i++) {
    snprintf(names[i], NAME_SIZE, "/%s:%zu", f->device.name, i);
    devices[i] = names[i];
  }
  cnnb_report_header header = {
      .version = CNNB_VERSION_STRING,
      .model = f->model.name,
      .dataset = dataset,
      .mode = cnnb_run_config_mode_label(cfg),
      .global_batch = f->global_batch,
      .per_device_batch = f->batch_size,
      /* tf prints --num_batches as given: a resumed run's total, not what is left. */
      .num_batches = f->total_batches,
      .num_epochs = f->examples_per_epoch > 0 ? (double)f->total_batches * (double)f->global_batch /
                                                    (double)f->examples_per_epoch
                                              : NAN,
      .devices = devices,
      .num_devices = shown,
      .device_description = f->device_description,
      .data_format = cfg->data_format,
      .optimizer = cfg->mode == CNNB_MODE_TRAIN ? cnnb_optimizer_rule_name(cfg->trainer.rule)
                                                : NULL,
      .variable_update = f->strategy.name,
      .all_reduce = all_reduce_line(run),
  };
  cnnb_report_print_header(out, &header);
}

cnnb_status cnnb_run_print_total(cnnb_run *run, double images, double seconds, int64_t steps,
                                 FILE *out) {
  const cnnb_world *world = &run->facts.world;
  double images_per_sec = 0;
  cnnb_status st = cnnb_world_total(world, images, seconds, &images_per_sec);
  if (st != CNNB_OK) return st;
  cnnb_benchmark_log_total(run->log, images_per_sec, images, seconds, steps);
  char note[320] = "";
  if (run->interrupted) cnnb_run_interrupted_note(run, steps, note, sizeof note);
  if (world->size > 1)
    snprintf(note + strlen(note), sizeof note - strlen(note),
             "%s%d ranks: every rank's images over the slowest rank's time, gathered by the "
             "strategy",
             *note ? "; " : "", (int)world->size);
  if (*note) cnnb_report_print_total_note(out, images_per_sec, note);
  else cnnb_report_print_total(out, images_per_sec);
  return CNNB_OK;
}

void cnnb_run_print_overflows(cnnb_run *run, int64_t steps, FILE *out) {
  const cnnb_trainer *tr = run->replicas ? run->replicas[0].trainer : NULL;
  int64_t overflows = tr ? cnnb_trainer_overflow_steps(tr) : 0;
  if (!out || overflows == 0) return;
  fprintf(out, "fp16 gradients overflowed in %lld of %lld steps (%s)\n", (long long)overflows,
          (long long)steps,
          run->cfg->trainer.auto_loss_scale
              ? "their updates skipped, the loss scale lowered: --fp16_enable_auto_loss_scale"
              : "their updates applied at the static loss scale, as tf_cnn_benchmarks does: "
                "--fp16_enable_auto_loss_scale skips them");
}

/* Examples the training (or --eval) datasource instances of this process skipped as
 * unreadable, summed over its replicas. */
static int64_t skipped_examples(const cnnb_run *run) {
  int64_t total = 0;
  for (int32_t i = 0; run->replicas && i < run->facts.replicas; i++)
    total += cnnb_replica_skipped_examples(run, run->replicas[i].datasource);
  return total;
}

cnnb_status cnnb_run_print_skipped(cnnb_run *run, FILE *out) {
  int64_t skipped[2] = {skipped_examples(run), cnnb_evaluation_skipped_examples(run)};
  cnnb_status st = cnnb_world_sum(&run->facts.world, skipped, 2,
                                  "summing the examples skipped as unreadable");
  if (st != CNNB_OK) return st;
  if (run->facts.world.rank == 0 && skipped[0] + skipped[1] > 0)
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "the datasource skipped %lld unreadable examples (%lld of "
             "them evaluating during training)",
             (long long)(skipped[0] + skipped[1]), (long long)skipped[1]);
  cnnb_report_print_skipped(out, skipped[0] + skipped[1]);
  return CNNB_OK;
}
