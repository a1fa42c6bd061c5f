/* json_lines_check.c — checks one --benchmark_log_dir file against the schema
 * docs/checkpoints-and-logs.md documents ("Benchmark log"), for cli/benchmark_log.sh:
 *   json_lines_check LOG RANK [REPORT | -failed]
 * - every line is one JSON object ending in a newline; record kinds in order: run,
 *   then step / eval / checkpoint, then one summary, last;
 * - every record's common keys ("record", "time", "rank" == RANK) and each kind's
 *   required keys with their types;
 * - the step records are exactly the displayed steps the run record implies: step 1,
 *   every display_every-th, and the last, each with global_step = step + warm-up;
 * - a finished run's summary: status "ok", steps = num_batches, this rank's images;
 *   with REPORT (the console report of the same run): the same step numbers as its step
 *   lines (--eval's "N<TAB>X examples/sec" lines too), and images_per_sec equal to
 *   "total images/sec: X" within X's rounding;
 * - with -failed: the summary's status is a message, not "ok".
 * Prints what it found wrong and exits 1; 2 on bad usage or an unreadable file. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_path;
static int failures;

static void fail(int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "json_lines_check: %s:%d: ", log_path, line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  failures++;
}

/* Types a key may hold: a bit set, so "string or null" is two bits. */
enum { STR = 1, INT = 2, REAL = 4, NUM = INT | REAL, BOOL = 8, OBJ = 16, ARR = 32, NUL = 64 };

static bool has_type(const json_t *v, int types) {
  return ((types & STR) && json_is_string(v)) || ((types & INT) && json_is_integer(v)) ||
         ((types & REAL) && json_is_real(v)) || ((types & BOOL) && json_is_boolean(v)) ||
         ((types & OBJ) && json_is_object(v)) || ((types & ARR) && json_is_array(v)) ||
         ((types & NUL) && json_is_null(v));
}

typedef struct key_spec {
  const char *key;
  int types;
} key_spec;

static void require(int line, const char *where, const json_t *obj, const key_spec *keys,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_object_get(obj, keys[i].key);
    if (!v) fail(line, "%s: no key \"%s\"", where, keys[i].key);
    else if (!has_type(v, keys[i].types))
      fail(line, "%s: \"%s\" has the wrong type", where, keys[i].key);
  }
}
#define REQUIRE(line, where, obj, ...)                                \
  do {                                                                \
    static const key_spec keys_[] = {__VA_ARGS__};                    \
    require(line, where, obj, keys_, sizeof keys_ / sizeof keys_[0]); \
  } while (0)

static double num(const json_t *obj, const char *key) {
  return json_number_value(json_object_get(obj, key));
}
static long long integer(const json_t *obj, const char *key) {
  return json_integer_value(json_object_get(obj, key));
}

static void check_run(int line, const json_t *r) {
  REQUIRE(line, "run", r, {"cnnbench_version", STR}, {"abi", STR}, {"command_line", ARR},
          {"flags", OBJ}, {"plugin_flags", OBJ}, {"flags_set", ARR}, {"resolved", OBJ},
          {"machine", OBJ}, {"plugins", OBJ}, {"device_description", STR | NUL},
          {"libraries", OBJ});
  unsigned major, minor;
  char end;
  const char *abi = json_string_value(json_object_get(r, "abi"));
  if (abi && sscanf(abi, "%u.%u%c", &major, &minor, &end) != 2)
    fail(line, "run: abi \"%s\" is not MAJOR.MINOR", abi);
  const json_t *argv = json_object_get(r, "command_line");
  if (json_array_size(argv) < 1 || !json_is_string(json_array_get(argv, 0)))
    fail(line, "run: command_line is not a non-empty array of strings");
  const json_t *flags = json_object_get(r, "flags");
  if (!json_is_string(json_object_get(flags, "benchmark_log_dir")))
    fail(line, "run: flags has no string benchmark_log_dir");
  const json_t *res = json_object_get(r, "resolved");
  REQUIRE(line, "run.resolved", res, {"model", STR}, {"dataset", STR}, {"data_dir", STR | NUL},
          {"datasource", STR}, {"device", STR}, {"strategy", STR}, {"mode", STR},
          {"batch_size_per_replica", INT}, {"global_batch_size", INT}, {"replicas_per_rank", INT},
          {"ranks", INT}, {"image_size", INT}, {"num_classes", INT}, {"precision", STR},
          {"input_dtype", STR}, {"optimizer", STR | NUL}, {"num_batches", INT},
          {"num_warmup_batches", INT}, {"display_every", INT}, {"examples_per_epoch", INT | NUL},
          {"num_epochs", NUM | NUL});
  if (integer(res, "global_batch_size") != integer(res, "batch_size_per_replica") *
                                               integer(res, "replicas_per_rank") *
                                               integer(res, "ranks"))
    fail(line, "run.resolved: global_batch_size is not batch x replicas x ranks");
  REQUIRE(line, "run.machine", json_object_get(r, "machine"), {"hostname", STR | NUL},
          {"os", STR | NUL}, {"os_release", STR | NUL}, {"arch", STR | NUL},
          {"cpu_model", STR | NUL}, {"logical_cores", INT | NUL}, {"memory_bytes", INT | NUL},
          {"pid", INT});
  static const char *const kinds[] = {"model", "device", "strategy", "datasource"};
  for (size_t k = 0; k < 4; k++) {
    const json_t *p = json_object_get(json_object_get(r, "plugins"), kinds[k]);
    char where[64];
    snprintf(where, sizeof where, "run.plugins.%s", kinds[k]);
    if (!json_is_object(p)) fail(line, "%s: missing", where);
    else
      REQUIRE(line, where, p, {"name", STR}, {"plugin", STR}, {"version", STR}, {"abi", STR},
              {"path", STR}, {"description", STR});
  }
  REQUIRE(line, "run.libraries", json_object_get(r, "libraries"), {"jansson", STR});
}

/* The steps the report prints a line for (report.h): 1, every display_every-th, last. */
static bool displayed(long long step, long long every, long long last) {
  return step == 1 || (every > 0 && step % every == 0) || step == last;
}

/* The numbers at the start of the report's step lines (an --eval run's included), and
 * its total. */
static int read_report(const char *path, long long *steps, int max, double *total, int *decimals) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[1024];
  int n = 0;
  *total = NAN;
  while (fgets(line, sizeof line, f)) {
    long long step;
    char rest[16];
    double rate;
    /* Training's "N<TAB>images/sec: ..." and --eval's "N<TAB>X examples/sec". */
    if ((sscanf(line, "%lld\timages/sec%15s", &step, rest) == 2 ||
         sscanf(line, "%lld\t%lf examples/sec%c", &step, &rate, rest) == 3) &&
        n < max)
      steps[n++] = step;
    const char *t = "total images/sec: ";
    if (strncmp(line, t, strlen(t)) == 0) {
      *total = atof(line + strlen(t));
      const char *dot = strchr(line + strlen(t), '.');
      *decimals = dot ? (int)strspn(dot + 1, "0123456789") : 0;
    }
  }
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: json_lines_check LOG RANK [REPORT | -failed]\n");
    return 2;
  }
  log_path = argv[1];
  long long rank = atoll(argv[2]);
  bool failed = argc == 4 && strcmp(argv[3], "-failed") == 0;
  const char *report = argc == 4 && !failed ? argv[3] : NULL;
  FILE *f = fopen(log_path, "r");
  if (!f) {
    fprintf(stderr, "json_lines_check: cannot read %s\n", log_path);
    return 2;
  }
  enum { MAX_STEPS = 4096 };
  static long long logged[MAX_STEPS];
  int nlogged = 0, line_no = 0;
  bool seen_summary = false;
  long long warmup = 0, num_batches = 0, every = 0, images = 0, last_step = 0;
  json_t *summary = NULL;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    line_no++;
    if (line[len - 1] != '\n') fail(line_no, "the last line does not end in a newline");
    json_error_t error;
    json_t *r = json_loads(line, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(r)) {
      fail(line_no, "not a JSON object: %s", r ? "another value" : error.text);
      json_decref(r);
      continue;
    }
    REQUIRE(line_no, "record", r, {"record", STR}, {"time", NUM}, {"rank", INT});
    const char *kind = json_string_value(json_object_get(r, "record"));
    kind = kind ? kind : "";
    if (integer(r, "rank") != rank) fail(line_no, "rank %lld, want %lld", integer(r, "rank"), rank);
    if (!(num(r, "time") > 1e9)) fail(line_no, "time %g is not a Unix time", num(r, "time"));
    if (seen_summary) fail(line_no, "a %s record after the summary", kind);
    if ((line_no == 1) != (strcmp(kind, "run") == 0))
      fail(line_no, "a %s record: the run record, and only it, comes first", kind);
    if (strcmp(kind, "run") == 0) {
      check_run(line_no, r);
      const json_t *res = json_object_get(r, "resolved");
      warmup = integer(res, "num_warmup_batches");
      num_batches = integer(res, "num_batches");
      every = integer(res, "display_every");
      images = integer(res, "batch_size_per_replica") * integer(res, "replicas_per_rank") *
               num_batches;
    } else if (strcmp(kind, "step") == 0) {
      REQUIRE(line_no, "step", r, {"step", INT}, {"global_step", INT}, {"images_per_sec", NUM},
              {"images_per_sec_uncertainty", NUM}, {"jitter", NUM}, {"loss", NUM | NUL},
              {"top1", NUM | NUL}, {"top5", NUM | NUL}, {"learning_rate", NUM | NUL},
              {"loss_scale", NUM | NUL}, {"step_seconds", NUM});
      long long step = integer(r, "step");
      if (step <= last_step) fail(line_no, "step %lld after step %lld", step, last_step);
      last_step = step;
      if (integer(r, "global_step") != step + warmup)
        fail(line_no, "global_step %lld, want step + warm-up = %lld", integer(r, "global_step"),
             step + warmup);
      if (!(num(r, "images_per_sec") > 0) || !(num(r, "step_seconds") > 0))
        fail(line_no, "images_per_sec and step_seconds must be > 0");
      if (nlogged < MAX_STEPS) logged[nlogged++] = step;
    } else if (strcmp(kind, "eval") == 0) {
      REQUIRE(line_no, "eval", r, {"step", INT}, {"top1", NUM | NUL}, {"top5", NUM | NUL},
              {"examples", INT});
    } else if (strcmp(kind, "checkpoint") == 0) {
      REQUIRE(line_no, "checkpoint", r, {"step", INT}, {"path", STR}, {"seconds", NUM});
    } else if (strcmp(kind, "summary") == 0) {
      REQUIRE(line_no, "summary", r, {"status", STR}, {"images_per_sec", NUM | NUL},
              {"images", INT | NUL}, {"seconds", NUM | NUL}, {"steps", INT | NUL});
      seen_summary = true;
      summary = json_incref(r);
    } else if (line_no > 1) {
      fail(line_no, "unknown record kind \"%s\"", kind);
    }
    json_decref(r);
  }
  free(line);
  fclose(f);
  if (line_no == 0) fail(0, "empty");
  if (!summary) fail(line_no, "no summary record");

  const char *status = summary ? json_string_value(json_object_get(summary, "status")) : NULL;
  if (summary && failed && status && strcmp(status, "ok") == 0)
    fail(line_no, "the run failed, yet the summary's status is \"ok\"");
  if (summary && !failed) {
    if (!status || strcmp(status, "ok") != 0)
      fail(line_no, "status \"%s\", want \"ok\"", status ? status : "");
    /* Every displayed step, in order, and nothing else. */
    static long long want[MAX_STEPS];
    int nwant = 0;
    for (long long s = 1; s <= num_batches && nwant < MAX_STEPS; s++)
      if (displayed(s, every, num_batches)) want[nwant++] = s;
    if (nwant != nlogged || memcmp(want, logged, (size_t)nwant * sizeof *want) != 0) {
      fail(0, "the step records are not the displayed steps:");
      fputs("  step records:", stderr);
      for (int i = 0; i < nlogged; i++) fprintf(stderr, " %lld", logged[i]);
      fputs("\n  displayed steps:", stderr);
      for (int i = 0; i < nwant; i++) fprintf(stderr, " %lld", want[i]);
      fputc('\n', stderr);
    }
    if (integer(summary, "steps") != num_batches)
      fail(line_no, "summary steps %lld, want %lld", integer(summary, "steps"), num_batches);
    if (integer(summary, "images") != images)
      fail(line_no, "summary images %lld, want %lld", integer(summary, "images"), images);
    if (!(num(summary, "seconds") > 0) || !(num(summary, "images_per_sec") > 0))
      fail(line_no, "summary seconds and images_per_sec must be > 0");
  }
  if (summary && report) {
    long long printed[MAX_STEPS];
    double total;
    int decimals = 0;
    int n = read_report(report, printed, MAX_STEPS, &total, &decimals);
    if (n < 0) {
      fprintf(stderr, "json_lines_check: cannot read %s\n", report);
      return 2;
    }
    if (n != nlogged) fail(0, "%d step records, the report prints %d step lines", nlogged, n);
    for (int i = 0; i < n && i < nlogged; i++)
      if (printed[i] != logged[i])
        fail(0, "step record %d is step %lld, the report's line says %lld", i + 1, logged[i],
             printed[i]);
    double logged_total = num(summary, "images_per_sec");
    double rounding = 0.5 * pow(10, -decimals) * (1 + 1e-9);
    if (!(fabs(logged_total - total) <= rounding))
      fail(line_no, "summary images_per_sec %.6f, the report prints total images/sec: %.*f",
           logged_total, decimals, total);
  }
  json_decref(summary);
  if (failures) return 1;
  printf("ok: %s: %d lines, %d step records\n", log_path, line_no, nlogged);
  return 0;
}
