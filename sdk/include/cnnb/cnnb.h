/* cnnb/cnnb.h — the whole SDK: include this to write any kind of plugin. (main.h, the
 * program as a call, is for programs that embed cnnbench, not plugins.) */
#ifndef CNNB_CNNB_H
#define CNNB_CNNB_H
#include "abi.h"
#include "ctx.h"
#include "dataset.h"
#include "graph.h"
#include "optimizer.h"
#include "model.h"
#include "device.h"
#include "strategy.h"
#include "datasource.h"
#include "trace.h"
#endif
