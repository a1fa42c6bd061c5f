/* steps.h — the steps of a run with a model (training, --forward_only, --eval) and the
 * report they print; --input_only's steps are run/input_only.h's. Host-internal. */
#ifndef CNNB_RUN_STEPS_H
#define CNNB_RUN_STEPS_H

#include <stdio.h>

#include "base/trace.h"
#include "run/run.h"

/* The warm-up and timed steps of a prepared run, evaluating and saving during training
 * as the configuration asks, and the report on `out` (rank 0's; NULL on the others).
 * Steps count globally from the resumed checkpoint's step (facts.start_step): the
 * learning rate, dropout masks and saved step continue; the report's step numbers are
 * this run's. The first --trace_steps timed steps are traced into `trace` when given. */
cnnb_status cnnb_run_model_steps(cnnb_run *run, FILE *out, cnnb_trace *trace);

#endif
