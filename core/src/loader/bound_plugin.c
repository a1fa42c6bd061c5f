/* bound_plugin.c — the record of a plugin a run uses, and the host's two ways of talking
 * to one (bound_plugin.h). */
#define _GNU_SOURCE /* asprintf */
#include "loader/bound_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cnnb_status cnnb_bound_plugin_open(cnnb_bound_plugin *p, cnnb_loader *loader, uint32_t kind,
                                   const char *name, cnnb_ctx *parent) {
  memset(p, 0, sizeof *p);
  char err[4096];
  cnnb_status st = cnnb_loader_find(loader, kind, name, &p->plugin, &p->path, err, sizeof err);
  if (st != CNNB_OK) return cnnb_error(parent, st, "%s", err);
  p->kind = kind;
  p->name = name;
  p->vt.model = p->plugin->vtable; /* every member is a pointer to the kind's vtable */
  if (asprintf(&p->label, "%s plugin '%s' (%s)", cnnb_kind_name(kind), p->plugin->name, p->path) <
      0) {
    p->label = NULL;
    return cnnb_error(parent, CNNB_ENOMEM, "out of memory");
  }
  if (!(p->ctx = cnnb_ctx_create_child(parent, name)))
    return cnnb_error(parent, CNNB_ENOMEM, "out of memory");
  return CNNB_OK;
}

void cnnb_bound_plugin_close(cnnb_bound_plugin *p) {
  free(p->label);
  cnnb_ctx_destroy(p->ctx);
  memset(p, 0, sizeof *p);
}

const void *cnnb_bound_extension(const cnnb_bound_plugin *p, void *instance, const char *id,
                                 size_t needed) {
  if (!p->plugin) return NULL;
  const void *(*instance_get)(void *, const char *) = NULL;
  if (instance) {
    switch (p->kind) {
      case CNNB_KIND_DEVICE: instance_get = p->vt.device->get_extension; break;
      case CNNB_KIND_STRATEGY: instance_get = p->vt.strategy->get_extension; break;
      case CNNB_KIND_DATASOURCE: instance_get = p->vt.datasource->get_extension; break;
      default: break; /* a model has no instances */
    }
  }
  return cnnb_extension_lookup(p->label, p->plugin, instance_get, instance, id, needed);
}

cnnb_status cnnb_plugin_failed(cnnb_ctx *ctx, const cnnb_bound_plugin *p, cnnb_status status,
                               const cnnb_ctx *from, const char *what) {
  const char *message = from ? cnnb_error_message(from) : "";
  if (!*message)
    return cnnb_error(ctx, status, "%s: %s (%s returned this status without a message)", what,
                      cnnb_status_name(status), p && p->label ? p->label : "the plugin");
  return cnnb_error(ctx, status, "%s: %s", what, message);
}
