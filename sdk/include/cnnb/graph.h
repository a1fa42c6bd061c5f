/* cnnb/graph.h — the graph IR and the builder model plugins describe networks with.
 *
 * A graph is a DAG of nodes; every node produces one tensor, named by the node's index
 * (cnnb_tensor). Shapes are logical NCHW (a dense layer's output is [N, units, 1, 1]);
 * devices choose physical layouts. Parameters live in one arena per replica: a node's
 * weights are ranges of it (cnnb_param.offset), so a fused allreduce or a checkpoint is
 * one call over the arena. Batch-norm running statistics live in a second, untrained
 * arena ("stats").
 *
 * The builder keeps the first error: a failing call records a message naming the node
 * and both shapes, returns CNNB_NO_TENSOR, and every later call that receives
 * CNNB_NO_TENSOR returns it again. So model code stays straight-line and checks
 * cnnb_graph_status() once at the end. Not thread-safe: one builder per graph. */
#ifndef CNNB_GRAPH_H
#define CNNB_GRAPH_H

#include <stdbool.h>
#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnb_graph cnnb_graph;
typedef int32_t cnnb_tensor;
#define CNNB_NO_TENSOR ((cnnb_tensor)-1)

typedef struct cnnb_shape {
  int32_t n, c, h, w;
} cnnb_shape;

/* Op codes are ABI: append only, never renumber. An op added in a minor version is
 * listed below with the version that added it ("ABI 1.1"), as is its builder.
 *  - A model plugin that emits it needs a host of at least that version: an older
 *    host's libcnnb has no builder for it, so dlopen refuses the plugin there
 *    (undefined symbol). The loader itself still accepts a newer minor.
 *  - A device plugin says which ops it runs (supports_op, device.h; without it, the ops
 *    of the minor it was built for), and the host refuses a run that needs another
 *    before allocating anything, naming the op and the device. A device built before
 *    the op does not know it: given a graph that has it anyway, it must refuse the node
 *    in tensor_bytes / prepare (CNNB_EUNSUPPORTED naming the op), never guess.
 * CNNB_OP_COUNT_ is not ABI: it is this header's bound for the host's own tables and
 * grows with every op; plugins must not store it or compare against it.
 *
 * Adding an op: the project's docs/architecture.md, "Adding an op" (its code here, with
 * the minor that adds it, is the first step). */
typedef enum cnnb_op {
  CNNB_OP_INPUT = 1,      /* images, fp32 [N, C, H, W]; filled by the executor */
  CNNB_OP_LABELS = 2,     /* int32 class ids [N, 1, 1, 1]; filled by the executor */
  CNNB_OP_CONV2D = 3,     /* params: kernel [O, I/groups, KH, KW], bias [O] */
  CNNB_OP_BATCH_NORM = 4, /* params: scale [C] (optional), offset [C]; stats: mean, variance */
  CNNB_OP_RELU = 5,
  CNNB_OP_MAX_POOL = 6,
  CNNB_OP_AVG_POOL = 7,        /* padding excluded from the average (TF semantics) */
  CNNB_OP_GLOBAL_AVG_POOL = 8, /* [N, C, H, W] -> [N, C, 1, 1] */
  CNNB_OP_LRN = 9,             /* TF semantics: x / (bias + alpha * sum_{2r+1 channels} x^2)^beta */
  CNNB_OP_DENSE = 10, /* input flattened to [N, K]; params: weights [units, K], bias [units] */
  /* training: keep with keep_prob, scale by 1/keep_prob; inference: identity */
  CNNB_OP_DROPOUT = 11,
  CNNB_OP_CONCAT = 12,  /* along channels */
  CNNB_OP_ADD = 13,     /* elementwise, equal shapes */
  CNNB_OP_RESHAPE = 14, /* same element count per image; data order is logical NCHW */
  /* inputs: logits [N, K, 1, 1], labels; output: mean loss [1, 1, 1, 1]; ABI 1.14:
     attr.loss.label_smoothing s, the target (1 - s) onehot(label) + s / K */
  CNNB_OP_SOFTMAX_XENT = 15,
  /* ABI 1.1 */
  CNNB_OP_RELU6 = 16, /* min(max(x, 0), 6), tf.nn.relu6; never fused into conv / bn */
  /* ABI 1.2 */
  CNNB_OP_PAD_CHANNELS = 17, /* attr.pad: [N, C, H, W] -> [N, before + C + after, H, W], the new
                                channels zero (tf.pad on C only) */
  /* ABI 1.10 (CNNB_ABI_MINOR_PAD_SPATIAL) */
  CNNB_OP_PAD_SPATIAL = 18, /* attr.pad_spatial: [N, C, H, W] -> [N, C, top + H + bottom,
                               left + W + right]; a positive amount adds zero rows / columns
                               (tf.pad on H, W), a negative one crops (a slice) */
  /* ABI 1.14 (CNNB_ABI_MINOR_ACTIVATIONS): the activations of today's CNNs, elementwise,
   * each as torch.nn defines it, its gradient included (at a kink: torch's side). */
  CNNB_OP_SIGMOID = 19,      /* 1 / (1 + exp(-x)) */
  CNNB_OP_SILU = 20,         /* x * sigmoid(x): swish, torch.nn.SiLU */
  CNNB_OP_HARD_SIGMOID = 21, /* relu6(x + 3) / 6: torch.nn.Hardsigmoid */
  CNNB_OP_HARD_SWISH = 22,   /* x * relu6(x + 3) / 6: torch.nn.Hardswish */
  CNNB_OP_GELU = 23,         /* x * Phi(x), Phi the normal CDF (erf); attr.gelu.tanh: the tanh
                                approximation, torch's approximate='tanh' */
  /* training: each image of the batch dropped whole (zeros) with probability
     attr.stochastic_depth.drop_prob, else scaled by 1 / (1 - drop_prob), torchvision's
     StochasticDepth(mode="row") on a residual branch; inference: identity */
  CNNB_OP_STOCHASTIC_DEPTH = 24,
  /* a * b, b of a's shape or [N, C, 1, 1] (one value per image and channel, broadcast over
     H and W: the squeeze-and-excitation gate) */
  CNNB_OP_MULTIPLY = 25,
  /* at each image and position, over the C channels: (x - mean) / sqrt(var + epsilon) *
     scale[c] + offset[c], var biased; attr.layer_norm.epsilon; params: scale [C], offset
     [C]. ConvNeXt's LayerNorm2d (torch's LayerNorm over a channels-last tensor) */
  CNNB_OP_LAYER_NORM = 26,
  /* x * scale[c]; param: scale [C, 1, 1], learned (ConvNeXt's layer scale) */
  CNNB_OP_CHANNEL_SCALE = 27,
  /* x[:, begin : begin + count]: attr.slice (torch's x.chunk / x.narrow on channels) */
  CNNB_OP_SLICE_CHANNELS = 28,
  /* ShuffleNet's channel shuffle in attr.shuffle.groups g: output channel k * g + i is
     input channel i * (C / g) + k (torch: view(N, g, C / g, H, W).transpose(1, 2)) */
  CNNB_OP_CHANNEL_SHUFFLE = 29,
  CNNB_OP_COUNT_ = 30
} cnnb_op;

/* 0 is not a padding but "the op's default" (SAME for conv, VALID for pools, as
 * tf_cnn_benchmarks' conv() and mpool()), so a zeroed desc field never hides an
 * explicit choice of either. */
typedef enum cnnb_padding {
  CNNB_PAD_DEFAULT = 0, /* conv: SAME; pools: VALID */
  CNNB_PAD_VALID = 1,
  CNNB_PAD_EXPLICIT = 2, /* pad_top/bottom/left/right as given */
  CNNB_PAD_SAME = 3      /* TF SAME: output ceil(in / stride), extra padding at bottom/right */
} cnnb_padding;

typedef enum cnnb_init_kind {
  CNNB_INIT_DEFAULT = 0, /* the op's tf_cnn_benchmarks default */
  CNNB_INIT_ZEROS = 1,
  CNNB_INIT_CONSTANT = 2,         /* a */
  CNNB_INIT_TRUNCATED_NORMAL = 3, /* stddev a, cut at 2 stddev */
  CNNB_INIT_NORMAL = 4,           /* stddev a */
  CNNB_INIT_UNIFORM = 5,          /* [-a, a] */
  CNNB_INIT_GLOROT_UNIFORM = 6,   /* limit sqrt(6 / (fan_in + fan_out)) */
  CNNB_INIT_VARIANCE_SCALING = 7, /* TF default: truncated normal, scale a (0 = 1), fan_in */
  CNNB_INIT_HE_NORMAL = 8         /* variance scaling 2.0, fan_out (ResNet's conv init) */
} cnnb_init_kind;

typedef struct cnnb_init {
  uint32_t kind; /* cnnb_init_kind */
  float a;
} cnnb_init;

/* ---- builder descriptors: zero fields take the default named beside them ---------- */

typedef struct cnnb_conv2d_desc {
  uint32_t struct_size;
  int32_t filters;                                  /* required */
  int32_t kernel_h, kernel_w;                       /* required */
  int32_t stride_h, stride_w;                       /* 1 */
  uint32_t padding;                                 /* CNNB_PAD_DEFAULT: SAME */
  int32_t pad_top, pad_bottom, pad_left, pad_right; /* CNNB_PAD_EXPLICIT only */
  int32_t dilation_h, dilation_w;                   /* 1 */
  int32_t groups;        /* 1; groups == in channels == filters is depthwise */
  int32_t use_bias;      /* 0: no bias */
  cnnb_init kernel_init; /* variance scaling */
  float bias_init;       /* 0 */
  /* ABI 1.14: 1 for a 1x1 convolution without groups that stands for nn.Linear over the
   * channels at each position (ConvNeXt's pointwise layers): its kernel is the param
   * [O, I], as torch saves the Linear's weight, rather than [O, I, 1, 1]; the same values
   * in the same order, so devices see no difference. 0: [O, I/groups, KH, KW]. */
  int32_t linear_kernel;
} cnnb_conv2d_desc;

typedef struct cnnb_batch_norm_desc {
  uint32_t struct_size;
  float epsilon; /* 0.001 */
  float decay;   /* 0.999: running = decay * running + (1 - decay) * batch */
  int32_t scale; /* 0: offset only (tf_cnn_benchmarks' default); 1: learn a scale too */
} cnnb_batch_norm_desc;

typedef struct cnnb_pool_desc {
  uint32_t struct_size;
  int32_t kernel_h, kernel_w; /* required */
  int32_t stride_h, stride_w; /* kernel size */
  uint32_t padding;           /* CNNB_PAD_DEFAULT: VALID */
  int32_t pad_top, pad_bottom, pad_left, pad_right;
  /* ABI 1.14: 1 rounds the output size up, as torch's ceil_mode=True (SqueezeNet,
   * GoogLeNet): a last window that starts inside the input or its top / left padding is
   * kept, and the part of it past the bottom / right padding is more padding (left out of
   * the max and of the average). VALID or EXPLICIT padding only. 0: rounded down. */
  int32_t ceil_mode;
} cnnb_pool_desc;

typedef struct cnnb_lrn_desc {
  uint32_t struct_size;
  int32_t depth_radius; /* window is 2r+1 channels */
  float bias, alpha, beta;
} cnnb_lrn_desc;

typedef struct cnnb_dense_desc {
  uint32_t struct_size;
  int32_t units;         /* required */
  int32_t use_bias;      /* 0: no bias */
  cnnb_init weight_init; /* truncated normal, stddev sqrt(1 / K) */
  float bias_init;       /* 0 */
} cnnb_dense_desc;

#define CNNB_CONV2D(...) \
  (&(const cnnb_conv2d_desc){.struct_size = sizeof(cnnb_conv2d_desc), __VA_ARGS__})
#define CNNB_BATCH_NORM(...) \
  (&(const cnnb_batch_norm_desc){.struct_size = sizeof(cnnb_batch_norm_desc), __VA_ARGS__})
#define CNNB_POOL(...) (&(const cnnb_pool_desc){.struct_size = sizeof(cnnb_pool_desc), __VA_ARGS__})
#define CNNB_LRN(...) (&(const cnnb_lrn_desc){.struct_size = sizeof(cnnb_lrn_desc), __VA_ARGS__})
#define CNNB_DENSE(...) \
  (&(const cnnb_dense_desc){.struct_size = sizeof(cnnb_dense_desc), __VA_ARGS__})

/* ---- the IR as devices and the executor read it ------------------------------------ */

enum {
  CNNB_PARAM_NO_DECAY = 1u << 0 /* excluded from L2 weight decay (batch norm) */
};

/* Every param starts on a multiple of CNNB_PARAM_ALIGN elements of its arena: 256 bytes of
 * fp32, the alignment cuDNN, cuBLAS and vector loads want of a tensor. The gaps between
 * params are zero, belong to no param and are never trained; so an arena's element count
 * (cnnb_graph_param_arena_count) exceeds the model's parameter count. */
#define CNNB_PARAM_ALIGN 64

typedef struct cnnb_param {
  uint32_t struct_size;
  uint32_t flags;
  const char *name; /* "resnet_v1/block1/conv1/kernel" */
  int32_t ndims;
  int32_t dims[4];
  int64_t count;   /* elements */
  int64_t offset;  /* elements from the start of its arena (params, or stats) */
  int32_t node;    /* owning node */
  int32_t is_stat; /* 1: lives in the stats arena, never trained */
  cnnb_init init;
} cnnb_param;

typedef struct cnnb_node {
  uint32_t struct_size;
  uint32_t op; /* cnnb_op */
  const char *name;
  cnnb_shape shape; /* of the output */
  int32_t num_inputs;
  const cnnb_tensor *inputs;
  int32_t num_params; /* indices for cnnb_graph_param() */
  int32_t params[2];  /* conv: kernel, bias; dense: weights, bias; bn: scale, offset (or offset
                         alone);  layer norm: scale, offset; channel scale: scale */
  int32_t num_stats;
  int32_t stats[2];   /* bn: mean, variance */
  int32_t fused_relu; /* conv / batch norm (1.0); add, only for devices that offer
                         CNNB_EXT_FUSED_RELU_ADD: a ReLU follows inside this node */
  union {
    struct { /* conv2d, max/avg pool (filters, dilation, groups, use_bias unused by pools) */
      int32_t filters, kernel_h, kernel_w, stride_h, stride_w;
      int32_t pad_top, pad_bottom, pad_left, pad_right;
      int32_t dilation_h, dilation_w, groups, use_bias;
    } window;
    struct {
      float epsilon, decay;
      int32_t scale;
    } batch_norm;
    struct {
      int32_t depth_radius;
      float bias, alpha, beta;
    } lrn;
    struct {
      int32_t units, use_bias;
    } dense;
    struct {
      float keep_prob;
    } dropout;
    struct {
      int32_t before, after;
    } pad; /* pad_channels (1.2): zero channels added */
    struct {
      int32_t top, bottom, left, right;
    } pad_spatial; /* pad_spatial (1.10): rows / columns added (> 0) or cut (< 0) */
    struct {
      int32_t tanh; /* 1: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); 0: erf */
    } gelu;         /* gelu (1.14) */
    struct {
      float drop_prob;  /* [0, 1]: 1 drops every image */
    } stochastic_depth; /* stochastic_depth (1.14) */
    struct {
      float epsilon; /* > 0 */
    } layer_norm;    /* layer_norm (1.14) */
    struct {
      int32_t begin, count; /* channels [begin, begin + count) of the input */
    } slice;                /* slice_channels (1.14) */
    struct {
      int32_t groups; /* >= 1, divides the channels */
    } shuffle;        /* channel_shuffle (1.14) */
    struct {
      float label_smoothing; /* [0, 1); 0 before 1.14 (the host set no other) */
    } loss;                  /* softmax_xent (1.14), set by the host (--label_smoothing) */
    int32_t reserved[16];
  } attr;
} cnnb_node;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_shape) == 16, "ABI: cnnb_shape layout");
_Static_assert(sizeof(cnnb_init) == 8, "ABI: cnnb_init layout");
_Static_assert(offsetof(cnnb_conv2d_desc, linear_kernel) == 72, "ABI: 1.14 layout moved");
_Static_assert(sizeof(cnnb_conv2d_desc) == 76, "ABI: grow cnnb_conv2d_desc only by appending");
_Static_assert(sizeof(cnnb_batch_norm_desc) == 16,
               "ABI: grow cnnb_batch_norm_desc only by appending");
_Static_assert(offsetof(cnnb_pool_desc, ceil_mode) == 40, "ABI: 1.14 layout moved");
_Static_assert(sizeof(cnnb_pool_desc) == 44, "ABI: grow cnnb_pool_desc only by appending");
_Static_assert(sizeof(cnnb_lrn_desc) == 20, "ABI: grow cnnb_lrn_desc only by appending");
_Static_assert(sizeof(cnnb_dense_desc) == 24, "ABI: grow cnnb_dense_desc only by appending");
_Static_assert(sizeof(cnnb_param) == 72, "ABI: grow cnnb_param only by appending");
_Static_assert(offsetof(cnnb_node, attr) == 76, "ABI: cnnb_node layout");
_Static_assert(sizeof(cnnb_node) == 144, "ABI: grow cnnb_node only by appending");
#endif

/* ---- graph lifetime (the host creates graphs; tests and tools may too) ------------- */

/* A graph whose input is [batch, channels, height, width] and whose classifier has
 * num_classes outputs. Returns NULL only when out of memory. */
CNNB_EXPORT cnnb_graph *cnnb_graph_create(int32_t batch, int32_t channels, int32_t height,
                                          int32_t width, int32_t num_classes);
CNNB_EXPORT void cnnb_graph_destroy(cnnb_graph *g);

CNNB_EXPORT cnnb_status cnnb_graph_status(const cnnb_graph *g);
CNNB_EXPORT const char *cnnb_graph_error(const cnnb_graph *g); /* "" when none */

/* ---- builder ------------------------------------------------------------------------ */

CNNB_EXPORT cnnb_tensor cnnb_graph_input(cnnb_graph *g); /* the images */
CNNB_EXPORT int32_t cnnb_graph_num_classes(const cnnb_graph *g);
/* The model's logits ([N, num_classes, 1, 1]); the host adds the loss after it. */
CNNB_EXPORT cnnb_status cnnb_graph_set_logits(cnnb_graph *g, cnnb_tensor logits);

/* Names: `name` may be NULL for an automatic one ("conv2d_3"). Scopes prefix names
 * ("block1/conv2"), as TF's variable scopes do. */
CNNB_EXPORT void cnnb_graph_push_scope(cnnb_graph *g, const char *scope);
CNNB_EXPORT void cnnb_graph_pop_scope(cnnb_graph *g);

CNNB_EXPORT cnnb_tensor cnnb_conv2d(cnnb_graph *g, const char *name, cnnb_tensor x,
                                    const cnnb_conv2d_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_batch_norm(cnnb_graph *g, const char *name, cnnb_tensor x,
                                        const cnnb_batch_norm_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_relu(cnnb_graph *g, const char *name, cnnb_tensor x);
/* ABI 1.1: CNNB_OP_RELU6, MobileNet v2's activation. */
CNNB_EXPORT cnnb_tensor cnnb_relu6(cnnb_graph *g, const char *name, cnnb_tensor x);
/* ABI 1.2: CNNB_OP_PAD_CHANNELS, `before` zero channels, then x, then `after` zero
 * channels (both >= 0); the CIFAR ResNets' parameter-free shortcut. */
CNNB_EXPORT cnnb_tensor cnnb_pad_channels(cnnb_graph *g, const char *name, cnnb_tensor x,
                                          int32_t before, int32_t after);
/* ABI 1.10 (CNNB_ABI_MINOR_PAD_SPATIAL): CNNB_OP_PAD_SPATIAL, y[n][c][i][j] =
 * x[n][c][i - top][j - left] where that lies inside x, else 0; each amount may be
 * negative, which cuts that many rows or columns off that side. NASNet's factorized
 * reduction shifts by one pixel with it: tf.pad(x, [[0, 1], [0, 1]])[1:, 1:] is
 * top = left = -1, bottom = right = 1. The output must keep at least one row and column. */
CNNB_EXPORT cnnb_tensor cnnb_pad_spatial(cnnb_graph *g, const char *name, cnnb_tensor x,
                                         int32_t top, int32_t bottom, int32_t left, int32_t right);
/* ABI 1.14 (CNNB_ABI_MINOR_ACTIVATIONS): CNNB_OP_SIGMOID, _SILU, _HARD_SIGMOID,
 * _HARD_SWISH and _GELU (tanh: 0 the exact erf form, 1 the tanh approximation), the
 * activations of MobileNet v3, EfficientNet and ConvNeXt. A device that does not run one
 * refuses the graph naming it (supports_op). */
CNNB_EXPORT cnnb_tensor cnnb_sigmoid(cnnb_graph *g, const char *name, cnnb_tensor x);
CNNB_EXPORT cnnb_tensor cnnb_silu(cnnb_graph *g, const char *name, cnnb_tensor x);
CNNB_EXPORT cnnb_tensor cnnb_hard_sigmoid(cnnb_graph *g, const char *name, cnnb_tensor x);
CNNB_EXPORT cnnb_tensor cnnb_hard_swish(cnnb_graph *g, const char *name, cnnb_tensor x);
CNNB_EXPORT cnnb_tensor cnnb_gelu(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t tanh);
/* ABI 1.14: CNNB_OP_STOCHASTIC_DEPTH, a residual branch dropped per image in training
 * (EfficientNet, ConvNeXt); the mask, like dropout's, is a function of the run's seed,
 * the step and the node, so backward and a rerun of the step see the same one. */
CNNB_EXPORT cnnb_tensor cnnb_stochastic_depth(cnnb_graph *g, const char *name, cnnb_tensor x,
                                              float drop_prob);
/* ABI 1.14: CNNB_OP_MULTIPLY, x * gate where gate has x's shape or is [N, C, 1, 1] (one
 * value per image and channel, as a squeeze-and-excitation block's sigmoid gives it). */
CNNB_EXPORT cnnb_tensor cnnb_multiply(cnnb_graph *g, const char *name, cnnb_tensor x,
                                      cnnb_tensor gate);
/* ABI 1.14: CNNB_OP_LAYER_NORM, each position's C values normalised to mean 0 and
 * variance 1 (epsilon > 0 added to the variance; torch's LayerNorm default is 1e-5,
 * ConvNeXt's 1e-6), then scaled and offset per channel: learned params "gamma" (ones)
 * and "beta" (zeros), saved as ".weight" and ".bias", excluded from weight decay as batch
 * norm's are. The same statistics in training and inference. */
CNNB_EXPORT cnnb_tensor cnnb_layer_norm(cnnb_graph *g, const char *name, cnnb_tensor x,
                                        float epsilon);
/* ABI 1.14: CNNB_OP_CHANNEL_SCALE, x * scale[c] with a learned "scale" of [C, 1, 1]
 * starting at `init` everywhere (ConvNeXt: 1e-6), saved as ".layer_scale" as torchvision's
 * CNBlock names it. */
CNNB_EXPORT cnnb_tensor cnnb_channel_scale(cnnb_graph *g, const char *name, cnnb_tensor x,
                                           float init);
/* ABI 1.14: CNNB_OP_SLICE_CHANNELS, channels [begin, begin + count) of x (ShuffleNet v2's
 * x.chunk(2, dim=1) is two slices); its gradient is dy in those channels, zero elsewhere. */
CNNB_EXPORT cnnb_tensor cnnb_slice_channels(cnnb_graph *g, const char *name, cnnb_tensor x,
                                            int32_t begin, int32_t count);
/* ABI 1.14: CNNB_OP_CHANNEL_SHUFFLE, ShuffleNet's channel shuffle in `groups` groups. */
CNNB_EXPORT cnnb_tensor cnnb_channel_shuffle(cnnb_graph *g, const char *name, cnnb_tensor x,
                                             int32_t groups);
CNNB_EXPORT cnnb_tensor cnnb_max_pool(cnnb_graph *g, const char *name, cnnb_tensor x,
                                      const cnnb_pool_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x,
                                      const cnnb_pool_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_global_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x);
CNNB_EXPORT cnnb_tensor cnnb_lrn(cnnb_graph *g, const char *name, cnnb_tensor x,
                                 const cnnb_lrn_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_dense(cnnb_graph *g, const char *name, cnnb_tensor x,
                                   const cnnb_dense_desc *desc);
CNNB_EXPORT cnnb_tensor cnnb_dropout(cnnb_graph *g, const char *name, cnnb_tensor x,
                                     float keep_prob);
CNNB_EXPORT cnnb_tensor cnnb_concat(cnnb_graph *g, const char *name, int32_t count,
                                    const cnnb_tensor *xs);
CNNB_EXPORT cnnb_tensor cnnb_add(cnnb_graph *g, const char *name, cnnb_tensor a, cnnb_tensor b);
CNNB_EXPORT cnnb_tensor cnnb_reshape(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t c,
                                     int32_t h, int32_t w);
CNNB_EXPORT cnnb_tensor cnnb_flatten(cnnb_graph *g, const char *name, cnnb_tensor x);

/* ABI 1.5: the key prefix under which node x's parameters are saved in checkpoints, so
 * a model torchvision also has saves under torchvision's state_dict keys and PyTorch
 * loads the file as it is: "layer1.0.conv1" makes a conv2d's kernel and bias
 * "layer1.0.conv1.weight" and ".bias", a dense layer's the same, and a batch norm's scale,
 * offset, moving mean and variance ".weight", ".bias", ".running_mean", ".running_var"
 * (the suffixes are each op's, in the core's op table). x must be a node that owns
 * parameters; the prefix is copied and must be unique in the graph. Without a call a
 * parameter is saved under its own name ("resnet_v2/block1/conv1/kernel"). Errors are
 * recorded like the builder's (the first one sticks) and returned. */
CNNB_EXPORT cnnb_status cnnb_graph_set_checkpoint_name(cnnb_graph *g, cnnb_tensor x,
                                                       const char *prefix);

/* ---- reading the IR ------------------------------------------------------------------ */

CNNB_EXPORT int32_t cnnb_graph_num_nodes(const cnnb_graph *g);
CNNB_EXPORT const cnnb_node *cnnb_graph_node(const cnnb_graph *g, int32_t index);
CNNB_EXPORT int32_t cnnb_graph_num_params(const cnnb_graph *g); /* params and stats */
CNNB_EXPORT const cnnb_param *cnnb_graph_param(const cnnb_graph *g, int32_t index);
/* elements of the trainable arena, CNNB_PARAM_ALIGN gaps included */
CNNB_EXPORT int64_t cnnb_graph_param_arena_count(const cnnb_graph *g);
CNNB_EXPORT int64_t cnnb_graph_stat_arena_count(const cnnb_graph *g);
CNNB_EXPORT cnnb_tensor cnnb_graph_logits(const cnnb_graph *g);
CNNB_EXPORT cnnb_tensor cnnb_graph_labels(const cnnb_graph *g); /* after the host added the loss */
CNNB_EXPORT cnnb_tensor cnnb_graph_loss(const cnnb_graph *g);
CNNB_EXPORT int64_t cnnb_shape_count(cnnb_shape s);

#ifdef __cplusplus
}
#endif
#endif
