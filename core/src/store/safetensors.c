/* safetensors.c — writing and checking safetensors files (safetensors.h). The header is
 * built and parsed with jansson; every number from a file is checked before it is used
 * (sizes against the file, offsets against the data, element counts for overflow), so a
 * torn or hostile file is an error message, never a read out of bounds. */
#define _POSIX_C_SOURCE 200809L
#include "store/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/atomic_file.h"

/* The reference implementation's limit (safetensors' MAX_HEADER_SIZE): a larger header is
 * a foreign or corrupt file, not a checkpoint, and is refused before any allocation. */
#define MAX_HEADER_BYTES 100000000u
#define METADATA_KEY "__metadata__"

static const struct {
  uint32_t dtype;
  const char *name;
  size_t size;
} dtypes[] = {{CNNB_ST_F32, "F32", 4},
              {CNNB_ST_I64, "I64", 8},
              {CNNB_ST_F16, "F16", 2},
              {CNNB_ST_BF16, "BF16", 2}};
#define NUM_DTYPES (sizeof dtypes / sizeof dtypes[0])

size_t cnnb_st_dtype_size(uint32_t dtype) {
  for (size_t i = 0; i < NUM_DTYPES; i++)
    if (dtypes[i].dtype == dtype) return dtypes[i].size;
  return 0;
}

static const char *dtype_name(uint32_t dtype) {
  for (size_t i = 0; i < NUM_DTYPES; i++)
    if (dtypes[i].dtype == dtype) return dtypes[i].name;
  return NULL;
}

static uint32_t dtype_from_name(const char *name) {
  for (size_t i = 0; i < NUM_DTYPES; i++)
    if (strcmp(dtypes[i].name, name) == 0) return dtypes[i].dtype;
  return 0;
}

/* Bytes of ndims x dims of elements of `size` bytes; false on a negative dim or overflow. */
static bool tensor_bytes(size_t size, int32_t ndims, const int64_t *dims, uint64_t *out) {
  uint64_t n = size;
  for (int32_t d = 0; d < ndims; d++) {
    if (dims[d] < 0 || __builtin_mul_overflow(n, (uint64_t)dims[d], &n)) return false;
  }
  *out = n;
  return true;
}

/* ---- writing ------------------------------------------------------------------ */

static cnnb_status check_tensor(cnnb_ctx *ctx, const char *path, const cnnb_st_tensor *t) {
  if (!t->name || !*t->name)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: a tensor without a name", path);
  if (strcmp(t->name, METADATA_KEY) == 0)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: \"%s\" is reserved, not a tensor name", path,
                      METADATA_KEY);
  size_t size = cnnb_st_dtype_size(t->dtype);
  if (!size)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': unknown dtype %u", path, t->name,
                      (unsigned)t->dtype);
  if (t->ndims < 0 || t->ndims > CNNB_ST_MAX_DIMS)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': %d dims (0 to %d)", path, t->name,
                      (int)t->ndims, CNNB_ST_MAX_DIMS);
  uint64_t bytes;
  if (!tensor_bytes(size, t->ndims, t->dims, &bytes))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': a negative or too large dim", path,
                      t->name);
  if (bytes != t->bytes)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': %zu bytes given, its dtype and shape need %" PRIu64, path,
                      t->name, t->bytes, bytes);
  if (bytes && !t->data)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': no data", path, t->name);
  return CNNB_OK;
}

/* The header as the reference writer lays it out: "__metadata__" first, compact JSON,
 * padded with spaces to a multiple of 8 bytes so the data (and, since every dtype here is
 * at most 8 bytes wide and tensors are whole elements, each tensor that follows an 8-byte
 * multiple) starts aligned. */
static cnnb_status build_header(cnnb_ctx *ctx, const char *path, const cnnb_st_tensor *tensors,
                                size_t num_tensors, const cnnb_st_meta *meta, size_t num_meta,
                                char **out, size_t *out_size) {
  cnnb_status st = CNNB_OK;
  json_t *root = json_object();
  if (!root) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
  if (num_meta) {
    json_t *m = json_object();
    if (!m || json_object_set_new(root, METADATA_KEY, m) != 0) goto oom;
    for (size_t i = 0; i < num_meta; i++) {
      if (!meta[i].key || !meta[i].value) {
        st = cnnb_error(ctx, CNNB_EINVAL, "%s: metadata entry %zu without a key or value", path, i);
        goto done;
      }
      if (json_object_get(m, meta[i].key)) {
        st = cnnb_error(ctx, CNNB_EINVAL, "%s: metadata key '%s' given twice", path, meta[i].key);
        goto done;
      }
      /* json_string refuses text that is not UTF-8: JSON cannot hold it. */
      json_t *v = json_string(meta[i].value);
      if (!v || json_object_set_new(m, meta[i].key, v) != 0) {
        st = cnnb_error(ctx, CNNB_EINVAL, "%s: metadata '%s': key or value is not UTF-8 text", path,
                        meta[i].key);
        goto done;
      }
    }
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < num_tensors; i++) {
    const cnnb_st_tensor *t = &tensors[i];
    if ((st = check_tensor(ctx, path, t)) != CNNB_OK) goto done;
    if (json_object_get(root, t->name)) {
      st = cnnb_error(ctx, CNNB_EINVAL, "%s: tensor name '%s' given twice", path, t->name);
      goto done;
    }
    json_t *shape = json_array();
    json_t *entry = json_object();
    if (!shape || !entry) {
      json_decref(shape);
      json_decref(entry);
      goto oom;
    }
    for (int32_t d = 0; d < t->ndims; d++)
      if (json_array_append_new(shape, json_integer(t->dims[d])) != 0) {
        json_decref(shape);
        json_decref(entry);
        goto oom;
      }
    if (json_object_set_new(entry, "dtype", json_string(dtype_name(t->dtype))) != 0 ||
        json_object_set_new(entry, "shape", shape) != 0 ||
        json_object_set_new(entry, "data_offsets",
                            json_pack("[II]", (json_int_t)offset,
                                      (json_int_t)(offset + t->bytes))) != 0) {
      json_decref(entry);
      goto oom;
    }
    if (json_object_set_new(root, t->name, entry) != 0) {
      st = cnnb_error(ctx, CNNB_EINVAL, "%s: tensor name '%s' is not UTF-8 text", path, t->name);
      goto done;
    }
    offset += t->bytes;
  }
  char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (!text) goto oom;
  size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
  char *header = realloc(text, padded);
  if (!header) {
    free(text);
    goto oom;
  }
  memset(header + len, ' ', padded - len);
  *out = header;
  *out_size = padded;
  goto done;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory building the header", path);
done:
  json_decref(root);
  return st;
}

cnnb_status cnnb_safetensors_write(cnnb_ctx *ctx, const char *path, const cnnb_st_tensor *tensors,
                                   size_t num_tensors, const cnnb_st_meta *meta, size_t num_meta) {
  char *header = NULL;
  size_t header_size = 0;
  cnnb_status st = build_header(ctx, path, tensors, num_tensors, meta, num_meta, &header,
                                &header_size);
  if (st != CNNB_OK) return st;
  cnnb_atomic_part *parts = malloc((num_tensors + 2) * sizeof *parts);
  if (!parts) {
    free(header);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
  }
  unsigned char size_le[8];
  for (int i = 0; i < 8; i++) size_le[i] = (unsigned char)((uint64_t)header_size >> (8 * i));
  parts[0] = (cnnb_atomic_part){size_le, 8};
  parts[1] = (cnnb_atomic_part){header, header_size};
  for (size_t i = 0; i < num_tensors; i++)
    parts[i + 2] = (cnnb_atomic_part){tensors[i].data, tensors[i].bytes};
  st = cnnb_atomic_write(ctx, path, parts, num_tensors + 2);
  free(parts);
  free(header);
  return st;
}

/* ---- reading ------------------------------------------------------------------ */

struct cnnb_safetensors {
  unsigned char *bytes;    /* the whole file */
  json_t *header;          /* owns the names the tensors point to */
  json_t *meta;            /* "__metadata__" or NULL */
  cnnb_st_tensor *tensors; /* in file order */
  size_t count;
  const cnnb_st_tensor **by_name; /* sorted by name, for find() */
};

/* A tensor's place in the data, for putting the entries in file order. */
typedef struct span {
  uint64_t begin, end;
  size_t index; /* in header order: ties (empty tensors) keep it */
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1; /* an empty tensor before its neighbour */
  return x->index < y->index ? -1 : x->index > y->index;
}
static int cmp_name(const void *a, const void *b) {
  return strcmp((*(const cnnb_st_tensor *const *)a)->name,
                (*(const cnnb_st_tensor *const *)b)->name);
}

static cnnb_status read_file(cnnb_ctx *ctx, const char *path, unsigned char **out,
                             size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return cnnb_error(ctx, CNNB_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0) {
    int e = errno;
    fclose(f);
    return cnnb_error(ctx, CNNB_EIO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    fclose(f);
    return cnnb_error(ctx, CNNB_EIO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  unsigned char *buf = malloc(size ? size : 1);
  if (!buf) {
    fclose(f);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory for its %zu bytes", path, size);
  }
  size_t got = fread(buf, 1, size, f);
  int err = ferror(f) ? errno : 0;
  fclose(f);
  if (got != size) {
    free(buf);
    /* A file shrinking under us is a writer that is not atomic: as good as torn. */
    return cnnb_error(ctx, CNNB_EIO, "%s: read %zu of its %zu bytes: %s", path, got, size,
                      err ? strerror(err) : "the file shrank while being read");
  }
  *out = buf;
  *out_size = size;
  return CNNB_OK;
}

/* Reads a JSON integer >= 0 into *out; false otherwise. */
static bool get_uint(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

/* Checks one header entry and fills *t (its data set later). */
static cnnb_status parse_entry(cnnb_ctx *ctx, const char *path, const char *name,
                               const json_t *entry, uint64_t data_size, cnnb_st_tensor *t,
                               uint64_t *begin) {
  if (!*name) return cnnb_error(ctx, CNNB_EINVAL, "%s: a tensor with an empty name", path);
  if (!json_is_object(entry))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': its entry is not a JSON object", path,
                      name);
  const json_t *dtype = json_object_get(entry, "dtype");
  const json_t *shape = json_object_get(entry, "shape");
  const json_t *offsets = json_object_get(entry, "data_offsets");
  if (!json_is_string(dtype))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': no \"dtype\" string", path, name);
  t->name = name;
  t->dtype = dtype_from_name(json_string_value(dtype));
  if (!t->dtype)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': dtype \"%s\" is not one cnnbench reads (F32, I64, F16, "
                      "BF16)",
                      path, name, json_string_value(dtype));
  if (!json_is_array(shape))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': no \"shape\" array", path, name);
  if (json_array_size(shape) > CNNB_ST_MAX_DIMS)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': %zu dims, more than %d", path, name,
                      json_array_size(shape), CNNB_ST_MAX_DIMS);
  t->ndims = (int32_t)json_array_size(shape);
  for (int32_t d = 0; d < t->ndims; d++) {
    uint64_t v;
    if (!get_uint(json_array_get(shape, (size_t)d), &v) || v > INT64_MAX)
      return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': shape dim %d is not an integer >= 0",
                        path, name, (int)d);
    t->dims[d] = (int64_t)v;
  }
  uint64_t b, e, bytes;
  if (!json_is_array(offsets) || json_array_size(offsets) != 2 ||
      !get_uint(json_array_get(offsets, 0), &b) || !get_uint(json_array_get(offsets, 1), &e) ||
      e < b)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': \"data_offsets\" is not [begin, end] with "
                      "0 <= begin <= end",
                      path, name);
  if (!tensor_bytes(cnnb_st_dtype_size(t->dtype), t->ndims, t->dims, &bytes))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: tensor '%s': its shape's size overflows", path, name);
  if (bytes != e - b)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64
                      " bytes, but its dtype and shape need %" PRIu64,
                      path, name, b, e, e - b, bytes);
  if (e > data_size)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                      "] run past the %" PRIu64 " bytes of data (a truncated file?)",
                      path, name, b, e, data_size);
  t->bytes = (size_t)bytes;
  *begin = b;
  return CNNB_OK;
}

static cnnb_status parse_metadata(cnnb_ctx *ctx, const char *path, const json_t *meta) {
  if (!json_is_object(meta))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: \"%s\" is not a JSON object", path, METADATA_KEY);
  const char *key;
  const json_t *value;
  json_object_foreach((json_t *)meta, key, value) {
    if (!json_is_string(value))
      return cnnb_error(ctx, CNNB_EINVAL, "%s: \"%s\" entry '%s' is not a string", path,
                        METADATA_KEY, key);
  }
  return CNNB_OK;
}

/* Everything about the file except reading it: the header, each entry, and the entries
 * against each other and the data. `size` is the file's; f->bytes holds all of it when
 * `with_data`, else only the size field and the header (cnnb_safetensors_check_file), and
 * the tensors' data pointers stay NULL. */
static cnnb_status parse(cnnb_ctx *ctx, const char *path, cnnb_safetensors *f, size_t size,
                         bool with_data) {
  if (size < 8)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: %zu bytes, too short for a safetensors file's 8-byte header size", path,
                      size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | f->bytes[i];
  if (n > MAX_HEADER_BYTES)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: header size %" PRIu64 " bytes exceeds safetensors' limit of %u: "
                      "not a safetensors file",
                      path, n, MAX_HEADER_BYTES);
  if (n > size - 8)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: header size %" PRIu64 " bytes, but the file has only %zu after the "
                      "size field (a truncated file?)",
                      path, n, size - 8);
  const char *text = (const char *)f->bytes + 8;
  /* The reference reader insists on it, so a file it opens and one this opens agree. */
  if (n == 0 || text[0] != '{')
    return cnnb_error(ctx, CNNB_EINVAL, "%s: the header does not start with '{'", path);
  json_error_t jerr;
  f->header = json_loadb(text, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (!f->header)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: header is not valid JSON (line %d, column %d): %s",
                      path, jerr.line, jerr.column, jerr.text);
  if (!json_is_object(f->header))
    return cnnb_error(ctx, CNNB_EINVAL, "%s: header is not a JSON object", path);

  uint64_t data_size = (uint64_t)size - 8 - n;
  size_t entries = json_object_size(f->header);
  cnnb_st_tensor *parsed = calloc(entries ? entries : 1, sizeof *parsed);
  span *spans = calloc(entries ? entries : 1, sizeof *spans);
  f->tensors = calloc(entries ? entries : 1, sizeof *f->tensors);
  f->by_name = calloc(entries ? entries : 1, sizeof *f->by_name);
  cnnb_status st = CNNB_OK;
  if (!parsed || !spans || !f->tensors || !f->by_name) {
    st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  size_t count = 0;
  const char *key;
  json_t *value;
  json_object_foreach(f->header, key, value) {
    if (strcmp(key, METADATA_KEY) == 0) {
      if ((st = parse_metadata(ctx, path, value)) != CNNB_OK) goto done;
      f->meta = value;
      continue;
    }
    if ((st = parse_entry(ctx, path, key, value, data_size, &parsed[count], &spans[count].begin)) !=
        CNNB_OK)
      goto done;
    spans[count].end = spans[count].begin + parsed[count].bytes;
    spans[count].index = count;
    count++;
  }
  /* The data must be exactly the tensors, back to back: no byte belongs to two tensors
   * and none to no tensor (the format forbids holes, which could hide anything). */
  qsort(spans, count, sizeof *spans, cmp_span);
  uint64_t expect = 0;
  for (size_t k = 0; k < count; k++) {
    const char *name = parsed[spans[k].index].name;
    if (spans[k].begin < expect) {
      st = cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                      "] overlap tensor '%s' (which ends at %" PRIu64 ")",
                      path, name, spans[k].begin, spans[k].end, parsed[spans[k - 1].index].name,
                      expect);
      goto done;
    }
    if (spans[k].begin > expect) {
      st = cnnb_error(ctx, CNNB_EINVAL,
                      "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                      "] leave a gap of %" PRIu64 " unused bytes before it",
                      path, name, spans[k].begin, spans[k].end, spans[k].begin - expect);
      goto done;
    }
    expect = spans[k].end;
  }
  if (expect != data_size) {
    st = cnnb_error(ctx, CNNB_EINVAL,
                    "%s: %" PRIu64 " trailing bytes after the last tensor%s%s%s (the tensors "
                    "cover %" PRIu64 " of %" PRIu64 " bytes of data)",
                    path, data_size - expect, count ? " '" : "",
                    count ? parsed[spans[count - 1].index].name : "", count ? "'" : "", expect,
                    data_size);
    goto done;
  }
  /* Tensors in file order, their data pointing into the file. */
  for (size_t k = 0; k < count; k++) {
    f->tensors[k] = parsed[spans[k].index];
    f->tensors[k].data = with_data ? f->bytes + 8 + n + spans[k].begin : NULL;
    f->by_name[k] = &f->tensors[k];
  }
  f->count = count;
  qsort(f->by_name, count, sizeof *f->by_name, cmp_name);
done:
  free(parsed);
  free(spans);
  return st;
}

cnnb_status cnnb_safetensors_open(cnnb_ctx *ctx, const char *path, cnnb_safetensors **out) {
  *out = NULL;
  cnnb_safetensors *f = calloc(1, sizeof *f);
  if (!f) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
  size_t size = 0;
  cnnb_status st = read_file(ctx, path, &f->bytes, &size);
  if (st == CNNB_OK) st = parse(ctx, path, f, size, true);
  if (st != CNNB_OK) {
    cnnb_safetensors_close(f);
    return st;
  }
  *out = f;
  return CNNB_OK;
}

cnnb_status cnnb_safetensors_open_bytes(cnnb_ctx *ctx, const char *name, const void *bytes,
                                        size_t size, cnnb_safetensors **out) {
  *out = NULL;
  cnnb_safetensors *f = calloc(1, sizeof *f);
  if (!f || !(f->bytes = malloc(size ? size : 1))) {
    free(f);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", name);
  }
  if (size) memcpy(f->bytes, bytes, size);
  cnnb_status st = parse(ctx, name, f, size, true);
  if (st != CNNB_OK) {
    cnnb_safetensors_close(f);
    return st;
  }
  *out = f;
  return CNNB_OK;
}

/* The size field and the header of `path` (no more of it) into f->bytes; *size gets the
 * file's size. A header size that the file cannot hold reads only the size field: parse
 * refuses it before looking further. */
static cnnb_status read_header(cnnb_ctx *ctx, const char *path, cnnb_safetensors *f, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return cnnb_error(ctx, CNNB_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  cnnb_status st = CNNB_OK;
  if (fstat(fileno(fp), &sb) != 0) {
    st = cnnb_error(ctx, CNNB_EIO, "%s: cannot stat: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(sb.st_mode)) {
    st = cnnb_error(ctx, CNNB_EIO, "%s: not a regular file", path);
    goto done;
  }
  *size = (size_t)sb.st_size;
  size_t want = *size < 8 ? *size : 8;
  if (!(f->bytes = malloc(8))) goto oom;
  if (fread(f->bytes, 1, want, fp) != want) goto short_read;
  if (want < 8) goto done;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | f->bytes[i];
  if (n > MAX_HEADER_BYTES || n > *size - 8) goto done;
  unsigned char *grown = realloc(f->bytes, 8 + (size_t)n);
  if (!grown) goto oom;
  f->bytes = grown;
  if (fread(f->bytes + 8, 1, (size_t)n, fp) != (size_t)n) goto short_read;
  goto done;
oom:
  st = cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory for its header", path);
  goto done;
short_read:
  st = cnnb_error(ctx, CNNB_EIO, "%s: cannot read its header: %s", path,
                  ferror(fp) ? strerror(errno) : "the file shrank while being read");
done:
  fclose(fp);
  return st;
}

cnnb_status cnnb_safetensors_check_file(cnnb_ctx *ctx, const char *path) {
  cnnb_safetensors *f = calloc(1, sizeof *f);
  if (!f) return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", path);
  size_t size = 0;
  cnnb_status st = read_header(ctx, path, f, &size);
  if (st == CNNB_OK) st = parse(ctx, path, f, size, false);
  cnnb_safetensors_close(f);
  return st;
}

void cnnb_safetensors_close(cnnb_safetensors *f) {
  if (!f) return;
  json_decref(f->header);
  free(f->tensors);
  free(f->by_name);
  free(f->bytes);
  free(f);
}

size_t cnnb_safetensors_count(const cnnb_safetensors *f) { return f->count; }

const cnnb_st_tensor *cnnb_safetensors_tensor(const cnnb_safetensors *f, size_t i) {
  return i < f->count ? &f->tensors[i] : NULL;
}

const cnnb_st_tensor *cnnb_safetensors_find(const cnnb_safetensors *f, const char *name) {
  size_t lo = 0, hi = f->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, f->by_name[mid]->name);
    if (c == 0) return f->by_name[mid];
    if (c < 0) hi = mid;
    else lo = mid + 1;
  }
  return NULL;
}

const char *cnnb_safetensors_meta(const cnnb_safetensors *f, const char *key) {
  return f->meta ? json_string_value(json_object_get(f->meta, key)) : NULL;
}
