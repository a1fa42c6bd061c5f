/* cpu_device.h — what the cpu device's files share: the device, the per-graph layout
 * plan, the per-node state every op embeds, and small oneDNN helpers.
 *
 * Layouts: every tensor of a graph gets one oneDNN memory descriptor (the "plan"),
 * decided once per graph, in node order, from its producer's preference (a convolution's
 * output may be blocked, nChw16c; a dense layer's is plain). Its gradient uses the same
 * descriptor, so backward never guesses. A consumer that needs another layout converts
 * through a cpu_xform (counted: the report of reorders says where time goes).
 *
 * Parameters are never blocked: the arenas hold plain fp32 (kernel OIHW, dense
 * [units, K]); a kernel's preferred weight layout or bf16 copy is made each step by a
 * cpu_xform into a buffer owned by the node.
 *
 * Threading: calls on one device come from one thread at a time (device.h), so the
 * scratchpad and counters need no lock. */
#ifndef CNNB_CPU_DEVICE_H
#define CNNB_CPU_DEVICE_H

#include <stdint.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <cnnb/cnnb.h>

typedef struct cpu_device cpu_device;
typedef struct cpu_plan cpu_plan;
typedef struct cpu_node cpu_node;

struct cpu_plan {
  cpu_plan *next;
  const cnnb_graph *g;
  uint64_t fingerprint; /* ops and shapes: a graph freed and another at the same address differ */
  int32_t num_nodes;
  dnnl_memory_desc_t *md; /* per tensor: the layout of its activation and its gradient */
  struct cpu_host_io *io; /* per tensor, made on first tensor_from/to_host */
};

/* The OpenMP runtime's entry points, from the libgomp that libdnnl loaded (threads.c);
 * all NULL when another runtime computes. */
typedef struct cpu_omp {
  void (*set_num_threads)(int);
  int (*get_max_threads)(void), (*get_thread_num)(void), (*get_num_threads)(void);
  void (*parallel)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
} cpu_omp;

struct cpu_device {
  cnnb_ctx *ctx;
  cpu_omp omp;
  cnnb_device_config cfg;
  int32_t threads;
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  dnnl_data_type_t act_dt;    /* activations and compute: f32 or bf16 */
  dnnl_primitive_attr_t attr; /* user scratchpad: one buffer for every primitive */
  void *scratch;
  size_t scratch_bytes;
  dnnl_memory_t scratch_mem;
  cpu_plan *plans;
  void *room;              /* address space kept for oneDNN (room.c, cpu_room_open) */
  dnnl_primitive_t *unrun; /* primitives not yet executed (a set; room.c) */
  size_t unrun_cap, unrun_count;
  void *transient[2]; /* buffers that live within one kernel call (cpu_transient) */
  size_t transient_bytes[2];
  uint64_t reorders_planned; /* per-step layout conversions prepared (weights and activations) */
  uint64_t reorders_run;     /* conversions executed since create */
  char description[256];
};

typedef struct cpu_node_ops {
  cnnb_status (*forward)(cpu_device *d, cpu_node *n, const cnnb_node_io *io);
  cnnb_status (*backward)(cpu_device *d, cpu_node *n, const cnnb_node_io *io);
  void (*release)(cpu_device *d, cpu_node *n);
} cpu_node_ops;

/* The head of every op's state (each op's struct embeds it first). */
struct cpu_node {
  const cpu_node_ops *ops;
  const cnnb_graph *g;
  const cnnb_node *node;
  cpu_plan *plan;
  int32_t index;
};

/* A layout conversion src_md -> dst_md; prim NULL when the two are the same. */
typedef struct cpu_xform {
  dnnl_primitive_t prim;
  dnnl_memory_t src, dst;
  size_t bytes; /* of dst */
} cpu_xform;

/* Host <-> device conversion of one tensor (logical NCHW fp32, or int32 labels). */
typedef struct cpu_host_io {
  int ready;
  cpu_xform to_device, to_host;
} cpu_host_io;

/* ---- errors (errors.c), the room for oneDNN (room.c), primitives (primitives.c) ---- */

/* CNNB_OK, or an error naming the node and what failed with oneDNN's status. */
cnnb_status cpu_check(cpu_device *d, dnnl_status_t s, const cnnb_node *node, const char *what);
/* CNNB_ENOMEM: "cpu: node '<name>' [n,c,h,w]: out of memory: cannot allocate <bytes> (MiB)
 * for <what>" plus a hint; bytes 0 leaves the size out. node may be NULL. */
cnnb_status cpu_oom(cpu_device *d, const cnnb_node *node, size_t bytes, const char *fmt, ...)
    CNNB_PRINTF(4, 5);

/* Address space kept free for oneDNN, which cannot report every failure to get some
 * (its JIT writes kernels through a NULL buffer when mmap fails; room.c explains).
 * Around every oneDNN call that may allocate (and each primitive's first run): open
 * (hands the room over, or checks it can be had: CNNB_ENOMEM naming `what` when not),
 * the call, close (takes it back). free: at device destruction. */
cnnb_status cpu_room_open(cpu_device *d, const cnnb_node *node, const char *what);
void cpu_room_close(cpu_device *d);
void cpu_room_free(cpu_device *d);
/* The set of primitives not yet run (primitives.c notes each it creates; 0 when out of
 * memory), and whether this is prim's first run (1, forgetting it, when it is). */
int cpu_room_note_created(cpu_device *d, dnnl_primitive_t prim);
int cpu_room_first_run(cpu_device *d, dnnl_primitive_t prim);
#define CPU_TRY(st, d, call, node, what)                                       \
  do {                                                                         \
    if (((st) = cpu_check((d), (call), (node), (what))) != CNNB_OK) goto done; \
  } while (0)

/* A primitive descriptor with the device's attributes (user scratchpad), recording the
 * scratchpad it needs. `attr` NULL uses the device's own. */
cnnb_status cpu_pd_create(cpu_device *d, dnnl_primitive_desc_t *pd, const void *op_desc,
                          const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                          const cnnb_node *node, const char *what);
/* Like cpu_pd_create, but CNNB_EUNSUPPORTED without recording an error when oneDNN
 * refuses; out of memory is still an error with its message. */
cnnb_status cpu_pd_try(cpu_device *d, dnnl_primitive_desc_t *pd, const void *op_desc,
                       const_dnnl_primitive_attr_t attr, const_dnnl_primitive_desc_t hint,
                       const cnnb_node *node, const char *what);
cnnb_status cpu_prim_create(cpu_device *d, dnnl_primitive_t *prim, const_dnnl_primitive_desc_t pd,
                            const cnnb_node *node, const char *what);
/* Grows the shared scratchpad to cover `pd`'s (prepare time, never per step). */
cnnb_status cpu_scratch_reserve(cpu_device *d, const_dnnl_primitive_desc_t pd,
                                const cnnb_node *node);
/* Runs `prim` with `args` (the scratchpad is added here) and waits for it. */
cnnb_status cpu_exec(cpu_device *d, dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args,
                     const cnnb_node *node, const char *what);
const dnnl_memory_desc_t *cpu_pd_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what, int index);

/* A memory object without data; point it at a buffer with cpu_bind before each use. */
cnnb_status cpu_mem(cpu_device *d, dnnl_memory_t *mem, const dnnl_memory_desc_t *md,
                    const cnnb_node *node);
static inline void cpu_bind(dnnl_memory_t mem, const void *ptr) {
  dnnl_memory_set_data_handle(mem, (void *)ptr);
}

/* Memory descriptors (memory.c): plain NCHW of a shape, and any plain tag. */
dnnl_memory_desc_t cpu_md_nchw(cnnb_shape s, dnnl_data_type_t dt);
dnnl_memory_desc_t cpu_md_tag(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt,
                              dnnl_format_tag_t tag);
dnnl_memory_desc_t cpu_md_any(int ndims, const dnnl_dim_t *dims, dnnl_data_type_t dt);
static inline int cpu_md_same(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b) {
  return dnnl_memory_desc_equal(a, b) != 0;
}
/* "nchw", "nChw16c", "blocked" ... for debug logs. */
const char *cpu_md_name(const dnnl_memory_desc_t *md, char *buf, size_t size);

/* Device-wide buffers for data that lives only inside one forward or backward call
 * (a masked gradient, a gradient in the kernel's layout before conversion): nodes run
 * one at a time, so two slots serve them all, sized at prepare to the largest need
 * (primitives.c). */
cnnb_status cpu_transient_reserve(cpu_device *d, int slot, size_t bytes, const cnnb_node *node);
static inline void *cpu_transient(const cpu_device *d, int slot) { return d->transient[slot]; }

/* Zeroed, 64-byte aligned; NULL on failure (size 0 gives a valid small block; memory.c). */
void *cpu_alloc(size_t bytes);
void cpu_free(void *p);

cnnb_status cpu_xform_init(cpu_device *d, cpu_xform *x, const dnnl_memory_desc_t *src,
                           const dnnl_memory_desc_t *dst, const cnnb_node *node, const char *what);
/* dst = src converted; a plain copy when no conversion is needed (nothing if src == dst). */
cnnb_status cpu_xform_run(cpu_device *d, cpu_xform *x, const void *src, void *dst,
                          const cnnb_node *node);
void cpu_xform_fini(cpu_xform *x);
static inline int cpu_xform_needed(const cpu_xform *x) { return x->prim != NULL; }

/* Prepared weights: the arena's plain fp32 kernel converted into the kernel's preferred
 * layout and type (or used in place when they agree), and the way back for gradients. */
typedef struct cpu_weights {
  cpu_xform to_compute; /* arena plain f32 -> compute md */
  void *compute_buf;    /* NULL when the arena is used in place */
  cpu_xform to_arena;   /* diff in the bwd-weights md (f32) -> arena plain f32 */
  void *diff_buf;       /* NULL when written into the gradient arena directly */
} cpu_weights;
cnnb_status cpu_weights_init_fwd(cpu_device *d, cpu_weights *w, const dnnl_memory_desc_t *plain,
                                 const dnnl_memory_desc_t *compute, const cnnb_node *node);
cnnb_status cpu_weights_init_bwd(cpu_device *d, cpu_weights *w, const dnnl_memory_desc_t *plain,
                                 const dnnl_memory_desc_t *diff, const cnnb_node *node);
/* The buffer to give the kernel as weights this step (converting when needed). */
cnnb_status cpu_weights_prepare(cpu_device *d, cpu_weights *w, const float *arena, const void **out,
                                const cnnb_node *node);
void cpu_weights_fini(cpu_weights *w);

/* bf16 <-> f32, round to nearest even (NaN stays NaN). */
static inline float cpu_bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static inline uint16_t cpu_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* The parameter (or stat) `which` of node n, in its arena at `base`. */
static inline float *cpu_param_ptr(const cnnb_graph *g, float *base, int32_t index) {
  return base + cnnb_graph_param(g, index)->offset;
}

/* Starts the device's threads on the OpenMP pool (at creation), first checking that
 * their stacks fit in the address space left: CNNB_ENOMEM with a message, where libgomp
 * would exit the process. */
cnnb_status cpu_threads_start(cpu_device *d);
/* Sets the compute threads on the calling thread (the OMP runtime keeps it per thread;
 * threads.c). */
void cpu_threads_apply(const cpu_device *d);
/* Finds the OpenMP runtime's entry points into d->omp (at creation). When they are not
 * found, d->omp stays zero: everything runs on the calling thread and OMP_NUM_THREADS
 * sets oneDNN's threads. */
void cpu_threads_look_up(cpu_device *d);
/* Flush-to-zero and denormals-are-zero on the calling thread and the OpenMP pool. */
void cpu_flush_denormals(const cpu_device *d);
/* fn(ctx, begin, end) over [0, n) split across the device's threads (threads.c). */
typedef void (*cpu_range_fn)(void *ctx, int64_t begin, int64_t end);
void cpu_parallel_for(const cpu_device *d, int64_t n, cpu_range_fn fn, void *ctx);

/* ---- plan (plan.c) --------------------------------------------------------------- */

cnnb_status cpu_plan_get(cpu_device *d, const cnnb_graph *g, cpu_plan **out);
void cpu_plans_free(cpu_device *d);
cnnb_status cpu_tensor_from_host(cpu_device *d, cpu_plan *p, cnnb_tensor t, void *buffer,
                                 const void *host);
cnnb_status cpu_tensor_to_host(cpu_device *d, cpu_plan *p, cnnb_tensor t, const void *buffer,
                               void *host);
/* CNNB_EXT_DEVICE_UINT8_INPUT's conversion (input_uint8.c). */
cnnb_status cpu_input_from_host_uint8(void *device, const cnnb_graph *g, cnnb_tensor t,
                                      void *buffer, const uint8_t *host, const float *scale,
                                      const float *offset);

/* ---- ops: the layout of a node's output, and its prepared state ------------------- */

/* Fills n->ops and the head; each op's prepare calls this first. */
static inline void cpu_node_init(cpu_node *n, const cpu_node_ops *ops, const cnnb_graph *g,
                                 cpu_plan *p, int32_t index) {
  n->ops = ops;
  n->g = g;
  n->node = cnnb_graph_node(g, index);
  n->plan = p;
  n->index = index;
}

/* The layout rule of an op's output (in node order, its inputs' layouts already in p). */
typedef cnnb_status (*cpu_layout_fn)(cpu_device *d, const cnnb_graph *g, const cpu_plan *p,
                                     int32_t index, dnnl_memory_desc_t *out);
/* Shared rules (layouts.c): plain NCHW in the activation type; the input's layout; int32
 * labels; plain fp32 (the loss). */
cnnb_status cpu_layout_plain(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                             dnnl_memory_desc_t *out);
cnnb_status cpu_layout_same(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                            dnnl_memory_desc_t *out);
cnnb_status cpu_layout_labels(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                              dnnl_memory_desc_t *out);
cnnb_status cpu_layout_f32(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                           dnnl_memory_desc_t *out);
/* Op families that ask oneDNN (ops_*.c). */
cnnb_status cpu_layout_conv(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                            dnnl_memory_desc_t *out);
cnnb_status cpu_layout_pool(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                            dnnl_memory_desc_t *out);
cnnb_status cpu_layout_concat(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                              dnnl_memory_desc_t *out);
cnnb_status cpu_layout_pad(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t index,
                           dnnl_memory_desc_t *out);
cnnb_status cpu_layout_pad_spatial(cpu_device *d, const cnnb_graph *g, const cpu_plan *p,
                                   int32_t index, dnnl_memory_desc_t *out);
/* nhwc in the activation type: layer norm's output (ops_layer_norm.c). */
cnnb_status cpu_layout_channels_last(cpu_device *d, const cnnb_graph *g, const cpu_plan *p,
                                     int32_t index, dnnl_memory_desc_t *out);

typedef cnnb_status (*cpu_prepare_fn)(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                      int32_t index, cpu_node **out);
cnnb_status cpu_prepare_source(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                               cpu_node **out); /* input, labels: nothing to do */
cnnb_status cpu_prepare_conv(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out);
cnnb_status cpu_prepare_batch_norm(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out);
cnnb_status cpu_prepare_pool(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out);
cnnb_status cpu_prepare_lrn(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out);
cnnb_status cpu_prepare_dense(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                              cpu_node **out);
cnnb_status cpu_prepare_relu(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out);
cnnb_status cpu_prepare_relu6(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                              cpu_node **out);
/* sigmoid, silu, hard_sigmoid, hard_swish, gelu (ABI 1.14) */
cnnb_status cpu_prepare_activation(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out);
cnnb_status cpu_prepare_add(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out);
/* multiply, channel_scale (ops_multiply.c), layer_norm (ops_layer_norm.c): ABI 1.14 */
cnnb_status cpu_prepare_multiply(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                 cpu_node **out);
cnnb_status cpu_prepare_channel_scale(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                      int32_t index, cpu_node **out);
cnnb_status cpu_prepare_layer_norm(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                   cpu_node **out);
/* multiply by an [N, C, 1, 1] gate, or channel_scale (ops_gate.c): CNNB_EUNSUPPORTED, with
 * no message, for layouts its loop does not walk (the caller then uses oneDNN's binary). */
cnnb_status cpu_prepare_gate(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                             cpu_node **out);
/* slice_channels, channel_shuffle (ops_channels.c): ABI 1.14 */
cnnb_status cpu_prepare_slice_channels(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                       int32_t index, cpu_node **out);
cnnb_status cpu_prepare_channel_shuffle(cpu_device *d, const cnnb_graph *g, cpu_plan *p,
                                        int32_t index, cpu_node **out);
cnnb_status cpu_prepare_dropout(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                cpu_node **out);
cnnb_status cpu_prepare_concat(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                               cpu_node **out);
cnnb_status cpu_prepare_pad(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                            cpu_node **out);
cnnb_status cpu_prepare_pad_spatial(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                    cpu_node **out);
/* A channel concat of `srcs` into `dst` with the device's attributes, its scratchpad
 * reserved (ops_concat.c; pad_channels uses it too). quiet: when oneDNN refuses (a
 * blocked dst it cannot write), CNNB_EUNSUPPORTED without a message. */
cnnb_status cpu_concat_pd(cpu_device *d, const cnnb_node *n, int32_t count,
                          const dnnl_memory_desc_t *srcs, const dnnl_memory_desc_t *dst,
                          dnnl_primitive_desc_t *pd, int quiet);
cnnb_status cpu_prepare_softmax_xent(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                     cpu_node **out);
cnnb_status cpu_prepare_reshape(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                cpu_node **out);

/* ---- the op table (ops.c) ------------------------------------------------------------ */

/* One graph op the device runs: its output's layout rule and its prepare. supports_op,
 * the layout plan and prepare all look ops up here, so they cannot disagree. */
typedef struct cpu_op {
  uint32_t op; /* cnnb_op */
  cpu_layout_fn layout;
  cpu_prepare_fn prepare;
} cpu_op;
/* The entry of `op`; NULL when the device does not run it. */
const cpu_op *cpu_op_find(uint32_t op);

/* The ReLU fused into a producer (conv2d, add; fused_relu.c). Forward: the device's
 * attributes plus a ReLU post-op (destroy *attr after use). Backward: dx = dy * (y > 0)
 * on the output's layout `md`; prepare also reserves transient slot 0 for one such dx.
 * `what` names it in messages ("conv2d fused relu"). */
typedef struct cpu_fused_relu {
  dnnl_primitive_t bwd;
  dnnl_memory_t dst, diff_dst, diff_src;
  char name[64]; /* "<what> backward", for run-time messages */
} cpu_fused_relu;
cnnb_status cpu_fused_relu_attr(cpu_device *d, const cnnb_node *n, dnnl_primitive_attr_t *attr);
cnnb_status cpu_fused_relu_prepare(cpu_device *d, cpu_fused_relu *r, const dnnl_memory_desc_t *md,
                                   const cnnb_node *node, const char *what);
cnnb_status cpu_fused_relu_backward(cpu_device *d, cpu_fused_relu *r, const void *y, const void *dy,
                                    void *dx, const cnnb_node *node);
void cpu_fused_relu_fini(cpu_fused_relu *r);

/* dst += src elementwise over a buffer of `md` (f32 or bf16). */
void cpu_accumulate_buffer(const cpu_device *d, const dnnl_memory_desc_t *md, void *dst,
                           const void *src);

/* The optimizer step and the finiteness check (update.c). */
cnnb_status cpu_update(cpu_device *d, const cnnb_update *u);
cnnb_status cpu_all_finite(cpu_device *d, const float *grads, int64_t count, int32_t *finite);

#endif
