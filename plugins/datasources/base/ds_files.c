/* ds_files.c — paths a datasource looks for its files at (ds_files.h). */
#include "ds_files.h"

#include <sys/stat.h>

int ds_is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int ds_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
