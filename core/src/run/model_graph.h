/* model_graph.h — the model's graph: built by the model plugin at a batch size, with the
 * loss (setup's graph at --batch_size; evaluations during training at --eval_batch_size),
 * and the ReLUs the devices can run inside the op before them fused. Host-internal. */
#ifndef CNNB_RUN_MODEL_GRAPH_H
#define CNNB_RUN_MODEL_GRAPH_H

#include "run/run.h"

/* The model's graph at `batch` images per replica, its loss added, into *out (the
 * caller's to destroy, whatever the status); errors name the model. */
cnnb_status cnnb_model_graph_build(cnnb_run *run, int32_t batch, cnnb_graph **out);

/* A ReLU right after an op that can take it (conv, batch norm; add when the device says
 * it can) runs inside it, sharing its buffers. Every replica shares a graph, so only
 * what every replica's device offers is fused: call once the devices exist. */
void cnnb_model_graph_fuse_relus(cnnb_run *run, cnnb_graph *graph);

/* Both, as the run's own graph is made: --eval_batch_size's second graph. */
cnnb_status cnnb_model_graph_build_fused(cnnb_run *run, int32_t batch, cnnb_graph **out);

#endif
