/* cnnb/device.h — what a device plugin provides: memory, a kernel for every graph op
 * forward and backward, and the optimizer update, on one accelerator (or the CPU).
 *
 * The core's executor plans and drives the step; the device owns kernels and physical
 * layouts. Memory pointers are opaque device addresses. Activation and gradient buffers
 * of a tensor are `tensor_bytes` long, in whatever layout the device chose; only
 * tensor_from_host / tensor_to_host see logical NCHW fp32 (int32 for labels).
 *
 * Order of calls: create -> supports_op (each op of the graph) -> tensor_bytes (each
 * tensor) -> prepare (each node, once per graph) -> per step: tensor_from_host(input,
 * labels), forward (topological order), backward (reverse order), update -> release ->
 * destroy. Calls on one device instance come from one thread at a time (the slot tags in
 * abi.h say which); work may be asynchronous until synchronize(). */
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

/* Extensions a device may answer, per instance (cnnb_device_vtable.get_extension) or per
 * plugin (the descriptor's get_extension); any non-NULL pointer means yes. They let the
 * host use what a device learned after 1.0 without old plugins computing something else
 * silently. */
/* The device applies cnnb_node.fused_relu on CNNB_OP_ADD nodes too (1.0 devices apply it
 * to conv2d and batch norm only, so the host fuses a ReLU into an add only with this). */
#define CNNB_EXT_FUSED_RELU_ADD "cnnb.device.fused_relu_add/1"
/* ABI 1.4: the device's alloc() returns plain host memory, and its parameter and
 * gradient arenas hold plain fp32: a strategy may read and write a gradient range that
 * was announced final (bucket_ready) and the parameter arena between steps directly,
 * from any thread, as long as it is done by the time finish_step / finish_update
 * returns. Without it a strategy stages through copy_to_host / copy_to_device on the
 * step thread. */
#define CNNB_EXT_HOST_MEMORY "cnnb.device.host_memory/1"

/* The device makes its input tensor from a batch of uint8 NHWC pixels itself
 * (cnnb_device_uint8_input below), normalizing them on its side: a batch crosses to it in
 * a quarter of the bytes of fp32. The host uses it with a datasource offering
 * CNNB_EXT_DATASOURCE_UINT8 (datasource.h); without it, batches arrive through
 * tensor_from_host as fp32. Answered with a cnnb_device_uint8_input. */
#define CNNB_EXT_DEVICE_UINT8_INPUT "cnnb.device.uint8_input/1"

/* ABI 1.6: whether the device can run on this machine at all (an accelerator's driver
 * and hardware), asked per plugin before a run creates an instance and by
 * --list_plugins. Answered with a cnnb_device_availability. A device without it is
 * assumed to run anywhere; create() still refuses what it cannot do. */
#define CNNB_EXT_DEVICE_AVAILABILITY "cnnb.device.availability/1"

/* ABI 1.6: a CUDA instance's GPU and the stream its work runs on in call order, so a
 * strategy can put NCCL calls and copies on it (or order its own streams after it with
 * events) instead of synchronizing the device. Answered per instance with a
 * cnnb_device_cuda_stream; the plugin's get_extension does not answer it. */
#define CNNB_EXT_CUDA_STREAM "cnnb.cuda.stream/1"

/* ABI 1.7: the device can record the work of one step (the forward, backward and
 * accumulate calls between begin_capture and end_capture) and replay it (CUDA graphs),
 * so a step of small kernels costs one launch instead of one per kernel. Answered per
 * instance with a cnnb_device_step_graph by a device that can record. The host uses it
 * under --cuda_graphs when the run allows (one replica in one process, the same batch
 * every step, already on the device; no traced or profiled step; no dropout, whose mask
 * follows the step number), and records again when the loss scale or the labels'
 * presence changes. */
#define CNNB_EXT_STEP_GRAPH "cnnb.device.step_graph/1"

/* The activations' physical layout a user may ask a device for (--data_format, given on
 * the command line). A device with one layout, or none that matters, may ignore it; one
 * that cannot honour a request says so in its log. */
typedef enum cnnb_data_format {
  CNNB_DATA_FORMAT_ANY = 0, /* not asked: the device's fastest */
  CNNB_DATA_FORMAT_NCHW = 1,
  CNNB_DATA_FORMAT_NHWC = 2
} cnnb_data_format;

typedef struct cnnb_device_config {
  uint32_t struct_size;
  int32_t device_index; /* which accelerator of this process */
  int32_t num_threads;  /* compute threads; 0: all cores */
  uint32_t precision;   /* cnnb_precision of activations and compute */
  int32_t training;     /* 0: --forward_only (inference kernels, no backward) */
  uint32_t seed;        /* dropout */
  /* ABI 1.8 */
  int32_t local_replicas; /* instances of this device in this process (--num_gpus): a
                             process's replicas take device_index 0 .. local_replicas-1 */
  /* ABI 1.12 */
  uint32_t data_format; /* cnnb_data_format the user asked for; ANY: the device's choice */
} cnnb_device_config;

/* Buffers one node reads and writes in one step. */
typedef struct cnnb_node_io {
  uint32_t struct_size;
  int32_t num_inputs;
  void *const *inputs;      /* activations of node->inputs */
  void *output;             /* activation of the node */
  void *const *input_grads; /* backward: d loss / d input_i, overwritten; NULL: not needed */
  const void *output_grad;  /* backward: d loss / d output */
  float *params;            /* base of the parameter arena (fp32 master weights) */
  float *grads;             /* base of the gradient arena: backward overwrites its params' ranges */
  float *stats;             /* base of the stats arena (batch norm running statistics) */
  float loss_scale;         /* backward of the loss starts from this instead of 1 */
  uint32_t reserved;
  uint64_t step; /* for dropout masks */
} cnnb_node_io;

typedef struct cnnb_device_vtable {
  uint32_t struct_size;
  /* [required] [main-thread] once per replica: a device instance for cfg->device_index.
   * Refuses (CNNB_EUNSUPPORTED) a precision it cannot do, naming those it can; the host
   * adds which flag asked for it. */
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_device_config *cfg,
                        void **device);
  /* [required] [main-thread] once per instance, after every buffer and node state of it
   * was freed and released. */
  void (*destroy)(void *device);
  /* [optional] [any-thread] a line for the report, valid until destroy:
   * "CPU: AMD EPYC (2 threads, oneDNN 2.6.3)". NULL: the report shows the plugin's
   * description. */
  const char *(*describe)(void *device);

  /* [required] [main-thread] arenas and buffers, at setup (never per step). */
  cnnb_status (*alloc)(void *device, size_t bytes, void **ptr);
  /* [required] [main-thread] at teardown; ptr is one alloc returned. */
  void (*free)(void *device, void *ptr);
  /* [required] [step-thread] setup, display steps and checkpoints: host <-> device bytes. */
  cnnb_status (*copy_to_device)(void *device, void *dst, const void *host_src, size_t bytes);
  /* [required] [step-thread] as copy_to_device, the other way. */
  cnnb_status (*copy_to_host)(void *device, void *host_dst, const void *src, size_t bytes);
  /* [required] [step-thread] zeroes `bytes` at ptr. */
  cnnb_status (*fill_zero)(void *device, void *ptr, size_t bytes);
  /* [required] [step-thread] waits until every call made so far has finished. */
  cnnb_status (*synchronize)(void *device);

  /* [required] [main-thread] once per tensor at setup: bytes of the activation (and of
   * the gradient) of tensor `t` in the device's layout. */
  cnnb_status (*tensor_bytes)(void *device, const cnnb_graph *g, cnnb_tensor t, size_t *bytes);
  /* [required] [step-thread] per step for the images and labels: logical fp32 NCHW (int32
   * for labels) into the device's layout of tensor `t`. Gradient buffers use their
   * tensor's layout, so this also converts them (the host relies on it when accumulate
   * is NULL). */
  cnnb_status (*tensor_from_host)(void *device, const cnnb_graph *g, cnnb_tensor t, void *buffer,
                                  const void *host);
  /* [required] [step-thread] display steps: the device's layout of `t` back to logical. */
  cnnb_status (*tensor_to_host)(void *device, const cnnb_graph *g, cnnb_tensor t,
                                const void *buffer, void *host);

  /* [required] [main-thread] once per node at setup: the node's kernels, chosen once
   * (primitive creation, workspace). A node whose op or attributes the device cannot run
   * is refused with CNNB_EUNSUPPORTED naming the op, never guessed. */
  cnnb_status (*prepare)(void *device, const cnnb_graph *g, int32_t node, void **node_state);
  /* [required] [main-thread] once per prepared node at teardown (node_state may be NULL). */
  void (*release)(void *device, void *node_state);
  /* [required] [step-thread] per node per step, in node order. */
  cnnb_status (*forward)(void *device, void *node_state, const cnnb_node_io *io);
  /* [required] [step-thread] per node per training step, in reverse node order. */
  cnnb_status (*backward)(void *device, void *node_state, const cnnb_node_io *io);
  /* [optional] [step-thread] per extra consumer per training step: dst += src for the
   * gradient of tensor t (a tensor that feeds several consumers: residual adds, inception
   * branches). NULL: the host adds them itself through tensor_to_host / tensor_from_host,
   * which is correct but slow. */
  cnnb_status (*accumulate)(void *device, const cnnb_graph *g, cnnb_tensor t, void *dst,
                            const void *src);

  /* [required] [step-thread] per step, once per parameter range with one weight decay:
   * one optimizer step (optimizer.h). */
  cnnb_status (*update)(void *device, const cnnb_update *update);
  /* [optional] [step-thread] per step under dynamic loss scaling: *finite = 1 when every
   * element of grads[0, count) is finite. NULL: the host copies the gradients to the
   * host and checks them there. */
  cnnb_status (*all_finite)(void *device, const float *grads, int64_t count, int32_t *finite);

  /* ABI 1.3 */
  /* [optional] [any-thread] whether this instance runs graph op `op` (cnnb_op), forward
   * and backward, in its precision: 1 yes, 0 no. The host asks for every op of a graph
   * before allocating anything, so a run that needs an op the device lacks is refused up
   * front, naming op and device. NULL: the ops of the ABI minor the plugin was built for
   * (graph.h says which minor added each op). */
  int32_t (*supports_op)(void *device, uint32_t op);
  /* [optional] [any-thread] this instance's capabilities by string id (the extensions
   * below), valid until destroy; NULL (slot or answer): ask the descriptor's
   * get_extension. An instance may say no where its plugin says yes (another GPU). */
  const void *(*get_extension)(void *device, const char *id);
} cnnb_device_vtable;

/* CNNB_EXT_DEVICE_UINT8_INPUT's answer. */
typedef struct cnnb_device_uint8_input {
  uint32_t struct_size;
  /* [required] [step-thread] per step, instead of tensor_from_host for the images: host
   * [N, H, W, C] uint8 (N, C, H, W of tensor t, the graph's input) into the device's
   * layout of t, each element (float)v * scale[c] + offset[c] computed in fp32 and then
   * stored as tensor_from_host stores that float (rounded to the device's precision the
   * same way), so a run trains identically with either transport. scale and offset hold
   * C values and, like host, are valid during the call only. */
  cnnb_status (*input_from_host_uint8)(void *device, const cnnb_graph *g, cnnb_tensor t,
                                       void *buffer, const uint8_t *host, const float *scale,
                                       const float *offset);
} cnnb_device_uint8_input;

/* CNNB_EXT_DEVICE_AVAILABILITY's answer. */
typedef struct cnnb_device_availability {
  uint32_t struct_size;
  /* [required] [main-thread] once per run before the first create, and by
   * --list_plugins: NULL when instances can be created here, else one line saying what
   * is missing ("no NVIDIA driver: libcuda.so.1 not found"), valid while the plugin is
   * loaded. It may load libraries to find out, but never fails the process. */
  const char *(*unavailable)(void);
} cnnb_device_availability;

/* CNNB_EXT_CUDA_STREAM's answer, valid until the instance is destroyed. */
typedef struct cnnb_device_cuda_stream {
  uint32_t struct_size;
  int32_t ordinal; /* the CUDA device ordinal (cudaSetDevice) the instance runs on */
  void *stream;    /* its cudaStream_t */
} cnnb_device_cuda_stream;

/* CNNB_EXT_STEP_GRAPH's answer, valid until the instance is destroyed. A device offering
 * it offers accumulate too (the host's fallback reads the device). Every slot is
 * [required] and [step-thread]: begin_capture, the calls recorded and end_capture come
 * from one thread. An instance holds one recording (one executor records on it). */
typedef struct cnnb_device_step_graph {
  uint32_t struct_size;
  /* Starts recording, discarding any earlier recording. Until end_capture, the instance
   * gets only forward, backward and accumulate calls, for the nodes of one executor step,
   * and records their work instead of running it: the addresses and values of their
   * arguments as they are now (buffers, node io, step, loss scale) are frozen; the
   * buffers' contents are read when the recording runs. Called only after two steps ran
   * unrecorded, so everything a step allocates on first use exists. */
  cnnb_status (*begin_capture)(void *device);
  /* Ends the recording and makes it runnable; nothing recorded has run yet. Called after
   * every begin_capture, also when a call in between failed: the host then never replays
   * that recording (the device may discard it here and return an error, or keep it until
   * the next begin_capture or destroy) and runs its steps without one. An error here
   * likewise ends the host's use of the extension for the run. */
  cnnb_status (*end_capture)(void *device);
  /* Runs the recording once, in call order with the instance's other work and as
   * asynchronously as the calls it holds would have. */
  cnnb_status (*replay)(void *device);
} cnnb_device_step_graph;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_device_config, seed) == 20, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_device_config, data_format) == 28, "ABI: 1.12 layout moved");
_Static_assert(sizeof(cnnb_device_config) == 32, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_node_io) == 80, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_device_vtable, all_finite) == 152, "ABI: 1.0 layout moved");
_Static_assert(sizeof(cnnb_device_vtable) == 176, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_device_availability) == 16, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_device_cuda_stream) == 16, "ABI: grow only by appending");
_Static_assert(sizeof(cnnb_device_step_graph) == 32, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif
