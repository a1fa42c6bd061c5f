/* idx_source.h — where an IDX file's bytes come from: a plain file, a buffer in memory, or
 * the gunzip of another source (the datasets are published as .gz, and Debian's
 * dataset-fashion-mnist installs them so). One interface, so the IDX reader (idx.h) does
 * not care which, and the fuzzer drives the same code from memory that the plugin drives
 * from files.
 *
 * gunzip needs zlib: a build without it (MNIST_HAVE_ZLIB unset) still reads plain files,
 * and idx_source_gunzip refuses with a message saying how to get .gz support. */
#ifndef MNIST_IDX_SOURCE_H
#define MNIST_IDX_SOURCE_H

#include <stddef.h>
#include <stdint.h>

/* Results shared by the sources and the reader (idx.h). IDX_UNSUPPORTED: a .gz file in a
 * build without zlib. */
enum { IDX_OK = 0, IDX_BAD_DATA = -1, IDX_IO_ERROR = -2, IDX_NO_MEMORY = -3, IDX_UNSUPPORTED = -4 };

typedef struct idx_source idx_source;
struct idx_source {
  /* Up to n bytes into buf: how many (0 only at the end of the data), or a negative
   * IDX_* result with err saying what went wrong (without the file's name). */
  int64_t (*read)(idx_source *src, uint8_t *buf, size_t n, char *err, size_t err_size);
  void (*close)(idx_source *src);
  /* The bytes read would yield in all, when known before reading (a plain file's
   * size), else -1 (a gzip stream's content). */
  int64_t size;
  /* How the bytes are counted in messages: "" for a file's own, " after gunzip" for a
   * compressed one's content. */
  const char *counted;
};

/* A source over size bytes at data (not copied: they must outlive the source). NULL when
 * out of memory. */
idx_source *idx_source_memory(const uint8_t *data, size_t size);

/* The file at path, opened for reading; NULL with err (strerror) when it cannot be. */
idx_source *idx_source_file(const char *path, char *err, size_t err_size);

/* The gunzip of `inner` (a gzip file, possibly of several members, as gzip -d reads it),
 * which the new source owns and closes; NULL with err and *result (IDX_NO_MEMORY, or
 * IDX_UNSUPPORTED built without zlib), inner closed then too. */
idx_source *idx_source_gunzip(idx_source *inner, int *result, char *err, size_t err_size);

/* Whether this build reads .gz files (zlib), and zlib's version ("" without it). */
int idx_source_has_gunzip(void);
const char *idx_source_zlib_version(void);

static inline void idx_source_close(idx_source *src) {
  if (src) src->close(src);
}

#endif
