/* fuzz_flags.c — the command line and --flagfile reader (core/src/flags) on arbitrary
 * bytes, with the core's flag table. The first byte picks how the rest is read:
 *   even: the contents of a flagfile, given as --flagfile=TMP;
 *   odd:  an argv, the arguments separated by NUL or newline bytes.
 * Each is parsed as cnnbench does, the forgiving pass then the strict one through one
 * flagfile cache, and strictly a second time: the same input must give the same answer.
 * Besides the sanitizers' checks: a refusal says why; a flagfile's refusal names the file
 * (and its line, for anything read from it) and stays short, however long the line.
 * Inputs naming a flagfile of their own are skipped: a fuzzer that wrote --flagfile=
 * /dev/stdin or a FIFO's path would block on it, which is no bug of the reader. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags/flags.h"
#include "flags/flagfile.h"
#include "config/core_flags.h"

enum { MAX_ARGS = 64 };

static char file_path[64];

/* The flagfile every input of the first kind is written to, made once. */
static const char *flagfile_path(void) {
  if (!file_path[0])
    snprintf(file_path, sizeof file_path, "/tmp/fuzz_flags_%d.flags", (int)getpid());
  return file_path;
}

static bool write_flagfile(const uint8_t *data, size_t size) {
  FILE *f = fopen(flagfile_path(), "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

/* The strict parse twice through one cache: the same status and message. */
static void parse_both(int argc, char **argv, bool from_file) {
  cnnb_flagfiles *files = cnnb_flagfiles_create();
  cnnb_flags *first = cnnb_flags_create(), *flags = cnnb_flags_create();
  if (!files || !first || !flags || cnnb_flags_declare_core(first) != CNNB_OK ||
      cnnb_flags_declare_core(flags) != CNNB_OK)
    goto done; /* out of memory */
  cnnb_flags_parse_known_files(first, files, argc, argv);
  static char err[8192], again[8192];
  err[0] = again[0] = '\0';
  cnnb_status st = cnnb_flags_parse_files(flags, files, argc, argv, err, sizeof err);
  if (st != CNNB_OK && !err[0]) abort(); /* a refusal must say why */
  if (from_file && st == CNNB_EINVAL) {
    size_t plen = strlen(file_path);
    bool names_file = strncmp(err, file_path, plen) == 0 ||
                      (strncmp(err, "--flagfile=", 11) == 0 &&
                       strncmp(err + 11, file_path, plen) == 0);
    if (!names_file) abort();
    /* "PATH:LINE: " and a reason quoting at most 80 characters: never near the buffer's
     * end, where the reason would be cut. */
    if (strlen(err) > 1024) abort();
  }
  cnnb_flags *twice = cnnb_flags_create();
  if (twice && cnnb_flags_declare_core(twice) == CNNB_OK) {
    cnnb_status st2 = cnnb_flags_parse_files(twice, files, argc, argv, again, sizeof again);
    if (st2 != st || strcmp(err, again) != 0) abort();
  }
  cnnb_flags_destroy(twice);
done:
  cnnb_flags_destroy(first);
  cnnb_flags_destroy(flags);
  cnnb_flagfiles_destroy(files);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || memmem(data, size, "flagfile", 8)) return 0;
  bool as_file = data[0] % 2 == 0;
  data++, size--;
  if (as_file) {
    if (!write_flagfile(data, size)) return 0;
    char arg[96];
    snprintf(arg, sizeof arg, "--flagfile=%s", flagfile_path());
    char *argv[] = {"cnnbench", arg, NULL};
    parse_both(2, argv, true);
    unlink(flagfile_path());
    return 0;
  }
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *argv[MAX_ARGS + 1] = {"cnnbench"};
  int argc = 1;
  for (size_t at = 0; at <= size && argc < MAX_ARGS;) {
    size_t len = 0;
    while (at + len < size && text[at + len] != '\0' && text[at + len] != '\n') len++;
    text[at + len] = '\0';
    argv[argc++] = text + at;
    at += len + 1;
  }
  argv[argc] = NULL;
  parse_both(argc, argv, false);
  free(text);
  return 0;
}
