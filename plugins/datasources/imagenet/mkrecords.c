/* mkrecords.c — cnnbench-mkrecords: a torchvision ImageFolder (DIR/<class>/<image>.jpg) turned
 * into TFRecord shards as TensorFlow's build_imagenet_data.py lays them out, so a folder of
 * JPEGs feeds a tf_cnn_benchmarks command line (and cnnbench's TFRecord path):
 *   OUT/<name>-00000-of-0000N ... , tf.Example records with build_imagenet_data.py's
 *   features; label = class index + 1 (ImageNet's 1001-class convention, 0 unused),
 *   synset = the class folder's name, bounding-box lists present and empty.
 * Examples are shuffled once by --seed and cut into contiguous ranges, one per shard, so
 * the output depends on the seed only, not on --num_threads. The JPEG bytes are stored as
 * they are; each image is decoded once (at 1/8 scale) so a corrupt or non-JPEG file is
 * skipped with a warning instead of reaching training. Each shard is written under a
 * temporary name and renamed when complete and synced. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "example.h"
#include "image_folder.h"
#include "jpeg_image.h"
#include <tfrecord/tfrecord.h>

enum { MAX_WARNINGS = 20, MAX_SHARDS = 99999, MAX_THREADS = 256 };
#define MAX_IMAGE_BYTES ((size_t)1 << 29) /* well under a record's 1 GiB limit */

static const char *prog = "cnnbench-mkrecords";

typedef struct options {
  const char *input_dir, *output_dir, *name;
  long num_shards, num_threads;
  uint64_t seed;
} options;

typedef struct job {
  const options *opt;
  const image_folder *folder;
  const size_t *order; /* shuffled example indices */
  atomic_long next_shard;
  atomic_size_t written, skipped;
  atomic_int warnings, failed;
  pthread_mutex_t print_lock;
} job;

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s --input_dir=DIR --output_dir=OUT [--name=train] [--num_shards=1]\n"
          "       [--seed=0] [--num_threads=N]\n"
          "Converts an ImageFolder (DIR/<class>/<image>.jpg, classes in sorted order) into\n"
          "TFRecord shards OUT/<name>-00000-of-NNNNN with tf.Example records as TensorFlow's\n"
          "build_imagenet_data.py writes them (image/class/label = class index + 1).\n"
          "Examples are shuffled by --seed; threads (default: the CPUs) each write whole\n"
          "shards, so more shards than one are needed for more than one thread.\n",
          prog);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi) {
    fprintf(stderr, "%s: %s=%s: must be an integer in [%ld, %ld]\n", prog, flag, v, lo, hi);
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  long procs = sysconf(_SC_NPROCESSORS_ONLN);
  *o = (options){.name = "train", .num_shards = 1, .num_threads = 0, .seed = 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *eq = strchr(a, '=');
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (strncmp(a, "--", 2) != 0 || !eq) {
      fprintf(stderr, "%s: unexpected argument '%s' (flags are --name=value)\n", prog, a);
      return -1;
    }
    size_t klen = (size_t)(eq - a);
    const char *v = eq + 1;
#define IS(flag) (klen == strlen(flag) && !strncmp(a, flag, klen))
    if (IS("--input_dir")) {
      o->input_dir = v;
    } else if (IS("--output_dir")) {
      o->output_dir = v;
    } else if (IS("--name")) {
      if (!*v || strchr(v, '/')) {
        fprintf(stderr, "%s: --name=%s: must be a non-empty file name prefix\n", prog, v);
        return -1;
      }
      o->name = v;
    } else if (IS("--num_shards")) {
      if (parse_long("--num_shards", v, 1, MAX_SHARDS, &o->num_shards)) return -1;
    } else if (IS("--num_threads")) {
      if (parse_long("--num_threads", v, 1, MAX_THREADS, &o->num_threads)) return -1;
    } else if (IS("--seed")) {
      char *end;
      errno = 0;
      unsigned long long s = strtoull(v, &end, 10);
      if (!*v || *end || errno || *v == '-') {
        fprintf(stderr, "%s: --seed=%s: must be a non-negative integer\n", prog, v);
        return -1;
      }
      o->seed = s;
    } else {
      fprintf(stderr, "%s: unknown flag %.*s\n", prog, (int)klen, a);
      return -1;
    }
#undef IS
  }
  if (!o->input_dir || !*o->input_dir || !o->output_dir || !*o->output_dir) {
    fprintf(stderr, "%s: --input_dir and --output_dir are required\n", prog);
    usage(stderr);
    return -1;
  }
  if (o->num_threads == 0) o->num_threads = procs > 0 ? procs : 1;
  if (o->num_threads > o->num_shards) o->num_threads = o->num_shards;
  return 0;
}

/* splitmix64: a small, well-mixed generator; the shuffle depends on nothing but the seed. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject). */
static uint64_t below(uint64_t *state, uint64_t n) {
  for (;;) {
    unsigned __int128 m = (unsigned __int128)splitmix64(state) * n;
    uint64_t low = (uint64_t)m;
    if (low >= n || low >= (0 - n) % n) return (uint64_t)(m >> 64);
  }
}

static void warn(job *j, const char *fmt, const char *a, const char *b) {
  int n = atomic_fetch_add(&j->warnings, 1);
  if (n >= MAX_WARNINGS) return;
  pthread_mutex_lock(&j->print_lock);
  fprintf(stderr, "%s: warning: ", prog);
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  if (n == MAX_WARNINGS - 1) fprintf(stderr, "%s: (further warnings not shown)\n", prog);
  pthread_mutex_unlock(&j->print_lock);
}

/* The whole file, or NULL with err. */
static uint8_t *read_file(const char *path, size_t *size, char *err, size_t err_size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, err_size, "%s", strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > MAX_IMAGE_BYTES) {
    snprintf(err, err_size, "larger than %zu bytes", MAX_IMAGE_BYTES);
    fclose(f);
    return NULL;
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    snprintf(err, err_size, "%s", buf ? "read failed" : "out of memory");
    free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  *size = n;
  return buf;
}

/* One example into the writer: 1 written, 0 skipped (warned), -1 a write error. */
static int convert(job *j, size_t index, tfrecord_writer *w, rgb_image *scratch) {
  const image_folder *folder = j->folder;
  const char *path = folder->paths[index];
  char err[512];
  size_t size = 0;
  uint8_t *data = read_file(path, &size, err, sizeof err);
  if (!data) {
    warn(j, "%s: %s (skipped)", path, err);
    return 0;
  }
  jpeg_info info;
  if (jpeg_image_info(data, size, &info, err, sizeof err) != 0 ||
      jpeg_image_decode_region(data, size, 0, 0, info.width, info.height, 1, 1, scratch, err,
                               sizeof err) != 0) {
    warn(j, "%s: %s (skipped)", path, err);
    free(data);
    return 0;
  }
  int32_t label = folder->labels[index];
  const char *synset = folder->classes[label];
  const char *base = strrchr(path, '/');
  static const char *const colorspaces[] = {"", "Gray", "", "RGB", "CMYK"};
  example_fields fields = {
      .image = data,
      .image_size = size,
      .label = (int64_t)label + 1,
      .synset = synset,
      .text = synset,
      .filename = base ? base + 1 : path,
      .colorspace = info.components >= 1 && info.components <= 4 ? colorspaces[info.components]
                                                                 : "",
      .height = info.height,
      .width = info.width,
      .channels = info.components,
      .boxes = NULL,
      .num_boxes = 0,
  };
  uint8_t *record = NULL;
  size_t record_size = 0;
  int rc = 1;
  if (example_encode(&fields, &record, &record_size) != 0) {
    snprintf(err, sizeof err, "%s: out of memory encoding the example", path);
    rc = -1;
  } else if (tfrecord_write(w, record, record_size, err, sizeof err) != 0) {
    rc = -1;
  }
  if (rc < 0) {
    pthread_mutex_lock(&j->print_lock);
    fprintf(stderr, "%s: %s\n", prog, err);
    pthread_mutex_unlock(&j->print_lock);
  }
  free(record);
  free(data);
  return rc;
}

static int write_shard(job *j, long shard, rgb_image *scratch) {
  const options *o = j->opt;
  size_t n = j->folder->count;
  size_t begin = (size_t)((unsigned __int128)n * (uint64_t)shard / (uint64_t)o->num_shards);
  size_t end = (size_t)((unsigned __int128)n * (uint64_t)(shard + 1) / (uint64_t)o->num_shards);
  size_t plen = strlen(o->output_dir) + strlen(o->name) + 64;
  char *final_path = malloc(plen), *tmp_path = malloc(plen + 8);
  char err[512];
  if (!final_path || !tmp_path) {
    free(final_path);
    free(tmp_path);
    fprintf(stderr, "%s: out of memory\n", prog);
    return -1;
  }
  snprintf(final_path, plen, "%s/%s-%05ld-of-%05ld", o->output_dir, o->name, shard, o->num_shards);
  snprintf(tmp_path, plen + 8, "%s.tmp", final_path);
  tfrecord_writer *w;
  int rc = 0;
  if (tfrecord_writer_open(tmp_path, &w, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    rc = -1;
  } else {
    for (size_t i = begin; i < end && rc == 0; i++) {
      int r = convert(j, j->order[i], w, scratch);
      if (r < 0) rc = -1;
      else if (r == 0) atomic_fetch_add(&j->skipped, 1);
      else atomic_fetch_add(&j->written, 1);
    }
    if (tfrecord_writer_close(w, err, sizeof err) != 0 && rc == 0) {
      fprintf(stderr, "%s: %s\n", prog, err);
      rc = -1;
    }
    if (rc == 0 && rename(tmp_path, final_path) != 0) {
      fprintf(stderr, "%s: rename %s to %s: %s\n", prog, tmp_path, final_path, strerror(errno));
      rc = -1;
    }
    if (rc != 0) unlink(tmp_path);
  }
  free(final_path);
  free(tmp_path);
  return rc;
}

static void *worker(void *arg) {
  job *j = arg;
  rgb_image scratch = {0};
  for (;;) {
    if (atomic_load(&j->failed)) break;
    long shard = atomic_fetch_add(&j->next_shard, 1);
    if (shard >= j->opt->num_shards) break;
    if (write_shard(j, shard, &scratch) != 0) atomic_store(&j->failed, 1);
  }
  rgb_image_free(&scratch);
  return NULL;
}

int main(int argc, char **argv) {
  options opt;
  if (parse_args(argc, argv, &opt) != 0) return 2;
  image_folder folder;
  char err[1024];
  if (image_folder_scan(opt.input_dir, &folder, err, sizeof err) != 0) {
    fprintf(stderr, "%s: --input_dir=%s: %s\n", prog, opt.input_dir, err);
    return 2;
  }
  if (folder.png_count)
    fprintf(stderr, "%s: warning: %zu .png files not converted (only JPEG is stored), e.g. %s\n",
            prog, folder.png_count, folder.first_png);
  if (folder.count == 0) {
    fprintf(stderr, "%s: --input_dir=%s: %d class folders but no .jpg/.jpeg images in them\n", prog,
            opt.input_dir, folder.num_classes);
    image_folder_free(&folder);
    return 2;
  }
  if (mkdir(opt.output_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: --output_dir=%s: %s\n", prog, opt.output_dir, strerror(errno));
    image_folder_free(&folder);
    return 1;
  }
  struct stat st;
  if (stat(opt.output_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "%s: --output_dir=%s: not a directory\n", prog, opt.output_dir);
    image_folder_free(&folder);
    return 1;
  }

  size_t *order = malloc(folder.count * sizeof *order);
  if (!order) {
    fprintf(stderr, "%s: out of memory\n", prog);
    image_folder_free(&folder);
    return 1;
  }
  for (size_t i = 0; i < folder.count; i++) order[i] = i;
  uint64_t state = opt.seed;
  for (size_t i = folder.count - 1; i > 0; i--) { /* Fisher-Yates */
    size_t k = (size_t)below(&state, (uint64_t)i + 1);
    size_t t = order[i];
    order[i] = order[k];
    order[k] = t;
  }

  job j = {.opt = &opt, .folder = &folder, .order = order};
  atomic_init(&j.next_shard, 0);
  atomic_init(&j.written, 0);
  atomic_init(&j.skipped, 0);
  atomic_init(&j.warnings, 0);
  atomic_init(&j.failed, 0);
  pthread_mutex_init(&j.print_lock, NULL);
  pthread_t threads[MAX_THREADS];
  long started = 0;
  for (; started < opt.num_threads; started++)
    if (pthread_create(&threads[started], NULL, worker, &j) != 0) break;
  if (started == 0) worker(&j);
  for (long t = 0; t < started; t++) pthread_join(threads[t], NULL);
  pthread_mutex_destroy(&j.print_lock);

  size_t written = atomic_load(&j.written), skipped = atomic_load(&j.skipped);
  int rc = 0;
  if (atomic_load(&j.failed)) {
    fprintf(stderr, "%s: failed; shards not completed were removed\n", prog);
    rc = 1;
  } else if (written == 0) {
    fprintf(stderr, "%s: every one of the %zu images was skipped (none is a readable JPEG)\n", prog,
            skipped);
    rc = 1;
  } else {
    printf("%s: wrote %zu examples of %d classes into %ld shards %s/%s-*-of-%05ld "
           "(labels 1..%d); skipped %zu files\n",
           prog, written, folder.num_classes, opt.num_shards, opt.output_dir, opt.name,
           opt.num_shards, folder.num_classes, skipped);
  }
  free(order);
  image_folder_free(&folder);
  return rc;
}
