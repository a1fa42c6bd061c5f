/* host_ctx.h — contexts as the host makes them (never installed): a root ctx per
 * component, the log level and tag its family shares, and logging where no ctx is at
 * hand. A plugin only ever sees the SDK's side (cnnb/ctx.h). */
#ifndef CNNB_BASE_HOST_CTX_H
#define CNNB_BASE_HOST_CTX_H

#include <cnnb/cnnb.h>

typedef struct cnnb_flags cnnb_flags; /* flags/flags.h */

/* A root context for one component: `component` prefixes its log lines ("cpu: ..."), and
 * flag getters read `flags` (may be NULL in tests: getters then return defaults of 0). It
 * logs at CNNB_LOG_INFO and above until told otherwise. cnnb_ctx_create_child and
 * cnnb_ctx_destroy are the SDK's (cnnb/ctx.h); parent NULL there makes a new root without
 * flags. */
cnnb_ctx *cnnb_ctx_create(const char *component, const cnnb_flags *flags);
/* For ctx's whole family: lines less severe than `level` are dropped, and every line
 * starts with `tag` (NULL or "": none). Set them before other threads log. */
void cnnb_ctx_set_log_level(cnnb_ctx *ctx, cnnb_log_level level);
void cnnb_ctx_set_log_tag(cnnb_ctx *ctx, const char *tag);
/* The flag table ctx's getters read (NULL for a ctx without one). */
const cnnb_flags *cnnb_ctx_flags(const cnnb_ctx *ctx);

/* As cnnb_log, with `component` as the prefix ("cnnbench"), at the default level (info):
 * for errors found where no ctx is at hand (declaring flags). */
void cnnb_log_component(const char *component, cnnb_log_level level, const char *fmt, ...)
    CNNB_PRINTF(3, 4);
/* "error" | "warn" | "info" | "debug" (as --log_level spells them); false otherwise. */
bool cnnb_log_level_parse(const char *name, cnnb_log_level *level);

#endif
