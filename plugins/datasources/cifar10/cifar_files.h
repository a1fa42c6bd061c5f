/* cifar_files.h — the CIFAR-10 binary batches on disk: where they are and what they hold.
 *
 * The "binary version" of CIFAR-10 (www.cs.toronto.edu/~kriz/cifar.html) is six files of
 * 3073-byte records: one label byte (0..9), then 3072 pixel bytes, the 1024 red values
 * of the 32x32 image row by row, then the green, then the blue. Training reads
 * data_batch_1.bin .. data_batch_5.bin, evaluation test_batch.bin, from --data_dir itself
 * or from its cifar-10-batches-bin/ subfolder (how the archive unpacks).
 *
 * Every error is a sentence naming the file (and record) at fault, for the plugin to pass
 * on through cnnb_error. */
#ifndef CIFAR_FILES_H
#define CIFAR_FILES_H

#include <stddef.h>
#include <stdint.h>

enum {
  CIFAR_SIDE = 32,
  CIFAR_CHANNELS = 3,
  CIFAR_PIXELS = CIFAR_SIDE * CIFAR_SIDE * CIFAR_CHANNELS, /* 3072 */
  CIFAR_RECORD = 1 + CIFAR_PIXELS,                         /* 3073 */
  CIFAR_CLASSES = 10
};

/* The examples of one split, in file order. */
typedef struct cifar_set {
  uint8_t *pixels; /* [count][3][32][32]: each record's planes as stored */
  uint8_t *labels; /* [count], each < CIFAR_CLASSES */
  int64_t count;
} cifar_set;

/* The directory holding every file of the split (training: 1, the five data batches;
 * evaluation: 0, test_batch.bin): data_dir itself, or data_dir/cifar-10-batches-bin.
 * On success writes it to dir (dir_size bytes) and returns 0; otherwise -1 with err
 * saying which files were looked for where, and which of them are missing. */
int cifar_find_dir(const char *data_dir, int training, char *dir, size_t dir_size, char *err,
                   size_t err_size);

/* Reads every file of the split from dir, checking each file's size (a whole number of
 * records, at least one) and each label. 0, or with err (and *set empty): CIFAR_BAD_DATA
 * (a size or label), CIFAR_IO_ERROR (a file that cannot be opened or read),
 * CIFAR_NO_MEMORY. */
enum { CIFAR_BAD_DATA = -1, CIFAR_IO_ERROR = -2, CIFAR_NO_MEMORY = -3 };
int cifar_load(const char *dir, int training, cifar_set *set, char *err, size_t err_size);
void cifar_set_free(cifar_set *set);

#endif
