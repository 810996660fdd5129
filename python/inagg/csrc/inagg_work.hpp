/*
 * inagg_work.hpp - the c10d::Work of one allreduce through the switch: finished by the process
 * group's progress thread when libinagg reports the request done (inagg_test / inagg_wait),
 * with a Future that DDP's reducer and `async_op=True` callers wait on.
 */
#pragma once

#include <ATen/core/ivalue.h>
#include <ATen/core/ivalue_inl.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "cuda_stage.hpp"

namespace inagg_torch {

class InaggWork : public c10d::Work {
 public:
  /* devices: the CUDA device of a staged tensor (its Future then records events), or none */
  InaggWork(int rank, std::vector<at::Tensor> tensors, std::vector<c10::Device> devices = {})
      : c10d::Work(rank, c10d::OpType::ALLREDUCE, "inagg:all_reduce"),
        tensors_(std::move(tensors)),
        future_(c10::make_intrusive<at::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()), std::move(devices))) {}

#ifdef INAGG_WITH_CUDA
  void setCudaStage(std::shared_ptr<CudaStage> stage) { cuda_ = std::move(stage); }
#endif

  std::vector<at::Tensor> result() override { return tensors_; }

  /* Once asked for, the Future may carry callbacks (then()), which must run on a completer
   * thread of the process group, never under its lock. */
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    {
      std::lock_guard<std::mutex> g(future_mu_);
      future_claimed_ = true;
    }
    /* whoever waits on the Future does not drive the library: the progress thread must */
    if (on_claim_ && !isCompleted()) on_claim_();
    return future_;
  }
  void setOnClaim(std::function<void()> on_claim) { on_claim_ = std::move(on_claim); }

  /* A thread that waits for this Work drives the library itself (the process group's
   * drive(): no hand-off through the progress thread), then Work's own wait. */
  void setDriver(std::function<void(InaggWork*, std::chrono::milliseconds)> drive) {
    drive_ = std::move(drive);
  }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override {
    if (!driven_.exchange(true) && drive_ && !isCompleted()) drive_(this, timeout);
    bool done = c10d::Work::wait(timeout); /* throws the Work's error */
#ifdef INAGG_WITH_CUDA
    if (done && cuda_) inagg_torch::blockCurrentStream(*cuda_); /* the caller's stream, not the host */
#endif
    return done;
  }

  /* Called once, by the thread that saw the request end (or on shutdown): wakes wait(). */
  void finishWork(std::exception_ptr error) { finish(error); }
  /* The Future completed here, by the thread that finished the Work, when nobody has asked for
   * it yet (a synchronous all_reduce): no callback can be chained on it, and a getFuture()
   * racing with this waits for it and gets a completed Future. false: it was claimed. */
  bool completeUnclaimedFuture(std::exception_ptr error) {
    std::lock_guard<std::mutex> g(future_mu_);
    if (future_claimed_) return false;
    completeFuture(error);
    return true;
  }
  /* Otherwise, on a completer thread of the process group: the Future, and with it the
   * callbacks chained on it (then()), which may start and wait for further collectives. */
  void completeFuture(std::exception_ptr error) {
    if (error) {
      future_->setError(error);
      return;
    }
#ifdef INAGG_WITH_CUDA
    if (cuda_) { /* the Future's events go on the stream that copies the result back */
      onStageStream(*cuda_, [this] { future_->markCompleted(c10::IValue(tensors_)); });
      return;
    }
#endif
    future_->markCompleted(c10::IValue(tensors_));
  }

 private:
  std::vector<at::Tensor> tensors_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
  std::function<void(InaggWork*, std::chrono::milliseconds)> drive_;
  std::atomic<bool> driven_{false};
  std::function<void()> on_claim_;
  std::mutex future_mu_;
  bool future_claimed_ = false;
#ifdef INAGG_WITH_CUDA
  std::shared_ptr<CudaStage> cuda_;
#endif
};

} // namespace inagg_torch
