/* test_datasets.h — the host's dataset table (cnnb/dataset.h) filled as cnnbench fills
 * it, from the datasource plugins in $CNNB_PLUGIN_DIR (the build tree's), for a test that
 * parses a run configuration or calls model plugins without loading plugins itself. */
#ifndef TEST_DATASETS_H
#define TEST_DATASETS_H

#include "loader/loader.h"

/* The loader holding the datasources (destroy it at the end, which empties the table).
 * Exits the test program with a message when they cannot be loaded or describe nothing:
 * every test after it would fail for that one reason. */
cnnb_loader *test_datasets_load(void);

#endif
