/* errors.c — the cpu device's failures in words: a oneDNN status turned into an error
 * naming the node, and out of memory with the size, what it was for and a hint. */
#include <stdarg.h>
#include <stdio.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "cpu_device.h"

#define OOM_HINT "a smaller --batch_size needs less"

cnnb_status cpu_check(cpu_device *d, dnnl_status_t s, const cnnb_node *node, const char *what) {
  if (s == dnnl_success) return CNNB_OK;
  cnnb_status st = s == dnnl_unimplemented   ? CNNB_EUNSUPPORTED
                   : s == dnnl_out_of_memory ? CNNB_ENOMEM
                                             : CNNB_EINTERNAL;
  const char *hint = st == CNNB_ENOMEM ? " (out of memory; " OOM_HINT ")" : "";
  if (node)
    return cnnb_error(d->ctx, st, "cpu: %s '%s' [%d,%d,%d,%d]: %s failed: oneDNN %s%s", "node",
                      node->name ? node->name : "?", node->shape.n, node->shape.c, node->shape.h,
                      node->shape.w, what, dnnl_status2str(s), hint);
  return cnnb_error(d->ctx, st, "cpu: %s failed: oneDNN %s%s", what, dnnl_status2str(s), hint);
}

cnnb_status cpu_oom(cpu_device *d, const cnnb_node *node, size_t bytes, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  char where[160] = "";
  if (node)
    snprintf(where, sizeof where, "node '%s' [%d,%d,%d,%d]: ", node->name ? node->name : "?",
             node->shape.n, node->shape.c, node->shape.h, node->shape.w);
  if (bytes)
    return cnnb_error(
        d->ctx, CNNB_ENOMEM,
        "cpu: %sout of memory: cannot allocate %zu bytes (%.1f MiB) for %s; " OOM_HINT, where,
        bytes, (double)bytes / 1048576.0, what);
  return cnnb_error(d->ctx, CNNB_ENOMEM, "cpu: %sout of memory: %s; " OOM_HINT, where, what);
}
