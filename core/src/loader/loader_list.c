/* loader_list.c — `cnnbench --list_plugins`: where the loader looked, every plugin it
 * accepted (kind, names offered, version, ABI, file) in aligned columns grouped by kind,
 * and every file it rejected with why. Long name lists wrap inside their column so the
 * table stays readable in an 80-100 column terminal. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash_guard.h"
#include "loader/loader_impl.h"
#include "graph/op_device.h"

/* Names wrap beyond this many characters (a column, not a hard limit on one name). */
#define NAMES_WIDTH 40

static const uint32_t kind_order[] = {CNNB_KIND_MODEL, CNNB_KIND_DEVICE, CNNB_KIND_STRATEGY,
                                      CNNB_KIND_DATASOURCE};

/* p's names as lines of about NAMES_WIDTH characters: "a, b," then "c". */
typedef struct wrapped {
  char *lines[64];
  size_t n, widest;
} wrapped;

static void wrapped_free(wrapped *w) {
  for (size_t i = 0; i < w->n; i++) free(w->lines[i]);
  w->n = 0;
}

static bool flush_line(wrapped *w, char *line, size_t *len) {
  if (w->n == sizeof w->lines / sizeof w->lines[0]) return true; /* absurdly many: cut */
  if (!(w->lines[w->n++] = strdup(line))) return false;
  if (*len > w->widest) w->widest = *len;
  *len = 0;
  line[0] = '\0';
  return true;
}

static bool wrap_names(const loader_plugin *p, wrapped *w) {
  memset(w, 0, sizeof *w);
  char line[4096] = "";
  size_t len = 0;
  for (size_t i = 0; i < p->num_names; i++) {
    const char *sep = i + 1 < p->num_names ? "," : "";
    size_t add = strlen(p->names[i]) + strlen(sep);
    if (len > 0 && len + 1 + add > NAMES_WIDTH && !flush_line(w, line, &len)) return false;
    int n = snprintf(line + len, sizeof line - len, "%s%s%s", len ? " " : "", p->names[i], sep);
    len = n < 0 ? len : len + (size_t)n;
    if (len >= sizeof line) len = sizeof line - 1;
  }
  return len == 0 && w->n > 0 ? true : flush_line(w, line, &len);
}

static void print_accepted(const cnnb_loader *l, FILE *out) {
  size_t names_w = strlen("NAMES"), version_w = strlen("VERSION"), abi_w = strlen("ABI");
  size_t kind_w = strlen("KIND"), accepted = 0;
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why) continue;
    accepted++;
    wrapped w;
    if (wrap_names(p, &w) && w.widest > names_w) names_w = w.widest;
    wrapped_free(&w);
    size_t v = strlen(p->version[0] ? p->version : "-");
    if (v > version_w) version_w = v;
    char abi[32];
    size_t a = (size_t)snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
    if (a > abi_w) abi_w = a;
    if (strlen(cnnb_kind_name(p->kind)) > kind_w) kind_w = strlen(cnnb_kind_name(p->kind));
  }
  if (accepted == 0) {
    fprintf(out, "No plugins found.\n");
    return;
  }
  fprintf(out, "Plugins (%zu):\n", accepted);
  fprintf(out, "  %-*s  %-*s  %-*s  %-*s  %s\n", (int)kind_w, "KIND", (int)names_w, "NAMES",
          (int)version_w, "VERSION", (int)abi_w, "ABI", "FILE");
  for (size_t k = 0; k < sizeof kind_order / sizeof kind_order[0]; k++) {
    for (size_t i = 0; i < l->num_plugins; i++) {
      const loader_plugin *p = l->plugins[i];
      if (p->why || p->kind != kind_order[k]) continue;
      wrapped w;
      if (!wrap_names(p, &w)) {
        wrapped_free(&w);
        continue;
      }
      char abi[32];
      snprintf(abi, sizeof abi, "%u.%u", p->abi_major, p->abi_minor);
      /* The other columns go on the first line; names that wrap continue below it. */
      fprintf(out, "  %-*s  %-*s  %-*s  %-*s  %s\n", (int)kind_w, cnnb_kind_name(p->kind),
              (int)names_w, w.n ? w.lines[0] : "", (int)version_w, p->version[0] ? p->version : "-",
              (int)abi_w, abi, p->path);
      for (size_t j = 1; j < w.n; j++) fprintf(out, "  %-*s  %s\n", (int)kind_w, "", w.lines[j]);
      wrapped_free(&w);
    }
  }
}

/* Devices that loaded but cannot run on this machine (a GPU device without a driver or
 * a GPU), with the device's own reason: accepted, since the same files serve machines
 * that have one. */
static void print_unavailable(const cnnb_loader *l, FILE *out) {
  size_t count = 0;
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why || p->kind != CNNB_KIND_DEVICE || !p->num_names) continue;
    const char *why;
    CNNB_GUARDED(p->path, "availability", NULL, why = cnnb_device_unavailable(&p->desc));
    if (!why) continue;
    if (count++ == 0) fprintf(out, "\nDevices that cannot run on this machine:\n");
    fprintf(out, "  %s: %s\n", p->names[0], why);
  }
}

static void print_rejected(const cnnb_loader *l, FILE *out) {
  size_t rejected = 0, file_w = strlen("FILE");
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (!p->why) continue;
    rejected++;
    if (strlen(p->path) > file_w) file_w = strlen(p->path);
  }
  if (rejected == 0) return;
  fprintf(out, "\nRejected (%zu):\n", rejected);
  fprintf(out, "  %-*s  %s\n", (int)file_w, "FILE", "WHY");
  for (size_t i = 0; i < l->num_plugins; i++) {
    const loader_plugin *p = l->plugins[i];
    if (p->why) fprintf(out, "  %-*s  %s\n", (int)file_w, p->path, p->why);
  }
}

void cnnb_loader_print(const cnnb_loader *l, FILE *out) {
  const char *env = getenv("CNNB_PLUGIN_PATH");
  fprintf(out,
          "Plugin search order: %s (this installation), then CNNB_PLUGIN_PATH%s%s%s, then "
          "--plugin=FILE\n\n",
          l->install_dir ? l->install_dir : "(none)", env && env[0] ? " (" : " (unset)",
          env && env[0] ? env : "", env && env[0] ? ")" : "");
  print_accepted(l, out);
  print_unavailable(l, out);
  print_rejected(l, out);
}
