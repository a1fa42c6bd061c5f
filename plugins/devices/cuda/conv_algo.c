/* conv_algo.c — choosing cuDNN convolution algorithms, once per distinct convolution
 * (conv_algo.h's key) and direction for the whole run, and the descriptors of a key.
 *
 * A network repeats its shapes (ResNet-50 has 53 convolutions but about 20 distinct
 * ones), so the cache keeps every choice in d->algos and later nodes of the same key
 * reuse it: the heuristics are asked, or the candidates timed, once per key.
 *
 * Candidates come sorted best first: by cuDNN's expected performance (heuristics) or
 * by measured time (autotune). The first one is taken that succeeded, needs no more
 * workspace than d->workspace_limit, and runs in a math type the device allows (fp32
 * without TF32 accepts only CUDNN_FMA_MATH: a candidate in another math type could use
 * TF32 tensor cores). Its exact workspace is asked again with its math type set, as
 * cuDNN sizes workspaces per (algorithm, math type).
 *
 * Under --cudnn_autotune the timed choices also go to the autotune cache file
 * (algo_cache_file.h), opened at the device's first choice: a key found there is taken
 * without timing, once cuDNN confirms it still offers that algorithm for the
 * descriptors within the workspace limit (a choice it then fails to run is reported as
 * any other cuDNN failure). Heuristic choices are not kept: they cost nothing to make
 * again, and a run whose timing failed should time again next time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_algo.h"
#include "gpu_impl.h"

_Static_assert(GPU_CONV_DIRS == GPU_ALGO_FILE_DIRS, "the cache file names every direction");

/* More than any direction has algorithms (cuDNN 9: 8 forward, 6 and 7 backward). */
#define MAX_CANDIDATES 16

typedef struct candidate {
  int32_t algo;
  cudnnStatus_t status;
  float time_ms; /* measured under autotune; cuDNN's heuristics leave it meaningless */
  size_t memory;
  cudnnMathType_t math;
} candidate;

typedef struct cache_entry {
  gpu_conv_key key;
  int32_t dir;
  gpu_conv_algo algo;
  float time_ms; /* < 0: chosen by the heuristics, not timed */
} cache_entry;

struct gpu_algo_cache {
  cache_entry *entries;
  size_t count, capacity;
  gpu_algo_file *file; /* --cudnn_autotune_cache, NULL when off */
  size_t from_file;    /* entries taken from the file */
  size_t timed;        /* entries timed by this run (each appended to the file) */
};

static const char *const dir_names[GPU_CONV_DIRS] = {"forward", "backward data", "backward filter"};

static const char *math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor op (conversion)";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "unknown";
}

cudnnMathType_t gpu_conv_math(const gpu_device *d) {
  if (d->act != GPU_F32) return CUDNN_TENSOR_OP_MATH;
  return d->allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* ---- descriptors ------------------------------------------------------------------- */

void gpu_conv_descs_destroy(gpu_conv_descs *s) {
  if (s->x) gpu_tensor_desc_free(&s->x);
  if (s->y) gpu_tensor_desc_free(&s->y);
  s->x = s->y = NULL;
  if (s->w) cudnnDestroyFilterDescriptor(s->w);
  s->w = NULL;
  for (int i = 0; i < GPU_CONV_DIRS; i++) {
    if (s->conv[i]) cudnnDestroyConvolutionDescriptor(s->conv[i]);
    s->conv[i] = NULL;
  }
}

cnnb_status gpu_conv_descs_create(gpu_device *d, const gpu_conv_key *key, gpu_conv_descs *s,
                                  const cnnb_node *node) {
  memset(s, 0, sizeof *s);
  const cudnnDataType_t type = (cudnnDataType_t)key->data_type;
  const cudnnTensorFormat_t format = (cudnnTensorFormat_t)key->format;
  cnnb_status st = CNNB_OK;
  cnnb_shape x_shape = {key->n, key->c, key->h, key->w};
  GPU_TRY(st, gpu_tensor_desc_as(d, &s->x, x_shape, type, format, node));
  /* Filters [K, C / groups, R, S]; format NCHW means OIHW in memory, NHWC means OHWI. */
  GPU_TRY(st, gpu_cudnn(d, cudnnCreateFilterDescriptor(&s->w), node, "filter descriptor"));
  GPU_TRY(st, gpu_cudnn(d,
                        cudnnSetFilter4dDescriptor(s->w, type, format, key->k, key->c / key->groups,
                                                   key->r, key->s),
                        node, "filter descriptor"));
  for (int i = 0; i < GPU_CONV_DIRS; i++) {
    GPU_TRY(st, gpu_cudnn(d, cudnnCreateConvolutionDescriptor(&s->conv[i]), node,
                          "convolution descriptor"));
    /* Cross-correlation (no filter flip), as TF's conv2d; compute in fp32 always
     * ("pseudo half" for fp16 / bf16 data). */
    GPU_TRY(st,
            gpu_cudnn(d,
                      cudnnSetConvolution2dDescriptor(s->conv[i], key->pad_h, key->pad_w,
                                                      key->stride_h, key->stride_w, key->dilation_h,
                                                      key->dilation_w, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT),
                      node, "convolution descriptor"));
    GPU_TRY(st, gpu_cudnn(d, cudnnSetConvolutionGroupCount(s->conv[i], key->groups), node,
                          "convolution group count"));
    GPU_TRY(st, gpu_cudnn(d, cudnnSetConvolutionMathType(s->conv[i], (cudnnMathType_t)key->math),
                          node, "convolution math type"));
  }
  int yn = 0, yc = 0, yh = 0, yw = 0;
  GPU_TRY(st, gpu_cudnn(d,
                        cudnnGetConvolution2dForwardOutputDim(s->conv[0], s->x, s->w, &yn, &yc, &yh,
                                                              &yw),
                        node, "convolution output size"));
  s->y_shape = (cnnb_shape){yn, yc, yh, yw};
  GPU_TRY(st, gpu_tensor_desc_as(d, &s->y, s->y_shape, type, format, node));
done:
  if (st) gpu_conv_descs_destroy(s);
  return st;
}

/* ---- the cache --------------------------------------------------------------------- */

static const cache_entry *cache_find(const gpu_device *d, const gpu_conv_key *key,
                                     gpu_conv_dir dir) {
  const gpu_algo_cache *c = d->algos;
  if (!c) return NULL;
  for (size_t i = 0; i < c->count; i++)
    if (c->entries[i].dir == (int32_t)dir && !memcmp(&c->entries[i].key, key, sizeof *key))
      return &c->entries[i];
  return NULL;
}

/* The cache file --cudnn_autotune_cache names, for this GPU; NULL when there is none
 * (off, autotune off, no home directory for "auto", out of memory: logged, never an
 * error). */
static gpu_algo_file *file_open(gpu_device *d) {
  if (!d->autotune || !d->autotune_cache) return NULL;
  char auto_path[4096];
  const char *path = d->autotune_cache;
  const int is_auto = !strcmp(path, GPU_ALGO_FILE_AUTO);
  if (is_auto) {
    if (gpu_algo_file_default_path(auto_path, sizeof auto_path)) {
      cnnb_log(d->ctx, CNNB_LOG_DEBUG,
               "no cudnn autotune cache: neither XDG_CACHE_HOME nor HOME names a "
               "directory (--cudnn_autotune_cache=PATH names one)");
      return NULL;
    }
    path = auto_path;
  }
  gpu_algo_file_gpu gpu = {
      .name = d->prop.name,
      .cc_major = d->prop.major,
      .cc_minor = d->prop.minor,
      .memory_mib = (uint64_t)d->prop.totalGlobalMem >> 20,
      .cudnn_version = (uint64_t)cudnnGetVersion(),
      .build = GPU_DEVICE_VERSION,
  };
  return gpu_algo_file_open(d->ctx, path, is_auto, &gpu);
}

/* d->algos, made (and the cache file read) at the device's first choice. */
static cnnb_status cache_init(gpu_device *d, const cnnb_node *node) {
  if (d->algos) return CNNB_OK;
  if (!(d->algos = calloc(1, sizeof *d->algos)))
    return cnnb_error(d->ctx, CNNB_ENOMEM, "cuda: node '%s': out of memory for the algorithm cache",
                      node->name);
  d->algos->file = file_open(d);
  return CNNB_OK;
}

static cnnb_status cache_add(gpu_device *d, const cnnb_node *node, const cache_entry *e) {
  cnnb_status st = cache_init(d, node);
  if (st) return st;
  gpu_algo_cache *c = d->algos;
  if (c->count == c->capacity) {
    size_t capacity = c->capacity ? 2 * c->capacity : 32;
    cache_entry *grown = realloc(c->entries, capacity * sizeof *grown);
    if (!grown)
      return cnnb_error(d->ctx, CNNB_ENOMEM,
                        "cuda: node '%s': out of memory for the algorithm cache", node->name);
    c->entries = grown;
    c->capacity = capacity;
  }
  c->entries[c->count++] = *e;
  return CNNB_OK;
}

void gpu_algo_cache_free(gpu_device *d) {
  gpu_algo_cache *c = d->algos;
  if (!c) return;
  if (c->file && c->count) {
    gpu_algo_file_stats stats;
    gpu_algo_file_stats_of(c->file, &stats);
    /* One line per device and run: what the cache saved, and whether it grew. */
    char timed[96] = "";
    if (c->timed)
      snprintf(timed, sizeof timed, "; %zu timed%s", c->timed,
               stats.appended == c->timed ? " and added to it"
               : stats.appended           ? ", some not kept"
                                          : ", not kept");
    cnnb_log(d->ctx, CNNB_LOG_INFO, "GPU %d: cudnn autotune: %zu of %zu choices from %s%s",
             d->ordinal, c->from_file, c->count, gpu_algo_file_path(c->file), timed);
  }
  gpu_algo_file_close(c->file);
  free(c->entries);
  free(c);
  d->algos = NULL;
}

/* ---- candidates -------------------------------------------------------------------- */

/* The three perf structs have the same fields under different algorithm enums. */
#define COPY_CANDIDATES(perf, returned, out, count)                     \
  do {                                                                  \
    int n_ = (returned) < MAX_CANDIDATES ? (returned) : MAX_CANDIDATES; \
    for (int i_ = 0; i_ < n_; i_++) {                                   \
      (out)[i_].algo = (int32_t)(perf)[i_].algo;                        \
      (out)[i_].status = (perf)[i_].status;                             \
      (out)[i_].time_ms = (perf)[i_].time;                              \
      (out)[i_].memory = (perf)[i_].memory;                             \
      (out)[i_].math = (perf)[i_].mathType;                             \
    }                                                                   \
    *(count) = n_ > 0 ? n_ : 0;                                         \
  } while (0)

/* cuDNN's heuristics, best expected first. */
static cnnb_status heuristic_candidates(gpu_device *d, const cnnb_node *node,
                                        const gpu_conv_descs *s, gpu_conv_dir dir, candidate *out,
                                        int *count) {
  int returned = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  *count = 0;
  if (dir == GPU_CONV_FORWARD) {
    cudnnConvolutionFwdAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnGetConvolutionForwardAlgorithm_v7(d->cudnn, s->x, s->w, s->conv[dir], s->y,
                                                    MAX_CANDIDATES, &returned, perf);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  } else if (dir == GPU_CONV_BACKWARD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnGetConvolutionBackwardDataAlgorithm_v7(d->cudnn, s->w, s->y, s->conv[dir], s->x,
                                                         MAX_CANDIDATES, &returned, perf);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnGetConvolutionBackwardFilterAlgorithm_v7(d->cudnn, s->x, s->y, s->conv[dir], s->w,
                                                           MAX_CANDIDATES, &returned, perf);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  }
  return gpu_cudnn(d, status, node, "convolution algorithm heuristics");
}

/* Buffers for timing: the operands of the direction (contents zero: their values do
 * not matter, but uninitialized reads would) and a workspace. */
typedef struct scratch {
  void *x, *w, *y, *workspace;
  size_t workspace_bytes;
} scratch;

static void scratch_free(scratch *b) {
  void *ptrs[] = {b->x, b->w, b->y, b->workspace};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++)
    if (ptrs[i]) cudaFree(ptrs[i]);
  memset(b, 0, sizeof *b);
}

static int scratch_one(gpu_device *d, void **ptr, size_t bytes) {
  if (!bytes) return 1;
  if (cudaMalloc(ptr, bytes) != cudaSuccess) {
    *ptr = NULL;
    (void)cudaGetLastError(); /* not sticky: clear it so no later launch check reports it */
    return 0;
  }
  return cudaMemsetAsync(*ptr, 0, bytes, d->stream) == cudaSuccess;
}

/* 1 when every buffer was allocated; 0 (nothing left allocated) when the GPU has no room
 * for them: the caller then keeps the heuristics' choice. */
static int scratch_alloc(gpu_device *d, const gpu_conv_descs *s, size_t workspace_bytes,
                         scratch *b) {
  size_t x = 0, w = 0, y = 0;
  memset(b, 0, sizeof *b);
  if (cudnnGetTensorSizeInBytes(s->x, &x) != CUDNN_STATUS_SUCCESS ||
      cudnnGetTensorSizeInBytes(s->y, &y) != CUDNN_STATUS_SUCCESS ||
      cudnnGetFilterSizeInBytes(s->w, &w) != CUDNN_STATUS_SUCCESS)
    return 0;
  b->workspace_bytes = workspace_bytes;
  if (scratch_one(d, &b->x, x) && scratch_one(d, &b->w, w) && scratch_one(d, &b->y, y) &&
      scratch_one(d, &b->workspace, workspace_bytes))
    return 1;
  (void)cudaGetLastError();
  scratch_free(b);
  return 0;
}

/* cuDNN's measurements on the scratch buffers, fastest first. cudnnFind*Ex runs every
 * algorithm it has for the problem; those needing more than b->workspace_bytes fail
 * there and are skipped by the caller. */
static cnnb_status timed_candidates(gpu_device *d, const cnnb_node *node, const gpu_conv_descs *s,
                                    gpu_conv_dir dir, const scratch *b, candidate *out,
                                    int *count) {
  int returned = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  *count = 0;
  if (dir == GPU_CONV_FORWARD) {
    cudnnConvolutionFwdAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnFindConvolutionForwardAlgorithmEx(d->cudnn, s->x, b->x, s->w, b->w, s->conv[dir],
                                                    s->y, b->y, MAX_CANDIDATES, &returned, perf,
                                                    b->workspace, b->workspace_bytes);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  } else if (dir == GPU_CONV_BACKWARD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnFindConvolutionBackwardDataAlgorithmEx(d->cudnn, s->w, b->w, s->y, b->y,
                                                         s->conv[dir], s->x, b->x, MAX_CANDIDATES,
                                                         &returned, perf, b->workspace,
                                                         b->workspace_bytes);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[MAX_CANDIDATES];
    status = cudnnFindConvolutionBackwardFilterAlgorithmEx(d->cudnn, s->x, b->x, s->y, b->y,
                                                           s->conv[dir], s->w, b->w, MAX_CANDIDATES,
                                                           &returned, perf, b->workspace,
                                                           b->workspace_bytes);
    if (status == CUDNN_STATUS_SUCCESS) COPY_CANDIDATES(perf, returned, out, count);
  }
  return gpu_cudnn(d, status, node, "convolution algorithm timing");
}

/* The exact workspace of `algo` with the math type already set on s->conv[dir]. */
static cudnnStatus_t workspace_size(gpu_device *d, const gpu_conv_descs *s, gpu_conv_dir dir,
                                    int32_t algo, size_t *bytes) {
  *bytes = 0;
  if (dir == GPU_CONV_FORWARD)
    return cudnnGetConvolutionForwardWorkspaceSize(d->cudnn, s->x, s->w, s->conv[dir], s->y,
                                                   (cudnnConvolutionFwdAlgo_t)algo, bytes);
  if (dir == GPU_CONV_BACKWARD_DATA)
    return cudnnGetConvolutionBackwardDataWorkspaceSize(d->cudnn, s->w, s->y, s->conv[dir], s->x,
                                                        (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(d->cudnn, s->x, s->y, s->conv[dir], s->w,
                                                        (cudnnConvolutionBwdFilterAlgo_t)algo,
                                                        bytes);
}

static int math_allowed(cudnnMathType_t asked, cudnnMathType_t got) {
  /* fp32 without TF32: only plain FMA. Otherwise any math type cuDNN offers (for fp32
   * with TF32 allowed and for fp16 / bf16 they are all permitted precisions). */
  return asked != CUDNN_FMA_MATH || got == CUDNN_FMA_MATH;
}

/* The first usable candidate (in the given order) within `cap` workspace bytes, with
 * s->conv[dir]'s math type set to it; -1 when none. */
/* cuDNN's non-fused Winograd algorithm of direction `dir` (tf's --winograd_nonfused,
 * TF_ENABLE_WINOGRAD_NONFUSED: false keeps them out). */
static int winograd_nonfused(gpu_conv_dir dir, int32_t algo) {
  if (dir == GPU_CONV_FORWARD) return algo == (int32_t)CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
  if (dir == GPU_CONV_BACKWARD_DATA)
    return algo == (int32_t)CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
  return algo == (int32_t)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

static int pick(gpu_device *d, const gpu_conv_key *key, gpu_conv_descs *s, gpu_conv_dir dir,
                const candidate *c, int count, size_t cap, gpu_conv_algo *out) {
  for (int i = 0; i < count; i++) {
    if (c[i].status != CUDNN_STATUS_SUCCESS || c[i].memory > cap ||
        !math_allowed((cudnnMathType_t)key->math, c[i].math) ||
        (!d->winograd_nonfused && winograd_nonfused(dir, c[i].algo)))
      continue;
    size_t bytes = 0;
    if (cudnnSetConvolutionMathType(s->conv[dir], c[i].math) != CUDNN_STATUS_SUCCESS ||
        workspace_size(d, s, dir, c[i].algo, &bytes) != CUDNN_STATUS_SUCCESS)
      continue;
    if (bytes < c[i].memory) bytes = c[i].memory;
    if (bytes > cap) continue;
    out->algo = c[i].algo;
    out->math = c[i].math;
    out->workspace = bytes;
    return i;
  }
  /* Leave the descriptor as the key asked. */
  (void)cudnnSetConvolutionMathType(s->conv[dir], (cudnnMathType_t)key->math);
  return -1;
}

/* Autotune: time the candidates on scratch buffers sized for the largest workspace any
 * heuristic candidate within the limit needs. 1 and *out set when a timed candidate was
 * taken; 0 when timing was impossible (no memory for the scratch) or gave nothing
 * usable, *out untouched then; an error status only for a failing cuDNN call. */
static cnnb_status choose_timed(gpu_device *d, const cnnb_node *node, const gpu_conv_key *key,
                                gpu_conv_descs *s, gpu_conv_dir dir, const candidate *heuristic,
                                int heuristic_count, gpu_conv_algo *out, float *time_ms,
                                int *taken) {
  *taken = 0;
  size_t workspace = 0;
  for (int i = 0; i < heuristic_count; i++)
    if (heuristic[i].status == CUDNN_STATUS_SUCCESS && heuristic[i].memory <= d->workspace_limit &&
        heuristic[i].memory > workspace)
      workspace = heuristic[i].memory;
  scratch b;
  if (!scratch_alloc(d, s, workspace, &b)) {
    cnnb_log(d->ctx, CNNB_LOG_WARN,
             "cuda: conv2d '%s' %s: no GPU memory to time algorithms (%zu bytes of workspace); "
             "taking cuDNN's heuristic choice",
             node->name, dir_names[dir], workspace);
    return CNNB_OK;
  }
  candidate timed[MAX_CANDIDATES];
  int count = 0;
  cnnb_status st = timed_candidates(d, node, s, dir, &b, timed, &count);
  /* The scratch goes before anything else: cudaFree waits for the timing runs. */
  scratch_free(&b);
  if (st) {
    /* Timing is an optimization: cuDNN refusing to time a shape (a grouped half
     * convolution, say) or running out of memory for it (the scratch is freed by now)
     * still leaves its heuristic choice. */
    cnnb_log(d->ctx, CNNB_LOG_WARN,
             "cuda: conv2d '%s' %s: timing the algorithms failed (%s); "
             "taking cuDNN's heuristic choice",
             node->name, dir_names[dir], cnnb_error_message(d->ctx));
    cnnb_clear_error(d->ctx);
    return CNNB_OK;
  }
  size_t cap = workspace < d->workspace_limit ? workspace : d->workspace_limit;
  int i = pick(d, key, s, dir, timed, count, cap, out);
  if (i < 0) return CNNB_OK;
  *time_ms = timed[i].time_ms;
  *taken = 1;
  return CNNB_OK;
}

/* ---- the cache file ---------------------------------------------------------------- */

/* How many algorithms this cuDNN has in direction `dir`. */
static int32_t algo_count(gpu_conv_dir dir) {
  if (dir == GPU_CONV_FORWARD) return (int32_t)CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  if (dir == GPU_CONV_BACKWARD_DATA) return (int32_t)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return (int32_t)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static int math_known(int32_t m) {
  return m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH ||
         m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || m == CUDNN_FMA_MATH;
}

/* A choice read from the cache file, checked against this run as a fresh candidate is
 * (the file may have been edited, or copied from another machine): NULL, *out set and
 * s->conv[dir]'s math type set to it; else why it is not taken, the descriptor's math
 * type back to the key's. */
static const char *file_choice_check(gpu_device *d, const gpu_conv_key *key, gpu_conv_descs *s,
                                     gpu_conv_dir dir, const gpu_algo_file_choice *c,
                                     gpu_conv_algo *out) {
  const char *why = NULL;
  size_t bytes = 0;
  if (c->algo >= algo_count(dir)) why = "an algorithm this cuDNN does not have";
  else if (!math_known(c->math)) why = "a math type this cuDNN does not have";
  else if (!math_allowed((cudnnMathType_t)key->math, (cudnnMathType_t)c->math))
    why = "a math type this run does not allow";
  else if (!d->winograd_nonfused && winograd_nonfused(dir, c->algo))
    why = "a non-fused Winograd algorithm, which --nowinograd_nonfused passes over";
  else if (cudnnSetConvolutionMathType(s->conv[dir], (cudnnMathType_t)c->math) !=
               CUDNN_STATUS_SUCCESS ||
           workspace_size(d, s, dir, c->algo, &bytes) != CUDNN_STATUS_SUCCESS)
    why = "cuDNN does not offer it for this convolution";
  else if (c->workspace > d->workspace_limit || bytes > d->workspace_limit)
    why = "its workspace is over the --cudnn_workspace_mb limit";
  if (why) {
    (void)cudnnSetConvolutionMathType(s->conv[dir], (cudnnMathType_t)key->math);
    return why;
  }
  out->algo = c->algo;
  out->math = (cudnnMathType_t)c->math;
  /* What the timing saw it use, or what cuDNN says now: whichever is more. */
  out->workspace = bytes > c->workspace ? bytes : (size_t)c->workspace;
  return NULL;
}

static gpu_algo_file_key file_key_of(const gpu_device *d, const gpu_conv_key *key,
                                     gpu_conv_dir dir) {
  gpu_algo_file_key k;
  memset(&k, 0, sizeof k);
  k.conv = *key;
  k.dir = (int32_t)dir;
  k.winograd_nonfused = d->winograd_nonfused ? 1 : 0;
  k.workspace_limit = d->workspace_limit;
  return k;
}

/* ---- choosing ----------------------------------------------------------------------- */

cnnb_status gpu_conv_algo_choose(gpu_device *d, const cnnb_node *node, const gpu_conv_key *key,
                                 gpu_conv_descs *s, gpu_conv_dir dir, gpu_conv_algo *out) {
  cnnb_status st;
  const cache_entry *hit = cache_find(d, key, dir);
  if (hit) {
    *out = hit->algo;
    if ((st = gpu_cudnn(d, cudnnSetConvolutionMathType(s->conv[dir], out->math), node,
                        "convolution math type")))
      return st;
    if (hit->time_ms >= 0.0f)
      cnnb_log(d->ctx, CNNB_LOG_DEBUG,
               "cuda: conv2d '%s' %s: algo %d, %s math, workspace %zu bytes, %.3f ms (cached, "
               "timed)",
               node->name, dir_names[dir], (int)out->algo, math_name(out->math), out->workspace,
               (double)hit->time_ms);
    else
      cnnb_log(d->ctx, CNNB_LOG_DEBUG,
               "cuda: conv2d '%s' %s: algo %d, %s math, workspace %zu bytes (cached, heuristic)",
               node->name, dir_names[dir], (int)out->algo, math_name(out->math), out->workspace);
    return gpu_workspace_reserve(d, out->workspace, node);
  }

  if ((st = cache_init(d, node))) return st;
  gpu_algo_file *file = d->algos->file; /* only under --cudnn_autotune */
  const gpu_algo_file_key file_key = file_key_of(d, key, dir);
  gpu_algo_file_choice cached;
  if (file && gpu_algo_file_find(file, &file_key, &cached)) {
    const char *why = file_choice_check(d, key, s, dir, &cached, out);
    if (!why) {
      cnnb_log(d->ctx, CNNB_LOG_DEBUG,
               "cuda: conv2d '%s' %s: algo %d, %s math, workspace %zu bytes, %.3f ms when timed "
               "(cache hit, %s)",
               node->name, dir_names[dir], (int)out->algo, math_name(out->math), out->workspace,
               cached.time_ms, gpu_algo_file_path(file));
      cache_entry e;
      memset(&e, 0, sizeof e);
      e.key = *key;
      e.dir = (int32_t)dir;
      e.algo = *out;
      e.time_ms = (float)cached.time_ms;
      if ((st = cache_add(d, node, &e))) return st;
      d->algos->from_file++;
      return gpu_workspace_reserve(d, out->workspace, node);
    }
    cnnb_log(d->ctx, CNNB_LOG_DEBUG,
             "cuda: conv2d '%s' %s: algo %d in %s not taken (%s): choosing again", node->name,
             dir_names[dir], (int)cached.algo, gpu_algo_file_path(file), why);
  }

  candidate heuristic[MAX_CANDIDATES];
  int count = 0;
  if ((st = heuristic_candidates(d, node, s, dir, heuristic, &count))) return st;
  float time_ms = -1.0f;
  int timed = 0;
  if (d->autotune &&
      (st = choose_timed(d, node, key, s, dir, heuristic, count, out, &time_ms, &timed)))
    return st;
  if (!timed && pick(d, key, s, dir, heuristic, count, d->workspace_limit, out) < 0)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: node '%s' [%d, %d, %d, %d]: no cuDNN %s convolution algorithm fits "
                      "the workspace limit of %zu bytes in %s math (%d candidates)",
                      node->name, node->shape.n, node->shape.c, node->shape.h, node->shape.w,
                      dir_names[dir], d->workspace_limit, math_name((cudnnMathType_t)key->math),
                      count);

  if (timed)
    cnnb_log(d->ctx, CNNB_LOG_DEBUG,
             "cuda: conv2d '%s' %s: algo %d, %s math, workspace %zu bytes, %.3f ms (timed)",
             node->name, dir_names[dir], (int)out->algo, math_name(out->math), out->workspace,
             (double)time_ms);
  else
    cnnb_log(d->ctx, CNNB_LOG_DEBUG,
             "cuda: conv2d '%s' %s: algo %d, %s math, workspace %zu bytes (heuristic)", node->name,
             dir_names[dir], (int)out->algo, math_name(out->math), out->workspace);

  cache_entry e;
  memset(&e, 0, sizeof e);
  e.key = *key;
  e.dir = (int32_t)dir;
  e.algo = *out;
  e.time_ms = time_ms;
  if ((st = cache_add(d, node, &e))) return st;
  if (timed) {
    /* The choice the next process on this GPU takes instead of timing again. */
    const gpu_algo_file_choice choice = {.algo = out->algo,
                                         .math = (int32_t)out->math,
                                         .workspace = out->workspace,
                                         .time_ms = time_ms};
    gpu_algo_file_append(file, &file_key, &choice);
    d->algos->timed++;
  }
  return gpu_workspace_reserve(d, out->workspace, node);
}
