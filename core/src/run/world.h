/* world.h — what the host does across processes, through the strategy's allgather (ABI
 * 1.4): make sure every rank runs the same thing before anything is exchanged, add every
 * rank's images into the report's total, sum counters. Every function takes the world
 * (config/run_facts.h) and records a failure in its ctx. Host-internal. */
#ifndef CNNB_WORLD_H
#define CNNB_WORLD_H

#include "config/run_config.h"
#include "config/run_facts.h"

/* Before the strategy's first broadcast: every rank compares the run as it resolved it
 * (model, device, strategy, precision, batch size, image size, classes, replicas,
 * parameter count, steps) and every flag, the core's and each plugin's, except those
 * marked per-rank (cnnb_flag_mark_per_rank: a log level, a trace file). A mismatch is
 * CNNB_EINVAL on every rank, naming each differing flag or value and the ranks that hold
 * it. Two allgathers when the ranks agree (the views, then a digest of the flags), a
 * third to name the flags when they do not. A world of one returns at once; a world of
 * several whose strategy has no allgather is refused (nothing would keep the ranks in
 * step). */
cnnb_status cnnb_world_check_agreement(const cnnb_world *w, const cnnb_run_config *cfg,
                                       const cnnb_run_facts *facts, int64_t param_count);

/* The report's total over every rank: each rank's images over the slowest rank's timed
 * seconds (synchronous training runs at the pace of the slowest). Collective: every
 * rank calls it once after its timed steps. */
cnnb_status cnnb_world_total(const cnnb_world *w, double images, double seconds,
                             double *images_per_sec);

/* Adds `count` counters element-wise over every rank, exactly (top-1 / top-5 hits and
 * examples of an evaluation, skipped examples): on return values[] holds the world's
 * sums on every rank. Collective: every rank calls it with the same count; a world of
 * one returns at once. `what` names the exchange in a failure ("summing the accuracy"). */
cnnb_status cnnb_world_sum(const cnnb_world *w, int64_t *values, int32_t count, const char *what);

/* Whether every rank holds the same `value` (the step a resumed run starts at): CNNB_EINVAL
 * on every rank, naming what and the first rank that differs from rank 0. Collective. */
cnnb_status cnnb_world_check_same(const cnnb_world *w, int64_t value, const char *what);

/* Replaces *value with rank 0's on every rank (a decision only rank 0's clock makes).
 * Collective. */
cnnb_status cnnb_world_rank0_value(const cnnb_world *w, int64_t *value, const char *what);

#endif
