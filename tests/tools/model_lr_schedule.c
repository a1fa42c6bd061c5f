/* model_lr_schedule.c — a model plugin's learning-rate schedule at given steps, as the
 * host computes it with no learning-rate flag (the model's learning_rate_at through
 * exec/lr_schedule.c), for the zoo's recipe oracle (cli/torchvision_zoo.sh). Never
 * installed.
 *
 *   model_lr_schedule --model=NAME --global_batch=B --examples_per_epoch=E < steps
 *
 * Reads one global step per line on stdin, writes "<step> <rate>" per line. The model
 * plugin is found as cnnbench finds it (CNNB_PLUGIN_PATH, the install's directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/lr_schedule.h"
#include "flags/flags.h"
#include "loader/loader.h"
#include "config/core_flags.h"

static const char *value_of(int argc, char **argv, const char *name) {
  size_t n = strlen(name);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return NULL;
}

int main(int argc, char **argv) {
  const char *model = value_of(argc, argv, "--model");
  const char *batch = value_of(argc, argv, "--global_batch");
  const char *epoch = value_of(argc, argv, "--examples_per_epoch");
  if (!model || !batch || !epoch || atoi(batch) < 1 || atoll(epoch) < 1) {
    fprintf(stderr, "usage: model_lr_schedule --model=NAME --global_batch=B "
                    "--examples_per_epoch=E < steps\n");
    return 2;
  }
  char err[4096];
  int rc = 1;
  cnnb_flags *flags = cnnb_flags_create();
  cnnb_loader *loader = cnnb_loader_create(NULL);
  cnnb_ctx *ctx = NULL;
  cnnb_lr_schedule *schedule = NULL;
  const cnnb_plugin *mp;
  if (!flags || !loader || cnnb_flags_declare_core(flags) != CNNB_OK ||
      cnnb_loader_discover(loader, NULL, err, sizeof err) != CNNB_OK ||
      (cnnb_loader_register_flags(loader, flags), !(ctx = cnnb_ctx_create("lr", flags))) ||
      cnnb_loader_find(loader, CNNB_KIND_MODEL, model, &mp, NULL, err, sizeof err) != CNNB_OK) {
    fprintf(stderr, "model_lr_schedule: %s\n", err);
    goto done;
  }
  const cnnb_model_vtable *mv = mp->vtable;
  const cnnb_dataset_info *imagenet = cnnb_dataset_find("imagenet");
  cnnb_model_info info = {.struct_size = sizeof info};
  if (!imagenet || mv->describe(ctx, model, imagenet->kind, &info) != CNNB_OK) {
    fprintf(stderr, "model_lr_schedule: describing %s: %s\n", model, cnnb_error_message(ctx));
    goto done;
  }
  cnnb_lr_model lr_model = {.name = model,
                            .ctx = ctx,
                            .dataset = imagenet->kind,
                            .learning_rate_at = mv->learning_rate_at,
                            .learning_rate = mv->learning_rate,
                            .default_learning_rate = info.default_learning_rate};
  cnnb_lr_config cfg = {
      .examples_per_epoch = atoll(epoch), .global_batch_size = atoi(batch), .model = &lr_model};
  if (cnnb_lr_schedule_create(ctx, &cfg, &schedule) != CNNB_OK) {
    fprintf(stderr, "model_lr_schedule: %s\n", cnnb_error_message(ctx));
    goto done;
  }
  long long step;
  while (scanf("%lld", &step) == 1)
    printf("%lld %.9g\n", step, (double)cnnb_lr_schedule_at(schedule, (int64_t)step));
  rc = 0;
done:
  cnnb_lr_schedule_destroy(schedule);
  cnnb_ctx_destroy(ctx);
  cnnb_loader_destroy(loader);
  cnnb_flags_destroy(flags);
  return rc;
}
