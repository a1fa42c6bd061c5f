/* cnnb/device.h — what a device plugin provides: memory, a kernel for every graph op
 * forward and backward, and the optimizer update, on one accelerator (or the CPU).
 *
 * The core's executor plans and drives the step; the device owns kernels and physical
 * layouts. Memory pointers are opaque device addresses. Activation and gradient buffers
 * of a tensor are `tensor_bytes` long, in whatever layout the device chose; only
 * tensor_from_host / tensor_to_host see logical NCHW fp32 (int32 for labels).
 *
 * Order of calls: create -> tensor_bytes (each tensor) -> prepare (each node, once per
 * graph) -> per step: tensor_from_host(input, labels), forward (topological order),
 * backward (reverse order), update -> release -> destroy. Calls on one device instance
 * come from one thread at a time; work may be asynchronous until synchronize(). */
#ifndef CNNB_DEVICE_H
#define CNNB_DEVICE_H

#include "ctx.h"
#include "graph.h"
#include "optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cnnb_precision {
  CNNB_PRECISION_FP32 = 1,
  CNNB_PRECISION_BF16 = 2,
  CNNB_PRECISION_FP16 = 3
} cnnb_precision;

/* Extensions a device plugin may answer in its descriptor's get_extension(id) (any
 * non-NULL pointer means yes). They let the host use what a device learned after 1.0
 * without old plugins computing something else silently. */
/* The device applies cnnb_node.fused_relu on CNNB_OP_ADD nodes too (1.0 devices apply it
 * to conv2d and batch norm only, so the host fuses a ReLU into an add only with this). */
#define CNNB_EXT_FUSED_RELU_ADD "cnnb.device.fused_relu_add/1"

typedef struct cnnb_device_config {
  uint32_t struct_size;
  int32_t device_index;   /* which accelerator of this process */
  int32_t num_threads;    /* compute threads; 0: all cores */
  uint32_t precision;     /* cnnb_precision of activations and compute */
  int32_t training;       /* 0: --forward_only (inference kernels, no backward) */
  uint32_t seed;          /* dropout */
} cnnb_device_config;

/* Buffers one node reads and writes in one step. */
typedef struct cnnb_node_io {
  uint32_t struct_size;
  int32_t num_inputs;
  void *const *inputs;        /* activations of node->inputs */
  void *output;               /* activation of the node */
  void *const *input_grads;   /* backward: d loss / d input_i, overwritten; NULL: not needed */
  const void *output_grad;    /* backward: d loss / d output */
  float *params;              /* base of the parameter arena (fp32 master weights) */
  float *grads;               /* base of the gradient arena: backward overwrites its params' ranges */
  float *stats;               /* base of the stats arena (batch norm running statistics) */
  float loss_scale;           /* backward of the loss starts from this instead of 1 */
  uint32_t reserved;
  uint64_t step;              /* for dropout masks */
} cnnb_node_io;

typedef struct cnnb_device_vtable {
  uint32_t struct_size;
  /* Refuses (CNNB_EUNSUPPORTED) a precision it cannot do, naming those it can. */
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_device_config *cfg,
                        void **device);
  void (*destroy)(void *device);
  /* A line for the report: "CPU: AMD EPYC (2 threads, oneDNN 2.6.3)". */
  const char *(*describe)(void *device);

  cnnb_status (*alloc)(void *device, size_t bytes, void **ptr);
  void (*free)(void *device, void *ptr);
  cnnb_status (*copy_to_device)(void *device, void *dst, const void *host_src, size_t bytes);
  cnnb_status (*copy_to_host)(void *device, void *host_dst, const void *src, size_t bytes);
  cnnb_status (*fill_zero)(void *device, void *ptr, size_t bytes);
  cnnb_status (*synchronize)(void *device);

  /* Bytes of the activation (and of the gradient) of tensor `t` in the device's layout. */
  cnnb_status (*tensor_bytes)(void *device, const cnnb_graph *g, cnnb_tensor t, size_t *bytes);
  /* Logical fp32 NCHW (int32 for labels) <-> the device's layout of tensor `t`. */
  cnnb_status (*tensor_from_host)(void *device, const cnnb_graph *g, cnnb_tensor t,
                                  void *buffer, const void *host);
  cnnb_status (*tensor_to_host)(void *device, const cnnb_graph *g, cnnb_tensor t,
                                const void *buffer, void *host);

  /* Kernels of one node, chosen once (primitive creation, workspace). */
  cnnb_status (*prepare)(void *device, const cnnb_graph *g, int32_t node, void **node_state);
  void (*release)(void *device, void *node_state);
  cnnb_status (*forward)(void *device, void *node_state, const cnnb_node_io *io);
  cnnb_status (*backward)(void *device, void *node_state, const cnnb_node_io *io);
  /* dst += src for the gradient of tensor t (a tensor that feeds several consumers). */
  cnnb_status (*accumulate)(void *device, const cnnb_graph *g, cnnb_tensor t, void *dst,
                            const void *src);

  /* One optimizer step over a range of the arenas (optimizer.h). */
  cnnb_status (*update)(void *device, const cnnb_update *update);
  /* *finite = 1 when every element of grads[0, count) is finite (loss scaling). */
  cnnb_status (*all_finite)(void *device, const float *grads, int64_t count, int32_t *finite);
} cnnb_device_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_device_config) == 24, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_node_io) == 80, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_device_vtable) == 160, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
