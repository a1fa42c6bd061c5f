/* trainer.h — one training update of one replica, shared by every device (core, never
 * installed): optimizer slots in device arenas, the learning-rate schedule, L2 weight
 * decay that skips CNNB_PARAM_NO_DECAY params (batch norm), clipping by value, and fp16
 * loss scaling (static, or dynamic: skip the update on inf/NaN gradients).
 *
 * Per step the run loop does:
 *   scale = cnnb_trainer_loss_scale(tr);
 *   cnnb_executor_step(ex, images, labels, scale, step);   (strategy averages grads)
 *   cnnb_trainer_apply(tr, step, &skipped, &lr);
 * apply() calls the device's update once per contiguous run of parameters that share
 * the same decay, with grad_scale = 1 / scale. The math is cnnb_update_reference's. */
#ifndef CNNB_TRAINER_H
#define CNNB_TRAINER_H

#include <stdbool.h>
#include <cnnb/optimizer.h>
#include "exec/executor.h"
#include "exec/loss_scale.h"
#include "exec/lr_schedule.h"

typedef struct cnnb_trainer_config {
  uint32_t rule; /* cnnb_optimizer_rule */
  bool nesterov; /* tf_cnn_benchmarks' momentum is always Nesterov */
  float momentum;
  float rmsprop_decay, rmsprop_momentum, rmsprop_epsilon;
  float adam_beta1, adam_beta2, adam_epsilon;
  float weight_decay;
  float gradient_clip;   /* 0: none */
  bool fp16;             /* loss scaling applies only to fp16, as tf_cnn_benchmarks */
  float fp16_loss_scale; /* <= 0: 128 */
  bool auto_loss_scale;
  int64_t inc_loss_scale_every_n;
  cnnb_lr_config lr;
} cnnb_trainer_config;

typedef struct cnnb_trainer cnnb_trainer;

/* Allocates the slots on ex's device (zeros; RMSProp's mean square starts at ones, as
 * TF's) and builds the schedule. `ex` must be a training executor and outlive `tr`; cfg
 * comes from the run configuration (run_config.h), its lr part completed at setup. */
cnnb_status cnnb_trainer_create(cnnb_ctx *ctx, const cnnb_trainer_config *cfg, cnnb_executor *ex,
                                cnnb_trainer **out);

/* Where a trainer's updates go when not to its executor's device: a strategy that keeps
 * the variables itself (a parameter server's apply_update). `apply` gets each run's
 * update with its arena offset; its slot pointers are NULL (the keeper has its own).
 * apply NULL: nowhere — the trainer keeps only its bookkeeping (loss scale, Adam's step),
 * for replicas whose parameters the keeper refreshes. Either way no slots are allocated. */
typedef struct cnnb_update_sink {
  cnnb_status (*apply)(void *user, int64_t offset, const cnnb_update *update);
  void *user;
} cnnb_update_sink;

/* cnnb_trainer_create, sending updates to `sink` (NULL: the device, as create). */
cnnb_status cnnb_trainer_create_with_sink(cnnb_ctx *ctx, const cnnb_trainer_config *cfg,
                                          cnnb_executor *ex, const cnnb_update_sink *sink,
                                          cnnb_trainer **out);
void cnnb_trainer_destroy(cnnb_trainer *tr);

/* The scale to multiply the loss by in this step's backward (1 without fp16). */
float cnnb_trainer_loss_scale(const cnnb_trainer *tr);

/* fp16 steps whose gradients held inf/NaN so far: skipped under dynamic loss scaling,
 * applied (and counted, with one warning) under a static scale. 0 without fp16. */
int64_t cnnb_trainer_overflow_steps(const cnnb_trainer *tr);

/* Applies the gradient arena to the parameters for global step `step` (0-based count
 * of steps before this one). *skipped = 1 when dynamic loss scaling found inf/NaN and
 * skipped the update; *lr_used is the step's learning rate. Either may be NULL. */
cnnb_status cnnb_trainer_apply(cnnb_trainer *tr, int64_t step, int *skipped, float *lr_used);

/* The learning rate at `step`. */
float cnnb_trainer_learning_rate(const cnnb_trainer *tr, int64_t step);

/* weight_decay * sum over decayed params of w^2 / 2 (TF's l2_loss term of
 * tf_cnn_benchmarks' total_loss). Downloads the parameters: call it at display steps. */
cnnb_status cnnb_trainer_weight_decay_loss(cnnb_trainer *tr, double *out);

/* "momentum (nesterov, m=0.9), lr piecewise ..., weight decay 4e-05" for the report. */
const char *cnnb_trainer_describe(const cnnb_trainer *tr);

/* Optimizer state, as device pointers over the whole parameter arena (NULL if unused),
 * and the number of updates applied so far (Adam's t). */
float *cnnb_trainer_slot1(const cnnb_trainer *tr);
float *cnnb_trainer_slot2(const cnnb_trainer *tr);
int64_t cnnb_trainer_updates(const cnnb_trainer *tr);

/* What a checkpoint keeps of a trainer besides its slots: the updates applied (Adam's t)
 * and the loss scale's state (dynamic scaling's current scale and clean-step count). */
typedef struct cnnb_trainer_state {
  int64_t updates;
  float loss_scale;
  int64_t loss_scale_normal_steps;
} cnnb_trainer_state;

void cnnb_trainer_get_state(const cnnb_trainer *tr, cnnb_trainer_state *out);
/* Resuming: sets the updates count and, under dynamic loss scaling, the scale and its
 * counter (a static scale stays the flag's: the user chose it for this run; without fp16
 * the scale stays 1). CNNB_EINVAL naming the value for a negative count or a scale that
 * is not finite and positive. */
cnnb_status cnnb_trainer_set_state(cnnb_trainer *tr, const cnnb_trainer_state *state);

/* "sgd" | "momentum" | "rmsprop" | "adam" -> rule; 0 when unknown. */
uint32_t cnnb_optimizer_rule_parse(const char *name);
/* The other way: the rule's name, "unknown" for none. */
const char *cnnb_optimizer_rule_name(uint32_t rule);

#endif
