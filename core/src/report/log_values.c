/* log_values.c — JSON values and machine facts of the file logs (log_values.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "report/log_values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *cnnb_log_number(double value) { return isfinite(value) ? json_real(value) : json_null(); }

json_t *cnnb_log_float_number(double value) {
  if (!isfinite(value)) return json_null();
  float f = (float)value;
  char digits[32];
  for (int precision = 1; precision < 9; precision++) {
    snprintf(digits, sizeof digits, "%.*g", precision, (double)f);
    double shortest = strtod(digits, NULL);
    if ((float)shortest == f) return json_real(shortest);
  }
  return json_real((double)f);
}

json_t *cnnb_log_text(const char *s) {
  if (!s) return json_null();
  json_t *value = json_string(s);
  if (value) return value;
  char *copy = strdup(s);
  if (!copy) return NULL;
  for (char *p = copy; *p; p++)
    if ((unsigned char)*p >= 0x80) *p = '?';
  value = json_string(copy);
  free(copy);
  return value;
}

/* The value after the ':' of the first line of `path` that starts with `key`, into buf
 * (trimmed); 0 when there is none. */
static int proc_field(const char *path, const char *key, char *buf, size_t size) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char line[512];
  int found = 0;
  size_t n = strlen(key);
  while (!found && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, key, n) != 0 || !colon) continue;
    char *start = colon + 1 + strspn(colon + 1, " \t");
    start[strcspn(start, "\n")] = '\0';
    snprintf(buf, size, "%s", start);
    found = 1;
  }
  fclose(f);
  return found;
}

json_t *cnnb_log_cpu_model(void) {
  char value[512];
  json_t *model = proc_field("/proc/cpuinfo", "model name", value, sizeof value)
                      ? cnnb_log_text(value)
                      : NULL;
  return model ? model : json_null();
}

json_t *cnnb_log_cpu_mhz(void) {
  char value[64];
  if (!proc_field("/proc/cpuinfo", "cpu MHz", value, sizeof value)) return json_null();
  char *end;
  double mhz = strtod(value, &end);
  return end != value && mhz > 0 ? cnnb_log_number(mhz) : json_null();
}

json_t *cnnb_log_meminfo_bytes(const char *key) {
  char value[64];
  if (!proc_field("/proc/meminfo", key, value, sizeof value)) return json_null();
  char *end;
  long long kib = strtoll(value, &end, 10); /* "16318244 kB" */
  return end != value && kib > 0 ? json_integer((json_int_t)kib * 1024) : json_null();
}
