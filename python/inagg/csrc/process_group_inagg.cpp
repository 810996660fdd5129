/*
 * process_group_inagg.cpp - see process_group_inagg.hpp: which all_reduce calls the switch
 * serves, the progress thread that drives libinagg's requests, and the hand-off of everything
 * else to Gloo (the fall-back when the switch is lost: process_group_fallback.cpp).
 */
#include "process_group_inagg.hpp"

#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace inagg_torch {

namespace {

/* The longest single sleep of the progress thread: only a bound, as every wake-up comes from
 * a descriptor (a completion, a queued operation, shutdown). */
constexpr int kSleepBoundMs = 1000;
/* How often an idle progress thread asks whether the switch was lost (fall-back on). */
constexpr int kIdleLookMs = 20;
/* A yield that took this long means another thread shares the core: a driver stops spinning
 * (the library's own waits use the same bound). */
constexpr auto kYieldLong = std::chrono::microseconds(500);

bool verbose()
{
  const char* v = std::getenv("INAGG_VERBOSE");
  return v && *v && std::string(v) != "0";
}

/* How long a waiting caller looks again (yielding the CPU between looks) before it sleeps on
 * the completion signal: $INAGG_POLL as the library reads it for its own waits (docs: "sleep",
 * "busy", "adaptive[:US]"), default adaptive, 200 us. */
uint64_t driveSpinNs()
{
  const char* v = std::getenv("INAGG_POLL");
  std::string mode = v ? v : "";
  if (mode == "sleep") return 0;
  if (mode == "busy") return UINT64_MAX;
  if (mode.rfind("adaptive:", 0) == 0) return std::strtoull(mode.c_str() + 9, nullptr, 10) * 1000;
  return 200000;
}

bool isLossyCodec(const std::string& compress)
{
  return !compress.empty() && compress != "none" && compress != "zfp:reversible";
}


} // namespace

uint64_t nowNs()
{
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ProcessGroupInagg::ProcessGroupInagg(int rank, int size,
                                     c10::intrusive_ptr<BaseGroup> gloo,
                                     c10::intrusive_ptr<BaseGroup> fallback,
                                     const SwitchConfig& cfg)
    : BaseGroup(rank, size), gloo_(std::move(gloo)), cfg_(cfg), fallback_(std::move(fallback))
{
  TORCH_CHECK(gloo_, "inagg: the process group needs a Gloo group for delegated calls");
  TORCH_CHECK(fallback_ || !cfg.fallback, "inagg: the fall-back needs a Gloo group of its own");
  fb_.enabled = cfg.fallback;
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
  /* With the fall-back every rank meets a lost switch the same way, over Gloo: were the
   * library's own fail-over on, a rank between calls would rejoin the restarted switch and
   * wait there for ranks that are salvaging over Gloo */
  o.no_failover = cfg.fallback ? 1 : 0;
  opts_ = o;
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
  inagg_result_t rc2 = inagg_comm_event_fd(comm_, &comm_fd_);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  driver_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (rc2 != INAGG_OK || wake_fd_ < 0 || driver_fd_ < 0) {
    std::string why = rc2 != INAGG_OK ? std::string(inagg_strerror(rc2)) + ": " +
                                            inagg_last_error(comm_)
                                      : std::string("eventfd: ") + std::strerror(errno);
    inagg_comm_destroy(comm_);
    comm_ = nullptr;
    if (wake_fd_ >= 0) close(wake_fd_);
    if (driver_fd_ >= 0) close(driver_fd_);
    wake_fd_ = driver_fd_ = -1;
    TORCH_CHECK(false, "inagg: rank ", rank, ": no completion signal for job '", cfg.job, "': ",
                why);
  }
  spin_ns_ = driveSpinNs();
  progress_ = std::thread([this] { progressLoop(); });
}

void ProcessGroupInagg::wakeProgress()
{
  (void)eventfd_write(wake_fd_, 1);
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
  if (wake_fd_ >= 0) wakeProgress();
  if (progress_.joinable()) progress_.join();
  stopCompleters();
  std::lock_guard<std::mutex> cl(comm_mu_); /* a caller may still be inside drive() */
  joined_ = false;
  if (comm_) {
    inagg_comm_destroy(comm_); /* leaves the job; the switch frees its slots; closes comm_fd_ */
    comm_ = nullptr;
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  if (driver_fd_ >= 0) close(driver_fd_);
  wake_fd_ = driver_fd_ = -1;
  FallbackStats fb = fallbackStats();
  if (fb.fallbacks && getRank() == 0)
    std::fprintf(stderr,
                 "inagg-torch: %llu fall-backs to Gloo, %llu returns to the switch, %llu "
                 "all_reduce done by Gloo meanwhile\n",
                 (unsigned long long)fb.fallbacks, (unsigned long long)fb.returns,
                 (unsigned long long)fb.gloo_calls);
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

FallbackStats ProcessGroupInagg::fallbackStats()
{
  std::lock_guard<std::mutex> g(count_mu_);
  FallbackStats f = fb_;
  f.on_switch = !fallen_.load();
  return f;
}

std::string ProcessGroupInagg::switchRefusal(const std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& opts) const
{
  if (!joined_.load() || stopping_) return "no switch job"; /* fallen back: still ours */
  if (tensors.size() != 1) return "more than one tensor";
  const at::Tensor& t = tensors[0];
#ifdef INAGG_WITH_CUDA
  if (!t.device().is_cpu() && !t.is_cuda()) return "not a CPU or CUDA tensor";
#else
  if (!t.device().is_cpu()) return "not a CPU tensor (this build of the backend has no CUDA)";
#endif
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
  bool direct = op.user.is_cpu() && op.user.is_contiguous() &&
                (op.user.scalar_type() == at::kFloat || is_int);
  std::vector<c10::Device> devices;
#ifdef INAGG_WITH_CUDA
  if (op.user.is_cuda()) {
    op.cuda = stageIn(op.user, is_int ? at::kInt : at::kFloat, &op.wire);
    devices.push_back(op.user.device());
  }
#endif
  /* float16, bfloat16 and float64 are summed as float32 and converted back */
  if (!op.wire.defined())
    op.wire = direct ? op.user : op.user.to(is_int ? at::kInt : at::kFloat).contiguous();
  if (cfg_.error_feedback && lossy_ && !is_int && !p4sgd_) op.residual = residualFor(op.user);
  op.work = c10::make_intrusive<InaggWork>(getRank(), std::vector<at::Tensor>{op.user},
                                           std::move(devices));
#ifdef INAGG_WITH_CUDA
  op.work->setCudaStage(op.cuda);
#endif
  op.work->setDriver([this](InaggWork* w, std::chrono::milliseconds t) { drive(w, t); });
  op.work->setOnClaim([this] { wakeProgress(); });
  c10::intrusive_ptr<c10d::Work> result = op.work;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queued_.push_back(std::move(op));
  }
  /* Start it here when the library is free. A synchronous call (torch 2.x says which) is
   * waited for at once, and its waiter drives it (drive()): the progress thread is left
   * asleep. Any other is the progress thread's to finish, or to start when the library was
   * busy. */
  bool waited_at_once = false;
#ifdef INAGG_TORCH2
  waited_at_once = !opts.asyncOp;
#endif
  std::unique_lock<std::mutex> cl(comm_mu_, std::try_to_lock);
  if (cl.owns_lock()) {
    step();
    cl.unlock();
  }
  if (!waited_at_once && !progress_watches_comm_.load()) wakeProgress();
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

inagg_result_t ProcessGroupInagg::startOp(Op& op)
{
  void* buf = op.wire.data_ptr();
  size_t n = (size_t)op.wire.numel();
  float* residual = op.residual.defined() ? op.residual.data_ptr<float>() : nullptr;
#ifdef INAGG_WITH_CUDA
  if (op.cuda) waitStagedIn(*op.cuda); /* the tensor's bytes are on the host */
#endif
  inagg_result_t rc = inagg_iallreduce_ef(comm_, buf, buf, n, op.dtype, op.op, residual, &op.req);
  if (rc != INAGG_OK) op.req = nullptr;
  return rc;
}

void ProcessGroupInagg::finishOp(Op& op, inagg_result_t rc)
{
  /* An int32 sum that wrapped is delivered wrapped, as Gloo does; a NaN or Inf input makes
   * its chunk NaN, which the caller sees in the result as it would see the Inf/NaN. */
  if (rc == INAGG_OK || rc == INAGG_ERR_OVERFLOW || rc == INAGG_ERR_NONFINITE) {
    try {
      copyBack(op);
      completeWork(op.work, nullptr);
    } catch (...) {
      completeWork(op.work, std::current_exception());
    }
    return;
  }
  auto err = failure("all_reduce", rc);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!broken_) broken_ = err;
  }
  completeWork(op.work, err);
}

void ProcessGroupInagg::copyBack(Op& op)
{
#ifdef INAGG_WITH_CUDA
  if (op.cuda) {
    stageOut(*op.cuda, op.user, op.wire);
    return;
  }
#endif
  if (!op.wire.is_same(op.user)) op.user.copy_(op.wire);
}

bool ProcessGroupInagg::step()
{
  std::deque<Op> batch, unstarted, lost;
  std::exception_ptr broken;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(queued_);
    broken = broken_;
  }
  inagg_result_t lost_rc = INAGG_OK; /* the switch was lost (fall-back on) */
  uint64_t lost_ns = 0;
  bool finished = false;
  for (Op& op : batch) {
    if (broken) {
      completeWork(op.work, broken); /* the job failed: the communicator cannot serve more */
    } else if (lost_rc != INAGG_OK) {
      unstarted.push_back(std::move(op));
    } else if (fallen_.load()) {
      finished |= !runFallen(op);
    } else {
      inagg_result_t rc = startOp(op);
      if (rc == INAGG_OK) {
        running_.push_back(std::move(op));
      } else if (cfg_.fallback && switchLost(rc)) {
        lost_rc = rc;
        lost_ns = nowNs();
        unstarted.push_back(std::move(op));
      } else {
        finishOp(op, rc);
        finished = true;
      }
    }
  }
  /* Cleared before the requests are looked at: a completion after this raises it again. */
  if (comm_) inagg_comm_event_clear(comm_);
  while (!running_.empty()) { /* oldest first: a Work's order is the caller's */
    inagg_result_t rc = running_.front().waited_rc; /* a waiter waited for it (waitOldest) */
    if (running_.front().req) {
      int done = 0;
      rc = inagg_test(running_.front().req, &done);
      if (rc == INAGG_OK && !done && lost_rc == INAGG_OK) break;
      rc = inagg_wait(running_.front().req); /* returns at once; frees the request */
    }
    Op op = std::move(running_.front());
    running_.pop_front();
    if (cfg_.fallback && switchLost(rc)) { /* the later ones fail too: wait for them all */
      if (lost_rc == INAGG_OK) lost_ns = nowNs();
      lost_rc = rc;
      lost.push_back(std::move(op));
      continue;
    }
    if (rc == INAGG_OK || rc == INAGG_ERR_OVERFLOW || rc == INAGG_ERR_NONFINITE) switch_calls_++;
    finishOp(op, rc);
    finished = true;
  }
  /* Idle, the completion signal woke us: a switch lost between calls is a fall-back now, so
   * that ranks waiting for this one's part of an interrupted call are not left waiting. */
  if (lost_rc == INAGG_OK && cfg_.fallback && comm_ && running_.empty() && !fallen_.load()) {
    inagg_result_t rc = inagg_comm_failure(comm_);
    if (switchLost(rc)) {
      lost_rc = rc;
      lost_ns = nowNs();
    }
  }
  if (lost_rc != INAGG_OK) {
    fallBack(lost, unstarted, lost_rc, lost_ns);
    finished = true;
  }
  /* This step may have taken the signal a waiting caller sleeps on: wake it. */
  if (finished && drivers_.load() > 0) (void)eventfd_write(driver_fd_, 1);
  return running_.empty();
}

/* comm_mu_ held, a step just taken: when work's request is the oldest running and the caller
 * waits without a time limit, wait for it in the library itself (inagg_wait: its own spin
 * and sleep on the engine's timers, as a C caller waits). true if it did. */
bool ProcessGroupInagg::waitOldest(InaggWork* work, std::chrono::milliseconds timeout)
{
  if (timeout != kNoTimeout || running_.empty() || fallen_.load()) return false;
  Op& oldest = running_.front();
  if (oldest.work.get() != work || !oldest.req) return false;
  oldest.waited_rc = inagg_wait(oldest.req); /* frees the request: step() takes waited_rc */
  oldest.req = nullptr;
  return true;
}

/* A caller waits for `work`: it steps and sleeps on the completion signal itself, or waits in
 * the library (waitOldest). The progress thread does not watch the signal meanwhile (one
 * thread wakes per completion) and is woken on the way out if requests remain for it. */
void ProcessGroupInagg::drive(InaggWork* work, std::chrono::milliseconds timeout)
{
  drivers_++;
  auto started = std::chrono::steady_clock::now();
  bool idle = false, may_spin = spin_ns_ > 0;
  for (int i = 0; !work->isCompleted(); i++) {
    if (timeout != kNoTimeout && std::chrono::steady_clock::now() - started >= timeout)
      break;
    eventfd_t ignored;
    (void)eventfd_read(driver_fd_, &ignored);
    {
      std::lock_guard<std::mutex> cl(comm_mu_);
      if (!joined_.load()) break; /* shut down: the Work was completed or fails by itself */
      idle = step();
      if (!work->isCompleted() && waitOldest(work, timeout)) idle = step();
    }
    if (work->isCompleted() || idle) break;
    uint64_t waited_ns = (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - started).count();
    if (may_spin && waited_ns < spin_ns_) {
      /* the result is usually one round trip away: look again first, unless a yield shows
       * another thread wants this core (then spinning only delays it: sleep instead) */
      auto before = std::chrono::steady_clock::now();
      sched_yield();
      may_spin = std::chrono::steady_clock::now() - before < kYieldLong;
      continue;
    }
    struct pollfd fds[2] = {{comm_fd_, POLLIN, 0}, {driver_fd_, POLLIN, 0}};
    (void)poll(fds, 2, kSleepBoundMs);
  }
  drivers_--;
  /* Requests this caller did not wait for are still running: the progress thread watches
   * them from now on. */
  if (!idle && !progress_watches_comm_.load()) wakeProgress();
}

/* The progress thread: steps whenever it wakes, and sleeps in poll() on the queue's eventfd
 * and (unless a caller drives) the completion signal. Each descriptor is cleared before the
 * state it signals is looked at, so no wake-up is lost. */
void ProcessGroupInagg::progressLoop()
{
  for (;;) {
    eventfd_t ignored;
    (void)eventfd_read(wake_fd_, &ignored); /* EAGAIN when nothing was queued */
    bool stopping, idle;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping = stopping_;
    }
    {
      std::lock_guard<std::mutex> cl(comm_mu_);
      idle = step();
    }
    if (stopping && idle) return; /* shutdown() queues nothing after stopping_ */
    /* The signal is watched only for requests that no caller drives: a completion a waiting
     * caller takes wakes no second thread. Idle, the thread looks every kIdleLookMs at
     * whether the switch was lost between calls (step() asks the library), so that ranks
     * waiting in a salvage for this one are not left waiting. */
    bool watch = !idle && drivers_.load() == 0;
    progress_watches_comm_.store(watch);
    if (watch && drivers_.load() != 0) progress_watches_comm_.store(watch = false);
    struct pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {comm_fd_, POLLIN, 0}};
    bool look_idle = idle && cfg_.fallback && !fallen_.load();
    if (poll(fds, watch ? 2 : 1, look_idle ? kIdleLookMs : kSleepBoundMs) > 0) progress_wakes_++;
    progress_watches_comm_.store(false);
  }
}

/* A Work is finished (Work::wait returns) by the thread that saw its request end; its Future
 * is completed on a completer thread, since a callback chained on it (then(): DDP's comm
 * hooks, PowerSGD) may start another all_reduce and wait for it, which the progress thread
 * must be free to finish. A completer is added whenever none is idle (a callback blocks),
 * up to kMaxCompleters. */
void ProcessGroupInagg::completeWork(const c10::intrusive_ptr<InaggWork>& work,
                                     std::exception_ptr error)
{
  work->finishWork(error);
  if (work->completeUnclaimedFuture(error)) return; /* no callback can be waiting on it */
  futures_on_completers_++;
  std::lock_guard<std::mutex> g(done_mu_);
  done_.emplace_back(work, error);
  if (idle_completers_ == 0 && completers_.size() < kMaxCompleters && !completers_stop_)
    completers_.emplace_back([this] { completerLoop(); });
  done_cv_.notify_one();
}

void ProcessGroupInagg::completerLoop()
{
  std::unique_lock<std::mutex> lk(done_mu_);
  for (;;) {
    idle_completers_++;
    done_cv_.wait(lk, [this] { return !done_.empty() || completers_stop_; });
    idle_completers_--;
    if (done_.empty()) return; /* stopping, nothing left to complete */
    auto item = std::move(done_.front());
    done_.pop_front();
    lk.unlock();
    item.first->completeFuture(item.second);
    lk.lock();
  }
}

void ProcessGroupInagg::stopCompleters()
{
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> g(done_mu_);
    completers_stop_ = true;
    threads.swap(completers_);
  }
  done_cv_.notify_all();
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id())
      t.detach(); /* shut down from a callback: this thread ends after it */
    else
      t.join();
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

#ifdef INAGG_TORCH2
/* FSDP's all_gather_into_tensor / reduce_scatter_tensor of several tensors at once */
c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& out, std::vector<at::Tensor>& in, const c10d::AllgatherOptions& o)
{
  countDelegated("all_gather_into_tensor_coalesced");
  return gloo_->allgather_into_tensor_coalesced(out, in, o);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupInagg::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
    const c10d::ReduceScatterOptions& o)
{
  countDelegated("reduce_scatter_tensor_coalesced");
  return gloo_->reduce_scatter_tensor_coalesced(out, in, o);
}
#endif

} // namespace inagg_torch
