/* trace_check.c — checks a --trace_file output (Chrome trace-event JSON) for the CLI tests
 * (cli/trace_file.sh), with jansson, so no test needs Python. Never installed.
 *
 *   trace_check FILE [--pid=R] [--steps=N] [--nodes=LIST] [--training] [--coverage=F]
 *                    [--tracks=PREFIX:MIN]
 *
 * Always: FILE is a JSON object whose traceEvents is an array; every event has a string
 * name and ph, a number ts and integer pid and tid; "X" events have dur >= 0; "B"/"E"
 * events pair up per track; the complete events of one track nest or follow each other,
 * never overlapping partially (what the format asks of one thread).
 *   --pid=R       every event is rank R's, and the process is named "rank R"
 *   --steps=N     exactly N "step K" spans (track "step"), K = 1..N
 *   --nodes=LIST  the model's layers, one "name op params" a line (--model_info's table):
 *                 on every "replica *" track, within each step span, each layer has a
 *                 forward, upload or resident (a constant batch kept on the device)
 *                 event (or is listed in one's args.fused)...
 *   --training    ...and each layer with params, and the loss (op softmax_xent), a
 *                 backward event
 *   --coverage=F  the union of the other events on track "step" inside a step span
 *                 covers at least F of it, in the best-covered step: a phase the trace
 *                 leaves out leaves the same hole in every step, while a preemption of
 *                 the process (a loaded 2-core CI machine under a sanitizer) opens a gap
 *                 in one step only
 *   --tracks=PREFIX:MIN  at least MIN tracks whose name starts with PREFIX hold events
 * Prints one line per failure and exits 1; "ok: ..." and 0 when all hold. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS_US 0.002 /* the file keeps nanoseconds: ts + dur may round by a few of them */

typedef struct event {
  const char *name, *ph, *cat;
  double ts, dur;
  int64_t pid, tid;
  json_t *args;
} event;

typedef struct track {
  int64_t pid, tid;
  const char *name;
} track;

static int failures;

static void fail(const char *fmt, const char *a, const char *b, double x) {
  printf("FAIL: ");
  printf(fmt, a ? a : "", b ? b : "", x);
  printf("\n");
  failures++;
}

static const char *track_name(const track *tracks, size_t n, int64_t pid, int64_t tid) {
  for (size_t i = 0; i < n; i++)
    if (tracks[i].pid == pid && tracks[i].tid == tid) return tracks[i].name;
  return "";
}

/* Complete events by track, then start, longer first: a parent before its children. */
static int by_track_time(const void *pa, const void *pb) {
  const event *a = *(const event *const *)pa, *b = *(const event *const *)pb;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return 0;
}

static int by_start(const void *pa, const void *pb) {
  const event *a = *(const event *const *)pa, *b = *(const event *const *)pb;
  return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* The complete events of one track nest or follow: a stack of open ends. */
static void check_nesting(event **xs, size_t n, const track *tracks, size_t num_tracks) {
  qsort(xs, n, sizeof *xs, by_track_time);
  double *ends = malloc((n ? n : 1) * sizeof *ends);
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && (xs[i]->pid != xs[i - 1]->pid || xs[i]->tid != xs[i - 1]->tid)) depth = 0;
    while (depth > 0 && ends[depth - 1] <= xs[i]->ts + EPS_US) depth--;
    double end = xs[i]->ts + xs[i]->dur;
    if (depth > 0 && end > ends[depth - 1] + EPS_US) {
      char what[160];
      snprintf(what, sizeof what, "'%s' at %.3f", xs[i]->name, xs[i]->ts);
      fail("track '%s': %s overlaps an enclosing event partially (ends %.3f us after it)",
           track_name(tracks, num_tracks, xs[i]->pid, xs[i]->tid), what, end - ends[depth - 1]);
    }
    ends[depth++] = end;
  }
  free(ends);
}

/* Whether `name` is one of the layers some event in [lo, hi] on track `tid` covers. */
static bool node_seen(event **xs, size_t n, int64_t pid, int64_t tid, double lo, double hi,
                      const char *name, bool backward) {
  for (size_t i = 0; i < n; i++) {
    const event *e = xs[i];
    if (e->pid != pid || e->tid != tid || e->ts < lo - EPS_US || e->ts + e->dur > hi + EPS_US)
      continue;
    if (!e->cat) continue;
    bool pass = backward ? strcmp(e->cat, "backward") == 0
                         : strcmp(e->cat, "forward") == 0 || strcmp(e->cat, "upload") == 0 ||
                               strcmp(e->cat, "resident") == 0;
    if (!pass) continue;
    if (strcmp(e->name, name) == 0) return true;
    json_t *fused = json_object_get(e->args, "fused");
    size_t k;
    json_t *v;
    json_array_foreach(fused, k, v) if (json_is_string(v) &&
                                        strcmp(json_string_value(v), name) == 0) return true;
  }
  return false;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: trace_check FILE [--pid=R] [--steps=N] [--nodes=LIST] [--training] "
                    "[--coverage=F] [--tracks=PREFIX:MIN]\n");
    return 2;
  }
  long want_pid = -1, want_steps = -1, min_tracks = 0;
  const char *nodes_file = NULL, *prefix = NULL;
  bool training = false;
  double coverage = 0;
  static char prefix_buf[256];
  for (int i = 2; i < argc; i++) {
    if (strncmp(argv[i], "--pid=", 6) == 0) want_pid = atol(argv[i] + 6);
    else if (strncmp(argv[i], "--steps=", 8) == 0) want_steps = atol(argv[i] + 8);
    else if (strncmp(argv[i], "--nodes=", 8) == 0) nodes_file = argv[i] + 8;
    else if (strcmp(argv[i], "--training") == 0) training = true;
    else if (strncmp(argv[i], "--coverage=", 11) == 0) coverage = atof(argv[i] + 11);
    else if (strncmp(argv[i], "--tracks=", 9) == 0) {
      snprintf(prefix_buf, sizeof prefix_buf, "%s", argv[i] + 9);
      char *colon = strrchr(prefix_buf, ':');
      if (!colon) {
        fprintf(stderr, "trace_check: --tracks=PREFIX:MIN\n");
        return 2;
      }
      *colon = 0;
      prefix = prefix_buf;
      min_tracks = atol(colon + 1);
    } else {
      fprintf(stderr, "trace_check: unknown argument %s\n", argv[i]);
      return 2;
    }
  }

  json_error_t error;
  json_t *doc = json_load_file(argv[1], JSON_REJECT_DUPLICATES, &error);
  if (!doc) {
    printf("FAIL: %s is not JSON: line %d: %s\n", argv[1], error.line, error.text);
    return 1;
  }
  json_t *array = json_object_get(doc, "traceEvents");
  if (!json_is_array(array)) {
    printf("FAIL: %s: no traceEvents array\n", argv[1]);
    return 1;
  }
  size_t n = json_array_size(array);
  event *events = calloc(n ? n : 1, sizeof *events);
  event **xs = calloc(n ? n : 1, sizeof *xs);
  track *tracks = calloc(n ? n : 1, sizeof *tracks);
  size_t num_x = 0, num_tracks = 0;
  bool process_named = false;
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(array, i);
    event *ev = &events[i];
    json_t *name = json_object_get(e, "name"), *ph = json_object_get(e, "ph");
    json_t *ts = json_object_get(e, "ts"), *pid = json_object_get(e, "pid");
    json_t *tid = json_object_get(e, "tid");
    if (!json_is_string(name) || !json_is_string(ph) || !json_is_number(ts) ||
        !json_is_integer(pid) || !json_is_integer(tid)) {
      char *text = json_dumps(e, JSON_COMPACT);
      fail("event %s lacks a string name/ph, a number ts or an integer pid/tid%s", text, "", 0);
      free(text);
      continue;
    }
    ev->name = json_string_value(name);
    ev->ph = json_string_value(ph);
    ev->ts = json_number_value(ts);
    ev->pid = json_integer_value(pid);
    ev->tid = json_integer_value(tid);
    ev->args = json_object_get(e, "args");
    json_t *cat = json_object_get(e, "cat");
    ev->cat = json_is_string(cat) ? json_string_value(cat) : NULL;
    if (want_pid >= 0 && ev->pid != want_pid) {
      char pid_text[32];
      snprintf(pid_text, sizeof pid_text, "%lld", (long long)ev->pid);
      fail("event '%s' has pid %s, want %.0f", ev->name, pid_text, (double)want_pid);
    }
    if (strcmp(ev->ph, "M") == 0) {
      const char *value = json_string_value(json_object_get(ev->args, "name"));
      if (strcmp(ev->name, "thread_name") == 0 && value)
        tracks[num_tracks++] = (track){ev->pid, ev->tid, value};
      if (strcmp(ev->name, "process_name") == 0 && value && want_pid >= 0) {
        char want[32];
        snprintf(want, sizeof want, "rank %ld", want_pid);
        if (strcmp(value, want) == 0) process_named = true;
      }
    } else if (strcmp(ev->ph, "X") == 0) {
      json_t *dur = json_object_get(e, "dur");
      if (!json_is_number(dur) || json_number_value(dur) < 0)
        fail("complete event '%s'%s at %.3f has no dur >= 0", ev->name, "", ev->ts);
      ev->dur = json_number_value(dur);
      xs[num_x++] = ev;
    }
  }
  if (want_pid >= 0 && !process_named)
    fail("%s: no process_name naming the rank given by --pid%s", argv[1], "", 0);

  /* B/E pairs per track, in file order (one thread's events come in its order). */
  for (size_t t = 0; t < num_tracks; t++) {
    long open = 0;
    for (size_t i = 0; i < n; i++) {
      if (!events[i].ph || events[i].pid != tracks[t].pid || events[i].tid != tracks[t].tid)
        continue;
      if (strcmp(events[i].ph, "B") == 0) open++;
      if (strcmp(events[i].ph, "E") == 0 && --open < 0)
        fail("track '%s': an E without its B%s", tracks[t].name, "", 0), open = 0;
    }
    if (open) fail("track '%s': a B never ended%s", tracks[t].name, "", 0);
  }

  check_nesting(xs, num_x, tracks, num_tracks);

  /* The step spans, in time order. */
  event **steps = calloc(num_x ? num_x : 1, sizeof *steps);
  size_t num_steps = 0;
  for (size_t i = 0; i < num_x; i++) {
    int k = 0;
    char extra;
    if (sscanf(xs[i]->name, "step %d%c", &k, &extra) == 1 &&
        strcmp(track_name(tracks, num_tracks, xs[i]->pid, xs[i]->tid), "step") == 0)
      steps[num_steps++] = xs[i];
  }
  qsort(steps, num_steps, sizeof *steps, by_start);
  if (want_steps >= 0 && (long)num_steps != want_steps)
    fail("%s%s%.0f step spans on track 'step', want --steps", "", "", (double)num_steps);
  for (size_t s = 0; s < num_steps; s++) {
    char want[32];
    snprintf(want, sizeof want, "step %zu", s + 1);
    if (strcmp(steps[s]->name, want) != 0)
      fail("span '%s' where '%s' belongs (%.0f)", steps[s]->name, want, (double)s);
  }

  /* Coverage: the union of the step track's other events within each span. The events
   * are sorted by start within the track, so the union is one sweep. */
  double best_fraction = 0;
  char fractions[256] = "";
  for (size_t s = 0; coverage > 0 && s < num_steps; s++) {
    const event *span = steps[s];
    double lo = span->ts, hi = span->ts + span->dur, covered = 0, reach = lo;
    for (size_t i = 0; i < num_x; i++) {
      const event *e = xs[i];
      if (e == span || e->pid != span->pid || e->tid != span->tid) continue;
      double a = e->ts, b = e->ts + e->dur;
      if (b <= lo || a >= hi) continue;
      if (a < reach) a = reach;
      if (b > hi) b = hi;
      if (b > a) covered += b - a, reach = b;
    }
    double fraction = span->dur > 0 ? covered / span->dur : 1;
    if (fraction > best_fraction) best_fraction = fraction;
    size_t used = strlen(fractions);
    snprintf(fractions + used, sizeof fractions - used, "%s%.3f", s ? ", " : "", fraction);
  }
  if (coverage > 0 && num_steps > 0 && best_fraction < coverage)
    fail("the step track's events cover %s of the step spans%s: at best %.3f", fractions, "",
         best_fraction);

  /* Layers on every replica track, every step. */
  if (nodes_file) {
    FILE *f = fopen(nodes_file, "r");
    if (!f) {
      printf("FAIL: cannot read %s\n", nodes_file);
      return 1;
    }
    char line[512], name[256], op[64];
    long long params;
    size_t replicas = 0, layers = 0;
    for (size_t t = 0; t < num_tracks; t++) {
      if (strncmp(tracks[t].name, "replica ", 8) != 0) continue;
      replicas++;
      for (size_t s = 0; s < num_steps; s++) {
        double lo = steps[s]->ts, hi = steps[s]->ts + steps[s]->dur;
        rewind(f);
        layers = 0;
        while (fgets(line, sizeof line, f)) {
          if (sscanf(line, "%255s %63s %lld", name, op, &params) != 3) continue;
          layers++;
          if (!node_seen(xs, num_x, tracks[t].pid, tracks[t].tid, lo, hi, name, false))
            fail("%s: layer '%s' has no forward event in step %.0f", tracks[t].name, name,
                 (double)(s + 1));
          if (training && (params > 0 || strcmp(op, "softmax_xent") == 0) &&
              !node_seen(xs, num_x, tracks[t].pid, tracks[t].tid, lo, hi, name, true))
            fail("%s: layer '%s' has no backward event in step %.0f", tracks[t].name, name,
                 (double)(s + 1));
        }
      }
    }
    fclose(f);
    if (replicas == 0) fail("no 'replica N' track%s%s", "", "", 0);
    if (layers == 0) fail("no layers read from %s%s", nodes_file, "", 0);
  }

  if (prefix) {
    long found = 0;
    for (size_t t = 0; t < num_tracks; t++) {
      if (strncmp(tracks[t].name, prefix, strlen(prefix)) != 0) continue;
      for (size_t i = 0; i < num_x; i++)
        if (xs[i]->pid == tracks[t].pid && xs[i]->tid == tracks[t].tid) {
          found++;
          break;
        }
    }
    if (found < min_tracks)
      fail("%s'%s*': only %.0f tracks hold events, fewer than --tracks asks", "", prefix,
           (double)found);
  }

  if (!failures) printf("ok: %zu events, %zu tracks, %zu step spans\n", n, num_tracks, num_steps);
  /* Freed on failure too: the sanitizer build runs this checker on traces it must reject. */
  free(steps);
  free(events);
  free(xs);
  free(tracks);
  json_decref(doc);
  return failures ? 1 : 0;
}
