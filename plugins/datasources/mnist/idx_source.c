/* idx_source.c — the byte sources of idx_source.h: memory, a plain file, and gunzip.
 *
 * gunzip drives zlib's inflate() over its inner source rather than using gzread(), for
 * two reasons: the same code then reads a buffer (the fuzzer) as well as a file, and its
 * errors can tell a corrupt stream (zlib's own words, with the compressed offset) from a
 * truncated one (the input ends before a member's trailer), which gzread reports alike. */
#define _POSIX_C_SOURCE 200809L
#include "idx_source.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef MNIST_HAVE_ZLIB
#include <zlib.h>
#endif

static int64_t fail(int result, char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int64_t fail(int result, char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && size) vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return result;
}

/* ---- memory ------------------------------------------------------------------------- */

typedef struct memory_source {
  idx_source base;
  const uint8_t *data;
  size_t size, at;
} memory_source;

static int64_t memory_read(idx_source *src, uint8_t *buf, size_t n, char *err, size_t err_size) {
  (void)err;
  (void)err_size;
  memory_source *m = (memory_source *)src;
  size_t left = m->size - m->at;
  if (n > left) n = left;
  if (n) memcpy(buf, m->data + m->at, n);
  m->at += n;
  return (int64_t)n;
}

static void memory_close(idx_source *src) { free(src); }

idx_source *idx_source_memory(const uint8_t *data, size_t size) {
  memory_source *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->base = (idx_source){
      .read = memory_read, .close = memory_close, .size = (int64_t)size, .counted = ""};
  m->data = data;
  m->size = size;
  return &m->base;
}

/* ---- a plain file ------------------------------------------------------------------- */

typedef struct file_source {
  idx_source base;
  FILE *f;
} file_source;

static int64_t file_read(idx_source *src, uint8_t *buf, size_t n, char *err, size_t err_size) {
  file_source *s = (file_source *)src;
  size_t got = fread(buf, 1, n, s->f);
  if (got == 0 && ferror(s->f))
    return fail(IDX_IO_ERROR, err, err_size, "read error: %s", strerror(errno));
  return (int64_t)got;
}

static void file_close(idx_source *src) {
  file_source *s = (file_source *)src;
  fclose(s->f);
  free(s);
}

idx_source *idx_source_file(const char *path, char *err, size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(IDX_IO_ERROR, err, err_size, "%s", strerror(errno));
    return NULL;
  }
  file_source *s = calloc(1, sizeof *s);
  if (!s) {
    fclose(f);
    fail(IDX_NO_MEMORY, err, err_size, "out of memory");
    return NULL;
  }
  struct stat st;
  int64_t size = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
  s->base = (idx_source){.read = file_read, .close = file_close, .size = size, .counted = ""};
  s->f = f;
  return &s->base;
}

/* ---- gunzip ------------------------------------------------------------------------- */

#ifdef MNIST_HAVE_ZLIB

enum { GUNZIP_CHUNK = 1 << 16 };

typedef struct gunzip_source {
  idx_source base;
  idx_source *inner;
  z_stream z;
  int64_t fed;         /* compressed bytes handed to zlib so far */
  int inner_ended;     /* the inner source said 0: no more compressed bytes */
  int between_members; /* the last member ended; more bytes would start another */
  int done;            /* the last member ended with the input */
  uint8_t in[GUNZIP_CHUNK];
} gunzip_source;

/* Where in the compressed input zlib stands, for messages. */
static long long compressed_at(const gunzip_source *g) {
  return (long long)(g->fed - (int64_t)g->z.avail_in);
}

static int64_t gunzip_read(idx_source *src, uint8_t *buf, size_t n, char *err, size_t err_size) {
  gunzip_source *g = (gunzip_source *)src;
  if (g->done || n == 0) return 0;
  /* zlib counts in uInt; one call never asks for more than a chunk's worth anyway. */
  if (n > (size_t)1 << 30) n = (size_t)1 << 30;
  g->z.next_out = buf;
  g->z.avail_out = (uInt)n;
  while (g->z.avail_out > 0) {
    if (g->z.avail_in == 0 && !g->inner_ended) {
      int64_t got = g->inner->read(g->inner, g->in, sizeof g->in, err, err_size);
      if (got < 0) return got;
      if (got == 0) g->inner_ended = 1;
      g->fed += got;
      g->z.next_in = g->in;
      g->z.avail_in = (uInt)got;
    }
    if (g->between_members) {
      if (g->z.avail_in == 0) { /* input over, after a whole member: the end */
        g->done = 1;
        break;
      }
      /* More bytes after a member: another member (gzip's concatenation). */
      if (inflateReset(&g->z) != Z_OK)
        return fail(IDX_BAD_DATA, err, err_size, "corrupt gzip stream near compressed byte %lld",
                    compressed_at(g));
      g->between_members = 0;
    }
    if (g->z.avail_in == 0 && g->inner_ended)
      return fail(IDX_BAD_DATA, err, err_size,
                  "truncated gzip stream: the compressed data ends after %lld bytes, inside a "
                  "member (before its CRC and length trailer)",
                  (long long)g->fed);
    int rc = inflate(&g->z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      g->between_members = 1;
    } else if (rc == Z_MEM_ERROR) {
      return fail(IDX_NO_MEMORY, err, err_size, "out of memory inflating the gzip stream");
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      return fail(IDX_BAD_DATA, err, err_size, "corrupt gzip stream near compressed byte %lld: %s",
                  compressed_at(g), g->z.msg ? g->z.msg : "zlib could not inflate it");
    }
    /* Z_OK, or Z_BUF_ERROR (no progress without more input): go round for more. */
  }
  return (int64_t)(n - g->z.avail_out);
}

static void gunzip_close(idx_source *src) {
  gunzip_source *g = (gunzip_source *)src;
  inflateEnd(&g->z);
  idx_source_close(g->inner);
  free(g);
}

idx_source *idx_source_gunzip(idx_source *inner, int *result, char *err, size_t err_size) {
  gunzip_source *g = calloc(1, sizeof *g);
  /* 16 + MAX_WBITS: a gzip wrapper (header, CRC-32 and length checked), not zlib's. */
  if (!g || inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) {
    free(g);
    idx_source_close(inner);
    *result = (int)fail(IDX_NO_MEMORY, err, err_size, "out of memory for a gzip stream");
    return NULL;
  }
  g->base = (idx_source){
      .read = gunzip_read, .close = gunzip_close, .size = -1, .counted = " after gunzip"};
  g->inner = inner;
  return &g->base;
}

int idx_source_has_gunzip(void) { return 1; }

const char *idx_source_zlib_version(void) { return zlibVersion(); }

#else /* no zlib */

idx_source *idx_source_gunzip(idx_source *inner, int *result, char *err, size_t err_size) {
  idx_source_close(inner);
  *result =
      (int)fail(IDX_UNSUPPORTED, err, err_size,
                "gzip-compressed, and this build of the mnist datasource has no zlib: install zlib "
                "(Debian: apt-get install zlib1g-dev) and rebuild, or gunzip the file beside it");
  return NULL;
}

int idx_source_has_gunzip(void) { return 0; }

const char *idx_source_zlib_version(void) { return ""; }

#endif
