/* layout.c — recognising a --data_dir (layout.h). */
#define _POSIX_C_SOURCE 200809L
#include "layout.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shard_set.h"
#include <tfrecord/crc32c.h>
#include <tfrecord/tfrecord.h>

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_files(char **files, size_t count) {
  for (size_t i = 0; i < count; i++) free(files[i]);
  free(files);
}

/* DIR/<subset>-*-of-*, sorted, as tf_cnn_benchmarks' file pattern. -1 on a read error. */
static int list_shards(const char *dir, const char *subset, char ***out, size_t *count, char *err,
                       size_t err_size) {
  *out = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, err_size, "--data_dir=%s: %s", dir, strerror(errno));
    return -1;
  }
  char pattern[64];
  snprintf(pattern, sizeof pattern, "%s-*-of-*", subset);
  char **files = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (fnmatch(pattern, e->d_name, 0) != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **grown = realloc(files, cap * sizeof *files);
      if (!grown) {
        rc = -1;
        break;
      }
      files = grown;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    if (!(files[n] = malloc(len))) {
      rc = -1;
      break;
    }
    snprintf(files[n++], len, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  if (rc != 0) {
    free_files(files, n);
    snprintf(err, err_size, "--data_dir=%s: out of memory listing shards", dir);
    return -1;
  }
  if (n) qsort(files, n, sizeof *files, compare_names);
  *out = files;
  *count = n;
  return 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The shard count in a name "...-of-NNNNN", or 0. */
static long shard_total(const char *path) {
  const char *of = strstr(path, "-of-");
  return of ? strtol(of + 4, NULL, 10) : 0;
}

/* Records in each shard, reading only each record's 12-byte header and seeking over its
 * data (tfrecord_skip, the walk the stream makes): cheap even for large shards. A lost
 * framing ends a file's count there (reading the shard reports the damage). */
static int count_records(dataset_layout *layout, char *err, size_t err_size) {
  layout->file_records = calloc(layout->num_files, sizeof *layout->file_records);
  if (!layout->file_records) {
    snprintf(err, err_size, "out of memory counting the records of %zu shards", layout->num_files);
    return -1;
  }
  int64_t total = 0;
  for (size_t i = 0; i < layout->num_files; i++) {
    tfrecord_reader *reader;
    if (tfrecord_open(layout->files[i], &reader, err, err_size) != TFRECORD_OK) return -1;
    tfrecord_result r;
    char why[512];
    while ((r = tfrecord_skip(reader, why, sizeof why)) == TFRECORD_OK) layout->file_records[i]++;
    tfrecord_close(reader);
    if (r == TFRECORD_IO) {
      snprintf(err, err_size, "%s", why);
      return -1;
    }
    if (r == TFRECORD_CORRUPT) layout->damaged_files++;
    total += layout->file_records[i];
  }
  layout->examples = total;
  return 0;
}

/* Maps the validation folder's classes onto the training folder's indices by name, so
 * a validation split missing a class still labels the others as training did. */
static int map_to_train_classes(const char *data_dir, image_folder *split, char *err,
                                size_t err_size) {
  char train_dir[1024];
  snprintf(train_dir, sizeof train_dir, "%s/train", data_dir);
  if (!is_dir(train_dir)) return 0;
  image_folder train = {0};
  if (image_folder_scan(train_dir, &train, err, err_size) != 0) return -1;
  int32_t *index = malloc((size_t)(split->num_classes ? split->num_classes : 1) * sizeof *index);
  int rc = index ? 0 : -1;
  if (!index) snprintf(err, err_size, "out of memory mapping class folders");
  for (int32_t c = 0; rc == 0 && c < split->num_classes; c++) {
    index[c] = -1;
    for (int32_t t = 0; t < train.num_classes; t++)
      if (strcmp(train.classes[t], split->classes[c]) == 0) index[c] = t;
    if (index[c] < 0) {
      snprintf(err, err_size,
               "class folder '%s' of the validation split is not in %s: the "
               "model would have no label for it",
               split->classes[c], train_dir);
      rc = -1;
    }
  }
  for (size_t i = 0; rc == 0 && i < split->count; i++) split->labels[i] = index[split->labels[i]];
  free(index);
  image_folder_free(&train);
  return rc;
}

static int detect_folder(const char *data_dir, int training, dataset_layout *out, char *err,
                         size_t err_size) {
  const char *names[] = {training ? "train" : "validation", training ? NULL : "val"};
  for (size_t i = 0; i < 2 && names[i]; i++) {
    snprintf(out->where, sizeof out->where, "%s/%s", data_dir, names[i]);
    if (!is_dir(out->where)) continue;
    if (image_folder_scan(out->where, &out->folder, err, err_size) != 0) return -1;
    if (!training && map_to_train_classes(data_dir, &out->folder, err, err_size) != 0) return -1;
    out->kind = LAYOUT_FOLDER;
    out->examples = (int64_t)out->folder.count;
    return 1;
  }
  return 0;
}

int layout_detect(const char *data_dir, int training, int imagenet, int32_t num_classes,
                  int64_t known_examples, int allow_missing_shards, dataset_layout *out, char *err,
                  size_t err_size) {
  memset(out, 0, sizeof *out);
  if (!data_dir || !*data_dir) {
    snprintf(err, err_size, "no --data_dir given");
    return -1;
  }
  struct stat st;
  if (stat(data_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    int missing = stat(data_dir, &st) != 0;
    snprintf(err, err_size, "--data_dir=%s: %s", data_dir,
             missing ? strerror(errno) : "not a directory");
    return -1;
  }
  const char *subset = training ? "train" : "validation";
  if (list_shards(data_dir, subset, &out->files, &out->num_files, err, err_size) != 0) return -1;
  if (shard_set_check(data_dir, subset, out->files, &out->num_files, allow_missing_shards,
                      out->warning, sizeof out->warning, err, err_size) != 0)
    return layout_free(out), -1;
  if (out->num_files > 0) {
    out->kind = LAYOUT_TFRECORD;
    snprintf(out->where, sizeof out->where, "%s/%s-*-of-*", data_dir, subset);
    long total = shard_total(out->files[0]);
    bool full_imagenet = imagenet && known_examples > 0 && total == (training ? 1024 : 128) &&
                         out->num_files == (size_t)total;
    if (full_imagenet) out->examples = known_examples;
    else if (count_records(out, err, err_size) != 0) return layout_free(out), -1;
    return 0;
  }
  out->label_offset = imagenet ? 1 : 0;
  int found = detect_folder(data_dir, training, out, err, err_size);
  if (found < 0) return layout_free(out), -1;
  if (!found) {
    snprintf(err, err_size,
             "--data_dir=%s holds no %s data: looked for TFRecord shards %s-*-of-* (as "
             "TensorFlow's converters write them) and for JPEG folders %s/<class>/*.jpg "
             "(torchvision's ImageFolder%s)",
             data_dir, subset, subset, training ? "train" : "validation",
             training ? "" : "; or val/");
    layout_free(out);
    return -1;
  }
  if (out->folder.count == 0) {
    snprintf(err, err_size, "%s: %d class folders but no .jpg/.jpeg images%s%s", out->where,
             (int)out->folder.num_classes,
             out->folder.png_count ? " (PNG files are not read; e.g. " : "",
             out->folder.png_count ? out->folder.first_png : "");
    if (out->folder.png_count) strncat(err, ")", err_size - strlen(err) - 1);
    layout_free(out);
    return -1;
  }
  if (out->folder.num_classes + out->label_offset > num_classes) {
    snprintf(err, err_size,
             "%s has %d class folders, more than the model's %d classes%s (--num_classes)",
             out->where, (int)out->folder.num_classes, (int)num_classes,
             imagenet ? " less the unused label 0" : "");
    layout_free(out);
    return -1;
  }
  for (size_t i = 0; i < out->folder.count; i++) out->folder.labels[i] += out->label_offset;
  return 0;
}

void layout_free(dataset_layout *layout) {
  free_files(layout->files, layout->num_files);
  free(layout->file_records);
  layout->file_records = NULL;
  layout->files = NULL;
  layout->num_files = 0;
  image_folder_free(&layout->folder);
}
