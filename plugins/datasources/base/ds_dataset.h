/* ds_dataset.h — a datasource's own datasets (what its describe_dataset slot answers,
 * cnnb/dataset.h) against the one the run names. */
#ifndef DS_DATASET_H
#define DS_DATASET_H

#include <cnnb/cnnb.h>

/* The run's dataset as the host describes it, or NULL (a config older than ABI 1.3 names
 * none; an unknown kind). */
const cnnb_dataset_info *ds_run_dataset(const cnnb_datasource_config *cfg);

/* The entry of `own` (NULL-terminated: the plugin's descriptions) that the run names, by
 * name. NULL when the run names another: then ctx holds "PLUGIN: reads --data_name=a (or
 * b) only, and the run names --data_name=X: give --data_name=a". */
const cnnb_dataset_info *ds_own_dataset(cnnb_ctx *ctx, const char *plugin,
                                        const cnnb_dataset_info *const *own,
                                        const cnnb_datasource_config *cfg);

#endif
