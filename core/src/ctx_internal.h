/* ctx_internal.h — the layout of cnnb_ctx, shared by ctx.c (errors, logging) and
 * flags.c (flag getters on a ctx). Core-private: nothing outside core/src includes it. */
#ifndef CNNB_CTX_INTERNAL_H
#define CNNB_CTX_INTERNAL_H

#include "host.h"

struct cnnb_ctx {
  char *component;          /* log prefix: the plugin's or core part's name */
  const cnnb_flags *flags;  /* what flag getters read; NULL in some tests */
  char *error;              /* first error since the last clear, plus context; NULL = none */
};

/* "cnnbench" when ctx is NULL. */
const char *cnnb_ctx_component(const cnnb_ctx *ctx);

#endif
