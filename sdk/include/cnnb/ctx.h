/* cnnb/ctx.h — host services a plugin calls: errors that carry their message, logging,
 * and flags (plugins declare their own and read any flag's value).
 *
 * Threading: a cnnb_ctx belongs to one plugin instance; calls on one ctx must not race.
 * Plugins never print or exit(): they log through the ctx and return a status. */
#ifndef CNNB_CTX_H
#define CNNB_CTX_H

#include <stdbool.h>
#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ------------------------------------------------------------------ */

/* Records `message` as the ctx's error and returns `status`, so a failing path reads
 *   return cnnb_error(ctx, CNNB_EINVAL, "conv2d %s: filter %dx%d larger than input %dx%d", ...);
 * The first error recorded since the last cnnb_clear_error() wins; later ones are
 * appended as context ("...: while building resnet50"). */
CNNB_EXPORT cnnb_status cnnb_error(cnnb_ctx *ctx, cnnb_status status, const char *fmt, ...)
    CNNB_PRINTF(3, 4);
CNNB_EXPORT const char *cnnb_error_message(const cnnb_ctx *ctx); /* "" when none */
CNNB_EXPORT void cnnb_clear_error(cnnb_ctx *ctx);

/* ---- contexts of a plugin's own (ABI 1.4) ------------------------------------- */

/* A context for a part of the plugin that runs on a thread of its own (a communication
 * thread, a decoder pool): it reads the same flags and logs with the parent's settings
 * (level, rank tag), prefixed with `component`, and keeps its own error, so two threads
 * never race on one ctx. Destroy it before the parent's instance is destroyed. NULL when
 * out of memory. */
CNNB_EXPORT cnnb_ctx *cnnb_ctx_create_child(const cnnb_ctx *parent, const char *component);
CNNB_EXPORT void cnnb_ctx_destroy(cnnb_ctx *ctx);

/* ---- logging (stderr, prefixed with the plugin's name) ------------------------ */

typedef enum cnnb_log_level {
  CNNB_LOG_ERROR = 0,
  CNNB_LOG_WARN = 1,
  CNNB_LOG_INFO = 2,
  CNNB_LOG_DEBUG = 3
} cnnb_log_level;

CNNB_EXPORT void cnnb_log(const cnnb_ctx *ctx, cnnb_log_level level, const char *fmt, ...)
    CNNB_PRINTF(3, 4);

/* ---- flags ------------------------------------------------------------------- */

typedef enum cnnb_flag_type {
  CNNB_FLAG_BOOL = 1,
  CNNB_FLAG_INT = 2,
  CNNB_FLAG_FLOAT = 3,
  CNNB_FLAG_STRING = 4
} cnnb_flag_type;

/* Declared from a plugin's register_flags(); `name` without dashes ("nccl_streams"),
 * `default_value` in command-line spelling ("2", "true", "0.1", "fp32"). A name
 * another component already declared is refused (CNNB_EINVAL). */
CNNB_EXPORT cnnb_status cnnb_flag_declare(cnnb_flag_registry *registry, const char *name,
                                          cnnb_flag_type type, const char *default_value,
                                          const char *help);

/* ABI 1.11: marks a flag this registry declared as one whose value may differ between
 * the ranks of one job — a local path such as a per-rank trace file, a log level, a
 * thread count sized to the machine. [main-thread] [optional to call] from
 * register_flags, after declaring the flag. Before the first step the ranks compare
 * every flag not so marked, the core's and every plugin's, and a difference stops the
 * job naming the flag and each rank's value: leave a flag unmarked whenever its value
 * changes what is computed. CNNB_EINVAL for a flag this registry did not declare. */
CNNB_EXPORT cnnb_status cnnb_flag_mark_per_rank(cnnb_flag_registry *registry, const char *name);

/* Values as parsed from the command line (or their defaults). Reading a flag nobody
 * declared is a programming error: it logs and returns 0 / false / "". A plugin reads
 * its own flags here; what it needs of the run (replicas, threads, the device, the
 * precision) comes in its config struct, never from the core's flags by name. */
CNNB_EXPORT int64_t cnnb_flag_int(const cnnb_ctx *ctx, const char *name);
CNNB_EXPORT double cnnb_flag_float(const cnnb_ctx *ctx, const char *name);
CNNB_EXPORT bool cnnb_flag_bool(const cnnb_ctx *ctx, const char *name);
CNNB_EXPORT const char *cnnb_flag_string(const cnnb_ctx *ctx, const char *name);
/* True when the user gave the flag on the command line (not just its default). */
CNNB_EXPORT bool cnnb_flag_is_set(const cnnb_ctx *ctx, const char *name);
/* ABI 1.8: true when ctx's flag table holds a flag called `name` (the core's or any
 * plugin's); false for a ctx without a flag table, as a test harness creates instances
 * with, where a plugin's flags all read zero and it should use its own defaults. */
CNNB_EXPORT bool cnnb_flag_declared(const cnnb_ctx *ctx, const char *name);

#ifdef __cplusplus
}
#endif
#endif
