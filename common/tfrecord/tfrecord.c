/* tfrecord.c — TFRecord framing: the pure parser over a buffer, a file reader that keeps
 * one growing buffer and reads the file in large chunks, and the writer.
 *
 * A record's length is trusted only after its own CRC matches, and even then a length
 * beyond the rest of the file or beyond TFRECORD_MAX_LENGTH is a corrupt record, so a
 * damaged header never turns into a huge allocation. Errors give the byte offset of the
 * record's first byte; the reader prefixes the file name. */
#define _POSIX_C_SOURCE 200809L /* strdup, fileno, fsync, O_CLOEXEC, posix_fadvise */
#include "tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"

enum {
  HEADER = 12, /* uint64 length + uint32 masked crc of it */
  FOOTER = 4,  /* uint32 masked crc of the data */
  CHUNK = 1 << 20
};
/* No ImageNet record comes near this (the largest JPEG is ~15 MB); TensorFlow's own
 * reader has no limit, but a length this large in a file of images is damage. */
#define TFRECORD_MAX_LENGTH ((uint64_t)1 << 30)

static void fail(char *err, size_t err_size, const char *fmt, ...) {
  if (!err || !err_size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
}

static uint32_t load32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t load64(const uint8_t *p) { return load32(p) | (uint64_t)load32(p + 4) << 32; }
static void store32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void store64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The header at p (HEADER bytes present): its length, or CORRUPT with err. `avail` is how
 * many bytes the record could have after its header (the rest of the buffer or file). */
static tfrecord_result check_header(const uint8_t *p, uint64_t offset, uint64_t avail,
                                    uint64_t *length, char *err, size_t err_size) {
  uint64_t n = load64(p);
  uint32_t stored = load32(p + 8), computed = crc32c_mask(crc32c(p, 8));
  if (stored != computed) {
    fail(err, err_size, "record at byte %llu: length CRC mismatch (stored 0x%08x, computed 0x%08x)",
         (unsigned long long)offset, stored, computed);
    return TFRECORD_CORRUPT;
  }
  if (n > TFRECORD_MAX_LENGTH) {
    fail(err, err_size, "record at byte %llu: impossible length %llu (more than 1 GiB)",
         (unsigned long long)offset, (unsigned long long)n);
    return TFRECORD_CORRUPT;
  }
  if (avail < n + FOOTER) {
    fail(err, err_size, "record at byte %llu: truncated: %llu of %llu bytes",
         (unsigned long long)offset, (unsigned long long)(HEADER + avail),
         (unsigned long long)(HEADER + n + FOOTER));
    return TFRECORD_CORRUPT;
  }
  *length = n;
  return TFRECORD_OK;
}

/* One record at buf[pos] whose offset in the file is base + pos. */
static tfrecord_result parse_at(const uint8_t *buf, size_t len, size_t *pos, uint64_t base,
                                const uint8_t **data, size_t *size, char *err, size_t err_size) {
  size_t at = *pos;
  if (at >= len) return TFRECORD_END;
  uint64_t offset = base + at, length;
  if (len - at < HEADER) {
    fail(err, err_size, "record at byte %llu: truncated header: %zu of %d bytes",
         (unsigned long long)offset, len - at, HEADER);
    return TFRECORD_CORRUPT;
  }
  tfrecord_result r = check_header(buf + at, offset, len - at - HEADER, &length, err, err_size);
  if (r != TFRECORD_OK) return r;
  const uint8_t *d = buf + at + HEADER;
  uint32_t stored = load32(d + length), computed = crc32c_mask(crc32c(d, (size_t)length));
  if (stored != computed) {
    fail(err, err_size, "record at byte %llu: data CRC mismatch (stored 0x%08x, computed 0x%08x)",
         (unsigned long long)offset, stored, computed);
    /* The length's CRC held: the next record starts right after this one. */
    *pos = at + HEADER + (size_t)length + FOOTER;
    return TFRECORD_BAD_DATA;
  }
  *data = d;
  *size = (size_t)length;
  *pos = at + HEADER + (size_t)length + FOOTER;
  return TFRECORD_OK;
}

tfrecord_result tfrecord_parse(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                               size_t *size, char *err, size_t err_size) {
  return parse_at(buf, len, pos, 0, data, size, err, err_size);
}

/* ---- reader ---- */

struct tfrecord_reader {
  int fd;
  char *path;
  uint64_t file_size;  /* at open: what a header's length is checked against */
  uint64_t buf_offset; /* file offset of buf[0] */
  uint8_t *buf;
  size_t cap, len, pos; /* buf[pos, len) is read and not yet consumed */
  int eof, failed;
  int borrowed; /* tfrecord_open_memory: buf is the caller's whole file (fd -1) */
};

tfrecord_result tfrecord_open(const char *path, tfrecord_reader **out, char *err, size_t err_size) {
  *out = NULL;
  tfrecord_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    fail(err, err_size, "%s: out of memory", path);
    return TFRECORD_IO;
  }
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (r->fd < 0 || fstat(r->fd, &st) != 0) {
    fail(err, err_size, "%s: %s", path, strerror(errno));
    tfrecord_close(r);
    return TFRECORD_IO;
  }
  if (S_ISDIR(st.st_mode)) {
    fail(err, err_size, "%s: is a directory", path);
    tfrecord_close(r);
    return TFRECORD_IO;
  }
  r->file_size = (uint64_t)st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
  posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  *out = r;
  return TFRECORD_OK;
}

tfrecord_result tfrecord_open_memory(const char *path, const uint8_t *bytes, size_t size,
                                     tfrecord_reader **out, char *err, size_t err_size) {
  *out = NULL;
  tfrecord_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    fail(err, err_size, "%s: out of memory", path);
    return TFRECORD_IO;
  }
  r->fd = -1;
  r->borrowed = 1;
  r->buf = (uint8_t *)bytes; /* never written through: fill() returns at eof */
  r->cap = r->len = size;
  r->file_size = size;
  r->eof = 1;
  *out = r;
  return TFRECORD_OK;
}

/* Makes buf[pos, pos + need) readable, or as much of it as the file has (r->eof then).
 * Moves the unconsumed bytes to the front and grows the buffer when a record is larger. */
static tfrecord_result fill(tfrecord_reader *r, size_t need, char *err, size_t err_size) {
  if (r->len - r->pos >= need || r->eof) return TFRECORD_OK;
  if (r->pos > 0) {
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->buf_offset += r->pos;
    r->len -= r->pos;
    r->pos = 0;
  }
  size_t want = need < CHUNK ? CHUNK : need;
  if (want > r->cap) {
    size_t cap = r->cap ? r->cap : CHUNK;
    while (cap < want) cap *= 2;
    uint8_t *grown = realloc(r->buf, cap);
    if (!grown) {
      fail(err, err_size, "%s: out of memory for a record of %zu bytes at byte %llu", r->path, need,
           (unsigned long long)r->buf_offset);
      return TFRECORD_IO;
    }
    r->buf = grown;
    r->cap = cap;
  }
  /* Reads at least `need`, and fills the buffer when the read can (large sequential reads). */
  while (r->len < need) {
    ssize_t got = read(r->fd, r->buf + r->len, r->cap - r->len);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(err, err_size, "%s: read at byte %llu: %s", r->path,
           (unsigned long long)(r->buf_offset + r->len), strerror(errno));
      return TFRECORD_IO;
    }
    if (got == 0) {
      r->eof = 1;
      break;
    }
    r->len += (size_t)got;
  }
  return TFRECORD_OK;
}

static tfrecord_result corrupt(tfrecord_reader *r, const char *what, char *err, size_t err_size) {
  fail(err, err_size, "%s: %s", r->path, what);
  r->failed = 1;
  return TFRECORD_CORRUPT;
}

tfrecord_result tfrecord_next(tfrecord_reader *r, const uint8_t **data, size_t *size, char *err,
                              size_t err_size) {
  char msg[400];
  if (r->failed) {
    fail(err, err_size, "%s: reading past a corrupt record", r->path);
    return TFRECORD_CORRUPT;
  }
  tfrecord_result res = fill(r, HEADER, err, err_size);
  if (res != TFRECORD_OK) return res;
  if (r->len - r->pos < HEADER) {
    if (r->len == r->pos) return TFRECORD_END;
    size_t pos = r->pos;
    parse_at(r->buf, r->len, &pos, r->buf_offset, data, size, msg, sizeof msg);
    return corrupt(r, msg, err, err_size);
  }
  uint64_t offset = r->buf_offset + r->pos, length;
  /* The length is checked against the whole rest of the file before any of it is read. */
  uint64_t rest = r->file_size > offset + HEADER ? r->file_size - offset - HEADER : 0;
  if (check_header(r->buf + r->pos, offset, rest, &length, msg, sizeof msg) != TFRECORD_OK)
    return corrupt(r, msg, err, err_size);
  res = fill(r, HEADER + (size_t)length + FOOTER, err, err_size);
  if (res != TFRECORD_OK) return res;
  size_t pos = r->pos;
  res = parse_at(r->buf, r->len, &pos, r->buf_offset, data, size, msg, sizeof msg);
  if (res == TFRECORD_BAD_DATA) {
    r->pos = pos; /* framing intact: the next call reads the next record */
    fail(err, err_size, "%s: %s", r->path, msg);
    return TFRECORD_BAD_DATA;
  }
  if (res != TFRECORD_OK) return corrupt(r, msg, err, err_size);
  r->pos = pos;
  return TFRECORD_OK;
}

/* Headers come from the buffer when it holds them; otherwise 12 bytes are read at their
 * offset and the file position moves past the record, so skipping a file reads a header
 * per record and none of the data. */
tfrecord_result tfrecord_skip(tfrecord_reader *r, char *err, size_t err_size) {
  char msg[400];
  if (r->failed) {
    fail(err, err_size, "%s: reading past a corrupt record", r->path);
    return TFRECORD_CORRUPT;
  }
  uint64_t offset = r->buf_offset + r->pos, length;
  uint8_t own[HEADER];
  size_t have = r->len - r->pos;
  /* No buffer yet (a reader that only skipped so far): no pointer into it either. */
  const uint8_t *header = have > 0 ? r->buf + r->pos : own;
  if (have < HEADER && r->borrowed) { /* the whole file is in buf: nothing to read */
    if (have == 0) return TFRECORD_END;
    fail(msg, sizeof msg, "record at byte %llu: truncated header: %zu of %d bytes",
         (unsigned long long)offset, have, HEADER);
    return corrupt(r, msg, err, err_size);
  }
  if (have < HEADER) {
    ssize_t got;
    do got = pread(r->fd, own, HEADER, (off_t)offset);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
      fail(err, err_size, "%s: read at byte %llu: %s", r->path, (unsigned long long)offset,
           strerror(errno));
      return TFRECORD_IO;
    }
    if (got == 0) return TFRECORD_END;
    if (got < HEADER) {
      fail(msg, sizeof msg, "record at byte %llu: truncated header: %zd of %d bytes",
           (unsigned long long)offset, got, HEADER);
      return corrupt(r, msg, err, err_size);
    }
    header = own;
    have = 0; /* the buffer's partial bytes are dropped below */
  }
  uint64_t rest = r->file_size > offset + HEADER ? r->file_size - offset - HEADER : 0;
  if (check_header(header, offset, rest, &length, msg, sizeof msg) != TFRECORD_OK)
    return corrupt(r, msg, err, err_size);
  uint64_t record = HEADER + length + FOOTER;
  if (have >= record) {
    r->pos += (size_t)record;
    return TFRECORD_OK;
  }
  /* The record ends beyond the buffer: the next read starts right after it. */
  uint64_t next = offset + record;
  if (lseek(r->fd, (off_t)next, SEEK_SET) < 0) {
    fail(err, err_size, "%s: seek to byte %llu: %s", r->path, (unsigned long long)next,
         strerror(errno));
    return TFRECORD_IO;
  }
  r->buf_offset = next;
  r->len = r->pos = 0;
  r->eof = 0;
  return TFRECORD_OK;
}

uint64_t tfrecord_offset(const tfrecord_reader *r) { return r->buf_offset + r->pos; }

uint64_t tfrecord_file_size(const tfrecord_reader *r) { return r->file_size; }

void tfrecord_close(tfrecord_reader *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  if (!r->borrowed) free(r->buf);
  free(r->path);
  free(r);
}

/* ---- writer ---- */

struct tfrecord_writer {
  FILE *file;
  char *path;
  int failed;
};

/* fopen's mode: "wbe" replaces, "wbxe" creates only (C11's x: fails when the file exists). */
static int writer_open(const char *path, const char *mode, tfrecord_writer **out, char *err,
                       size_t err_size) {
  *out = NULL;
  tfrecord_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path))) {
    free(w);
    fail(err, err_size, "%s: out of memory", path);
    return -1;
  }
  w->file = fopen(path, mode);
  if (!w->file) {
    int saved = errno;
    fail(err, err_size, "%s: %s", path, strerror(saved));
    free(w->path);
    free(w);
    errno = saved;
    return -1;
  }
  *out = w;
  return 0;
}

int tfrecord_writer_open(const char *path, tfrecord_writer **out, char *err, size_t err_size) {
  return writer_open(path, "wbe", out, err, err_size);
}

int tfrecord_writer_create(const char *path, tfrecord_writer **out, char *err, size_t err_size) {
  return writer_open(path, "wbxe", out, err, err_size);
}

int tfrecord_write(tfrecord_writer *w, const void *data, size_t size, char *err, size_t err_size) {
  if ((uint64_t)size > TFRECORD_MAX_LENGTH) {
    fail(err, err_size, "%s: a record of %zu bytes is larger than readers accept (1 GiB)", w->path,
         size);
    return -1;
  }
  uint8_t header[HEADER], footer[FOOTER];
  store64(header, (uint64_t)size);
  store32(header + 8, crc32c_mask(crc32c(header, 8)));
  store32(footer, crc32c_mask(crc32c(data, size)));
  if (fwrite(header, 1, HEADER, w->file) != HEADER ||
      (size && fwrite(data, 1, size, w->file) != size) ||
      fwrite(footer, 1, FOOTER, w->file) != FOOTER) {
    fail(err, err_size, "%s: write: %s", w->path, strerror(errno));
    w->failed = 1;
    return -1;
  }
  return 0;
}

int tfrecord_writer_flush(tfrecord_writer *w, char *err, size_t err_size) {
  if (w->failed) {
    fail(err, err_size, "%s: an earlier write failed", w->path);
    return -1;
  }
  if (fflush(w->file) != 0) {
    fail(err, err_size, "%s: write: %s", w->path, strerror(errno));
    w->failed = 1;
    return -1;
  }
  return 0;
}

int tfrecord_writer_close(tfrecord_writer *w, char *err, size_t err_size) {
  if (!w) return 0;
  int rc = w->failed ? -1 : 0;
  if (rc == 0 && (fflush(w->file) != 0 || fsync(fileno(w->file)) != 0)) {
    fail(err, err_size, "%s: flush: %s", w->path, strerror(errno));
    rc = -1;
  }
  if (fclose(w->file) != 0 && rc == 0) {
    fail(err, err_size, "%s: close: %s", w->path, strerror(errno));
    rc = -1;
  }
  if (w->failed) fail(err, err_size, "%s: an earlier write failed", w->path);
  free(w->path);
  free(w);
  return rc;
}
