/* op_device.h — what the core asks a device about graph ops before a run allocates
 * anything: whether it runs every op of the graph (its supports_op, or the ABI minor it
 * was built for), and which ops it fuses a ReLU into (the extensions the op table's rows
 * name). Both read the op table (op_table.h). Called by the run's setup, once per device
 * instance; [main-thread], like the device calls they make. */
#ifndef CNNB_OP_DEVICE_H
#define CNNB_OP_DEVICE_H

#include <cnnb/ctx.h>
#include <cnnb/device.h>
#include <cnnb/graph.h>

/* CNNB_OK when `device` (an instance of dv, from a plugin built for ABI 1.
 * device_abi_minor) runs every op of g. Otherwise CNNB_EUNSUPPORTED for the first op, in
 * node order, it cannot run, with a message naming the op, the first node that uses it,
 * the device (`device_name`, as the user picked it) and why: the op came in a later ABI
 * minor than the device was built for (rebuild it), or its supports_op said no. A device
 * without supports_op (a slot past its vtable's struct_size, or NULL) runs the ops of
 * its minor. CNNB_EINVAL for a failed graph or missing arguments. Call it after the graph
 * is built (the loss added) and before tensor_bytes. */
cnnb_status cnnb_ops_check_device(cnnb_ctx *ctx, const cnnb_graph *g, const cnnb_device_vtable *dv,
                                  void *device, uint32_t device_abi_minor, const char *device_name);

/* The ops a ReLU may be fused into on this device instance, as CNNB_FUSE_OP bits for
 * cnnb_plan_fuse_relus: the op table's fusible rows, those behind an extension only when
 * the instance's get_extension (ABI 1.3) or, failing that, the plugin's answers it. */
uint32_t cnnb_ops_device_relu_fusion(const cnnb_plugin *plugin, const cnnb_device_vtable *dv,
                                     void *device);

/* Why the device of `plugin` cannot run on this machine at all (no driver, no GPU), in
 * the plugin's own words, or NULL when it can or does not say (CNNB_EXT_DEVICE_AVAILABILITY,
 * ABI 1.6). Asked before a run creates an instance and by --list_plugins. */
const char *cnnb_device_unavailable(const cnnb_plugin *plugin);

#endif
