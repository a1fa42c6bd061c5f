/* ps_gpu.h — --local_parameter_device=gpu, tf_cnn_benchmarks' default: the variables live
 * on the first replica's GPU. They are that replica's own parameter arena (as tf's
 * replica on gpu:0 reads the variables it holds), the optimizer's slots are beside them
 * on that GPU, and each step
 *   push    the replicas' gradients are averaged into the first GPU's arena: one NCCL
 *           reduce (ncclAvg) on the replicas' streams, device to device;
 *   update  the host's updates run once, on the first GPU (its device's update kernel);
 *   pull    the new values go to every other replica: one NCCL broadcast.
 * Nothing goes through host memory, except the slots a checkpoint saves or restores. One
 * process only: across ranks the parameter servers keep the variables in host memory
 * (--local_parameter_device=cpu). Waits are nccl_gpus.h's, bounded. */
#ifndef CNNB_PS_GPU_H
#define CNNB_PS_GPU_H

#include <cnnb/cnnb.h>

#include "parameter_server.h"

/* Opens NCCL over cfg's devices (one line when it cannot: no CUDA device, no NCCL, no
 * GPU). */
cnnb_status ps_gpu_open(ps *s, const cnnb_strategy_config *cfg);
void ps_gpu_close(ps *s);
/* Every replica starts from the first replica's parameters. */
cnnb_status ps_gpu_broadcast(ps *s, float *const *params);
/* The push: the mean gradient in the first replica's arena (and, under dynamic loss
 * scaling, every replica's marked non-finite when the mean is). */
cnnb_status ps_gpu_finish_step(ps *s, float *const *grads);
/* One update on the first GPU, with the slots kept there. */
cnnb_status ps_gpu_apply(ps *s, int64_t offset, const cnnb_update *update);
/* The pull. */
cnnb_status ps_gpu_finish_update(ps *s, float *const *params);
/* The slots for `rule` on the GPU and their host mirrors (ps_make_slots'), once. */
cnnb_status ps_gpu_make_slots(ps *s, uint32_t rule);
/* Checkpoints: slot `slot` between the GPU and its host mirror (s->slot1 / s->slot2). */
cnnb_status ps_gpu_slot_to_host(ps *s, int32_t slot);
cnnb_status ps_gpu_slot_to_device(ps *s, int32_t slot);

#endif
