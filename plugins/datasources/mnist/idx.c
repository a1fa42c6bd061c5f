/* idx.c — reading one IDX file whole from a byte source, refusing any that is not exactly
 * what its header says (idx.h).
 *
 * The header is read first and checked on its own; a source that knows its size (a plain
 * file) is then compared with the size the dimensions imply before the payload is
 * allocated. A gzip stream's size is known only at its end, so its payload buffer grows
 * with what actually arrives: a short stream whose header claims gigabytes never
 * allocates them. */
#include "idx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  MAGIC_BYTES = 4,
  FIRST_CHUNK = 1 << 20, /* the first payload buffer of a stream of unknown size */
  TRAILING_PROBE = 4096  /* how far past the payload a stream is read to count extra bytes */
};

static int fail(int result, char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int result, char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && size) vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return result;
}

static const char *kind_name(int ndims) {
  return ndims == 3 ? "images" : ndims == 1 ? "labels" : "IDX";
}

static uint32_t expected_magic(int ndims) {
  return ((uint32_t)IDX_TYPE_UBYTE << 8) | (uint32_t)ndims;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* "60000 x 28 x 28" */
static const char *dims_text(const idx_data *d, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < d->ndims && len < size; i++)
    len += (size_t)snprintf(out + len, size - len, "%s%u", i ? " x " : "", d->dims[i]);
  return out;
}

/* Reads until n bytes or the end: the count in *got, or a source's negative result. */
static int read_full(idx_source *src, uint8_t *buf, size_t n, size_t *got, char *err,
                     size_t err_size) {
  *got = 0;
  while (*got < n) {
    int64_t r = src->read(src, buf + *got, n - *got, err, err_size);
    if (r < 0) return (int)r;
    if (r == 0) break;
    *got += (size_t)r;
  }
  return IDX_OK;
}

/* A source's error, prefixed with the file's name. */
static int source_failed(int result, const char *name, char *err, size_t err_size) {
  char why[1024];
  snprintf(why, sizeof why, "%s", err && err_size ? err : "");
  return fail(result, err, err_size, "%s: %s", name, why);
}

/* The magic number: 0 when it is the one of an unsigned-byte IDX file of ndims
 * dimensions, else the fault in err. */
static int check_magic(const uint8_t *m, int ndims, const char *name, char *err, size_t err_size) {
  uint32_t magic = be32(m), want = expected_magic(ndims);
  if (magic == want) return IDX_OK;
  if (m[0] == 0x1f && m[1] == 0x8b)
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: bad magic 0x%08x: gzip-compressed (an IDX %s "
                "file starts with 0x%08x): name it .gz to have it gunzipped",
                name, magic, kind_name(ndims), want);
  if (m[0] != 0 || m[1] != 0)
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: bad magic 0x%08x: not an IDX file (an IDX %s file starts with 0x%08x)", name,
                magic, kind_name(ndims), want);
  if (m[2] != IDX_TYPE_UBYTE)
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: bad magic 0x%08x: IDX values of type 0x%02x, "
                "not unsigned bytes (0x08; an IDX %s file starts with 0x%08x)",
                name, magic, m[2], kind_name(ndims), want);
  const char *hint = m[3] == 1 && ndims == 3   ? " (a labels file in place of the images?)"
                     : m[3] == 3 && ndims == 1 ? " (an images file in place of the labels?)"
                                               : "";
  return fail(IDX_BAD_DATA, err, err_size,
              "%s: wrong number of dimensions: %u, where an IDX %s "
              "file has %d (magic 0x%08x, expected 0x%08x)%s",
              name, m[3], kind_name(ndims), ndims, magic, want, hint);
}

void idx_data_free(idx_data *d) {
  if (!d) return;
  free(d->values);
  memset(d, 0, sizeof *d);
}

/* The payload of a stream of unknown size: its buffer grows with what arrives. */
static int read_growing(idx_source *src, idx_data *d, size_t *got, char *err, size_t err_size) {
  size_t want = (size_t)d->bytes, cap = want < FIRST_CHUNK ? want : FIRST_CHUNK;
  *got = 0;
  if (!(d->values = malloc(cap))) return IDX_NO_MEMORY;
  for (;;) {
    size_t n;
    int rc = read_full(src, d->values + *got, cap - *got, &n, err, err_size);
    if (rc != IDX_OK) return rc;
    *got += n;
    if (*got < cap || cap == want) return IDX_OK; /* the end, or all of it */
    size_t grown = cap * 2 < want ? cap * 2 : want;
    uint8_t *p = realloc(d->values, grown);
    if (!p) return IDX_NO_MEMORY;
    d->values = p;
    cap = grown;
  }
}

int idx_load(idx_source *src, const char *name, int ndims, idx_data *out, char *err,
             size_t err_size) {
  memset(out, 0, sizeof *out);
  if (ndims < 1 || ndims > IDX_MAX_DIMS)
    return fail(IDX_BAD_DATA, err, err_size, "%s: cannot read IDX files of %d dimensions", name,
                ndims);
  const char *counted = src->counted ? src->counted : "";
  uint8_t header[MAGIC_BYTES + 4 * IDX_MAX_DIMS];
  size_t header_size = MAGIC_BYTES + 4 * (size_t)ndims, got;
  int rc = read_full(src, header, MAGIC_BYTES, &got, err, err_size);
  if (rc != IDX_OK) return source_failed(rc, name, err, err_size);
  if (got < MAGIC_BYTES)
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: truncated: %zu bytes%s, shorter than the 4-byte IDX magic number", name, got,
                counted);
  if ((rc = check_magic(header, ndims, name, err, err_size)) != IDX_OK) return rc;
  rc = read_full(src, header + MAGIC_BYTES, header_size - MAGIC_BYTES, &got, err, err_size);
  if (rc != IDX_OK) return source_failed(rc, name, err, err_size);
  if (MAGIC_BYTES + got < header_size)
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: truncated: %zu bytes%s, shorter than the %zu-byte header of an IDX %s file",
                name, MAGIC_BYTES + got, counted, header_size, kind_name(ndims));

  idx_data d = {.ndims = ndims, .bytes = 1};
  char dims[64];
  for (int i = 0; i < ndims; i++) d.dims[i] = be32(header + MAGIC_BYTES + 4 * i);
  for (int i = 0; i < ndims; i++) {
    if (d.dims[i] == 0)
      return fail(IDX_BAD_DATA, err, err_size,
                  "%s: dimensions %s: dimension %d is 0, so the file holds no %s", name,
                  dims_text(&d, dims, sizeof dims), i + 1, kind_name(ndims));
    d.bytes *= d.dims[i];
    if (d.bytes > IDX_MAX_PAYLOAD) /* checked as it grows: 3 uint32s overflow 64 bits */
      return fail(IDX_BAD_DATA, err, err_size,
                  "%s: dimensions %s claim more than the %llu "
                  "bytes this reader takes (2 GiB): a corrupt header",
                  name, dims_text(&d, dims, sizeof dims), (unsigned long long)IDX_MAX_PAYLOAD);
  }
  uint64_t total = header_size + d.bytes;
  dims_text(&d, dims, sizeof dims);
  /* A plain file: its size against the header's before anything is allocated. */
  if (src->size >= 0 && (uint64_t)src->size != total) {
    if ((uint64_t)src->size < total)
      return fail(IDX_BAD_DATA, err, err_size,
                  "%s: truncated: its dimensions %s need %llu bytes "
                  "(%zu of header, %llu of %s), and it holds %lld",
                  name, dims, (unsigned long long)total, header_size, (unsigned long long)d.bytes,
                  kind_name(ndims), (long long)src->size);
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: trailing bytes: its dimensions %s account for "
                "%llu bytes, and it holds %lld, %llu more",
                name, dims, (unsigned long long)total, (long long)src->size,
                (unsigned long long)((uint64_t)src->size - total));
  }

  if (src->size >= 0) {
    if (!(d.values = malloc((size_t)d.bytes))) rc = IDX_NO_MEMORY;
    else rc = read_full(src, d.values, (size_t)d.bytes, &got, err, err_size);
  } else {
    rc = read_growing(src, &d, &got, err, err_size);
  }
  if (rc == IDX_NO_MEMORY) {
    idx_data_free(&d);
    return fail(IDX_NO_MEMORY, err, err_size, "%s: out of memory for %llu bytes of %s", name,
                (unsigned long long)d.bytes, kind_name(ndims));
  }
  if (rc != IDX_OK) {
    idx_data_free(&d);
    return source_failed(rc, name, err, err_size);
  }
  if (got < d.bytes) {
    idx_data_free(&d);
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: truncated%s: its dimensions %s need %llu bytes, and the data ends after %llu",
                name, counted, dims, (unsigned long long)total,
                (unsigned long long)(header_size + got));
  }
  /* Nothing may follow the payload (a plain file that grew while it was read, or a
   * stream's content, whose size was not known). */
  uint8_t probe[TRAILING_PROBE];
  rc = read_full(src, probe, sizeof probe, &got, err, err_size);
  if (rc != IDX_OK) {
    idx_data_free(&d);
    return source_failed(rc, name, err, err_size);
  }
  if (got > 0) {
    idx_data_free(&d);
    return fail(IDX_BAD_DATA, err, err_size,
                "%s: trailing bytes%s: its dimensions %s account "
                "for %llu bytes, and %s%zu more follow",
                name, counted, dims, (unsigned long long)total,
                got == sizeof probe ? "at least " : "", got);
  }
  *out = d;
  return IDX_OK;
}
