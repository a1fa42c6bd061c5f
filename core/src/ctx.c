/* ctx.c — the per-component context plugins and core code talk to the host through:
 * an error message that travels with the returned status, and logging to stderr with
 * the component's name as prefix. Flag getters on a ctx live in flags.c.
 *
 * Each log line is formatted whole and written under the stream's lock, so lines from
 * the input pipeline's threads never interleave mid-line. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "host.h"
#include "ctx_internal.h"

/* Error messages are bounded so a loop that keeps adding context cannot grow forever. */
#define MAX_ERROR_CHARS 4096

static atomic_int log_level = CNNB_LOG_INFO;

cnnb_ctx *cnnb_ctx_create(const char *component, const cnnb_flags *flags) {
  cnnb_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->component = strdup(component ? component : "cnnbench");
  if (!ctx->component) {
    free(ctx);
    return NULL;
  }
  ctx->flags = flags;
  return ctx;
}

void cnnb_ctx_destroy(cnnb_ctx *ctx) {
  if (!ctx) return;
  free(ctx->component);
  free(ctx->error);
  free(ctx);
}

const char *cnnb_ctx_component(const cnnb_ctx *ctx) {
  return ctx && ctx->component ? ctx->component : "cnnbench";
}

static char *vformat(const char *fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n < 0) return NULL;
  size_t size = (size_t)n + 1;
  if (size > MAX_ERROR_CHARS) size = MAX_ERROR_CHARS;
  char *s = malloc(size);
  if (!s) return NULL;
  vsnprintf(s, size, fmt, ap);
  return s;
}

cnnb_status cnnb_error(cnnb_ctx *ctx, cnnb_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(fmt, ap);
  va_end(ap);
  if (!ctx) {
    /* Nowhere to keep it: at least the user sees it. */
    cnnb_log_component("cnnbench", CNNB_LOG_ERROR, "%s", msg ? msg : fmt);
    free(msg);
    return status;
  }
  if (!msg) return status; /* out of memory: keep whatever was recorded before */
  if (!ctx->error || !ctx->error[0]) {
    free(ctx->error);
    ctx->error = msg;
    return status;
  }
  /* The first error is the cause; later ones say where it surfaced. */
  size_t have = strlen(ctx->error), add = strlen(msg);
  if (have + 2 + add + 1 <= MAX_ERROR_CHARS) {
    char *joined = realloc(ctx->error, have + 2 + add + 1);
    if (joined) {
      memcpy(joined + have, ": ", 2);
      memcpy(joined + have + 2, msg, add + 1);
      ctx->error = joined;
    }
  }
  free(msg);
  return status;
}

const char *cnnb_error_message(const cnnb_ctx *ctx) {
  return ctx && ctx->error ? ctx->error : "";
}

void cnnb_clear_error(cnnb_ctx *ctx) {
  if (!ctx) return;
  free(ctx->error);
  ctx->error = NULL;
}

/* ---- logging ------------------------------------------------------------------ */

void cnnb_log_set_level(cnnb_log_level level) { atomic_store(&log_level, (int)level); }

cnnb_log_level cnnb_log_get_level(void) { return (cnnb_log_level)atomic_load(&log_level); }

bool cnnb_log_level_parse(const char *name, cnnb_log_level *level) {
  static const struct {
    const char *name;
    cnnb_log_level level;
  } names[] = {{"error", CNNB_LOG_ERROR}, {"warn", CNNB_LOG_WARN}, {"warning", CNNB_LOG_WARN},
               {"info", CNNB_LOG_INFO},   {"debug", CNNB_LOG_DEBUG}};
  if (!name) return false;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(name, names[i].name) == 0) {
      if (level) *level = names[i].level;
      return true;
    }
  }
  return false;
}

static const char *level_tag(cnnb_log_level level) {
  switch (level) {
    case CNNB_LOG_ERROR: return "error: ";
    case CNNB_LOG_WARN: return "warning: ";
    case CNNB_LOG_INFO: return "";
    case CNNB_LOG_DEBUG: return "debug: ";
  }
  return "";
}

static void vlog(const char *component, cnnb_log_level level, const char *fmt, va_list ap) {
  if ((int)level > atomic_load(&log_level)) return;
  char line[2048];
  int n = snprintf(line, sizeof line, "%s: %s", component ? component : "cnnbench",
                   level_tag(level));
  if (n < 0) return;
  if ((size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  flockfile(stderr);
  fputs(line, stderr);
  size_t len = strlen(line);
  if (len == 0 || line[len - 1] != '\n') fputc('\n', stderr);
  funlockfile(stderr);
}

void cnnb_log(const cnnb_ctx *ctx, cnnb_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(cnnb_ctx_component(ctx), level, fmt, ap);
  va_end(ap);
}

void cnnb_log_component(const char *component, cnnb_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(component, level, fmt, ap);
  va_end(ap);
}
