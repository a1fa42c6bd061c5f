/* cnnb/abi.h — the versioned plugin ABI: status codes, plugin kinds, the descriptor
 * every plugin exports, and the rules that keep old plugins loading in new hosts.
 *
 * Rules (the project's docs/architecture.md, "The plugin ABI", has the whole picture):
 *  - one exported symbol per .so: CNNB_PLUGIN_ENTRY_SYMBOL;
 *  - the descriptor and every vtable start with their own size and only grow by
 *    appending; the host reads a field only when it lies inside both sizes;
 *  - a major version change means an incompatible layout: the host refuses the plugin;
 *    a newer minor from a plugin means it may fill fields this host does not know,
 *    which the host ignores (it reads only what fits in its own struct sizes).
 *
 * Every function pointer in a descriptor or vtable carries one tag line, as CLAP's
 * headers do, saying whether it may be NULL, which thread calls it, and how often:
 *   [required]        the loader refuses a plugin that leaves it NULL (naming the slot);
 *   [optional]        may be NULL; the host checks before every call, and the slot's
 *                     comment says what the host does instead;
 *   [main-thread]     called from the thread that sets the run up and tears it down,
 *                     never concurrently with another call on the same plugin;
 *   [step-thread]     called by the thread running training steps for that instance, one
 *                     call at a time per instance (today the main thread; a device per
 *                     replica may get a thread of its own);
 *   [input-thread]    called from the host's input thread of that instance (prefetching
 *                     batches while the step runs), one call at a time per instance;
 *   [any-thread]      may be called from any thread, also concurrently: keep it pure;
 * then how often it is called ("once per run", "per step", "per node").
 * Lifetimes: strings and structs a plugin returns stay valid while the plugin is loaded
 * (descriptor fields) or until the instance is destroyed (instance answers); everything
 * the host passes in is valid only during the call unless the slot says otherwise. */
#ifndef CNNB_ABI_H
#define CNNB_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CNNB_ABI_MAJOR 1
/* Minor versions: 1.1 added CNNB_OP_RELU6 and cnnb_relu6() (graph.h).
 *                 1.2 added CNNB_OP_PAD_CHANNELS and cnnb_pad_channels() (graph.h).
 *                 1.3 added dataset facts (dataset.h); per-instance get_extension on the
 *                     device, strategy and datasource vtables; the device's supports_op;
 *                     the model's learning_rate_at (with its ctx); the datasource's
 *                     probe and its config's dataset; cnnb_main() (main.h);
 *                     CNNB_ENUMERIC.
 *                 1.4 added the strategy's allgather, apply_update and finish_update,
 *                     its config's variables, precision and distribution flags
 *                     (strategy.h), CNNB_EXT_HOST_MEMORY (device.h), and
 *                     cnnb_ctx_create_child / cnnb_ctx_destroy for a plugin's own
 *                     threads (ctx.h).
 *                 1.5 added cnnb_graph_set_checkpoint_name() (graph.h), the trace
 *                     events plugins add to --trace_file (trace.h),
 *                     CNNB_EXT_STRATEGY_OPTIMIZER_STATE, the optimizer slots a strategy
 *                     keeps, for checkpoints (strategy.h), and
 *                     CNNB_EXT_DATASOURCE_SKIP, resuming a data stream (datasource.h).
 *                 1.6 added CNNB_EXT_DEVICE_AVAILABILITY, whether a device can run on this
 *                     machine at all, CNNB_EXT_CUDA_STREAM, a GPU instance's stream
 *                     (device.h), and CNNB_EXT_DATASOURCE_CONSTANT, a datasource whose
 *                     batch never changes (datasource.h).
 *                 1.7 added CNNB_EXT_STEP_GRAPH, a step's device work recorded once and
 *                     replayed (device.h).
 *                 1.8 added what plugins used to read from the core's flags to their
 *                     config structs: the device config's local_replicas (device.h), the
 *                     strategy config's auto_loss_scale and device_name (strategy.h),
 *                     the datasource config's local_replicas, device_threads and
 *                     device_name (datasource.h); and cnnb_flag_declared (ctx.h).
 *                 1.9 was never released.
 *                 1.10 added CNNB_OP_PAD_SPATIAL and cnnb_pad_spatial() (graph.h).
 *                 1.11 added cnnb_flag_mark_per_rank (ctx.h): the flags whose value may
 *                     differ between the ranks of a job; every other flag must agree.
 *                 1.12 added the device config's data_format (device.h): the layout the
 *                     user asked for with --data_format, or the device's choice.
 *                 1.13 moved the datasets' facts into the datasources that read them:
 *                     cnnb_datasource_vtable.describe_dataset (datasource.h), the image
 *                     size in cnnb_dataset_info and cnnb_dataset_at (dataset.h); the
 *                     CNNB_DATASET_* enum is gone, its kinds 1-3 keep their meaning.
 *                 1.14 added the activations CNNB_OP_SIGMOID, _SILU, _HARD_SIGMOID,
 *                     _HARD_SWISH and _GELU, CNNB_OP_STOCHASTIC_DEPTH, _MULTIPLY,
 *                     _LAYER_NORM, _CHANNEL_SCALE, _SLICE_CHANNELS and
 *                     _CHANNEL_SHUFFLE, their builders, the pools'
 *                     ceil_mode and the conv's linear_kernel (graph.h).
 * An op's row in the host's op table names its minor by the macro below, so a minor is
 * written down in this list and these two lines alone. */
#define CNNB_ABI_MINOR_PAD_SPATIAL 10
#define CNNB_ABI_MINOR_ACTIVATIONS 14
#define CNNB_ABI_MINOR 14

#define CNNB_PLUGIN_ENTRY_SYMBOL "cnnb_plugin_entry"

#if defined(__GNUC__)
#define CNNB_EXPORT __attribute__((visibility("default")))
#define CNNB_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CNNB_EXPORT
#define CNNB_PRINTF(fmt, args)
#endif

typedef enum cnnb_status {
  CNNB_OK = 0,
  CNNB_EINVAL = 1,       /* bad argument, flag or graph */
  CNNB_ENOMEM = 2,       /* allocation failed */
  CNNB_EUNSUPPORTED = 3, /* valid request this plugin cannot do (precision, op) */
  CNNB_EIO = 4,          /* file or device I/O */
  CNNB_EDATA = 5,        /* corrupt input data */
  CNNB_ECOMM = 6,        /* communication with another rank failed */
  CNNB_EINTERNAL = 7,    /* a bug: an invariant did not hold */
  CNNB_ENOTFOUND = 8,    /* a name that nothing offers */
  /* ABI 1.3 */
  CNNB_ENUMERIC = 9 /* the numbers went wrong at run time: a loss or gradient is not
                       finite (training diverged) */
} cnnb_status;

typedef enum cnnb_plugin_kind {
  CNNB_KIND_MODEL = 1,
  CNNB_KIND_DEVICE = 2,
  CNNB_KIND_STRATEGY = 3,
  CNNB_KIND_DATASOURCE = 4
} cnnb_plugin_kind;

/* What the host tells a plugin when it loads it. Read fields only inside struct_size. */
typedef struct cnnb_host {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t reserved;
  const char *host_version; /* "0.1.0" */
} cnnb_host;

typedef struct cnnb_ctx cnnb_ctx; /* host services: errors, logging, flags */
typedef struct cnnb_flag_registry cnnb_flag_registry;

/* The descriptor. The first seven fields never move. */
typedef struct cnnb_plugin {
  uint32_t abi_major;      /* CNNB_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;      /* CNNB_ABI_MINOR the plugin was built against */
  uint32_t struct_size;    /* sizeof(cnnb_plugin) as the plugin saw it */
  uint32_t kind;           /* cnnb_plugin_kind */
  const char *name;        /* the plugin's own name, e.g. "resnet" */
  const char *version;     /* the plugin's version, e.g. "1.0.0" */
  const char *description; /* one line */
  /* ABI 1.0 */
  const char *const *offers; /* NULL-terminated names users pick it by; NULL means {name} */
  const void *vtable;        /* cnnb_model_vtable / cnnb_device_vtable / ... by kind */
  /* [optional] [main-thread] once, before flags are parsed: declares the plugin's own
   * flags with cnnb_flag_declare (shown under its name in --help). NULL: it has none. */
  cnnb_status (*register_flags)(cnnb_flag_registry *registry);
  /* [optional] [any-thread] the plugin's capabilities by string id ("cnnb.cuda.stream/1"),
   * the same for every instance; NULL (slot or answer): it has none. A capability that
   * depends on the instance (the GPU it drives, the precision) is asked of the instance's
   * own get_extension in its vtable (ABI 1.3) first. */
  const void *(*get_extension)(const char *id);
} cnnb_plugin;

typedef const cnnb_plugin *(*cnnb_plugin_entry_fn)(const cnnb_host *host);

/* A plugin defines its entry with this macro so the symbol is exported and typed. */
#define CNNB_PLUGIN_ENTRY                                                  \
  CNNB_EXPORT const cnnb_plugin *cnnb_plugin_entry(const cnnb_host *host); \
  CNNB_EXPORT const cnnb_plugin *cnnb_plugin_entry(const cnnb_host *host)

/* Helper for plugins to fill the fixed head of the descriptor. */
#define CNNB_PLUGIN_HEAD(kind_, name_, version_, description_)                    \
  .abi_major = CNNB_ABI_MAJOR, .abi_minor = CNNB_ABI_MINOR,                       \
  .struct_size = (uint32_t)sizeof(cnnb_plugin), .kind = (kind_), .name = (name_), \
  .version = (version_), .description = (description_)

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_plugin, abi_major) == 0, "ABI: descriptor head moved");
_Static_assert(offsetof(cnnb_plugin, struct_size) == 8, "ABI: descriptor head moved");
_Static_assert(offsetof(cnnb_plugin, kind) == 12, "ABI: descriptor head moved");
_Static_assert(offsetof(cnnb_plugin, name) == 16, "ABI: descriptor head moved");
_Static_assert(offsetof(cnnb_plugin, description) == 32, "ABI: descriptor head moved");
_Static_assert(offsetof(cnnb_plugin, offers) == 40, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_plugin, get_extension) == 64, "ABI: 1.0 layout moved");
_Static_assert(sizeof(cnnb_plugin) == 72, "ABI: grow cnnb_plugin only by appending");
_Static_assert(sizeof(cnnb_host) == 24, "ABI: grow cnnb_host only by appending");
#endif

/* Returns the plugin kind's lowercase name ("model"), or "unknown". */
CNNB_EXPORT const char *cnnb_kind_name(uint32_t kind);
/* Returns a short name for a status ("invalid argument"). */
CNNB_EXPORT const char *cnnb_status_name(cnnb_status status);

#ifdef __cplusplus
}
#endif
#endif
