/* algo_cache_file.c — reading and appending the cudnn autotune cache file
 * (algo_cache_file.h has the format and the rules). Plain POSIX C: no CUDA here.
 *
 * The whole file is read once, at open, into an array of this GPU's records; a lookup
 * scans it from the end, so a later line wins. A GPU has a few hundred distinct
 * convolutions at most across every model and batch size it ran, and a run asks about
 * sixty: no index is needed. Appends reopen the file with O_APPEND at the first new
 * choice only, so a run whose choices all came from the cache never opens it for
 * writing (a read-only cache shared by a cluster works without a warning). */
#define _POSIX_C_SOURCE 200809L
#include "algo_cache_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONV_FIELDS (sizeof(gpu_conv_key) / sizeof(int32_t))
/* Columns: the identity (5), the direction, workspace limit and --winograd_nonfused (3),
 * the convolution's fields, the choice (4). */
#define IDENTITY_FIELDS 5
#define FIELDS (IDENTITY_FIELDS + 3 + CONV_FIELDS + 4)

/* gpu_conv_key's fields in order: the file's columns 9 to 25. */
static const char *const conv_columns[] = {
    "n",          "c",      "h",         "w",        "k",        "r",
    "s",          "pad_h",  "pad_w",     "stride_h", "stride_w", "dilation_h",
    "dilation_w", "groups", "data_type", "format",   "math"};
_Static_assert(sizeof conv_columns / sizeof *conv_columns == CONV_FIELDS,
               "gpu_conv_key changed: name the new column and raise GPU_ALGO_FILE_FORMAT");
_Static_assert(sizeof(gpu_conv_key) == CONV_FIELDS * sizeof(int32_t),
               "gpu_conv_key must hold int32_t fields only");

static const char *const dir_names[GPU_ALGO_FILE_DIRS] = {"forward", "backward_data",
                                                          "backward_filter"};

/* A line and the header the first one may carry go out in one write(2); PIPE_BUF (4096 on
 * Linux) is the size POSIX promises atomic for pipes, and local file systems write an
 * O_APPEND buffer that size whole too. A line is under 1 KiB (the GPU name is at most 255
 * bytes, every other field a number). */
#define WRITE_MAX PIPE_BUF

typedef struct record {
  gpu_algo_file_key key;
  gpu_algo_file_choice choice;
} record;

struct gpu_algo_file {
  cnnb_ctx *ctx;
  char *path;
  int create_dirs;
  /* The identity, as the file spells it. */
  char name[256];
  int32_t cc_major, cc_minor;
  uint64_t memory_mib, cudnn_version;
  char build[64];

  record *records;
  size_t count, capacity;

  int fd;          /* for appending; -1 until the first append opens it */
  int refused;     /* a problem was warned about: nothing more is written */
  int need_header; /* the file is empty: the next line carries the header */
  gpu_algo_file_stats stats;
};

/* "cudnn autotune cache <path>: <message>" at `level` (the ctx adds "cuda: "). */
static void say(const gpu_algo_file *f, cnnb_log_level level, const char *fmt, ...)
    CNNB_PRINTF(3, 4);
static void say(const gpu_algo_file *f, cnnb_log_level level, const char *fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  cnnb_log(f->ctx, level, "cudnn autotune cache %s: %s", f->path, message);
}

/* The one warning a handle gives: after it, nothing more is written. */
#define REFUSE(f, ...)                    \
  do {                                    \
    say((f), CNNB_LOG_WARN, __VA_ARGS__); \
    (f)->refused = 1;                     \
    (f)->stats.writable = 0;              \
  } while (0)

/* Copies a name into a field: tabs, newlines and other control bytes become spaces, so
 * the line keeps its columns. */
static void field_text(char *dst, size_t size, const char *src) {
  size_t i = 0;
  for (; src && src[i] && i + 1 < size; i++) {
    unsigned char ch = (unsigned char)src[i];
    dst[i] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
  }
  dst[i] = '\0';
  if (!dst[0] && size > 1) snprintf(dst, size, "unknown");
}

int gpu_algo_file_default_path(char *buf, size_t size) {
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (xdg && xdg[0] == '/') n = snprintf(buf, size, "%s/cnnbench/cudnn_autotune.tsv", xdg);
  else if (home && home[0] == '/')
    n = snprintf(buf, size, "%s/.cache/cnnbench/cudnn_autotune.tsv", home);
  else return -1;
  return n > 0 && (size_t)n < size ? 0 : -1;
}

/* ---- parsing ------------------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t *out) {
  if (*s < '0' || *s > '9') return 0; /* no sign, no space: strtoull would take both */
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return 0;
  *out = (uint64_t)v;
  return 1;
}

static int parse_i32(const char *s, int32_t *out) {
  int negative = *s == '-';
  uint64_t v = 0;
  if (!parse_u64(s + negative, &v) || v > (uint64_t)INT32_MAX + (uint64_t)negative) return 0;
  *out = negative ? (int32_t)(-(int64_t)v) : (int32_t)v;
  return 1;
}

/* "<major>.<minor>" */
static int parse_cc(char *s, int32_t *major, int32_t *minor) {
  char *dot = strchr(s, '.');
  if (!dot) return 0;
  *dot = '\0';
  int ok = parse_i32(s, major) && parse_i32(dot + 1, minor) && *major >= 0 && *minor >= 0;
  *dot = '.';
  return ok;
}

/* Milliseconds with up to three decimals, written and read without the C locale's
 * decimal point (a process under another LC_NUMERIC shares the file). */
static int parse_ms(char *s, double *out) {
  char *dot = strchr(s, '.');
  uint64_t whole = 0, frac = 0;
  size_t digits = 0;
  if (dot) {
    *dot = '\0';
    digits = strlen(dot + 1);
  }
  int ok = parse_u64(s, &whole) &&
           (!dot || (digits >= 1 && digits <= 3 && parse_u64(dot + 1, &frac)));
  if (dot) *dot = '.';
  if (!ok) return 0;
  double scale = digits == 1 ? 10.0 : digits == 2 ? 100.0 : 1000.0;
  *out = (double)whole + (digits ? (double)frac / scale : 0.0);
  return 1;
}

static int parse_dir(const char *s, int32_t *dir) {
  for (int i = 0; i < GPU_ALGO_FILE_DIRS; i++)
    if (!strcmp(s, dir_names[i])) {
      *dir = i;
      return 1;
    }
  return 0;
}

/* The identity fields of a parsed line, for comparing with the handle's. */
typedef struct identity {
  const char *name, *build;
  int32_t cc_major, cc_minor;
  uint64_t memory_mib, cudnn_version;
} identity;

/* Splits `line` (NUL-terminated, modified) at its tabs and parses every field: 1 and
 * *id, *r filled, or 0 for a line that is not a well-formed record. */
static int parse_record(char *line, identity *id, record *r) {
  char *field[FIELDS];
  size_t n = 0;
  for (char *p = line;; p++) {
    if (n == FIELDS) return 0; /* more fields than a record has */
    field[n++] = p;
    p = strchr(p, '\t');
    if (!p) break;
    *p = '\0';
  }
  if (n != FIELDS) return 0;
  for (size_t i = 0; i < n; i++)
    if (!field[i][0]) return 0;
  memset(id, 0, sizeof *id);
  memset(r, 0, sizeof *r);
  id->name = field[0];
  id->build = field[4];
  for (const char *p = id->name; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) return 0;
  if (!parse_cc(field[1], &id->cc_major, &id->cc_minor) || !parse_u64(field[2], &id->memory_mib) ||
      !parse_u64(field[3], &id->cudnn_version))
    return 0;
  size_t i = IDENTITY_FIELDS;
  int32_t winograd = 0;
  if (!parse_dir(field[i++], &r->key.dir) || !parse_u64(field[i++], &r->key.workspace_limit) ||
      !parse_i32(field[i++], &winograd) || (winograd != 0 && winograd != 1))
    return 0;
  r->key.winograd_nonfused = winograd;
  int32_t *conv = (int32_t *)&r->key.conv;
  for (size_t k = 0; k < CONV_FIELDS; k++)
    if (!parse_i32(field[i++], &conv[k])) return 0;
  if (!parse_i32(field[i++], &r->choice.algo) || r->choice.algo < 0 ||
      !parse_i32(field[i++], &r->choice.math) || r->choice.math < 0 ||
      !parse_u64(field[i++], &r->choice.workspace) || !parse_ms(field[i++], &r->choice.time_ms))
    return 0;
  return 1;
}

static int same_identity(const gpu_algo_file *f, const identity *id) {
  return !strcmp(id->name, f->name) && id->cc_major == f->cc_major && id->cc_minor == f->cc_minor &&
         id->memory_mib == f->memory_mib && id->cudnn_version == f->cudnn_version &&
         !strcmp(id->build, f->build);
}

static int same_key(const gpu_algo_file_key *a, const gpu_algo_file_key *b) {
  return a->dir == b->dir && a->winograd_nonfused == b->winograd_nonfused &&
         a->workspace_limit == b->workspace_limit && !memcmp(&a->conv, &b->conv, sizeof a->conv);
}

static int push(gpu_algo_file *f, const record *r) {
  if (f->count == f->capacity) {
    size_t capacity = f->capacity ? 2 * f->capacity : 64;
    record *grown = realloc(f->records, capacity * sizeof *grown);
    if (!grown) return 0;
    f->records = grown;
    f->capacity = capacity;
  }
  f->records[f->count++] = *r;
  return 1;
}

/* What a file's first line says. */
typedef enum header_kind { HEADER_OURS, HEADER_OTHER_VERSION, HEADER_NOT_OURS } header_kind;

static header_kind header_of(const char *line, size_t len, char *version, size_t version_size) {
  const size_t magic = strlen(GPU_ALGO_FILE_MAGIC);
  version[0] = '\0';
  if (len <= magic + 1 || memcmp(line, GPU_ALGO_FILE_MAGIC "\t", magic + 1)) return HEADER_NOT_OURS;
  size_t n = len - magic - 1;
  if (n >= version_size) n = version_size - 1;
  memcpy(version, line + magic + 1, n);
  version[n] = '\0';
  field_text(version, version_size, version);
  char ours[16];
  snprintf(ours, sizeof ours, "%d", GPU_ALGO_FILE_FORMAT);
  return len - magic - 1 == strlen(ours) && !memcmp(line + magic + 1, ours, strlen(ours))
             ? HEADER_OURS
             : HEADER_OTHER_VERSION;
}

/* Warns about a first line that is not this format's header; 1 when it is. */
static int check_header(gpu_algo_file *f, const char *line, size_t len) {
  char version[32];
  switch (header_of(line, len, version, sizeof version)) {
    case HEADER_OURS: return 1;
    case HEADER_OTHER_VERSION:
      REFUSE(f,
             "format %s, and this build reads format %d: neither read nor written (name "
             "another file with --cudnn_autotune_cache)",
             version, GPU_ALGO_FILE_FORMAT);
      return 0;
    case HEADER_NOT_OURS: break;
  }
  REFUSE(f,
         "not a cudnn autotune cache (its first line is not \"%s<TAB>%d\"): neither read nor "
         "written",
         GPU_ALGO_FILE_MAGIC, GPU_ALGO_FILE_FORMAT);
  return 0;
}

static const char *file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

/* Whether what fd refers to may be read or written as a cache: a regular file within the
 * size cap; otherwise one warning. */
static int usable(gpu_algo_file *f, int fd, struct stat *st) {
  if (fstat(fd, st)) {
    REFUSE(f, "cannot stat it (%s): autotuning without it", strerror(errno));
    return 0;
  }
  if (!S_ISREG(st->st_mode)) {
    REFUSE(f, "%s, not a regular file: neither read nor written", file_kind(st->st_mode));
    return 0;
  }
  if ((uint64_t)st->st_size > (uint64_t)GPU_ALGO_FILE_MAX_BYTES) {
    REFUSE(f,
           "%lld bytes, more than the %zu MiB a cache may have: neither read nor written "
           "(remove it, or name another file with --cudnn_autotune_cache)",
           (long long)st->st_size, GPU_ALGO_FILE_MAX_BYTES >> 20);
    return 0;
  }
  return 1;
}

/* Reads the file's lines into f->records. */
static void read_file(gpu_algo_file *f) {
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
  int fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return; /* no cache yet: the first append creates it */
    REFUSE(f, "cannot open it (%s): autotuning without it", strerror(errno));
    f->stats.readable = 0;
    return;
  }
  struct stat st;
  if (!usable(f, fd, &st)) {
    f->stats.readable = 0;
    close(fd);
    return;
  }
  /* The size fstat gave: lines appended after it are other processes' news, not needed. */
  size_t size = (size_t)st.st_size, got = 0;
  char *text = malloc(size + 1);
  if (!text) {
    REFUSE(f, "no memory to read its %zu bytes: autotuning without it", size);
    f->stats.readable = 0;
    close(fd);
    return;
  }
  while (got < size) {
    ssize_t r = read(fd, text + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      REFUSE(f, "reading it failed (%s): autotuning without it", strerror(errno));
      f->stats.readable = 0;
      free(text);
      close(fd);
      return;
    }
    if (r == 0) break; /* shrunk meanwhile: someone else's doing; take what is there */
    got += (size_t)r;
  }
  close(fd);
  text[got] = '\0';

  int first = 1;
  for (char *line = text; line < text + got;) {
    char *nl = memchr(line, '\n', (size_t)(text + got - line));
    size_t len = nl ? (size_t)(nl - line) : (size_t)(text + got - line);
    line[len] = '\0';
    char *next = line + len + 1;
    if (first) {
      first = 0;
      if (!nl) REFUSE(f, "its first line is cut short: neither read nor written (remove it)");
      if (!nl || !check_header(f, line, len)) {
        f->stats.readable = 0;
        break;
      }
    } else if (!nl) {
      f->stats.bad_lines++; /* the last line, unterminated: torn */
    } else if (len == 0 || line[0] == '#') {
      /* empty, or a comment */
    } else {
      char version[32];
      identity id;
      record r;
      if (header_of(line, len, version, sizeof version) == HEADER_OURS) {
        /* Two processes that both found the file empty both wrote the header. */
      } else if (!parse_record(line, &id, &r)) {
        f->stats.bad_lines++;
      } else if (!same_identity(f, &id)) {
        f->stats.others++;
      } else if (!push(f, &r)) {
        REFUSE(f, "no memory for its choices: using the %zu read so far", f->count);
        break;
      } else {
        f->stats.records++;
      }
    }
    line = next;
  }
  free(text);
  if (f->stats.bad_lines)
    say(f, CNNB_LOG_DEBUG, "%zu line(s) skipped: torn, or of another format", f->stats.bad_lines);
  say(f, CNNB_LOG_DEBUG, "%zu choice(s) for this GPU read (%zu of other GPUs or versions)",
      f->stats.records, f->stats.others);
}

gpu_algo_file *gpu_algo_file_open(cnnb_ctx *ctx, const char *path, int create_dirs,
                                  const gpu_algo_file_gpu *gpu) {
  gpu_algo_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    cnnb_log(ctx, CNNB_LOG_WARN,
             "cudnn autotune cache %s: out of memory: autotuning "
             "without it",
             path);
    return NULL;
  }
  f->ctx = ctx;
  f->create_dirs = create_dirs;
  f->fd = -1;
  field_text(f->name, sizeof f->name, gpu->name);
  field_text(f->build, sizeof f->build, gpu->build);
  f->cc_major = gpu->cc_major;
  f->cc_minor = gpu->cc_minor;
  f->memory_mib = gpu->memory_mib;
  f->cudnn_version = gpu->cudnn_version;
  f->stats.readable = f->stats.writable = 1;
  read_file(f);
  return f;
}

int gpu_algo_file_find(const gpu_algo_file *f, const gpu_algo_file_key *key,
                       gpu_algo_file_choice *out) {
  if (!f) return 0;
  for (size_t i = f->count; i-- > 0;)
    if (same_key(&f->records[i].key, key)) {
      *out = f->records[i].choice;
      return 1;
    }
  return 0;
}

/* ---- appending ---------------------------------------------------------------------- */

/* mkdir -p of path's parent directory; errors are left to the open that follows. */
static void make_parents(const char *path) {
  char *copy = strdup(path);
  if (!copy) return;
  for (char *p = copy + 1; (p = strchr(p, '/')); p++) {
    *p = '\0';
    if (mkdir(copy, 0700) && errno != EEXIST) break;
    *p = '/';
  }
  free(copy);
}

/* Opens the file for appending, checking it is still what was read (or new). */
static int open_append(gpu_algo_file *f) {
  if (f->create_dirs) make_parents(f->path);
  /* O_RDWR to read the header back; O_NONBLOCK so a FIFO put there since never blocks;
   * O_CREAT without O_TRUNC: an existing file is only ever added to. */
  int fd = open(f->path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0666);
  if (fd < 0) {
    REFUSE(f,
           "cannot open it for appending (%s): this run's new choices are not kept "
           "(--cudnn_autotune_cache=PATH names another file, an empty value none)",
           strerror(errno));
    return 0;
  }
  struct stat st;
  if (!usable(f, fd, &st)) {
    close(fd);
    return 0;
  }
  if (st.st_size == 0) {
    f->need_header = 1;
  } else {
    char head[128];
    ssize_t n = pread(fd, head, sizeof head, 0);
    const char *nl = n > 0 ? memchr(head, '\n', (size_t)n) : NULL;
    if (!nl) {
      REFUSE(f, "its first line is cut short: neither read nor written");
      close(fd);
      return 0;
    }
    if (!check_header(f, head, (size_t)(nl - head))) {
      close(fd);
      return 0;
    }
  }
  f->fd = fd;
  return 1;
}

static size_t format_record(char *buf, size_t size, const gpu_algo_file *f,
                            const gpu_algo_file_key *key, const gpu_algo_file_choice *c) {
  size_t len = 0;
  int n = snprintf(buf, size, "%s\t%d.%d\t%llu\t%llu\t%s\t%s\t%llu\t%d", f->name, (int)f->cc_major,
                   (int)f->cc_minor, (unsigned long long)f->memory_mib,
                   (unsigned long long)f->cudnn_version, f->build, dir_names[key->dir],
                   (unsigned long long)key->workspace_limit, key->winograd_nonfused ? 1 : 0);
  if (n < 0 || (size_t)n >= size) return 0;
  len = (size_t)n;
  const int32_t *conv = (const int32_t *)&key->conv;
  for (size_t k = 0; k < CONV_FIELDS; k++) {
    n = snprintf(buf + len, size - len, "\t%d", (int)conv[k]);
    if (n < 0 || (size_t)n >= size - len) return 0;
    len += (size_t)n;
  }
  double ms = c->time_ms > 0.0 && c->time_ms < 1e12 ? c->time_ms : 0.0;
  unsigned long long us = (unsigned long long)(ms * 1000.0 + 0.5);
  n = snprintf(buf + len, size - len, "\t%d\t%d\t%llu\t%llu.%03llu\n", (int)c->algo, (int)c->math,
               (unsigned long long)c->workspace, us / 1000, us % 1000);
  if (n < 0 || (size_t)n >= size - len) return 0;
  return len + (size_t)n;
}

static size_t format_header(char *buf, size_t size) {
  int n = snprintf(buf, size,
                   "%s\t%d\n# cnnbench's cuDNN convolution algorithm choices "
                   "(--cudnn_autotune_cache): one line per choice, appended by every run; "
                   "lines that do not parse are skipped\n"
                   "# gpu\tcc\tmemory_mib\tcudnn\tcnnbench_cuda\tdirection\tworkspace_limit\t"
                   "winograd_nonfused",
                   GPU_ALGO_FILE_MAGIC, GPU_ALGO_FILE_FORMAT);
  if (n < 0 || (size_t)n >= size) return 0;
  size_t len = (size_t)n;
  for (size_t k = 0; k < CONV_FIELDS; k++) {
    n = snprintf(buf + len, size - len, "\t%s", conv_columns[k]);
    if (n < 0 || (size_t)n >= size - len) return 0;
    len += (size_t)n;
  }
  n = snprintf(buf + len, size - len, "\talgo\talgo_math\tworkspace\ttime_ms\n");
  if (n < 0 || (size_t)n >= size - len) return 0;
  return len + (size_t)n;
}

void gpu_algo_file_append(gpu_algo_file *f, const gpu_algo_file_key *key,
                          const gpu_algo_file_choice *choice) {
  if (!f || key->dir < 0 || key->dir >= GPU_ALGO_FILE_DIRS) return;
  record r = {.key = *key, .choice = *choice};
  (void)push(f, &r); /* out of memory: the caller keeps its own copy anyway */
  if (f->refused || (f->fd < 0 && !open_append(f))) return;

  char buf[WRITE_MAX];
  size_t len = 0;
  if (f->need_header) {
    len = format_header(buf, sizeof buf);
  } else {
    /* A torn last line (a write the disk cut short) would swallow this one: end it
     * first. An empty line costs a reader nothing. */
    char last = '\n';
    struct stat st;
    if (!fstat(f->fd, &st) && st.st_size > 0 && pread(f->fd, &last, 1, st.st_size - 1) == 1 &&
        last != '\n')
      buf[len++] = '\n';
  }
  size_t line = len || !f->need_header ? format_record(buf + len, sizeof buf - len, f, key, choice)
                                       : 0;
  if (!line) {
    say(f, CNNB_LOG_DEBUG, "a choice's line is longer than %d bytes: not kept", WRITE_MAX);
    return;
  }
  len += line;
  ssize_t w;
  do w = write(f->fd, buf, len);
  while (w < 0 && errno == EINTR);
  if (w < 0 || (size_t)w != len) {
    if (w < 0)
      REFUSE(f, "appending failed (%s): this run's other new choices are not kept",
             strerror(errno));
    else
      REFUSE(f,
             "only %zd of %zu bytes appended (disk full?): this run's other new choices are "
             "not kept",
             w, len);
    return;
  }
  f->need_header = 0;
  f->stats.appended++;
}

const char *gpu_algo_file_path(const gpu_algo_file *f) { return f ? f->path : ""; }

void gpu_algo_file_stats_of(const gpu_algo_file *f, gpu_algo_file_stats *out) {
  memset(out, 0, sizeof *out);
  if (f) *out = f->stats;
}

void gpu_algo_file_close(gpu_algo_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  free(f->records);
  free(f->path);
  free(f);
}
