/*
 * process_group_fallback.cpp - see process_group_inagg.hpp: a lost switch's all_reduce calls
 * finished over the fall-back's Gloo group (libinagg's salvage of the requests in flight),
 * the calls after them run there, and the return to the switch at a call every rank agrees
 * on once it answers again.
 */
#include "process_group_inagg.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace inagg_torch {

namespace {

/* Does the switch's control port (the first of `address`: "HOST:PORT", shards "...,...",
 * a fail-over list "...;...") accept a connection within `ms`? */
bool switchAnswers(const std::string& address, int ms)
{
  std::string first = address.substr(0, address.find_first_of(",;"));
  size_t colon = first.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = first.substr(0, colon), port = first.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  struct addrinfo hints {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) return false;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ok = false;
  if (fd >= 0) {
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    if (rc == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      ok = poll(&p, 1, ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
           err == 0;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

} // namespace

bool ProcessGroupInagg::switchLost(inagg_result_t rc)
{
  return rc == INAGG_ERR_CONNECTION || rc == INAGG_ERR_TIMEOUT;
}

void ProcessGroupInagg::failOps(std::deque<Op>& ops, std::exception_ptr error)
{
  for (Op& op : ops) completeWork(op.work, error);
  ops.clear();
}

void ProcessGroupInagg::fallBack(std::deque<Op>& lost, std::deque<Op>& unstarted,
                                 inagg_result_t rc, uint64_t t0_ns)
{
  std::string cause = std::string(inagg_strerror(rc)) + ": " + inagg_last_error(comm_);
  inagg_channel_t ch{};
  ch.struct_size = sizeof(ch);
  ch.allreduce = &ProcessGroupInagg::glooChannel;
  ch.ctx = this;
  inagg_salvage_t sv{};
  sv.struct_size = sizeof(sv);
  inagg_result_t src = inagg_salvage_requests(comm_, &ch, &sv);
  if (src != INAGG_OK) {
    std::ostringstream msg;
    msg << "inagg: all_reduce through switch " << cfg_.address << " (job '" << cfg_.job
        << "', rank " << getRank() << " of " << getSize() << ") failed: " << cause
        << "; not finished over Gloo: " << inagg_last_error(comm_);
    auto err = std::make_exception_ptr(std::runtime_error(msg.str()));
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!broken_) broken_ = err;
    }
    failOps(lost, err);
    failOps(unstarted, err);
    return;
  }
  inagg_comm_destroy(comm_);
  comm_ = nullptr;
  comm_fd_ = -1;
  fallen_ = true;
  fell_ns_ = nowNs();
  next_probe_ns_ = fell_ns_ + (uint64_t)cfg_.retry_ms * 1000000ull;
  uint64_t stall_ms = (fell_ns_ - t0_ns) / 1000000ull;
  size_t salvaged = std::min<size_t>(sv.completed, lost.size());
  {
    std::lock_guard<std::mutex> g(count_mu_);
    fb_.fallbacks++;
    fb_.salvaged += salvaged;
    fb_.chunks_handed_on += sv.chunks_delivered;
    fb_.chunks_reduced += sv.chunks_reduced;
    fb_.stall_ms_total += stall_ms;
    fb_.last_cause = cause;
  }
  std::fprintf(stderr,
               "inagg-torch: rank %d: fall-back to Gloo: job %s lost the switch %s (%s); %zu "
               "all_reduce in flight, %zu finished by the salvage: %llu chunks handed on, %llu "
               "reduced again over Gloo; stall %llu ms\n",
               getRank(), cfg_.job.c_str(), cfg_.address.c_str(), cause.c_str(),
               lost.size() + unstarted.size(), salvaged, (unsigned long long)sv.chunks_delivered,
               (unsigned long long)sv.chunks_reduced, (unsigned long long)stall_ms);
  size_t i = 0;
  for (Op& op : lost) { /* the first ones hold their results; the rest their inputs */
    if (i++ < salvaged)
      finishOp(op, INAGG_OK);
    else
      runFallen(op);
  }
  for (Op& op : unstarted) runFallen(op);
  lost.clear();
  unstarted.clear();
}

void ProcessGroupInagg::glooAllreduce(void* buf, size_t count, inagg_dtype_t dtype, inagg_op_t op)
{
  at::Tensor t = at::from_blob(buf, {(int64_t)count},
                               at::TensorOptions().dtype(dtype == INAGG_INT32 ? at::kInt
                                                                              : at::kFloat));
  std::vector<at::Tensor> v{t};
  fallback_->allreduce(v, c10d::AllreduceOptions())->wait(); /* a sum */
  if (op == INAGG_AVG) { /* as the library averages: int32 truncated, float32 times 1/world */
    if (dtype == INAGG_INT32)
      t.copy_(at::div(t, getSize(), "trunc"));
    else
      t.mul_(1.0f / (float)getSize());
  }
}

int ProcessGroupInagg::glooChannel(void* ctx, const void* send, void* recv, size_t count,
                                   inagg_dtype_t dtype, inagg_op_t op)
{
  auto* self = static_cast<ProcessGroupInagg*>(ctx);
  try {
    if (send != recv) std::memcpy(recv, send, count * 4);
    self->glooAllreduce(recv, count, dtype, op);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inagg-torch: rank %d: the fall-back's Gloo all_reduce failed: %s\n",
                 self->getRank(), e.what());
    return 1;
  }
}

/* An int summed over the fall-back's group (its agreements). */
static int sumOver(const c10::intrusive_ptr<BaseGroup>& group, int mine)
{
  at::Tensor t = at::full({1}, mine, at::TensorOptions().dtype(at::kInt));
  std::vector<at::Tensor> v{t};
  group->allreduce(v, c10d::AllreduceOptions())->wait();
  return t.item<int>();
}

bool ProcessGroupInagg::joinSwitch(const std::string& job, std::string* why)
{
  inagg_comm_t* c = nullptr;
  char detail[512] = "";
  inagg_result_t rc = inagg_comm_create(&c, cfg_.address.c_str(), job.c_str(),
                                        (uint32_t)getRank(), (uint32_t)getSize(), &opts_, detail,
                                        sizeof(detail));
  int fd = -1;
  if (rc == INAGG_OK && inagg_comm_event_fd(c, &fd) != INAGG_OK) {
    *why = std::string("no completion signal: ") + inagg_last_error(c);
    inagg_comm_destroy(c);
    return false;
  }
  if (rc != INAGG_OK) {
    *why = std::string(inagg_strerror(rc)) + ": " + detail;
    return false;
  }
  comm_ = c;
  comm_fd_ = fd;
  return true;
}

bool ProcessGroupInagg::tryReturn()
{
  uint64_t now = nowNs();
  next_probe_ns_ = now + (uint64_t)cfg_.retry_ms * 1000000ull;
  int answers = switchAnswers(cfg_.address, 1000) ? 1 : 0;
  if (sumOver(fallback_, answers) != getSize()) return false;
  uint64_t returns;
  {
    std::lock_guard<std::mutex> g(count_mu_);
    returns = fb_.returns;
  }
  std::string job = cfg_.job + "-r" + std::to_string(returns + 1), why;
  bool joined = joinSwitch(job, &why);
  if (sumOver(fallback_, joined ? 1 : 0) != getSize()) {
    if (joined) inagg_comm_destroy(comm_);
    comm_ = nullptr;
    comm_fd_ = -1;
    std::fprintf(stderr,
                 "inagg-torch: rank %d: the switch %s answers but not every rank joined it%s%s: "
                 "all_reduce stays with Gloo\n",
                 getRank(), cfg_.address.c_str(), joined ? "" : " (", joined ? "" : why.c_str());
    return false;
  }
  fallen_ = false;
  uint64_t on_gloo;
  {
    std::lock_guard<std::mutex> g(count_mu_);
    fb_.returns++;
    on_gloo = fb_.gloo_calls;
  }
  std::fprintf(stderr,
               "inagg-torch: rank %d: return to the switch %s: job %s after %llu ms on Gloo (%llu "
               "all_reduce done by Gloo)\n",
               getRank(), cfg_.address.c_str(), job.c_str(),
               (unsigned long long)((nowNs() - fell_ns_) / 1000000ull),
               (unsigned long long)on_gloo);
  if (!progress_watches_comm_.load()) wakeProgress();
  return true;
}

bool ProcessGroupInagg::runFallen(Op& op)
{
  try {
#ifdef INAGG_WITH_CUDA
    if (op.cuda) waitStagedIn(*op.cuda); /* the tensor's bytes are on the host */
#endif
    int due = cfg_.retry_ms > 0 && nowNs() >= next_probe_ns_ ? 1 : 0;
    if (sumOver(fallback_, due) > 0 && tryReturn()) { /* every rank returns at this call */
      inagg_result_t rc = startOp(op);
      if (rc == INAGG_OK) {
        running_.push_back(std::move(op));
        return true;
      }
      finishOp(op, rc);
      return false;
    }
    glooAllreduce(op.wire.data_ptr(), (size_t)op.wire.numel(), op.dtype, op.op);
    {
      std::lock_guard<std::mutex> g(count_mu_);
      fb_.gloo_calls++;
    }
    finishOp(op, INAGG_OK);
  } catch (...) {
    auto err = std::current_exception();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!broken_) broken_ = err;
    }
    completeWork(op.work, err);
  }
  return false;
}

} // namespace inagg_torch
