/* ds_dataset.c — see ds_dataset.h. */
#include "ds_dataset.h"

#include <stdio.h>
#include <string.h>

const cnnb_dataset_info *ds_run_dataset(const cnnb_datasource_config *cfg) {
  if (cfg->struct_size < offsetof(cnnb_datasource_config, dataset) + sizeof cfg->dataset)
    return NULL;
  return cnnb_dataset_lookup(cfg->dataset);
}

const cnnb_dataset_info *ds_own_dataset(cnnb_ctx *ctx, const char *plugin,
                                        const cnnb_dataset_info *const *own,
                                        const cnnb_datasource_config *cfg) {
  const cnnb_dataset_info *named = ds_run_dataset(cfg);
  char names[256] = "";
  size_t len = 0;
  for (size_t i = 0; own[i]; i++) {
    if (named && strcmp(named->name, own[i]->name) == 0) return own[i];
    if (len < sizeof names)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s--data_name=%s",
                              i == 0 ? "" : " or ", own[i]->name);
  }
  cnnb_error(ctx, CNNB_EINVAL,
             "%s: reads %s only, and the run names --data_name=%s: give --data_name=%s", plugin,
             names, named ? named->name : "(none)", own[0] ? own[0]->name : "?");
  return NULL;
}
