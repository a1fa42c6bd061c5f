/* device_run.h — a deliberately simple executor for tests: runs a small graph on one
 * device instance (device_harness.h) with one buffer per activation, per gradient and
 * per backward input slot, no reuse, so op tests and gradient checks depend only on
 * device.h's contract, and a bug in the host's planner cannot hide or fake a bug in the
 * device. It calls the device only as device.h allows: buffers are opaque device memory,
 * reached through copy_to_host / tensor_to_host and friends, and a device without the
 * optional accumulate gets its gradients summed through the host, as the host would.
 *
 * Host-side tensors are logical NCHW fp32 (labels int32), as tensor_from/to_host see
 * them. Functions return 0 on success, otherwise -1 with a message in the harness. */
#ifndef CNNB_TEST_DEVICE_RUN_H
#define CNNB_TEST_DEVICE_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "device_harness.h"

typedef struct device_run device_run;

/* Sizes, allocates and prepares every node of g. NULL on failure (message in h->error). */
device_run *device_run_create(device_harness *h, const cnnb_graph *g);
void device_run_destroy(device_run *r);

/* Host copies of the arenas (fp32), uploaded; either may be NULL. */
int device_run_set_params(device_run *r, const float *params, const float *stats);
int device_run_get_params(device_run *r, float *params, float *stats);
/* d loss / d params after a backward (the whole gradient arena). */
int device_run_get_param_grads(device_run *r, float *grads);

/* Uploads the images (every INPUT node gets `images`) and labels (may be NULL), runs
 * forward over every node. */
int device_run_forward(device_run *r, const float *images, const int32_t *labels, uint64_t step);
/* Backward over every node in reverse order. `seed` >= 0: d loss / d seed is given
 * (`seed_grad`, logical NCHW) and nodes after it are skipped; seed < 0: the graph ends
 * in its loss, whose backward starts from loss_scale. */
int device_run_backward(device_run *r, cnnb_tensor seed, const float *seed_grad, float loss_scale,
                        uint64_t step);

/* 0: backward gets NULL for gradients of INPUT nodes (as the executor does when nothing
 * needs them); 1 (default): they are computed, so tests can read them. */
void device_run_want_image_grads(device_run *r, int wanted);

/* A tensor's activation, or its accumulated gradient, as logical NCHW fp32. */
int device_run_activation(device_run *r, cnnb_tensor t, float *host);
int device_run_gradient(device_run *r, cnnb_tensor t, float *host);
/* Device bytes of tensor t (the layout the device chose). */
size_t device_run_tensor_bytes(const device_run *r, cnnb_tensor t);

#endif
