/* json_line.h — one JSON value as one line of a log file (base/line_file.h): dumped with
 * jansson's `flags`, a newline added, written whole or not at all. Shared by the benchmark
 * log's JSON lines and tf_cnn_benchmarks' two files. Host-internal. */
#ifndef CNNB_JSON_LINE_H
#define CNNB_JSON_LINE_H

#include <stddef.h>

#include <jansson.h>

#include "base/line_file.h"

/* Takes the reference to `value` (NULL: out of memory). 0, or the errno that stopped the
 * write (ENOMEM: the line could not be made). */
int cnnb_json_line_write(cnnb_line_file *f, json_t *value, size_t flags);

#endif
