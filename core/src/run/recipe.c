/* recipe.c — a model's training recipe as a run's defaults (recipe.h). */
#include "run/recipe.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Appends ", <what>" (or "<what>" first) to buf. */
static void note(char *buf, size_t size, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 3 >= size) return;
  if (used) {
    memcpy(buf + used, ", ", 3);
    used += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, size - used, fmt, ap);
  va_end(ap);
}

static cnnb_status bad(cnnb_ctx *ctx, const char *model, const char *field, double v,
                       const char *range) {
  return cnnb_error(ctx, CNNB_EINVAL,
                    "--model=%s: its training recipe's %s is %g, which must be %s: fix the plugin",
                    model, field, v, range);
}

/* The recipe's values are the plugin's: checked as the flags are (run_config.c). */
static cnnb_status check(cnnb_ctx *ctx, const char *model, const cnnb_model_info *info,
                         uint32_t *rule) {
  *rule = cnnb_optimizer_rule_parse(info->optimizer);
  if (!*rule)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "--model=%s: its training recipe's optimizer '%s' is not one of sgd, "
                      "momentum, rmsprop or adam: fix the plugin",
                      model, info->optimizer);
  if (!(info->momentum >= 0.0f && info->momentum < 1.0f))
    return bad(ctx, model, "momentum", info->momentum, "in [0, 1)");
  if (!(info->weight_decay >= 0.0f && info->weight_decay <= 1.0f))
    return bad(ctx, model, "weight decay", info->weight_decay, "in [0, 1]");
  if (!(info->label_smoothing >= 0.0f && info->label_smoothing < 1.0f))
    return bad(ctx, model, "label smoothing", info->label_smoothing, "in [0, 1)");
  if (!(info->epsilon >= 0.0f && info->epsilon <= 1e6f))
    return bad(ctx, model, "epsilon", info->epsilon, "in [0, 1e6] (0: the flag's)");
  return CNNB_OK;
}

cnnb_status cnnb_recipe_apply(cnnb_ctx *ctx, const char *model, const cnnb_model_info *info,
                              cnnb_run_config *cfg, char *applied, size_t size) {
  applied[0] = '\0';
  if (info->struct_size < sizeof *info || !info->optimizer) return CNNB_OK;
  uint32_t rule;
  cnnb_status st = check(ctx, model, info, &rule);
  if (st != CNNB_OK) return st;
  cnnb_trainer_config *t = &cfg->trainer;
  const cnnb_recipe_flags *given = &cfg->recipe_flags_set;
  if (!given->optimizer) {
    t->rule = rule;
    note(applied, size, "optimizer %s", info->optimizer);
  }
  /* Momentum, Nesterov and epsilon are the recipe's optimizer's: with another one given,
   * they would tune an optimizer the recipe never ran. */
  if (t->rule == rule) {
    if (!given->momentum && (rule == CNNB_OPT_MOMENTUM || rule == CNNB_OPT_RMSPROP)) {
      if (rule == CNNB_OPT_RMSPROP) t->rmsprop_momentum = info->momentum;
      else t->momentum = info->momentum;
      note(applied, size, "momentum %g", (double)info->momentum);
    }
    if (!given->nesterov && rule == CNNB_OPT_MOMENTUM) {
      t->nesterov = info->nesterov != 0;
      note(applied, size, "%s", t->nesterov ? "Nesterov" : "not Nesterov");
    }
    if (!given->epsilon && info->epsilon > 0.0f &&
        (rule == CNNB_OPT_RMSPROP || rule == CNNB_OPT_ADAM)) {
      if (rule == CNNB_OPT_RMSPROP) t->rmsprop_epsilon = info->epsilon;
      else t->adam_epsilon = info->epsilon;
      note(applied, size, "epsilon %g", (double)info->epsilon);
    }
  }
  if (!given->weight_decay) {
    t->weight_decay = info->weight_decay;
    note(applied, size, "weight decay %g", (double)info->weight_decay);
  }
  if (!given->label_smoothing) {
    cfg->label_smoothing = info->label_smoothing;
    note(applied, size, "label smoothing %g", (double)info->label_smoothing);
  }
  return CNNB_OK;
}

void cnnb_recipe_print(const cnnb_model_info *info, FILE *out) {
  if (info->struct_size < sizeof *info || !info->optimizer) {
    fprintf(out, "Training recipe: none of the model's own (the flags' defaults: "
                 "tf_cnn_benchmarks')\n");
    return;
  }
  fprintf(out, "Training recipe: %s\n", info->recipe ? info->recipe : "(not described)");
  fprintf(out, "Recipe defaults: --optimizer=%s", info->optimizer);
  if (strcmp(info->optimizer, "sgd") != 0 && strcmp(info->optimizer, "adam") != 0)
    fprintf(out, " --%s=%g",
            strcmp(info->optimizer, "rmsprop") == 0 ? "rmsprop_momentum" : "momentum",
            (double)info->momentum);
  if (strcmp(info->optimizer, "momentum") == 0)
    fprintf(out, " --%snesterov", info->nesterov ? "" : "no");
  if (info->epsilon > 0.0f)
    fprintf(out, " --%s_epsilon=%g", strcmp(info->optimizer, "adam") == 0 ? "adam" : "rmsprop",
            (double)info->epsilon);
  fprintf(out, " --weight_decay=%g --label_smoothing=%g (each flag given wins)\n",
          (double)info->weight_decay, (double)info->label_smoothing);
}
