/* setup.h — how one run is put together and taken apart (run.h holds the pieces); the
 * step loop drives them (run/steps.c). Host-internal (bench/cnnb_profile reuses it).
 *
 * Order, so nothing is allocated for a run that cannot work: resolve the model, ask its
 * facts, build the graph; resolve the device, strategy and datasource plugins; create
 * every replica's device and check it runs every op of the graph; create the strategy
 * (which tells this process's rank, and refuses what it cannot do before any arena
 * exists); then plan and allocate (executors), let the ranks agree on the run and
 * broadcast the initial values, and last give each replica its shard of the data (and,
 * evaluating during training, a second inference-mode set: evaluation.h). --input_only
 * stops short of the executors. */
#ifndef CNNB_RUN_SETUP_H
#define CNNB_RUN_SETUP_H

#include "loader/loader.h"
#include "run/run.h"

/* Resolves the model, reads its facts (the sizes the config leaves to it) and builds
 * its graph with the loss. Enough for --model_info. run->ctx becomes a child of `parent`
 * (its flags and log settings; NULL: none). `cfg` and `parent` must outlive run. */
cnnb_status cnnb_run_open(cnnb_run *run, const cnnb_run_config *cfg, cnnb_ctx *parent,
                          cnnb_loader *loader);
/* Everything else: device, strategy and datasource plugins, replicas, strategy, data. */
cnnb_status cnnb_run_prepare(cnnb_run *run, cnnb_loader *loader);
/* Frees what open and prepare made, in reverse; safe after a failure at any point. */
void cnnb_run_close(cnnb_run *run);

#endif
