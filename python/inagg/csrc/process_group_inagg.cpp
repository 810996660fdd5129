/*
 * process_group_inagg.cpp - see process_group_inagg.hpp: which all_reduce calls the switch
 * serves, the progress thread that drives libinagg's requests, and the hand-off of everything
 * else to Gloo.
 */
#include "process_group_inagg.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace inagg_torch {

namespace {

constexpr auto kPollMin = std::chrono::microseconds(20);
constexpr auto kPollMax = std::chrono::microseconds(1000);

bool verbose()
{
  const char* v = std::getenv("INAGG_VERBOSE");
  return v && *v && std::string(v) != "0";
}

bool isLossyCodec(const std::string& compress)
{
  return !compress.empty() && compress != "none" && compress != "zfp:reversible";
}

} // namespace

ProcessGroupInagg::ProcessGroupInagg(int rank, int size,
                                     c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                                     const SwitchConfig& cfg)
    : c10d::ProcessGroup(rank, size), gloo_(std::move(gloo)), cfg_(cfg)
{
  TORCH_CHECK(gloo_, "inagg: the process group needs a Gloo group for delegated calls");
  inagg_options_t o = INAGG_OPTIONS_INIT;
  if (cfg.slots) o.slots = cfg.slots;
  if (cfg.threads) o.threads = cfg.threads;
  if (cfg.packet_elems) o.packet_elems = cfg.packet_elems;
  o.timeout_ms = cfg.timeout_ms;
  if (cfg.protocol == "p4sgd") {
    o.protocol = INAGG_PROTO_P4SGD;
    p4sgd_ = true;
  } else {
    TORCH_CHECK(cfg.protocol == "switchml", "inagg: protocol must be 'switchml' or 'p4sgd', not '",
                cfg.protocol, "'");
  }
  if (cfg.float_mode == "native")
    o.float_mode = INAGG_FLOAT_NATIVE;
  else
    TORCH_CHECK(cfg.float_mode == "fixed", "inagg: float_mode must be 'fixed' or 'native', not '",
                cfg.float_mode, "'");
  if (!cfg.compress.empty() && cfg.compress != "none") o.compress = cfg_.compress.c_str();
  lossy_ = isLossyCodec(cfg.compress);
  /* The communicator's own error feedback keeps one residual per element index across
   * calls: right for one tensor reduced every step, wrong for a process group that reduces
   * tensors of every shape (DDP's buckets alternate). With error_feedback the group keeps a
   * residual per tensor instead (inagg_iallreduce_ef); without, the codec's rounding is the
   * documented bound. */
  o.no_error_feedback = 1;
  char detail[512] = "";
  inagg_result_t rc = inagg_comm_create(&comm_, cfg.address.c_str(), cfg.job.c_str(),
                                        (uint32_t)rank, (uint32_t)size, &o, detail,
                                        sizeof(detail));
  if (rc != INAGG_OK) {
    comm_ = nullptr;
    TORCH_CHECK(false, "inagg: rank ", rank, " of ", size, " could not join job '", cfg.job,
                "' on switch ", cfg.address, ": ", inagg_strerror(rc),
                detail[0] ? std::string(": ") + detail : std::string());
  }
  progress_ = std::thread([this] { progressLoop(); });
}

ProcessGroupInagg::~ProcessGroupInagg()
{
  shutdown();
}

void ProcessGroupInagg::shutdown()
{
  std::lock_guard<std::mutex> g(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (progress_.joinable()) progress_.join();
  if (comm_) {
    inagg_comm_destroy(comm_); /* leaves the job; the switch frees its slots */
    comm_ = nullptr;
  }
  if (verbose()) {
    std::ostringstream out;
    uint64_t total = 0;
    std::string sep;
    for (const auto& kv : delegatedCalls()) {
      out << sep << kv.first << " " << kv.second;
      sep = ", ";
      total += kv.second;
    }
    std::fprintf(stderr,
                 "inagg-torch: rank %d: %llu all_reduce through the switch, %llu calls passed "
                 "to Gloo%s%s%s\n",
                 getRank(), (unsigned long long)switch_calls_.load(),
                 (unsigned long long)total, total ? " (" : "", out.str().c_str(),
                 total ? ")" : "");
    auto ef = errorFeedback();
    if (cfg_.error_feedback)
      std::fprintf(stderr,
                   "inagg-torch: rank %d: error feedback on %llu tensors, %llu calls without "
                   "(more tensors than %zu)\n",
                   getRank(), (unsigned long long)ef.first, (unsigned long long)ef.second,
                   kMaxResiduals);
  }
}

std::pair<uint64_t, uint64_t> ProcessGroupInagg::errorFeedback()
{
  std::lock_guard<std::mutex> lk(mu_);
  return {residuals_.size(), untracked_residuals_};
}

std::map<std::string, uint64_t> ProcessGroupInagg::delegatedCalls() const
{
  std::lock_guard<std::mutex> g(count_mu_);
  return delegated_;
}

void ProcessGroupInagg::countDelegated(const char* what)
{
  std::lock_guard<std::mutex> g(count_mu_);
  delegated_[what]++;
}

inagg_stats_t ProcessGroupInagg::wireStats()
{
  inagg_stats_t s{};
  /* the counters are plain reads of the engine's totals; a torn value only makes a
   * monitoring read slightly stale */
  if (comm_) inagg_get_stats(comm_, &s);
  return s;
}

std::string ProcessGroupInagg::switchRefusal(const std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& opts) const
{
  if (!comm_ || stopping_) return "no switch job";
  if (tensors.size() != 1) return "more than one tensor";
  const at::Tensor& t = tensors[0];
  if (!t.device().is_cpu()) return "not a CPU tensor";
  if (t.layout() != c10::kStrided) return "not a dense tensor";
  if (t.numel() == 0) return "empty tensor";
  auto op = opts.reduceOp.op_;
  if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) return "reduce op";
  switch (t.scalar_type()) {
  case at::kFloat:
  case at::kHalf:
  case at::kBFloat16:
  case at::kDouble:
    return "";
  case at::kInt:
    if (lossy_) return "int32 on a lossy codec";
    return "";
  default:
    return "dtype";
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts)
{
  if (!switchRefusal(tensors, opts).empty()) {
    countDelegated("all_reduce");
    return gloo_->allreduce(tensors, opts);
  }
  Op op;
  op.user = tensors[0];
  bool is_int = op.user.scalar_type() == at::kInt;
  op.dtype = is_int ? INAGG_INT32 : INAGG_FLOAT32;
  op.op = opts.reduceOp.op_ == c10d::ReduceOp::AVG ? INAGG_AVG : INAGG_SUM;
  bool direct = op.user.is_contiguous() &&
                (op.user.scalar_type() == at::kFloat || is_int);
  /* float16, bfloat16 and float64 are summed as float32 and converted back */
  op.wire = direct ? op.user : op.user.to(is_int ? at::kInt : at::kFloat).contiguous();
  if (cfg_.error_feedback && lossy_ && !is_int && !p4sgd_) op.residual = residualFor(op.user);
  op.work = c10::make_intrusive<InaggWork>(getRank(), std::vector<at::Tensor>{op.user});
  c10::intrusive_ptr<c10d::Work> result = op.work;
  switch_calls_++;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queued_.push_back(std::move(op));
  }
  cv_.notify_one();
  return result;
}

at::Tensor ProcessGroupInagg::residualFor(const at::Tensor& user)
{
  auto key = std::make_tuple(static_cast<const void*>(user.data_ptr()), user.numel(),
                             static_cast<int>(user.scalar_type()));
  std::lock_guard<std::mutex> lk(mu_);
  auto it = residuals_.find(key);
  if (it != residuals_.end()) return it->second;
  if (residuals_.size() >= kMaxResiduals) { /* more tensors than buckets: no feedback */
    untracked_residuals_++;
    return at::Tensor();
  }
  at::Tensor r = at::zeros({user.numel()}, at::TensorOptions().dtype(at::kFloat));
  residuals_.emplace(key, r);
  return r;
}

std::exception_ptr ProcessGroupInagg::failure(const std::string& what, inagg_result_t rc)
{
  std::string detail = comm_ ? inagg_last_error(comm_) : "";
  std::ostringstream msg;
  msg << "inagg: " << what << " through switch " << cfg_.address << " (job '" << cfg_.job
      << "', rank " << getRank() << " of " << getSize() << ") failed: " << inagg_strerror(rc);
  if (!detail.empty()) msg << ": " << detail;
  return std::make_exception_ptr(std::runtime_error(msg.str()));
}

bool ProcessGroupInagg::startOp(Op& op)
{
  void* buf = op.wire.data_ptr();
  size_t n = (size_t)op.wire.numel();
  if (p4sgd_) { /* no asynchronous large allreduce on p4sgd: the library pipelines the call */
    finishOp(op, inagg_allreduce(comm_, buf, buf, n, op.dtype, op.op));
    return false;
  }
  float* residual = op.residual.defined() ? op.residual.data_ptr<float>() : nullptr;
  inagg_result_t rc = inagg_iallreduce_ef(comm_, buf, buf, n, op.dtype, op.op, residual, &op.req);
  if (rc != INAGG_OK) {
    op.req = nullptr;
    finishOp(op, rc);
    return false;
  }
  return true;
}

void ProcessGroupInagg::finishOp(Op& op, inagg_result_t rc)
{
  /* An int32 sum that wrapped is delivered wrapped, as Gloo does; a NaN or Inf input makes
   * its chunk NaN, which the caller sees in the result as it would see the Inf/NaN. */
  if (rc == INAGG_OK || rc == INAGG_ERR_OVERFLOW || rc == INAGG_ERR_NONFINITE) {
    try {
      if (!op.wire.is_same(op.user)) op.user.copy_(op.wire);
      op.work->complete(nullptr);
    } catch (...) {
      op.work->complete(std::current_exception());
    }
    return;
  }
  auto err = failure("all_reduce", rc);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!broken_) broken_ = err;
  }
  op.work->complete(err);
}

void ProcessGroupInagg::progressLoop()
{
  std::deque<Op> running; /* started, oldest first: requests complete in collective order */
  auto backoff = kPollMin;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    while (!queued_.empty()) {
      Op op = std::move(queued_.front());
      queued_.pop_front();
      std::exception_ptr broken = broken_;
      lk.unlock();
      if (broken)
        op.work->complete(broken); /* the job failed: the communicator cannot serve more */
      else if (startOp(op))
        running.push_back(std::move(op));
      lk.lock();
      backoff = kPollMin;
    }
    if (running.empty()) {
      if (stopping_) return;
      cv_.wait(lk, [this] { return !queued_.empty() || stopping_; });
      continue;
    }
    lk.unlock();
    int done = 0;
    inagg_result_t rc = inagg_test(running.front().req, &done);
    if (rc != INAGG_OK || done) {
      rc = inagg_wait(running.front().req); /* returns at once; frees the request */
      Op op = std::move(running.front());
      running.pop_front();
      finishOp(op, rc);
      lk.lock();
      backoff = kPollMin;
      continue;
    }
    lk.lock();
    cv_.wait_for(lk, backoff, [this] { return !queued_.empty(); });
    backoff = std::min(backoff * 2, kPollMax);
  }
}

/* ---- delegated to Gloo ---- */

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::broadcast(std::vector<at::Tensor>& t,
                                                            const c10d::BroadcastOptions& o)
{
  countDelegated("broadcast");
  return gloo_->broadcast(t, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::allreduce_coalesced(
    std::vector<at::Tensor>& t, const c10d::AllreduceCoalescedOptions& o)
{
  countDelegated("allreduce_coalesced");
  return gloo_->allreduce_coalesced(t, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::reduce(std::vector<at::Tensor>& t,
                                                         const c10d::ReduceOptions& o)
{
  countDelegated("reduce");
  return gloo_->reduce(t, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::allgather(
    std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
    const c10d::AllgatherOptions& o)
{
  countDelegated("all_gather");
  return gloo_->allgather(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::_allgather_base(at::Tensor& out, at::Tensor& in,
                                                                  const c10d::AllgatherOptions& o)
{
  countDelegated("all_gather_base");
  return gloo_->_allgather_base(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
    const c10d::AllgatherOptions& o)
{
  countDelegated("all_gather_coalesced");
  return gloo_->allgather_coalesced(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::gather(
    std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
    const c10d::GatherOptions& o)
{
  countDelegated("gather");
  return gloo_->gather(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::scatter(
    std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
    const c10d::ScatterOptions& o)
{
  countDelegated("scatter");
  return gloo_->scatter(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::reduce_scatter(
    std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
    const c10d::ReduceScatterOptions& o)
{
  countDelegated("reduce_scatter");
  return gloo_->reduce_scatter(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::_reduce_scatter_base(
    at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o)
{
  countDelegated("reduce_scatter_base");
  return gloo_->_reduce_scatter_base(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::alltoall_base(
    at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
    std::vector<int64_t>& in_splits, const c10d::AllToAllOptions& o)
{
  countDelegated("all_to_all");
  return gloo_->alltoall_base(out, in, out_splits, in_splits, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::alltoall(std::vector<at::Tensor>& out,
                                                           std::vector<at::Tensor>& in,
                                                           const c10d::AllToAllOptions& o)
{
  countDelegated("all_to_all");
  return gloo_->alltoall(out, in, o);
}

void ProcessGroupInagg::monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks)
{
  countDelegated("monitored_barrier");
  gloo_->monitoredBarrier(o, wait_all_ranks);
}

void ProcessGroupInagg::setSequenceNumberForGroup()
{
  gloo_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupInagg::getSequenceNumberForGroup()
{
  return gloo_->getSequenceNumberForGroup();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::send(std::vector<at::Tensor>& t, int dst,
                                                       int tag)
{
  countDelegated("send");
  return gloo_->send(t, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::recv(std::vector<at::Tensor>& t, int src,
                                                       int tag)
{
  countDelegated("recv");
  return gloo_->recv(t, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::recvAnysource(std::vector<at::Tensor>& t,
                                                                int tag)
{
  countDelegated("recv");
  return gloo_->recvAnysource(t, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::barrier(const c10d::BarrierOptions& o)
{
  countDelegated("barrier");
  return gloo_->barrier(o);
}

} // namespace inagg_torch
