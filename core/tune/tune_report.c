/* tune_report.c — what a search leaves in --out: report.md (the table across models,
 * "best configuration per model on this machine", then a ranked table per model with
 * its ceiling and its failures), <model>.svg (bars of images/sec per configuration,
 * grouped by strategy, the independent ceiling marked; plain SVG, no script) and
 * <model>.flags (the winner, for cnnbench --flagfile). Each file is written whole to a
 * temporary name and renamed, so an interrupted write never leaves half a table. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tune.h"

static bool commit_file(FILE *f, char *tmp, const char *path, char *err, size_t err_size) {
  bool ok = !ferror(f);
  ok = (fclose(f) == 0) && ok;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
  }
  free(tmp);
  return ok;
}

static FILE *open_tmp(const char *path, char **tmp, char *err, size_t err_size) {
  *tmp = tune_format("%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(*tmp, "w");
  if (!f) {
    snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
    free(*tmp);
  }
  return f;
}

static void format_seconds(double s, char *out, size_t size) {
  if (s >= 60) snprintf(out, size, "%dm%02ds", (int)(s / 60), (int)s % 60);
  else snprintf(out, size, "%.1fs", s);
}

static void format_rss(long kb, char *out, size_t size) {
  if (kb <= 0) snprintf(out, size, "-");
  else snprintf(out, size, "%.0f MiB", (double)kb / 1024.0);
}

static void format_efficiency(double e, char *out, size_t size) {
  if (isfinite(e)) snprintf(out, size, "%.0f%%", 100 * e);
  else snprintf(out, size, "-");
}

/* A table cell: '|' would end the cell. */
static void cell(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '|') fputs("\\|", f);
    else if (*s != '\n') fputc(*s, f);
  }
}

static void knobs_text(const tune_candidate *c, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < c->knobs.n && len < size; i++)
    len += (size_t)snprintf(out + len, size - len, "%s`%s`", i ? " " : "", c->knobs.v[i]);
  if (!c->knobs.n) snprintf(out, size, "-");
}

static double best_ceiling(const tune_model_outcome *m) {
  double best = 0;
  for (size_t i = 0; i < m->num_ceilings; i++)
    if (m->ceilings[i]->ips > best) best = m->ceilings[i]->ips;
  return best;
}

static void model_section(FILE *f, const tune_model_outcome *m) {
  fprintf(f, "\n## %s\n\n", m->model);
  fprintf(f, "Search: %s. ", m->note ? m->note : "");
  if (m->winner)
    fprintf(f, "Chart: [%s.svg](%s.svg); the winner as a flagfile: `%s.flags`.\n\n", m->model,
            m->model, m->model);
  else if (!m->not_measured) fprintf(f, "No configuration ran to the end.\n\n");
  else fputs("\n", f);
  if (m->num_ranked) {
    fprintf(f, "| rank | configuration | images/sec | vs independent | peak RSS | steps | "
               "command |\n|---:|---|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < m->num_ranked; i++) {
      const tune_result *r = m->ranked[i];
      char eff[32], rss[32];
      format_efficiency(m->efficiency[i], eff, sizeof eff);
      format_rss(r->peak_rss_kb, rss, sizeof rss);
      bool shared = (i > 0 && m->rank[i] == m->rank[i - 1]) ||
                    (i + 1 < m->num_ranked && m->rank[i + 1] == m->rank[i]);
      fprintf(f, "| %s%d | ", shared ? "=" : "", m->rank[i]);
      cell(f, r->label);
      fprintf(f, " | %.1f ± %.1f | %s | %s | %d | `", r->ips, r->spread, eff, rss, r->steps);
      cell(f, r->command);
      fprintf(f, "` |\n");
    }
    fprintf(f, "\n`=N`: a tie — its interval (images/sec ± spread, about 95%%) overlaps that "
               "of the first row of rank N at the same length, so noise could order them "
               "either way. Rows are grouped by the longest run each candidate reached "
               "(successive halving): a row measured at fewer steps was eliminated earlier. "
               "`vs independent`: images/sec over the same layout, batch, precision and "
               "threads without any exchange (the ceiling). Peak RSS: the largest process "
               "of the run.\n");
  }
  if (m->num_ceilings) {
    fprintf(f, "\nThe ceiling, measured and never picked:\n\n| configuration | images/sec | "
               "steps | command |\n|---|---:|---:|---|\n");
    for (size_t i = 0; i < m->num_ceilings; i++) {
      const tune_result *r = m->ceilings[i];
      fputs("| ", f);
      cell(f, r->label);
      fprintf(f, " | %.1f ± %.1f | %d | `", r->ips, r->spread, r->steps);
      cell(f, r->command);
      fputs("` |\n", f);
    }
  }
  if (m->num_failed) {
    fprintf(f, "\nFailed or refused (never picked):\n\n| configuration | kind | first error "
               "line |\n|---|---|---|\n");
    for (size_t i = 0; i < m->num_failed; i++) {
      const tune_result *r = m->failed[i];
      fputs("| ", f);
      cell(f, r->label);
      fprintf(f, " | %s | ", r->oom ? "out of memory" : r->kind);
      cell(f, r->error ? r->error : "?");
      fputs(" |\n", f);
    }
  }
}

static void across_models(FILE *f, const tune_model_outcome *m, size_t n) {
  fprintf(f, "\n## Best configuration per model on this machine\n\n"
             "| model | strategy | replicas x processes | batch per device | precision | "
             "intra threads | knobs | images/sec | vs independent | tied with | flagfile |\n"
             "|---|---|---:|---:|---|---:|---|---:|---:|---|---|\n");
  for (size_t i = 0; i < n; i++) {
    const tune_candidate *c = m[i].winner_candidate;
    if (!m[i].winner || !c) {
      fprintf(f, "| %s | - | - | - | - | - | - | - | - | - | %s |\n", m[i].model,
              m[i].not_measured ? "not measured (interrupted before it)"
                                : "nothing ran to the end");
      continue;
    }
    char knobs[512], eff[32];
    knobs_text(c, knobs, sizeof knobs);
    format_efficiency(m[i].num_ranked ? m[i].efficiency[0] : NAN, eff, sizeof eff);
    fprintf(f, "| %s | %s | %dx%d | %d | %s | %d | %s | %.1f ± %.1f | %s | ", m[i].model,
            c->strategy, c->replicas, c->processes, c->batch, c->precision, c->threads, knobs,
            m[i].winner->ips, m[i].winner->spread, eff);
    for (size_t t = 0; t < m[i].tied.n; t++) {
      fputs(t ? "; " : "", f);
      cell(f, m[i].tied.v[t]);
    }
    fprintf(f, "%s | `%s.flags` |\n", m[i].tied.n ? "" : "-", m[i].model);
  }
  /* Do the winners differ? Say so, or say that they do not. */
  size_t with = 0, same = 0;
  const tune_candidate *first = NULL;
  for (size_t i = 0; i < n; i++) {
    const tune_candidate *c = m[i].winner_candidate;
    if (!c) continue;
    if (!first) first = c;
    with++;
    same += strcmp(c->strategy, first->strategy) == 0 && c->processes == first->processes &&
            c->batch == first->batch && strcmp(c->precision, first->precision) == 0 &&
            c->threads == first->threads;
  }
  if (with > 1 && same == with)
    fprintf(f,
            "\nEvery model's winner is the same configuration (%s, %dx%d, batch %d, %s): "
            "on this machine and device the search found no model for which another one "
            "wins; see each model's ranking below for how close the others came.\n",
            first->strategy, first->replicas, first->processes, first->batch, first->precision);
  else if (with > 1)
    fprintf(f, "\nThe winners differ between models: no one configuration is best for all "
               "of them on this machine.\n");
}

static bool write_report(const tune_options *o, const tune_listing *l, const tune_space *s,
                         const tune_model_outcome *m, size_t n, const tune_clock *clock,
                         bool interrupted, char *err, size_t err_size) {
  char *path = tune_format("%s/report.md", o->out_dir), *tmp;
  FILE *f = open_tmp(path, &tmp, err, err_size);
  if (!f) {
    free(path);
    return false;
  }
  char host[256] = "?", spent[32], budget[32], date[64] = "?";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  format_seconds(tune_now() - clock->start, spent, sizeof spent);
  format_seconds(o->budget_s, budget, sizeof budget);
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  fprintf(f, "# cnnbench-tune: the fastest configuration per model on %s\n\n", host);
  fprintf(f,
          "%s, %ld cores; cnnbench %s; device `%s`, %d device%s; budget %s, this call "
          "took %s.%s\n",
          date, sysconf(_SC_NPROCESSORS_ONLN), l->version, o->device, o->num_devices,
          o->num_devices == 1 ? "" : "s", budget, spent,
          interrupted ? " **Interrupted**: the tables hold what was measured; the same "
                        "command continues from results.jsonl."
                      : "");
  for (size_t i = 0; i < s->notes.n; i++) fprintf(f, "\n- %s", s->notes.v[i]);
  if (s->notes.n) fputc('\n', f);
  across_models(f, m, n);
  for (size_t i = 0; i < n; i++) model_section(f, &m[i]);
  bool ok = commit_file(f, tmp, path, err, err_size);
  free(path);
  return ok;
}

/* ---- the chart ------------------------------------------------------------------- */

static void xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else fputc(*s, f);
  }
}

enum { CHART_ROWS = 60 };

static bool write_chart(const tune_options *o, const tune_model_outcome *m, char *err,
                        size_t err_size) {
  char *path = tune_format("%s/%s.svg", o->out_dir, m->model), *tmp;
  FILE *f = open_tmp(path, &tmp, err, err_size);
  if (!f) {
    free(path);
    return false;
  }
  /* The strategies in order of their best row, each with its rows best first. */
  size_t shown = m->num_ranked < CHART_ROWS ? m->num_ranked : CHART_ROWS;
  tune_strings groups = {0};
  for (size_t i = 0; i < shown; i++)
    if (!tune_strings_has(&groups, m->ranked[i]->strategy))
      tune_strings_add(&groups, m->ranked[i]->strategy);
  double ceiling = best_ceiling(m), top = ceiling;
  for (size_t i = 0; i < shown; i++) top = fmax(top, m->ranked[i]->ips + m->ranked[i]->spread);
  if (top <= 0) top = 1;
  const int left = 380, bar_w = 440, row = 18, head = 50;
  int height = head + (int)(shown + groups.n) * row + 40;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
          "<text x=\"10\" y=\"20\" font-size=\"14\">%s: images/sec per configuration, grouped "
          "by strategy (longest run each reached)</text>\n",
          left + bar_w + 120, height, m->model);
  int y = head;
  for (size_t g = 0; g < groups.n; g++) {
    fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">", y + 13);
    xml_text(f, groups.v[g]);
    fputs("</text>\n", f);
    y += row;
    for (size_t i = 0; i < shown; i++) {
      const tune_result *r = m->ranked[i];
      if (strcmp(r->strategy, groups.v[g]) != 0) continue;
      double w = r->ips / top * bar_w, e = r->spread / top * bar_w;
      bool win = r == m->winner;
      fprintf(f, "<text x=\"20\" y=\"%d\">", y + 13);
      xml_text(f, r->label);
      fprintf(f, " (%d steps)</text>\n", r->steps);
      fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", left,
              y + 3, w, row - 6, win ? "#d95f02" : "#1b9e77");
      fprintf(f,
              "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n"
              "<text x=\"%.1f\" y=\"%d\">%.1f%s</text>\n",
              left + w - e, left + w + e, y + row / 2, y + row / 2, left + w + e + 4, y + 13,
              r->ips, win ? " (winner)" : "");
      y += row;
    }
  }
  if (ceiling > 0) {
    double x = left + ceiling / top * bar_w;
    fprintf(f,
            "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#7570b3\" "
            "stroke-dasharray=\"5,3\" stroke-width=\"2\"/>\n"
            "<text x=\"%.1f\" y=\"%d\" fill=\"#7570b3\">independent ceiling %.1f</text>\n",
            x, x, head - 5, y, x - 60, head - 8, ceiling);
  }
  fprintf(f,
          "<text x=\"10\" y=\"%d\" fill=\"#555\">bars: images/sec; whiskers: the "
          "spread (about 95%%); orange: the winner</text>\n</svg>\n",
          y + 25);
  tune_strings_free(&groups);
  bool ok = commit_file(f, tmp, path, err, err_size);
  free(path);
  return ok;
}

/* ---- the flagfile ---------------------------------------------------------------- */

static bool write_flagfile(const tune_options *o, const tune_model_outcome *m, char *err,
                           size_t err_size) {
  const tune_candidate *c = m->winner_candidate;
  char *path = tune_format("%s/%s.flags", o->out_dir, m->model), *tmp;
  FILE *f = open_tmp(path, &tmp, err, err_size);
  if (!f) {
    free(path);
    return false;
  }
  char host[256] = "?";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  fprintf(f, "# cnnbench-tune's winner for %s on %s: %.1f +- %.1f images/sec (%d steps).\n",
          m->model, host, m->winner->ips, m->winner->spread, m->winner->steps);
  for (size_t t = 0; t < m->tied.n; t++)
    fprintf(f, "# Tied within the noise with: %s\n", m->tied.v[t]);
  if (c->processes > 1)
    fprintf(f, "# Run: mpirun -np %d cnnbench --flagfile=%s.flags\n", c->processes, m->model);
  else fprintf(f, "# Run: cnnbench --flagfile=%s.flags\n", m->model);
  for (size_t i = 0; i < c->flags.n; i++) fprintf(f, "%s\n", c->flags.v[i]);
  bool ok = commit_file(f, tmp, path, err, err_size);
  free(path);
  return ok;
}

bool tune_report_write(const tune_options *o, const tune_listing *l, const tune_space *s,
                       const tune_model_outcome *m, size_t num_models, const tune_clock *clock,
                       bool interrupted, char *err, size_t err_size) {
  for (size_t i = 0; i < num_models; i++) {
    if (m[i].num_ranked && !write_chart(o, &m[i], err, err_size)) return false;
    if (m[i].winner && m[i].winner_candidate && !write_flagfile(o, &m[i], err, err_size))
      return false;
  }
  return write_report(o, l, s, m, num_models, clock, interrupted, err, err_size);
}
