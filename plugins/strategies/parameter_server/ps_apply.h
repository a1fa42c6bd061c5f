/* ps_apply.h — the optimizer where the variables live, on the host: the slots it keeps
 * and the update of one shard. The synchronous step (parameter_server.c), the server
 * thread of asynchronous mode (ps_async.c), the GPU variant's host mirrors (ps_gpu.c) and
 * checkpoints of the slots (ps_optimizer_state.c) all share it. Plugin-internal. */
#ifndef CNNB_PS_APPLY_H
#define CNNB_PS_APPLY_H

#include "parameter_server.h"

/* Applies `u` (with its arena offset) to shard `shard`'s variables in `vars`, reading
 * the gradients at the same arena positions of `grads` (both arena-sized); makes the
 * optimizer slots on first use, recording a failure in `ctx` (the calling thread's), and
 * refuses an update of another rule than the slots' (restored for another). The keeper of
 * a shard calls it: the step thread (synchronous, on s->vars), or the server thread
 * (asynchronous, on its own copy, holding slots_lock), never both. */
cnnb_status ps_apply_to_shard(ps *s, cnnb_ctx *ctx, int32_t shard, float *vars, const float *grads,
                              int64_t offset, const cnnb_update *u);

/* Makes the optimizer slots for `rule` (zeros; RMSProp's mean square ones), recording a
 * failure in `ctx`. The caller holds slots_lock when another thread may apply updates. */
cnnb_status ps_make_slots(ps *s, cnnb_ctx *ctx, uint32_t rule);

/* "momentum", for messages. */
const char *ps_rule_name(uint32_t rule);

#endif
