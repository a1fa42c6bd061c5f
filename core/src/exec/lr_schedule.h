/* lr_schedule.h — the learning rate at each global step, with tf_cnn_benchmarks'
 * get_learning_rate() semantics (core, never installed). Pick one, in this order:
 *  - --piecewise_learning_rate_schedule "lr0;e1;lr1;e2;lr2": lr0 until epoch e1, lr1
 *    until e2, then lr2 (TF piecewise_constant with boundaries int(e * batches_per_epoch)
 *    - 1, so the rate changes on the first step of epoch e);
 *  - --init_learning_rate, optionally decayed by --learning_rate_decay_factor every
 *    --num_epochs_per_decay epochs (staircase), floored at --minimum_learning_rate;
 *  - otherwise the model's own schedule, or its default constant rate.
 * A linear warm-up over --num_learning_rate_warmup_epochs (lr = init * step / warmup
 * steps, from 0) applies to the first two, never to a model's own schedule (as TF).
 * Epochs become steps through batches_per_epoch = examples_per_epoch / global batch, with
 * the datasource's epoch: a schedule in epochs with a datasource that cannot say how big
 * an epoch is gets refused, naming the flag. */
#ifndef CNNB_LR_SCHEDULE_H
#define CNNB_LR_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <cnnb/ctx.h>

/* The model's part (cnnb_model_vtable's learning-rate hooks and cnnb_model_info). */
typedef struct cnnb_lr_model {
  const char *name; /* as the user picked it ("resnet50") */
  cnnb_ctx *ctx;    /* the model's, for learning_rate_at */
  uint32_t dataset; /* cnnb_dataset_kind, for learning_rate_at */
  float (*learning_rate_at)(cnnb_ctx *ctx, const char *name, uint32_t dataset, int64_t global_step,
                            int32_t global_batch_size, int64_t examples_per_epoch);
  float (*learning_rate)(const char *name, int64_t global_step, int32_t global_batch_size,
                         int64_t examples_per_epoch); /* ABI 1.0's hook, when _at is NULL */
  float default_learning_rate;                        /* when neither hook is set */
  const char *crash_label; /* names the model plugin if a hook crashes (kept) */
} cnnb_lr_model;

typedef struct cnnb_lr_config {
  bool has_init_learning_rate; /* --init_learning_rate was given */
  double init_learning_rate;
  const char *piecewise;             /* NULL or "": none */
  double num_epochs_per_decay;       /* 0: none */
  double learning_rate_decay_factor; /* 0: none */
  double minimum_learning_rate;      /* 0: no floor */
  double warmup_epochs;              /* 0: none */
  int64_t examples_per_epoch;        /* the datasource's; 0: unknown */
  int32_t global_batch_size;         /* every replica on every rank */
  const cnnb_lr_model *model;        /* may be NULL when one of the flags sets a rate */
} cnnb_lr_config;

typedef struct cnnb_lr_schedule cnnb_lr_schedule;

/* Checks the flag fields alone (tf_cnn_benchmarks' rules: piecewise excludes the other
 * rate flags; decay needs both of its flags and an initial rate; the floor needs decay;
 * nothing negative; the piecewise schedule's syntax), so the command line is refused
 * before anything is built. CNNB_EINVAL with a message naming the flag in err. */
cnnb_status cnnb_lr_config_check(const cnnb_lr_config *cfg, char *err, size_t err_size);

/* Checks cfg (as cnnb_lr_config_check, plus the batch size and, for a schedule in epochs,
 * the epoch's size) and builds the schedule. CNNB_EINVAL with a message naming the flag. */
cnnb_status cnnb_lr_schedule_create(cnnb_ctx *ctx, const cnnb_lr_config *cfg,
                                    cnnb_lr_schedule **out);
void cnnb_lr_schedule_destroy(cnnb_lr_schedule *s);

/* The rate for the update after `global_step` completed updates (0 for the first). */
float cnnb_lr_schedule_at(const cnnb_lr_schedule *s, int64_t global_step);

/* One line for the report: "piecewise 0.1;30;0.01 (warm-up 5 epochs)", "0.1 (constant)". */
const char *cnnb_lr_schedule_describe(const cnnb_lr_schedule *s);

#endif
