/* make_cifar.c — writes a small CIFAR-10 binary dataset for the tests (cli/cifar10.sh):
 *   make_cifar DIR RECORDS [SEED]
 * creates DIR/data_batch_1.bin .. data_batch_5.bin and DIR/test_batch.bin, RECORDS
 * records each, in the real files' format (1 label byte, then the 32x32 red, green and
 * blue planes). Labels cycle through 0..9 in a seeded order; each class has its own
 * colour plus noise, so a model can learn them. Exit 0, or 2 with a message. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state;

static uint32_t next_random(void) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static int write_file(const char *dir, const char *name, long records) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "make_cifar: %s: %s\n", path, strerror(errno));
    return -1;
  }
  unsigned char record[3073];
  for (long r = 0; r < records; r++) {
    unsigned label = next_random() % 10;
    record[0] = (unsigned char)label;
    for (int c = 0; c < 3; c++) {
      int base = (int)((label * 25 + (unsigned)c * 85 * label) % 200) + 28;
      for (int i = 0; i < 1024; i++) {
        int v = base + (int)(next_random() % 57) - 28;
        record[1 + c * 1024 + i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
    if (fwrite(record, 1, sizeof record, f) != sizeof record) {
      fprintf(stderr, "make_cifar: %s: write failed\n", path);
      fclose(f);
      return -1;
    }
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "make_cifar: %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: make_cifar DIR RECORDS [SEED]\n");
    return 2;
  }
  char *end;
  long records = strtol(argv[2], &end, 10);
  if (*end || records < 0 || records > 100000) {
    fprintf(stderr, "make_cifar: RECORDS must be in [0, 100000], got %s\n", argv[2]);
    return 2;
  }
  state = argc == 4 ? strtoull(argv[3], NULL, 10) : 1;
  static const char *const files[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                      "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    if (write_file(argv[1], files[i], records) != 0) return 2;
  return 0;
}
