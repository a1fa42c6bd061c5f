/* mnist_files.c — finding a split's IDX files and reading them into one checked set
 * (mnist_files.h). The IDX format itself is idx.c's; what is checked here is what makes
 * two IDX files one MNIST-layout split: 28x28 images, and one label per image. */
#define _POSIX_C_SOURCE 200809L
#include "mnist_files.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ds_files.h"

#include "idx.h"

#define SUBFOLDER "raw"

static const char *const train_files[2] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
static const char *const eval_files[2] = {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

static int fail(int result, char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(int result, char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && size) vsnprintf(err, size, fmt, ap);
  va_end(ap);
  return result;
}

/* dir/name, or dir/name.gz when only that exists: 1 with the path in out, else 0. A
 * path too long for out is not looked for: a cut one could name another file. */
static int find_one(const char *dir, const char *name, char *out, size_t size) {
  int n = snprintf(out, size, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= size) return 0;
  if (ds_is_file(out)) return 1;
  n = snprintf(out, size, "%s/%s.gz", dir, name);
  return n >= 0 && (size_t)n < size && ds_is_file(out);
}

/* Both files of the split in dir: 1 with paths filled; else 0 with the missing names
 * listed in missing. */
static int find_in(const char *dir, const char *const files[2], mnist_paths *paths, char *missing,
                   size_t size) {
  int found = 0;
  size_t len = 0;
  missing[0] = '\0';
  char *outs[2] = {paths->images, paths->labels};
  for (int i = 0; i < 2; i++) {
    if (find_one(dir, files[i], outs[i], sizeof paths->images)) {
      found++;
    } else if (len < size) {
      len += (size_t)snprintf(missing + len, size - len, "%s%s", len ? " and " : "", files[i]);
    }
  }
  return found == 2;
}

int mnist_find_files(const char *data_dir, int training, mnist_paths *paths, char *err,
                     size_t err_size) {
  const char *const *files = training ? train_files : eval_files;
  char wanted[128];
  snprintf(wanted, sizeof wanted, "%s and %s, each plain or .gz", files[0], files[1]);
  if (!data_dir || !*data_dir)
    return fail(-1, err, err_size, "needs --data_dir holding the MNIST-layout IDX files (%s)",
                wanted);
  struct stat st;
  if (stat(data_dir, &st) != 0)
    return fail(-1, err, err_size, "--data_dir=%s: %s (looked for the IDX files %s)", data_dir,
                strerror(errno), wanted);
  if (!S_ISDIR(st.st_mode))
    return fail(-1, err, err_size,
                "--data_dir=%s is not a directory (looked for the IDX files %s in it)", data_dir,
                wanted);
  char missing_top[128], missing_sub[128], sub[4096];
  if (find_in(data_dir, files, paths, missing_top, sizeof missing_top)) return 0;
  snprintf(sub, sizeof sub, "%s/%s", data_dir, SUBFOLDER);
  int sub_exists = ds_is_dir(sub);
  if (sub_exists && find_in(sub, files, paths, missing_sub, sizeof missing_sub)) return 0;
  return fail(-1, err, err_size,
              "--data_dir=%s holds no MNIST-layout %s split: looked for %s in %s, missing %s, "
              "and in %s, %s%s",
              data_dir, training ? "training" : "test", wanted, data_dir, missing_top, sub,
              sub_exists ? "missing " : "no such directory", sub_exists ? missing_sub : "");
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

int mnist_read_idx(const char *path, int ndims, idx_data *out, char *err, size_t err_size) {
  memset(out, 0, sizeof *out);
  char why[1024];
  idx_source *src = idx_source_file(path, why, sizeof why);
  int rc = IDX_IO_ERROR;
  if (src && ends_with(path, ".gz")) src = idx_source_gunzip(src, &rc, why, sizeof why);
  if (!src) return fail(rc, err, err_size, "%s: %s", path, why);
  rc = idx_load(src, path, ndims, out, err, err_size);
  idx_source_close(src);
  return rc;
}

void mnist_set_free(mnist_set *set) {
  if (!set) return;
  free(set->pixels);
  free(set->labels);
  memset(set, 0, sizeof *set);
}

int mnist_load(const mnist_paths *paths, mnist_set *set, char *err, size_t err_size) {
  memset(set, 0, sizeof *set);
  idx_data images, labels;
  int rc = mnist_read_idx(paths->images, 3, &images, err, err_size);
  if (rc != IDX_OK) return rc;
  if (images.dims[1] != MNIST_SIDE || images.dims[2] != MNIST_SIDE) {
    fail(IDX_BAD_DATA, err, err_size, "%s: images of %ux%u pixels; the MNIST layout's are 28x28",
         paths->images, images.dims[1], images.dims[2]);
    idx_data_free(&images);
    return IDX_BAD_DATA;
  }
  if ((rc = mnist_read_idx(paths->labels, 1, &labels, err, err_size)) != IDX_OK) {
    idx_data_free(&images);
    return rc;
  }
  if (labels.dims[0] != images.dims[0]) {
    fail(IDX_BAD_DATA, err, err_size,
         "%s holds %u labels and %s %u images: the two files of a split have one label per image",
         paths->labels, labels.dims[0], paths->images, images.dims[0]);
    idx_data_free(&images);
    idx_data_free(&labels);
    return IDX_BAD_DATA;
  }
  set->pixels = images.values;
  set->labels = labels.values;
  set->count = images.dims[0];
  for (int64_t i = 0; i < set->count; i++)
    if (set->labels[i] > set->max_label || i == 0) {
      set->max_label = set->labels[i];
      set->max_label_at = i;
    }
  snprintf(set->labels_path, sizeof set->labels_path, "%s", paths->labels);
  return IDX_OK;
}
