/* safetensors.h — the safetensors file format (https://huggingface.co/docs/safetensors),
 * which checkpoints use so PyTorch (safetensors.torch.load_file) and Hugging Face tools
 * open them: 8 bytes little-endian N, N bytes of a JSON header, then the tensors' raw
 * little-endian bytes, back to back. The header maps each tensor's name to
 * {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (offsets relative to the
 * end of the header) and may hold "__metadata__": a map of string to string.
 *
 * Writing is atomic: a temporary file in the same directory, written, fsync'ed, renamed
 * over the target, then the directory fsync'ed, so a crash at any point leaves either
 * the old file or the whole new one. Reading checks everything a torn or foreign file
 * can get wrong before a byte is used, and names the file and what is wrong: the size
 * against the header, the JSON (parsed with jansson, never by hand), each entry's dtype,
 * shape, and offsets (inside the data, matching dtype x shape, no overlaps, no gaps, as
 * the format requires). Host-internal. */
#ifndef CNNB_SAFETENSORS_H
#define CNNB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <cnnb/ctx.h>

#define CNNB_ST_MAX_DIMS 8

typedef enum cnnb_st_dtype {
  CNNB_ST_F32 = 1, /* "F32" */
  CNNB_ST_I64 = 2, /* "I64": torchvision's batch norm num_batches_tracked */
  CNNB_ST_F16 = 3, /* "F16" */
  CNNB_ST_BF16 = 4 /* "BF16" */
} cnnb_st_dtype;

/* One tensor to write, or one read (then data points into the opened file's memory, valid
 * until close, and not necessarily aligned to its element size: the format does not
 * promise it, so copy with memcpy rather than casting). */
typedef struct cnnb_st_tensor {
  const char *name;
  uint32_t dtype; /* cnnb_st_dtype */
  int32_t ndims;  /* 0: a scalar */
  int64_t dims[CNNB_ST_MAX_DIMS];
  const void *data; /* little-endian, dtype-sized elements, row-major */
  size_t bytes;     /* element size x product of dims */
} cnnb_st_tensor;

/* "__metadata__" entries. */
typedef struct cnnb_st_meta {
  const char *key, *value;
} cnnb_st_meta;

/* Bytes of one element of dtype; 0 for an unknown one. */
size_t cnnb_st_dtype_size(uint32_t dtype);

/* Writes `path` atomically (above). Names must be unique and non-empty; tensors are laid
 * out in the order given. Errors name the path and the failing call (errno's text). */
cnnb_status cnnb_safetensors_write(cnnb_ctx *ctx, const char *path, const cnnb_st_tensor *tensors,
                                   size_t num_tensors, const cnnb_st_meta *meta, size_t num_meta);

typedef struct cnnb_safetensors cnnb_safetensors;

/* Reads and checks the whole file (above). CNNB_EIO when it cannot be read, CNNB_EINVAL
 * when it is not a valid safetensors file, with the path and the reason in ctx. */
cnnb_status cnnb_safetensors_open(cnnb_ctx *ctx, const char *path, cnnb_safetensors **out);
/* The same checks on a file's bytes already in memory (copied), `name` standing for the
 * path in messages: for tests and the fuzz target (tests/fuzz/fuzz_safetensors.c). */
cnnb_status cnnb_safetensors_open_bytes(cnnb_ctx *ctx, const char *name, const void *bytes,
                                        size_t size, cnnb_safetensors **out);
void cnnb_safetensors_close(cnnb_safetensors *f);

/* The same checks as open, reading only the size field and the header and taking the
 * file's size from the file system: whether `path` reads back whole as far as the format
 * can tell (the data's bytes carry no checksum to check), at the cost of its header. */
cnnb_status cnnb_safetensors_check_file(cnnb_ctx *ctx, const char *path);

/* Tensors in file order (by data offset); i in [0, count). */
size_t cnnb_safetensors_count(const cnnb_safetensors *f);
const cnnb_st_tensor *cnnb_safetensors_tensor(const cnnb_safetensors *f, size_t i);
/* The tensor named `name`; NULL when absent. */
const cnnb_st_tensor *cnnb_safetensors_find(const cnnb_safetensors *f, const char *name);
/* A "__metadata__" value; NULL when absent. */
const char *cnnb_safetensors_meta(const cnnb_safetensors *f, const char *key);

#endif
