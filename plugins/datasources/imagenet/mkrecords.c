/* mkrecords.c — cnnbench-mkrecords: a torchvision ImageFolder (DIR/<class>/<image>.jpg) turned
 * into TFRecord shards as TensorFlow's build_imagenet_data.py lays them out, so a folder of
 * JPEGs feeds a tf_cnn_benchmarks command line (and cnnbench's TFRecord path):
 *   OUT/<name>-00000-of-0000N ... , tf.Example records with build_imagenet_data.py's
 *   features; label = class index + 1 (ImageNet's 1001-class convention, 0 unused),
 *   synset = the class folder's name, bounding-box lists present and empty.
 * Examples are shuffled once by --seed and cut into contiguous ranges, one per shard, so
 * the output depends on the seed only, not on --num_threads. The JPEG bytes are stored as
 * they are; each image is decoded once (at 1/8 scale) so a corrupt or non-JPEG file is
 * skipped with a warning instead of reaching training. The output directory changes whole
 * or not at all (shard_output.h): shards of --name already there are refused unless
 * --overwrite, the new shards are written under temporary names and renamed into place
 * only when all are complete, and a failed or interrupted run (SIGINT, SIGTERM, SIGHUP)
 * removes its temporaries, leaving the directory as it found it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "example.h"
#include "image_folder.h"
#include "jpeg_image.h"
#include "shard_output.h"
#include <tfrecord/tfrecord.h>

enum { MAX_WARNINGS = 20, MAX_SHARDS = 99999, MAX_THREADS = 256 };
#define MAX_IMAGE_BYTES ((size_t)1 << 29) /* well under a record's 1 GiB limit */

static const char *prog = "cnnbench-mkrecords";

typedef struct options {
  const char *input_dir, *output_dir, *name;
  long num_shards, num_threads;
  uint64_t seed;
  int overwrite;
} options;

typedef struct job {
  const options *opt;
  const image_folder *folder;
  const size_t *order; /* shuffled example indices */
  const shard_output *out;
  atomic_long next_shard;
  atomic_size_t written, skipped;
  atomic_int warnings, failed, workers_done;
  pthread_mutex_t print_lock;
} job;

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s --input_dir=DIR --output_dir=OUT [--name=train] [--num_shards=1]\n"
          "       [--seed=0] [--num_threads=N] [--overwrite]\n"
          "Converts an ImageFolder (DIR/<class>/<image>.jpg, classes in sorted order) into\n"
          "TFRecord shards OUT/<name>-00000-of-NNNNN with tf.Example records as TensorFlow's\n"
          "build_imagenet_data.py writes them (image/class/label = class index + 1).\n"
          "Examples are shuffled by --seed; threads (default: the CPUs) each write whole\n"
          "shards, so more shards than one are needed for more than one thread.\n"
          "OUT holding shards named <name>-*-of-* already is refused; --overwrite replaces\n"
          "that set whole with the new one (only once every new shard is written).\n",
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
    /* The one flag with no value: --overwrite (or --overwrite=true/false). */
    if (!strcmp(a, "--overwrite") || !strcmp(a, "--overwrite=true")) {
      o->overwrite = 1;
      continue;
    }
    if (!strcmp(a, "--overwrite=false")) {
      o->overwrite = 0;
      continue;
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
    } else if (IS("--overwrite")) {
      fprintf(stderr, "%s: %s: must be --overwrite, --overwrite=true or --overwrite=false\n", prog,
              a);
      return -1;
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
      jpeg_image_decode_region(data, size, 0, 0, info.width, info.height,
                               jpeg_image_pick_scale(info.width, info.height, 1, 1), scratch, err,
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

/* For the test of an interrupted run, a moment a kill from outside cannot be sure to hit:
 * CNNB_FAULT_SIGSTOP_AT=mkrecords_shard_written stops the process with SIGSTOP once the
 * first shard's temporary is complete, as a user's kill -STOP then would. Once only: the
 * test continues the process once, and a second stop (a shard finished before the
 * signal sent meanwhile is taken) would wait for a SIGCONT no one sends. Nothing else
 * reads it. */
static void stop_here_if_asked(const char *point) {
  static atomic_int stopped;
  const char *at = getenv("CNNB_FAULT_SIGSTOP_AT");
  if (at && strcmp(at, point) == 0 && atomic_exchange(&stopped, 1) == 0) raise(SIGSTOP);
}

/* The shard's examples into its temporary (shard_output.h renames it once all are done):
 * 0, or -1 with the reason printed, or quietly when another shard failed first. */
static int write_shard(job *j, long shard, rgb_image *scratch) {
  const options *o = j->opt;
  size_t n = j->folder->count;
  size_t begin = (size_t)((unsigned __int128)n * (uint64_t)shard / (uint64_t)o->num_shards);
  size_t end = (size_t)((unsigned __int128)n * (uint64_t)(shard + 1) / (uint64_t)o->num_shards);
  const char *path = j->out->temp[shard];
  char err[512];
  tfrecord_writer *w;
  if (tfrecord_writer_open(path, &w, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return -1;
  }
  int rc = 0;
  /* Another shard's failure (or a signal) ends this one too: its work would be removed. */
  for (size_t i = begin; i < end && rc == 0 && !atomic_load(&j->failed); i++) {
    int r = convert(j, j->order[i], w, scratch);
    if (r < 0) rc = -1;
    else if (r == 0) atomic_fetch_add(&j->skipped, 1);
    else atomic_fetch_add(&j->written, 1);
  }
  if (atomic_load(&j->failed)) rc = -1;
  if (tfrecord_writer_close(w, err, sizeof err) != 0 && rc == 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    rc = -1;
  }
  if (rc == 0) stop_here_if_asked("mkrecords_shard_written");
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
  atomic_fetch_add(&j->workers_done, 1);
  return NULL;
}

/* The signals that end a run early. Blocked in every thread while the output directory
 * holds temporaries, so none ends the process between a write and its cleanup: the main
 * thread takes them with sigtimedwait, stops the workers, removes the temporaries, and
 * only then dies of the signal. One ignored when the run started (nohup) stays ignored. */
static void stop_signals(sigset_t *set) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  sigemptyset(set);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction now;
    if (sigaction(sigs[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(set, sigs[i]);
  }
}

/* Waits for the workers, taking any stop signal meanwhile: the signal, or 0. */
static int wait_for_workers(job *j, long workers, const sigset_t *set) {
  int got = 0;
  const struct timespec tick = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
  while (atomic_load(&j->workers_done) < workers) {
    int sig = sigtimedwait(set, NULL, &tick);
    if (sig > 0 && !got) {
      got = sig;
      atomic_store(&j->failed, 1);
    }
  }
  return got;
}

/* Dies of sig as if it had never been blocked, so a shell sees the usual status. */
static int die_of(int sig, const sigset_t *old_mask) {
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  raise(sig);
  pthread_sigmask(SIG_SETMASK, old_mask, NULL);
  pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  return 128 + sig; /* not reached unless sig is caught elsewhere */
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

  /* From here to the end the output directory may hold this run's temporaries. */
  sigset_t stops, old_mask;
  stop_signals(&stops);
  pthread_sigmask(SIG_BLOCK, &stops, &old_mask);
  shard_output out;
  int rc = shard_output_open(&out, opt.output_dir, opt.name, opt.num_shards, opt.overwrite, err,
                             sizeof err);
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    shard_output_free(&out);
    free(order);
    image_folder_free(&folder);
    return rc;
  }

  job j = {.opt = &opt, .folder = &folder, .order = order, .out = &out};
  atomic_init(&j.next_shard, 0);
  atomic_init(&j.written, 0);
  atomic_init(&j.skipped, 0);
  atomic_init(&j.warnings, 0);
  atomic_init(&j.failed, 0);
  atomic_init(&j.workers_done, 0);
  pthread_mutex_init(&j.print_lock, NULL);
  pthread_t threads[MAX_THREADS];
  long started = 0;
  for (; started < opt.num_threads; started++)
    if (pthread_create(&threads[started], NULL, worker, &j) != 0) break;
  if (started == 0) worker(&j); /* no thread to be had: this one does the work */
  int sig = wait_for_workers(&j, started ? started : 1, &stops);
  for (long t = 0; t < started; t++) pthread_join(threads[t], NULL);
  pthread_mutex_destroy(&j.print_lock);
  if (!sig) { /* one that came as the last shard ended still stops the run */
    const struct timespec now = {0, 0};
    int late = sigtimedwait(&stops, NULL, &now);
    if (late > 0) sig = late;
  }

  size_t written = atomic_load(&j.written), skipped = atomic_load(&j.skipped);
  if (sig) {
    fprintf(stderr,
            "%s: interrupted by %s; the new shards were removed, --output_dir=%s is as "
            "it was\n",
            prog,
            sig == SIGINT    ? "SIGINT"
            : sig == SIGTERM ? "SIGTERM"
                             : "SIGHUP",
            opt.output_dir);
    rc = 1;
  } else if (atomic_load(&j.failed)) {
    fprintf(stderr, "%s: failed; the new shards were removed, --output_dir=%s is as it was\n", prog,
            opt.output_dir);
    rc = 1;
  } else if (written == 0) {
    fprintf(stderr,
            "%s: every one of the %zu images was skipped (none is a readable JPEG); no shard "
            "written\n",
            prog, skipped);
    rc = 1;
  } else if (shard_output_commit(&out, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", prog, err);
    rc = 1;
  } else {
    printf("%s: wrote %zu examples of %d classes into %ld shards %s/%s-*-of-%05ld "
           "(labels 1..%d); skipped %zu files",
           prog, written, folder.num_classes, opt.num_shards, opt.output_dir, opt.name,
           opt.num_shards, folder.num_classes, skipped);
    if (out.num_old) printf("; replaced the %zu shards that were there", out.num_old);
    printf("\n");
  }
  if (rc != 0) shard_output_abandon(&out);
  shard_output_free(&out);
  free(order);
  image_folder_free(&folder);
  if (sig) return die_of(sig, &old_mask);
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  return rc;
}
