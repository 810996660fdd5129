/*
 * cuda_stage.hpp - a CUDA tensor's all_reduce through the switch, staged through pinned host
 * memory on a stream of the backend's own (one per device): the copy to the host is ordered
 * after the caller's current stream with an event; the progress thread waits for it before it
 * starts the request; the result is copied back on the same stream, and Work::wait makes the
 * caller's current stream (not the host) wait for that copy, as NCCL's work does. Built only
 * against a CUDA build of torch (INAGG_WITH_CUDA, set by inagg/_torch_ext.py).
 */
#pragma once

#ifdef INAGG_WITH_CUDA
#include <ATen/ATen.h>

#include <functional>
#include <memory>

namespace inagg_torch {

struct CudaStage; /* one all_reduce's stream and events (cuda_stage.cpp) */

/* Caller's thread: allocate `host` (pinned, contiguous, dtype `wire`) and enqueue the copy of
 * `user` into it on the backend's stream, after the work already on the caller's stream. */
std::shared_ptr<CudaStage> stageIn(const at::Tensor& user, at::ScalarType wire,
                                   at::Tensor* host);
/* Progress thread: block until the copy to `host` has landed. */
void waitStagedIn(CudaStage& stage);
/* Enqueue the copy of the result back into `user` on the backend's stream. */
void stageOut(CudaStage& stage, const at::Tensor& user, const at::Tensor& host);
/* Work::wait: the caller's current stream waits for the copy back; the host does not. */
void blockCurrentStream(CudaStage& stage);
/* Run `fn` with the backend's stream current (a CUDA Future records its events there). */
void onStageStream(CudaStage& stage, const std::function<void()>& fn);

} // namespace inagg_torch
#endif
