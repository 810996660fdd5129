/*
 * cuda_stage.cpp - see cuda_stage.hpp: the backend's stream per device, the events that order
 * the copies after the caller's stream and the caller's stream after the copy back.
 */
#include "cuda_stage.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>

namespace inagg_torch {

struct CudaStage {
  explicit CudaStage(c10::cuda::CUDAStream s) : stream(s) {}
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent copied; /* the copy to the host is done */
  at::cuda::CUDAEvent done;   /* the copy back is done */
};

namespace {

/* The backend's stream on device `d`: one for the process, taken from torch's pool. */
c10::cuda::CUDAStream stageStream(c10::DeviceIndex d)
{
  static std::mutex mu;
  static std::map<int, c10::cuda::CUDAStream> streams;
  std::lock_guard<std::mutex> g(mu);
  auto it = streams.find(d);
  if (it == streams.end())
    it = streams.emplace(d, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d)).first;
  return it->second;
}

} // namespace

std::shared_ptr<CudaStage> stageIn(const at::Tensor& user, at::ScalarType wire, at::Tensor* host)
{
  c10::cuda::CUDAGuard device(user.device());
  auto stage = std::make_shared<CudaStage>(stageStream(user.device().index()));
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(user.device().index()));
  ready.block(stage->stream);
  c10::cuda::CUDAStreamGuard on(stage->stream);
  *host = at::empty(user.sizes(), at::TensorOptions().dtype(wire).pinned_memory(true));
  host->copy_(user, /*non_blocking=*/true);
  /* the caller may free `user` once it returns: its memory stays ours until our stream ran */
  c10::cuda::CUDACachingAllocator::recordStream(user.storage().data_ptr(), stage->stream);
  stage->copied.record(stage->stream);
  return stage;
}

void waitStagedIn(CudaStage& stage)
{
  stage.copied.synchronize();
}

void stageOut(CudaStage& stage, const at::Tensor& user, const at::Tensor& host)
{
  c10::cuda::CUDAGuard device(stage.stream.device());
  c10::cuda::CUDAStreamGuard on(stage.stream);
  at::Tensor target = user; /* copy_ writes through the caller's view */
  target.copy_(host, /*non_blocking=*/true);
  stage.done.record(stage.stream);
}

void blockCurrentStream(CudaStage& stage)
{
  c10::cuda::CUDAGuard device(stage.stream.device());
  stage.done.block(c10::cuda::getCurrentCUDAStream(stage.stream.device_index()));
}

void onStageStream(CudaStage& stage, const std::function<void()>& fn)
{
  c10::cuda::CUDAGuard device(stage.stream.device());
  c10::cuda::CUDAStreamGuard on(stage.stream);
  fn();
}

} // namespace inagg_torch
