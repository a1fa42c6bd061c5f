/* replay_main.c — the main() a fuzz target gets where libFuzzer is unavailable (gcc): runs
 * each file given, or each file in each directory given, through LLVMFuzzerTestOneInput
 * once. Exits 1 when no input was found (a missing corpus must not pass as a test). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, n = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *grown = realloc(buf, cap *= 2);
      if (!grown) free(buf);
      buf = grown;
    }
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "%s: out of memory\n", path);
    return -1;
  }
  /* An exact-size copy, so ASan catches a read one past the input. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  long inputs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i]) != 0) return 1;
      inputs++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      perror(argv[i]);
      return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      if (run_file(path) != 0) {
        closedir(d);
        return 1;
      }
      inputs++;
    }
    closedir(d);
  }
  if (inputs == 0) {
    fprintf(stderr, "%s: no inputs to replay\n", argv[0]);
    return 1;
  }
  printf("replayed %ld inputs\n", inputs);
  return 0;
}
