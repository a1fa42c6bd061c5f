/* recipe.h — a model's reference training recipe (cnnb_model_info, ABI 1.14) as the
 * defaults of a run (core, never installed): every optimizer field whose flag the
 * command line did not give takes the recipe's value, so `--model=convnext_tiny` trains
 * as torchvision's recipe says and `--weight_decay=0` still means what it says. */
#ifndef CNNB_RECIPE_H
#define CNNB_RECIPE_H
#include <stddef.h>
#include <stdio.h>

#include <cnnb/model.h>
#include "config/run_config.h"

/* Applies info's recipe to cfg (a run's own copy) when it has one (info->optimizer set):
 * weight decay and label smoothing whatever the optimizer; momentum, Nesterov and
 * epsilon only while the run's optimizer is the recipe's (--optimizer not given, or
 * given as the recipe's).
 * `applied` gets what changed, "optimizer rmsprop, weight decay 1e-05, ..." ("" for
 * nothing). CNNB_EINVAL naming `model` (the plugin, "fix the plugin") for a recipe value
 * outside its flag's range. */
cnnb_status cnnb_recipe_apply(cnnb_ctx *ctx, const char *model, const cnnb_model_info *info,
                              cnnb_run_config *cfg, char *applied, size_t size);

/* One line for --model_info: "Training recipe: <info->recipe>" and the flags' values it
 * sets, or that the model has none. */
void cnnb_recipe_print(const cnnb_model_info *info, FILE *out);
#endif
