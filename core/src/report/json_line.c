/* json_line.c — one JSON value as one line of a log file (json_line.h). */
#include "report/json_line.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cnnb_json_line_write(cnnb_line_file *f, json_t *value, size_t flags) {
  char *text = value ? json_dumps(value, flags) : NULL;
  json_decref(value);
  size_t size = text ? strlen(text) : 0;
  char *line = text ? malloc(size + 1) : NULL;
  if (line) {
    memcpy(line, text, size);
    line[size++] = '\n';
  }
  free(text);
  int rc = line ? cnnb_line_file_write(f, line, size) : ENOMEM;
  free(line);
  return rc;
}
