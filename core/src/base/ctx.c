/* ctx.c — the per-component context plugins and core code talk to the host through:
 * an error message that travels with the returned status, and logging to stderr with
 * the component's name as prefix. Flag getters on a ctx live in flags.c.
 *
 * Each log line is formatted whole and written under the stream's lock, so lines from
 * the input pipeline's threads never interleave mid-line, and however long it is: a
 * message is never cut. The level and tag a line is filtered and prefixed by belong to
 * the ctx's family (ctx_internal.h), not to the process. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/host_ctx.h"
#include "base/ctx_internal.h"

/* Error messages are bounded so a loop that keeps adding context cannot grow forever. */
#define MAX_ERROR_CHARS 4096

/* What a NULL ctx logs with. */
static const cnnb_log_settings default_log = {CNNB_LOG_INFO, "", NULL};

static cnnb_ctx *create(const char *component, const cnnb_flags *flags, cnnb_log_settings *shared) {
  cnnb_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->component = strdup(component ? component : "cnnbench");
  ctx->log = shared ? shared : calloc(1, sizeof *ctx->log);
  ctx->owns_log = !shared;
  if (!ctx->component || !ctx->log) {
    cnnb_ctx_destroy(ctx);
    return NULL;
  }
  if (ctx->owns_log) { /* calloc left `tracing` NULL */
    ctx->log->level = default_log.level;
    memcpy(ctx->log->tag, default_log.tag, sizeof ctx->log->tag);
  }
  ctx->flags = flags;
  return ctx;
}

cnnb_ctx *cnnb_ctx_create(const char *component, const cnnb_flags *flags) {
  return create(component, flags, NULL);
}

cnnb_ctx *cnnb_ctx_create_child(const cnnb_ctx *parent, const char *component) {
  return parent ? create(component, parent->flags, parent->log) : create(component, NULL, NULL);
}

void cnnb_ctx_destroy(cnnb_ctx *ctx) {
  if (!ctx) return;
  if (ctx->owns_log) free(ctx->log);
  free(ctx->component);
  free(ctx->error);
  free(ctx);
}

void cnnb_ctx_set_log_level(cnnb_ctx *ctx, cnnb_log_level level) {
  if (ctx) ctx->log->level = level;
}

void cnnb_ctx_set_log_tag(cnnb_ctx *ctx, const char *tag) {
  if (ctx) snprintf(ctx->log->tag, sizeof ctx->log->tag, "%s", tag ? tag : "");
}

const cnnb_flags *cnnb_ctx_flags(const cnnb_ctx *ctx) { return ctx ? ctx->flags : NULL; }

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

const char *cnnb_error_message(const cnnb_ctx *ctx) { return ctx && ctx->error ? ctx->error : ""; }

void cnnb_clear_error(cnnb_ctx *ctx) {
  if (!ctx) return;
  free(ctx->error);
  ctx->error = NULL;
}

/* ---- logging ------------------------------------------------------------------ */

bool cnnb_log_level_parse(const char *name, cnnb_log_level *level) {
  static const struct {
    const char *name;
    cnnb_log_level level;
  } names[] = {{"error", CNNB_LOG_ERROR},
               {"warn", CNNB_LOG_WARN},
               {"warning", CNNB_LOG_WARN},
               {"info", CNNB_LOG_INFO},
               {"debug", CNNB_LOG_DEBUG}};
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

static void vlog(const cnnb_log_settings *settings, const char *component, cnnb_log_level level,
                 const char *fmt, va_list ap) {
  if ((int)level > (int)settings->level) return;
  /* Formatted whole with its newline, in one buffer (on the stack when it fits, else
   * allocated), and written with one call: stderr is unbuffered, so each stdio call is one
   * write(2), and a line written in two pieces lets another process's output (mpirun
   * merges every rank's stdout and stderr) land inside it. */
  char stack[2048], *line = stack;
  va_list copy;
  va_copy(copy, ap);
  int head = snprintf(stack, sizeof stack, "%s%s%s: %s", settings->tag, settings->tag[0] ? " " : "",
                      component ? component : "cnnbench", level_tag(level));
  int body = head < 0 ? -1 : vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (head < 0 || body < 0) return;
  size_t need = (size_t)head + (size_t)body + 2; /* + '\n' + NUL */
  if (need > sizeof stack && (line = malloc(need)) != NULL) memcpy(line, stack, (size_t)head);
  if (!line) line = stack; /* out of memory: the line is cut, not lost */
  size_t size = line == stack ? sizeof stack : need;
  if ((size_t)head < size) vsnprintf(line + head, size - (size_t)head, fmt, ap);
  size_t len = strlen(line);
  if (len == 0 || line[len - 1] != '\n') {
    if (len + 1 == size) len--; /* cut to fit: the newline replaces the last character */
    line[len++] = '\n';
  }
  fwrite(line, 1, len, stderr);
  if (line != stack) free(line);
}

void cnnb_log(const cnnb_ctx *ctx, cnnb_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(ctx ? ctx->log : &default_log, cnnb_ctx_component(ctx), level, fmt, ap);
  va_end(ap);
}

void cnnb_log_component(const char *component, cnnb_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(&default_log, component, level, fmt, ap);
  va_end(ap);
}
