/* idx.h — the IDX file format of MNIST and its relatives (Fashion-MNIST, KMNIST, EMNIST),
 * read whole from a byte source (idx_source.h: a file, memory, or a gunzip of either).
 *
 * An IDX file (yann.lecun.com/exdb/mnist) is a 4-byte magic number — two zero bytes, a
 * type byte (0x08: unsigned bytes, the only one these datasets use) and the number of
 * dimensions — then each dimension as a big-endian uint32, then the values, row-major.
 * Images files are 0x00000803 (count x rows x columns), labels files 0x00000801 (count).
 *
 * idx_load() refuses, with one sentence naming the file and the fault, every file that is
 * not exactly that: a bad magic, the wrong number of dimensions, a zero dimension,
 * dimensions that promise more or fewer bytes than the file holds (truncated, or trailing
 * bytes), and whatever its source reports (a read error, a corrupt gzip stream). When the
 * source knows its size (a plain file) the size is checked against the header before
 * anything is allocated, so a wrong file is named before a large read. */
#ifndef MNIST_IDX_H
#define MNIST_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "idx_source.h"

enum {
  IDX_IMAGES_MAGIC = 0x00000803,
  IDX_LABELS_MAGIC = 0x00000801,
  IDX_TYPE_UBYTE = 0x08,
  IDX_MAX_DIMS = 3
};

/* The largest payload idx_load accepts: 2 GiB, far above EMNIST's largest split (about
 * 550 MB) and far below what a corrupt header can claim (2^96 bytes). */
#define IDX_MAX_PAYLOAD ((uint64_t)1 << 31)

/* A file's values, as read. */
typedef struct idx_data {
  uint8_t *values; /* [dims[0]][dims[1]]...: the payload, malloc'ed */
  uint64_t bytes;  /* the payload's size: the product of the dimensions */
  uint32_t dims[IDX_MAX_DIMS];
  int ndims;
} idx_data;

/* Reads the whole IDX file of `ndims` dimensions that `src` yields, `name` being what
 * messages call it (its path). 0, or (with err, and *out empty) IDX_BAD_DATA,
 * IDX_IO_ERROR, IDX_NO_MEMORY. Does not close src. */
int idx_load(idx_source *src, const char *name, int ndims, idx_data *out, char *err,
             size_t err_size);

void idx_data_free(idx_data *d);

#endif
