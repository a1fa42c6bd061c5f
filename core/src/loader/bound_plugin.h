/* bound_plugin.h — a plugin a run uses: what the user picked it by, what the loader
 * found, the ctx it reports through, and (for the strategy) its instance. One record per
 * plugin of a run, whatever its kind, and the two ways host code talks to one: asking
 * for an extension, and calling a slot under the crash guard with a failure that names
 * what was being done. Host-internal. */
#ifndef CNNB_LOADER_BOUND_PLUGIN_H
#define CNNB_LOADER_BOUND_PLUGIN_H

#include <cnnb/cnnb.h>

#include "base/crash_guard.h"
#include "base/extension.h"
#include "loader/loader.h"

typedef struct cnnb_bound_plugin {
  uint32_t kind;             /* cnnb_plugin_kind */
  const char *name;          /* what the user picked it by: "resnet50", "cpu" */
  const cnnb_plugin *plugin; /* the loader's host-sized copy: missing slots read NULL */
  const char *path;          /* its file */
  char *label;               /* "model plugin 'resnet' (FILE)": crash reports, messages */
  union {                    /* plugin->vtable, typed by kind */
    const cnnb_model_vtable *model;
    const cnnb_device_vtable *device;
    const cnnb_strategy_vtable *strategy;
    const cnnb_datasource_vtable *datasource;
  } vt;
  cnnb_ctx *ctx; /* its ctx, a child of the run's; instances that belong to
                    one replica (devices, datasources) get ctxs of their own */
  void *state;   /* the one instance a run has of it (the strategy's); NULL
                    for kinds with an instance per replica */
} cnnb_bound_plugin;

/* Resolves `name` for `kind` through the loader (cnnb_loader_find: its message names the
 * flag and, when it can, the name meant) and gives the plugin a ctx under `parent`.
 * `name` must outlive the record. The error is recorded in `parent`. */
cnnb_status cnnb_bound_plugin_open(cnnb_bound_plugin *p, cnnb_loader *loader, uint32_t kind,
                                   const char *name, cnnb_ctx *parent);
/* Frees the label and ctx (not the state: only its kind knows how); safe on a record that
 * was never opened or failed to open. */
void cnnb_bound_plugin_close(cnnb_bound_plugin *p);

/* Extension `id` of `instance` (an instance of p, or NULL), else of p's descriptor
 * (cnnb_extension_lookup: NULL when none, or the answer holds fewer than `needed` bytes;
 * CNNB_EXT_NEEDS says how many). */
const void *cnnb_bound_extension(const cnnb_bound_plugin *p, void *instance, const char *id,
                                 size_t needed);

/* "<what>: <from's message>" recorded in ctx, returning status; a plugin that failed
 * without a message is named instead ("<what>: <label> returned <status> without a
 * message"). from NULL: no message to take. */
cnnb_status cnnb_plugin_failed(cnnb_ctx *ctx, const cnnb_bound_plugin *p, cnnb_status status,
                               const cnnb_ctx *from, const char *what);

/* st = the call that follows `what` (variadic only for its commas), a call into plugin
 * p's `slot` under the crash guard; a failure is recorded in
 * `ctx` as "<what>: <the message of `from`>" (cnnb_plugin_failed), st keeping its status.
 * `from` is the ctx the plugin was given for the call (p->ctx, or an instance's). */
#define CNNB_PLUGIN_CALL(st, ctx, p, slot, from, what, ...)                           \
  do {                                                                                \
    CNNB_GUARDED((p)->label, (slot), NULL, (st) = (__VA_ARGS__));                     \
    if ((st) != CNNB_OK) (st) = cnnb_plugin_failed((ctx), (p), (st), (from), (what)); \
  } while (0)

#endif
