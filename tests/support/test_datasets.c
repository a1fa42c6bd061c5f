/* test_datasets.c — see test_datasets.h. */
#include "test_datasets.h"

#include <stdio.h>
#include <stdlib.h>
#include <cnnb/dataset.h>

cnnb_loader *test_datasets_load(void) {
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  cnnb_loader *loader = cnnb_loader_create(NULL);
  char err[4096] = "out of memory";
  if (!dir || !*dir) snprintf(err, sizeof err, "CNNB_PLUGIN_DIR is not set");
  if (!dir || !*dir || !loader || cnnb_loader_set_install_dir(loader, dir) != CNNB_OK ||
      cnnb_loader_discover(loader, NULL, err, sizeof err) != CNNB_OK || !cnnb_dataset_at(0)) {
    fprintf(stderr, "loading the datasources of %s: %s\n", dir ? dir : "(none)",
            cnnb_dataset_at(0) ? err : "none describes a dataset");
    exit(1);
  }
  return loader;
}
