/* cifar_files.c — finding and reading the CIFAR-10 binary batches (cifar_files.h).
 *
 * A split is read whole into memory (50000 training images are 150 MiB): sizes are
 * checked for every file before anything is allocated, so a wrong file is named before a
 * large read, and each record's label as it is read. */
#define _POSIX_C_SOURCE 200809L
#include "cifar_files.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ds_files.h"

#define SUBFOLDER "cifar-10-batches-bin"

static const char *const train_files[] = {"data_batch_1.bin", "data_batch_2.bin",
                                          "data_batch_3.bin", "data_batch_4.bin",
                                          "data_batch_5.bin"};
static const char *const eval_files[] = {"test_batch.bin"};

static const char *const *split_files(int training, size_t *count) {
  *count = training ? sizeof train_files / sizeof *train_files : 1;
  return training ? train_files : eval_files;
}

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && size) vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return -1;
}

/* Appends ", name" for every file of the split missing from dir; returns how many. */
static size_t list_missing(const char *dir, int training, char *out, size_t size) {
  size_t count, missing = 0, len = strlen(out);
  const char *const *files = split_files(training, &count);
  for (size_t i = 0; i < count; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    if (ds_is_file(path)) continue;
    if (len < size)
      len += (size_t)snprintf(out + len, size - len, "%s%s", missing ? ", " : "", files[i]);
    missing++;
  }
  return missing;
}

int cifar_find_dir(const char *data_dir, int training, char *dir, size_t dir_size, char *err,
                   size_t err_size) {
  size_t count;
  const char *const *files = split_files(training, &count);
  char wanted[256] = "";
  for (size_t i = 0; i < count; i++)
    snprintf(wanted + strlen(wanted), sizeof wanted - strlen(wanted), "%s%s", i ? ", " : "",
             files[i]);
  if (!data_dir || !*data_dir)
    return fail(err, err_size, "needs --data_dir holding the CIFAR-10 binary batches (%s)", wanted);
  struct stat st;
  if (stat(data_dir, &st) != 0)
    return fail(err, err_size, "--data_dir=%s: %s (looked for the CIFAR-10 binary batches %s)",
                data_dir, strerror(errno), wanted);
  if (!S_ISDIR(st.st_mode))
    return fail(err, err_size,
                "--data_dir=%s is not a directory (looked for the CIFAR-10 "
                "binary batches %s in it)",
                data_dir, wanted);

  char sub[4096];
  snprintf(sub, sizeof sub, "%s/%s", data_dir, SUBFOLDER);
  char missing_top[512] = "", missing_sub[512] = "";
  if (list_missing(data_dir, training, missing_top, sizeof missing_top) == 0) {
    snprintf(dir, dir_size, "%s", data_dir);
    return 0;
  }
  int sub_exists = ds_is_dir(sub);
  if (sub_exists && list_missing(sub, training, missing_sub, sizeof missing_sub) == 0) {
    snprintf(dir, dir_size, "%s", sub);
    return 0;
  }
  return fail(err, err_size,
              "--data_dir=%s holds no CIFAR-10 %s split: looked for %s (the binary version) "
              "in %s, missing %s, and in %s, %s%s",
              data_dir, training ? "training" : "test", wanted, data_dir, missing_top, sub,
              sub_exists ? "missing " : "no such directory", sub_exists ? missing_sub : "");
}

void cifar_set_free(cifar_set *set) {
  if (!set) return;
  free(set->pixels);
  free(set->labels);
  memset(set, 0, sizeof *set);
}

/* Reads one file's records into set at *at: 0 or a cifar_load error. */
static int read_file(const char *path, int64_t records, cifar_set *set, int64_t *at, char *err,
                     size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(err, err_size, "%s: %s", path, strerror(errno));
    return CIFAR_IO_ERROR;
  }
  uint8_t record[CIFAR_RECORD];
  for (int64_t r = 0; r < records; r++) {
    if (fread(record, 1, sizeof record, f) != sizeof record) {
      int bad = ferror(f);
      fclose(f);
      fail(err, err_size, "%s: %s at record %lld of %lld (did the file change while it was read?)",
           path, bad ? "read error" : "ended early", (long long)r, (long long)records);
      return bad ? CIFAR_IO_ERROR : CIFAR_BAD_DATA;
    }
    if (record[0] >= CIFAR_CLASSES) {
      fclose(f);
      return fail(err, err_size,
                  "%s: record %lld (byte offset %lld) has label %u; CIFAR-10 "
                  "labels are 0..9: not a CIFAR-10 binary batch (the CIFAR-100 files hold two "
                  "label bytes per record)",
                  path, (long long)r, (long long)r * CIFAR_RECORD, (unsigned)record[0]);
    }
    set->labels[*at] = record[0];
    memcpy(set->pixels + (size_t)*at * CIFAR_PIXELS, record + 1, CIFAR_PIXELS);
    ++*at;
  }
  fclose(f);
  return 0;
}

int cifar_load(const char *dir, int training, cifar_set *set, char *err, size_t err_size) {
  memset(set, 0, sizeof *set);
  size_t count;
  const char *const *files = split_files(training, &count);
  int64_t records[8] = {0}, total = 0;
  char path[4096];
  for (size_t i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    struct stat st;
    if (stat(path, &st) != 0) {
      fail(err, err_size, "%s: %s", path, strerror(errno));
      return CIFAR_IO_ERROR;
    }
    if (st.st_size == 0 || st.st_size % CIFAR_RECORD != 0)
      return fail(err, err_size,
                  "%s: %lld bytes is not a whole, non-zero number of %d-byte "
                  "records (1 label byte + 3072 pixel bytes): a truncated or foreign file",
                  path, (long long)st.st_size, CIFAR_RECORD);
    records[i] = st.st_size / CIFAR_RECORD;
    total += records[i];
  }
  set->pixels = malloc((size_t)total * CIFAR_PIXELS);
  set->labels = malloc((size_t)total);
  if (!set->pixels || !set->labels) {
    cifar_set_free(set);
    fail(err, err_size, "out of memory for %lld CIFAR-10 images (%lld MiB)", (long long)total,
         (long long)(total * CIFAR_PIXELS >> 20));
    return CIFAR_NO_MEMORY;
  }
  int64_t at = 0;
  for (size_t i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    int rc = read_file(path, records[i], set, &at, err, err_size);
    if (rc != 0) {
      cifar_set_free(set);
      return rc;
    }
  }
  set->count = total;
  return 0;
}
