/* op_device.c — asking a device about the graph's ops (op_device.h): the check that
 * refuses a run before any allocation when the device lacks an op, and the ReLU fusion
 * set the device's extensions allow. */
#include "graph/op_device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/extension.h"
#include "graph/graph_internal.h"
#include "graph/op_table.h"

/* A vtable slot is there when the plugin's struct_size covers it (append-only ABI). */
#define HAS_SLOT(dv, slot) \
  ((dv)->struct_size >= offsetof(cnnb_device_vtable, slot) + sizeof((dv)->slot) && (dv)->slot)

/* "" or " (and 34 more nodes)": how many nodes after `first` use op. */
static void more_users(const cnnb_graph *g, int32_t first, uint32_t op, char *buf, size_t size) {
  int32_t more = 0;
  for (int32_t i = first + 1; i < cnnb_graph_num_nodes(g); i++)
    if (cnnb_graph_node(g, i)->op == op) more++;
  buf[0] = '\0';
  if (more > 0) snprintf(buf, size, " (and %d more node%s)", (int)more, more == 1 ? "" : "s");
}

cnnb_status cnnb_ops_check_device(cnnb_ctx *ctx, const cnnb_graph *g, const cnnb_device_vtable *dv,
                                  void *device, uint32_t device_abi_minor,
                                  const char *device_name) {
  if (!g || !dv) return cnnb_error(ctx, CNNB_EINVAL, "op check: no graph or no device");
  if (cnnb_graph_status(g) != CNNB_OK)
    return cnnb_error(ctx, CNNB_EINVAL, "op check: the graph has an error: %s",
                      cnnb_graph_error(g));
  const char *dev = device_name ? device_name : "(unnamed)";
  const bool asks = HAS_SLOT(dv, supports_op);
  bool checked[CNNB_OP_COUNT_] = {false};
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *n = cnnb_graph_node(g, i);
    const cnnb_op_row *row = cnnb_op_row_of(n->op);
    char more[48];
    if (!row) {
      more_users(g, i, n->op, more, sizeof more);
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "device '%s' cannot run op %u, which node '%s'%s uses: this host has no "
                        "such op",
                        dev, n->op, n->name, more);
    }
    /* An attribute a device of an earlier minor would not read: refused, not ignored. */
    if (n->op == CNNB_OP_SOFTMAX_XENT && n->attr.loss.label_smoothing != 0.0f &&
        device_abi_minor < CNNB_ABI_MINOR_ACTIVATIONS)
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "device '%s' cannot smooth the labels of loss '%s' (--label_smoothing): "
                        "the device was built for cnnbench ABI %d.%u, before label smoothing was "
                        "added in ABI %d.%u; rebuild it against the %d.%u SDK or newer",
                        dev, n->name, CNNB_ABI_MAJOR, device_abi_minor, CNNB_ABI_MAJOR,
                        CNNB_ABI_MINOR_ACTIVATIONS, CNNB_ABI_MAJOR, CNNB_ABI_MINOR_ACTIVATIONS);
    if (checked[n->op]) continue;
    checked[n->op] = true;
    /* A device cannot know an op from a later minor, whatever its supports_op says. */
    if (row->since_minor > device_abi_minor) {
      more_users(g, i, n->op, more, sizeof more);
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "device '%s' cannot run op %s, which node '%s'%s uses: the device was "
                        "built for cnnbench ABI %d.%u, before %s was added in ABI %d.%u; rebuild "
                        "it against the %d.%u SDK or newer",
                        dev, row->name, n->name, more, CNNB_ABI_MAJOR, device_abi_minor, row->name,
                        CNNB_ABI_MAJOR, row->since_minor, CNNB_ABI_MAJOR, row->since_minor);
    }
    if (asks && !dv->supports_op(device, n->op)) {
      more_users(g, i, n->op, more, sizeof more);
      return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                        "device '%s' cannot run op %s, which node '%s'%s uses: the device says it "
                        "does not support %s",
                        dev, row->name, n->name, more, row->name);
    }
  }
  return CNNB_OK;
}

typedef struct ext_query {
  const cnnb_plugin *plugin;
  const cnnb_device_vtable *dv;
  void *device;
} ext_query;

static int device_has_ext(void *user, const char *id) {
  const ext_query *q = user;
  return cnnb_extension_lookup(NULL, q->plugin,
                               q->dv && HAS_SLOT(q->dv, get_extension) ? q->dv->get_extension
                                                                       : NULL,
                               q->device, id, 0) != NULL;
}

uint32_t cnnb_ops_device_relu_fusion(const cnnb_plugin *plugin, const cnnb_device_vtable *dv,
                                     void *device) {
  ext_query q = {plugin, dv, device};
  return cnnb_ops_relu_fusion(device_has_ext, &q);
}

const char *cnnb_device_unavailable(const cnnb_plugin *plugin) {
  const cnnb_device_availability *a =
      cnnb_extension_lookup(NULL, plugin, NULL, NULL, CNNB_EXT_DEVICE_AVAILABILITY,
                            CNNB_EXT_NEEDS(cnnb_device_availability, unavailable));
  return a && a->unavailable ? a->unavailable() : NULL;
}
