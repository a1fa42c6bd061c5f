/* nccl_load.h — how a strategy plugin finds its NCCL implementation (nccl_api.h): the
 * file beside the strategy plugins (NCCL_API_IMPL_FILE), or the one $CNNB_NCCL_LIBRARY
 * names. Opened on first use only, so a plugin loads and runs its host algorithms on a
 * machine without NCCL, CUDA or a GPU, and a run asking for NCCL there is refused in one
 * line saying which of them is missing. */
#ifndef CNNB_STRATEGY_NCCL_LOAD_H
#define CNNB_STRATEGY_NCCL_LOAD_H

#include <stdbool.h>
#include <cnnb/cnnb.h>

#include "nccl_api.h"

/* Whether an implementation file is there to load (the build had NCCL), without loading
 * it: a run can then say "built without NCCL" only when that is the reason. */
bool nccl_load_built(void);
/* The table, or CNNB_EUNSUPPORTED with one line in ctx naming `who` ("--all_reduce_spec=
 * nccl") and what is missing: the implementation (built without NCCL), a loadable
 * library, a driver or a GPU. The library stays loaded for the process's life. */
cnnb_status nccl_load(cnnb_ctx *ctx, const char *who, const nccl_api **out);

#endif
