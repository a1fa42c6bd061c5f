/* ps_optimizer_state.h — the parameter server's answer to CNNB_EXT_STRATEGY_OPTIMIZER_STATE
 * (sdk/include/cnnb/strategy.h): checkpoints save and restore the optimizer slots that
 * live here, spread over the PS ranks' shards, since the host's trainers hold none.
 *
 * get_slot gathers every PS rank's shard into every rank (one broadcast per PS rank, as a
 * step's pull); set_slot has every rank keep its shard of the values every rank passes,
 * then checks over the ranks (one allgather) that they passed the same values and that
 * none had started training. In asynchronous mode the server thread applies pushes to the
 * slots concurrently, so both hold slots_lock, and get_slot first waits for every rank
 * to arrive: every push made before then is in what it returns. Every wait is bounded by
 * --collective_timeout_s (mpi_world.h). */
#ifndef CNNB_PS_OPTIMIZER_STATE_H
#define CNNB_PS_OPTIMIZER_STATE_H

#include <cnnb/cnnb.h>

extern const cnnb_strategy_optimizer_state ps_optimizer_state;

#endif
