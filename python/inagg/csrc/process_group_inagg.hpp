/*
 * process_group_inagg.hpp - the `inagg` torch.distributed backend: a c10d::ProcessGroup whose
 * all_reduce (SUM / AVG of one dense CPU tensor, or CUDA tensor staged through pinned host
 * memory when built against a CUDA torch: cuda_stage.hpp) goes through an inagg switch job, and which
 * hands every other collective, reduction op or tensor the switch cannot serve to a Gloo
 * process group built on the same store. Counters say how many calls went each way.
 *
 * One source for torch 1.13 and 2.x: on 1.13 the class is a c10d::ProcessGroup (what
 * register_backend's creator returns there); from 2.0 on c10d split that into ProcessGroup
 * (the per-device dispatcher) and Backend, and the class is a c10d::Backend registered for
 * "cpu" and "cuda". BaseGroup names whichever it is; the overrides that exist only in 2.x
 * are under INAGG_TORCH2.
 *
 * Threading: libinagg wants one thread at a time per communicator: comm_mu_ is that rule.
 * Callers queue an operation and get a Work. Whoever holds comm_mu_ runs one step (step()):
 * starts the queued requests (inagg_iallreduce, on either protocol) and finishes each Work
 * whose request inagg_test reports done, oldest first. The progress thread steps whenever it
 * wakes, sleeping in poll() on an eventfd that callers write when they queue an operation and,
 * while requests run that no caller waits for, on the communicator's completion signal
 * (inagg_comm_event_fd). A caller that queues while no one holds comm_mu_ starts its request
 * itself, and one that waits for its Work (Work::wait, a synchronous all_reduce) steps and
 * polls itself until it is done: no hand-off to another thread on the way in or out. On torch
 * 2.x a synchronous call (AllreduceOptions::asyncOp false) does not wake the progress thread
 * at all, and a Work's Future that nobody asked for is completed by the thread that finished
 * the Work, not handed to a completer thread.
 *
 * Fall-back (SwitchConfig.fallback, $INAGG_TORCH_FALLBACK, default on): when no switch answers
 * (the library's fail-over off or spent), the ranks finish the all_reduce calls in flight over
 * a Gloo group of their own (inagg_salvage_requests: a chunk some rank holds is handed on, the
 * others reduced again from the inputs), log one line each, leave the job, and run later
 * all_reduce calls over that group. Every retry_ms ($INAGG_TORCH_RETRY_MS, default 5000; 0:
 * never) they agree at the start of a call to probe the switch, and when it answers on every
 * rank they join a new job ("<job>-rN") and return to it at that call on every rank. The group
 * is the fall-back's alone, so its calls keep one order on every rank whatever else is
 * delegated to Gloo meanwhile.
 */
#pragma once

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define INAGG_TORCH2 1
#define INAGG_OVERRIDE_TORCH2 override
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define INAGG_OVERRIDE_TORCH2
#endif

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "inagg.h"
#include "inagg_work.hpp"

namespace inagg_torch {

#ifdef INAGG_TORCH2
using BaseGroup = c10d::Backend;
#else
using BaseGroup = c10d::ProcessGroup;
#endif

/* What the switch job is built with (the Python side fills it from options and env). */
struct SwitchConfig {
  std::string address;            /* "HOST:PORT[,HOST:PORT...]" */
  std::string job;                /* agreed through the store */
  std::string compress;           /* "" = none */
  bool error_feedback = false;    /* a residual per tensor (lossy codecs) */
  std::string protocol = "switchml";
  std::string float_mode = "fixed";
  uint32_t slots = 0;             /* 0: library default */
  uint32_t threads = 0;
  uint32_t packet_elems = 0;
  uint32_t timeout_ms = 30000;
  bool fallback = true;           /* a lost switch's all_reduce goes on over Gloo */
  uint32_t retry_ms = 5000;       /* fallen back: probe the switch this often (0: never) */
};

/* What the fall-back did (backend_stats()["fallback"]). */
/* The steady clock in nanoseconds (stalls and back-offs). */
uint64_t nowNs();

struct FallbackStats {
  bool enabled = false;
  bool on_switch = true;          /* false while fallen back */
  uint64_t fallbacks = 0, returns = 0;
  uint64_t gloo_calls = 0;        /* all_reduce run over Gloo while fallen back */
  uint64_t salvaged = 0;          /* all_reduce in flight finished by a salvage */
  uint64_t chunks_handed_on = 0, chunks_reduced = 0;
  uint64_t stall_ms_total = 0;
  std::string last_cause;
};

class ProcessGroupInagg : public BaseGroup {
 public:
  /* fallback: the Gloo group of the fall-back (used only with cfg.fallback) */
  ProcessGroupInagg(int rank, int size, c10::intrusive_ptr<BaseGroup> gloo,
                    c10::intrusive_ptr<BaseGroup> fallback, const SwitchConfig& cfg);
  ~ProcessGroupInagg() override;

  const std::string getBackendName() const override { return "inagg"; }

  /* Leave the switch job (inagg_comm_destroy) and print the counters if asked; idempotent. */
  void shutdown() INAGG_OVERRIDE_TORCH2;

  /* Calls that went through the switch, and per operation name those handed to Gloo. */
  uint64_t switchCalls() const { return switch_calls_.load(); }
  /* Error feedback: tensors with a residual, and calls sent without one (past the cap). */
  std::pair<uint64_t, uint64_t> errorFeedback();
  std::map<std::string, uint64_t> delegatedCalls() const;
  std::string address() const { return cfg_.address; }
  std::string job() const { return cfg_.job; }
  bool lossyCodec() const { return lossy_; }
  /* libinagg's counters of the communicator (bytes on the wire etc.), zeros after shutdown */
  inagg_stats_t wireStats();
  /* Hand-offs between threads: times the progress thread woke to a descriptor (a queued
   * operation, a completion it watched), and Futures completed on a completer thread. A
   * synchronous all_reduce on torch 2.x adds to neither. */
  std::pair<uint64_t, uint64_t> handoffs() const {
    return {progress_wakes_.load(), futures_on_completers_.load()};
  }
  FallbackStats fallbackStats();
  c10::intrusive_ptr<BaseGroup> gloo() const { return gloo_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;

  /* Everything below is Gloo's. */
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out,
                                           std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out,
                                        std::vector<at::Tensor>& in,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out,
                                         std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out,
                                                std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out,
                                          std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
#ifdef INAGG_TORCH2
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
      const c10d::ReduceScatterOptions& opts) override;
#endif

 private:
  /* One allreduce queued for the switch. `wire` is the float32/int32 contiguous buffer the
   * library reads and writes (the user's tensor itself when it already is one). */
  struct Op {
    c10::intrusive_ptr<InaggWork> work;
    at::Tensor user;
    at::Tensor wire;
    inagg_dtype_t dtype;
    inagg_op_t op;
    inagg_request_t* req = nullptr; /* NULL once waited for: waited_rc is its result */
    inagg_result_t waited_rc = INAGG_OK;
    at::Tensor residual; /* error feedback: this tensor's residual (undefined: none) */
#ifdef INAGG_WITH_CUDA
    std::shared_ptr<CudaStage> cuda; /* a CUDA tensor's staging; `wire` is pinned host memory */
#endif
  };

  /* The fall-back (see the top of the file); comm_mu_ held in each. */
  static bool switchLost(inagg_result_t rc);
  /* The switch was lost (rc; t0 when seen): salvage lost, leave the job, then run the rest of
   * lost and `unstarted` as fallen-back calls. */
  void fallBack(std::deque<Op>& lost, std::deque<Op>& unstarted, inagg_result_t rc,
                uint64_t t0_ns);
  void failOps(std::deque<Op>& ops, std::exception_ptr error);
  /* One call while fallen back: the agreement to probe, then the switch (true: started, in
   * running_) or Gloo. */
  bool runFallen(Op& op);
  bool tryReturn();
  /* buf summed (AVG: averaged) over fallback_; throws what Gloo throws */
  void glooAllreduce(void* buf, size_t count, inagg_dtype_t dtype, inagg_op_t op);
  static int glooChannel(void* ctx, const void* send, void* recv, size_t count,
                         inagg_dtype_t dtype, inagg_op_t op);
  bool joinSwitch(const std::string& job, std::string* why); /* comm_ and comm_fd_ */

  /* Why the switch cannot serve this call ("" if it can). */
  std::string switchRefusal(const std::vector<at::Tensor>& tensors,
                            const c10d::AllreduceOptions& opts) const;
  void countDelegated(const char* what);
  void progressLoop();
  void wakeProgress();        /* a caller queued an operation (or shutdown began) */
  bool step();                /* comm_mu_ held: start queued, finish done; true if idle */
  /* A waiting caller: step and poll until work completed, or `timeout` (kNoTimeout: none)
   * passed and Work::wait's own timeout takes over. */
  void drive(InaggWork* work, std::chrono::milliseconds timeout);
  bool waitOldest(InaggWork* work, std::chrono::milliseconds timeout);
  inagg_result_t startOp(Op& op); /* inagg_iallreduce_ef; op.req set when INAGG_OK */
  void finishOp(Op& op, inagg_result_t rc);
  void copyBack(Op& op); /* the result from `wire` into the caller's tensor */
  void completeWork(const c10::intrusive_ptr<InaggWork>& work, std::exception_ptr error);
  void completerLoop();
  void stopCompleters();
  std::exception_ptr failure(const std::string& what, inagg_result_t rc);
  void failAll(std::exception_ptr error);

  c10::intrusive_ptr<BaseGroup> gloo_;
  SwitchConfig cfg_;
  bool lossy_ = false;
  /* Error feedback: one float32 residual per tensor, keyed by its storage, element count and
   * dtype (DDP's buckets keep their storage from step to step); at most kMaxResiduals. */
  static constexpr size_t kMaxResiduals = 64;
  std::map<std::tuple<const void*, int64_t, int>, at::Tensor> residuals_;
  at::Tensor residualFor(const at::Tensor& user);
  uint64_t untracked_residuals_ = 0; /* calls past kMaxResiduals, sent without feedback */
  bool p4sgd_ = false;
  inagg_comm_t* comm_ = nullptr;
  inagg_options_t opts_; /* the job's options (a return joins with them) */
  c10::intrusive_ptr<BaseGroup> fallback_;
  std::atomic<bool> fallen_{false}; /* comm_ is NULL: all_reduce runs over fallback_ */
  std::atomic<bool> joined_{true};  /* false once shut down */
  uint64_t fell_ns_ = 0, next_probe_ns_ = 0;
  FallbackStats fb_; /* under count_mu_ */

  int comm_fd_ = -1; /* inagg_comm_event_fd: readable on a completion (the library's) */
  std::mutex comm_mu_; /* held by whoever calls the library; guards running_ */
  std::atomic<int> drivers_{0}; /* callers inside drive() */
  uint64_t spin_ns_ = 0; /* a driver looks again this long before it sleeps ($INAGG_POLL) */
  std::atomic<bool> progress_watches_comm_{false}; /* the progress thread polls comm_fd_ */
  int wake_fd_ = -1; /* eventfd: readable when queued_ grew or stopping_ was set */
  int driver_fd_ = -1; /* eventfd: a step finished Works while callers drive */
  std::mutex mu_;
  std::deque<Op> queued_;      /* not yet started */
  std::deque<Op> running_;     /* started, in collective order */
  bool stopping_ = false;
  std::exception_ptr broken_;  /* after a failure every later call fails with it */
  std::thread progress_;
  /* Futures to complete, and the threads that complete them (see completeWork) */
  static constexpr size_t kMaxCompleters = 8;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<std::pair<c10::intrusive_ptr<InaggWork>, std::exception_ptr>> done_;
  std::vector<std::thread> completers_;
  size_t idle_completers_ = 0;
  bool completers_stop_ = false;

  std::atomic<uint64_t> switch_calls_{0};
  std::atomic<uint64_t> progress_wakes_{0}, futures_on_completers_{0};
  mutable std::mutex count_mu_;
  std::map<std::string, uint64_t> delegated_;
  bool shut_down_ = false;
  std::mutex shutdown_mu_;
};

} // namespace inagg_torch
