/* algo_cache_file.h — the cudnn autotune cache (--cudnn_autotune_cache): a text file that
 * keeps the convolution algorithms cudnnFind*AlgorithmEx chose, so that the next process
 * on the same GPU (every row of bench/gpu_check.sh, every child of cnnbench-tune, every
 * rank of an mpirun job) takes them instead of timing every candidate again.
 *
 * Plain C without CUDA (the host test unit_cuda_algo_cache runs it on any machine):
 * conv_algo.c fills the GPU's identity and the keys from cudaDeviceProp and cuDNN.
 *
 * The file (format 1), tab-separated lines:
 *   cnnbench-cudnn-autotune-cache <TAB> 1          the first line: what it is, format
 *   # ...                                          comments (the column names)
 *   <identity> <TAB> <key> <TAB> <choice>          one line per choice, 29 fields:
 *     identity: GPU name, compute capability ("9.0"), total memory in MiB, cuDNN
 *               version (cudnnGetVersion), this device's version (GPU_DEVICE_VERSION);
 *     key:      direction (forward, backward_data, backward_filter), workspace limit in
 *               bytes, --winograd_nonfused (0/1), then gpu_conv_key's 17 fields in order;
 *     choice:   the algorithm (cuDNN's enum value for the direction), its math type
 *               (cudnnMathType_t), its workspace in bytes and the measured time in ms
 *               (for people; nothing reads it back but the debug log).
 * A file holds the choices of every GPU that shares it; a reader keeps its own GPU's
 * lines, and a later line of the same key wins over an earlier one.
 *
 * Safety (the cache is an optimization: nothing about it stops a run):
 *  - processes append at once (mpirun ranks, tuner children): each line goes out in one
 *    write(2) on an O_APPEND descriptor, shorter than PIPE_BUF, so lines do not interleave
 *    on a local file system; a reader skips every line it cannot parse (a torn line from
 *    a full disk, a line of another format), counting them in one debug message;
 *  - nothing is overwritten, truncated or deleted: the file only grows, and is written
 *    only when its first line is this header (or it is empty / new);
 *  - what is not a regular file (a FIFO, a device, a directory), a file over
 *    GPU_ALGO_FILE_MAX_BYTES, a file of another format or version, or one that cannot be
 *    read is refused with one warning: the run autotunes as without a cache. A file that
 *    can be read but not written gives its choices and one warning at the first choice
 *    it cannot keep. */
#ifndef CNNB_GPU_ALGO_CACHE_FILE_H
#define CNNB_GPU_ALGO_CACHE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <cnnb/cnnb.h>

/* Every parameter of one convolution (conv_algo.h's key; defined here because the cache
 * file's columns follow its fields, and this header needs no CUDA). Compared bytewise:
 * build it zeroed (all fields are int32_t, so it has no padding either). A new field is
 * a new column: raise GPU_ALGO_FILE_FORMAT and add its name to the column list
 * (algo_cache_file.c checks the count at compile time). */
typedef struct gpu_conv_key {
  int32_t n, c, h, w;   /* the input cuDNN reads (already padded when the graph's
                           pads were asymmetric) */
  int32_t k, r, s;      /* filters [K, C / groups, R, S] */
  int32_t pad_h, pad_w; /* symmetric, as cuDNN pads */
  int32_t stride_h, stride_w;
  int32_t dilation_h, dilation_w;
  int32_t groups;
  int32_t data_type; /* cudnnDataType_t of x, w, y (compute is always float) */
  int32_t format;    /* cudnnTensorFormat_t of x, y and the filter */
  int32_t math;      /* cudnnMathType_t asked for (gpu_conv_math) */
} gpu_conv_key;

#define GPU_ALGO_FILE_FORMAT 1
/* The first line of every cache file, without its newline. */
#define GPU_ALGO_FILE_MAGIC "cnnbench-cudnn-autotune-cache"
/* The most bytes a cache file may have to be read (a few hundred bytes a line: tens of
 * thousands of choices). */
#define GPU_ALGO_FILE_MAX_BYTES ((size_t)16 << 20)
/* --cudnn_autotune_cache's default: the file under the user's cache directory
 * (gpu_algo_file_default_path). */
#define GPU_ALGO_FILE_AUTO "auto"
/* The directions, as gpu_conv_dir numbers them (conv_algo.c checks the count). */
#define GPU_ALGO_FILE_DIRS 3

/* Where a choice was made: records of another identity are someone else's. */
typedef struct gpu_algo_file_gpu {
  const char *name; /* cudaDeviceProp.name; tabs and control characters are
                       written (and compared) as spaces */
  int32_t cc_major, cc_minor;
  uint64_t memory_mib;    /* cudaDeviceProp.totalGlobalMem >> 20 */
  uint64_t cudnn_version; /* cudnnGetVersion() */
  const char *build;      /* GPU_DEVICE_VERSION: a new device may choose differently */
} gpu_algo_file_gpu;

/* What a choice answers. */
typedef struct gpu_algo_file_key {
  gpu_conv_key conv;
  int32_t dir;               /* gpu_conv_dir: 0 forward, 1 backward data, 2 backward filter */
  int32_t winograd_nonfused; /* --winograd_nonfused: whether those algorithms could win */
  uint64_t workspace_limit;  /* bytes: a choice within a larger limit may not fit a smaller */
} gpu_algo_file_key;

typedef struct gpu_algo_file_choice {
  int32_t algo;       /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t by direction */
  int32_t math;       /* cudnnMathType_t it runs with */
  uint64_t workspace; /* bytes it needs */
  double time_ms;     /* as measured when chosen */
} gpu_algo_file_choice;

typedef struct gpu_algo_file_stats {
  size_t records;   /* lines of this identity read (a key repeated counts each time) */
  size_t others;    /* well-formed lines of other GPUs or versions, left alone */
  size_t bad_lines; /* lines that did not parse (torn, unknown), skipped */
  size_t appended;  /* lines this handle wrote */
  int readable;     /* 1: the file was read, or did not exist yet */
  int writable;     /* 1: choices are still appended (0 after a refusal or a failed write) */
} gpu_algo_file_stats;

typedef struct gpu_algo_file gpu_algo_file;

/* The file --cudnn_autotune_cache=auto names: $XDG_CACHE_HOME/cnnbench/cudnn_autotune.tsv
 * when XDG_CACHE_HOME is an absolute path (the XDG spec ignores a relative one), else
 * $HOME/.cache/cnnbench/cudnn_autotune.tsv. 0 with the path in buf; -1 when neither
 * variable gives one, or it does not fit `size`. */
int gpu_algo_file_default_path(char *buf, size_t size);

/* Reads `path`'s choices for `gpu` (the file is opened once, here; a missing file is an
 * empty cache). Problems are logged through ctx (one warning, "cudnn autotune cache <path>:
 * ...") and leave a handle that finds nothing and writes nothing; skipped lines,
 * one debug line. `create_dirs`: a missing parent directory is made (mode 0700, as the
 * XDG spec asks) at the first append: for the default path, never for one the user named.
 * NULL only when out of memory. */
gpu_algo_file *gpu_algo_file_open(cnnb_ctx *ctx, const char *path, int create_dirs,
                                  const gpu_algo_file_gpu *gpu);

/* The latest choice read or appended for `key`: 1 and *out filled, or 0. The caller
 * still checks it against the run (its workspace against the limit, cuDNN accepting it):
 * the file may have been edited. */
int gpu_algo_file_find(const gpu_algo_file *f, const gpu_algo_file_key *key,
                       gpu_algo_file_choice *out);

/* Keeps a new choice: appends its line (creating the file, and with create_dirs its
 * directory, on the first one) and remembers it for gpu_algo_file_find. A failure is one
 * warning, after which nothing more is written; the run goes on either way. */
void gpu_algo_file_append(gpu_algo_file *f, const gpu_algo_file_key *key,
                          const gpu_algo_file_choice *choice);

const char *gpu_algo_file_path(const gpu_algo_file *f);
void gpu_algo_file_stats_of(const gpu_algo_file *f, gpu_algo_file_stats *out);

/* Closes the file and frees the handle (NULL: nothing). */
void gpu_algo_file_close(gpu_algo_file *f);

#endif
