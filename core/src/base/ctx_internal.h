/* ctx_internal.h — the layout of cnnb_ctx, shared by ctx.c (errors, logging) and
 * flags.c (flag getters on a ctx). Core-private: nothing outside core/src includes it. */
#ifndef CNNB_CTX_INTERNAL_H
#define CNNB_CTX_INTERNAL_H

#include <stdatomic.h>

#include "base/host_ctx.h"

/* How a family of ctxs logs: the least severe level shown and a tag before every line
 * ("[rank 1] "). One per root ctx, shared by its children, so the command line's
 * --log_level and the process's rank reach every plugin's lines; nothing process-wide.
 * The family also shares the run's --trace_file recorder (trace.h): `tracing` points to
 * it while a traced step runs and is NULL otherwise, so cnnb_trace_active is one relaxed
 * atomic load. */
typedef struct cnnb_log_settings {
  cnnb_log_level level;
  char tag[32];
  struct cnnb_trace *_Atomic tracing;
} cnnb_log_settings;

struct cnnb_ctx {
  char *component;         /* log prefix: the plugin's or core part's name */
  const cnnb_flags *flags; /* what flag getters read; NULL in some tests */
  char *error;             /* first error since the last clear, plus context; NULL = none */
  cnnb_log_settings *log;  /* the root's; owned when owns_log */
  bool owns_log;
};

/* "cnnbench" when ctx is NULL. */
const char *cnnb_ctx_component(const cnnb_ctx *ctx);

#endif
