/* input_only.h — --input_only: the input pipeline timed alone (input_only.c).
 * Host-internal. */
#ifndef CNNB_RUN_INPUT_ONLY_H
#define CNNB_RUN_INPUT_ONLY_H

#include <stdio.h>

#include "run/run.h"

/* Warm-up, then num_batches timed reads of a batch from every replica's datasource
 * through its prefetch, with the usual step lines and total on `out` (rank 0's), and no
 * model. */
cnnb_status cnnb_input_only_run(cnnb_run *run, FILE *out);

#endif
