/* checkpoint.h — what a checkpoint holds, and how a run saves one, resumes from one and
 * evaluates one (--train_dir, --save_model_steps / _secs, --max_ckpts_to_keep). The files
 * and the directory are checkpoint_dir.h's; this is their contents. Host-internal.
 *
 * A checkpoint is one safetensors file that PyTorch opens as it is:
 *  - every parameter (the fp32 master weights) and batch-norm statistic as an F32 tensor
 *    under its key (cnnb_graph_param_key: torchvision's state_dict key where the model
 *    names its layers so, else the parameter's own name), in the graph's logical layout,
 *    which is PyTorch's (conv kernels OIHW, dense weights out x in);
 *  - for each batch norm named the torchvision way, what torchvision's BatchNorm2d has
 *    beyond the graph: "<prefix>.num_batches_tracked" (I64 scalar: the global step) and,
 *    for a batch norm that learns no scale (tf_cnn_benchmarks' default), "<prefix>.weight"
 *    of ones. So torchvision's load_state_dict(strict=True) takes the model tensors;
 *  - the optimizer's slots, per trainable parameter, as "optimizer.<slot>.<key>" with
 *    PyTorch's state names: momentum "momentum_buffer"; RMSProp "square_avg" and
 *    "momentum_buffer"; Adam "exp_avg" and "exp_avg_sq" (the values are TensorFlow's
 *    rules' accumulators, optimizer.h; drop the "optimizer." keys before a strict load);
 *  - "__metadata__": "format": "pt", and "cnnbench.*" entries: version, model, dataset,
 *    num_classes, image_size, precision, optimizer, global_step, updates (Adam's t),
 *    loss_scale, loss_scale_normal_steps, and the run as the core read it (config).
 *
 * Saving: every rank calls it (a strategy that keeps the optimizer's slots gathers them
 * collectively); rank 0 writes replica 0's state; every rank then learns whether the write
 * worked, so a full disk stops the whole job with rank 0's message. Replicas hold the same
 * values after every synchronous step; under the independent strategy each replica trains
 * alone and a checkpoint keeps replica 0's.
 *
 * Resuming: training's rank 0 first takes --train_dir (made, checked writable with a
 * test file, locked for this run alone: base/dir_lock.h), and every rank learns whether
 * it could. Every rank reads the newest checkpoint of --train_dir that reads back whole
 * (a shared directory under several machines) and every replica starts from it; the
 * ranks compare the step they resume at; rank 0 rebuilds the index when it disagrees
 * with the files. A checkpoint of another model, one whose tensors do not fit the graph
 * (missing, extra, wrong shape or dtype) or hold a NaN or an infinity, is refused naming
 * the file and the tensor; a torn or corrupt newer file is skipped for the previous one,
 * with a warning. A directory that holds checkpoint files none of which reads back whole
 * is refused, naming each and why, unless --ignore_unreadable_checkpoints. */
#ifndef CNNB_CHECKPOINT_H
#define CNNB_CHECKPOINT_H

#include "run/run.h"
#include "store/safetensors.h"

/* Setup, after the executors exist and before the strategy's broadcast: with --train_dir
 * (training or --eval), makes run->checkpoints (this module's state: the checkpoint
 * found, until its optimizer state is restored, and when the last save ended), finds the
 * latest valid checkpoint and loads its parameters and statistics into every replica
 * (and, for a strategy that keeps the variables, into what the broadcast hands it).
 * facts.start_step becomes its global step (0 with none). Training with no checkpoint
 * yet starts from the initializers; --eval without one is an error. */
cnnb_status cnnb_checkpoint_restore_model(cnnb_run *run);

/* Setup, after the trainers exist: the optimizer's slots and the trainers' state from the
 * checkpoint restore_model found (nothing without one), then closes it. A checkpoint of
 * another optimizer rule is refused, naming both. */
cnnb_status cnnb_checkpoint_restore_optimizer(cnnb_run *run);

/* Saves the run's state at global step `global_step` (above). Collective. */
cnnb_status cnnb_checkpoint_save(cnnb_run *run, int64_t global_step);

/* Whether the step loop saves after global step `global_step` (--save_model_steps), or
 * because --save_model_secs passed since the last save; all ranks agree (rank 0's clock
 * decides). Collective when --save_model_secs is given under several ranks. */
cnnb_status cnnb_checkpoint_due(cnnb_run *run, int64_t global_step, bool *due);

/* The checkpoint the run's weights were loaded from (training resumed, or --eval), for
 * messages that must name it (a loss that says its weights are bad); NULL: none. */
const char *cnnb_checkpoint_resumed_from(const cnnb_run *run);

/* The path of the checkpoint the run saved last, on rank 0 (the writer); NULL on the other
 * ranks and before a save. */
const char *cnnb_checkpoint_last_saved(const cnnb_run *run);

/* Frees the module's state (NULL is fine), releasing --train_dir's lock. */
void cnnb_checkpoints_free(cnnb_checkpoints *c);

/* Loads the parameters and statistics of the safetensors file `path` into `ex` (the
 * checks above; a file without cnnbench metadata, such as a torchvision state_dict saved
 * with safetensors, loads by keys alone). For tools and tests. */
cnnb_status cnnb_checkpoint_load_model_file(cnnb_ctx *ctx, const char *path, cnnb_executor *ex);

#endif
