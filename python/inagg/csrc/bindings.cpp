/*
 * bindings.cpp - the Python face of the extension: ProcessGroupInagg as a subclass of
 * torch.distributed.ProcessGroup (torch 1.13) or of torch's C++ Backend class (2.x), built from a Gloo group and a dict of switch settings
 * (python/inagg/_backend.py fills it and registers the backend).
 */
#include <torch/extension.h>

#include "process_group_inagg.hpp"

namespace py = pybind11;
using inagg_torch::BaseGroup;
using inagg_torch::ProcessGroupInagg;
using inagg_torch::SwitchConfig;

namespace {

template <typename T>
T get(const py::dict& d, const char* key, T fallback)
{
  return d.contains(key) && !d[key].is_none() ? d[key].cast<T>() : fallback;
}

SwitchConfig configFrom(const py::dict& d)
{
  SwitchConfig c;
  c.address = get<std::string>(d, "switch", "");
  c.job = get<std::string>(d, "job", "");
  c.compress = get<std::string>(d, "compress", "");
  c.error_feedback = get<bool>(d, "error_feedback", false);
  c.protocol = get<std::string>(d, "protocol", c.protocol);
  c.float_mode = get<std::string>(d, "float_mode", c.float_mode);
  c.slots = get<uint32_t>(d, "slots", 0);
  c.threads = get<uint32_t>(d, "threads", 0);
  c.packet_elems = get<uint32_t>(d, "packet_elems", 0);
  c.timeout_ms = get<uint32_t>(d, "timeout_ms", c.timeout_ms);
  c.fallback = get<bool>(d, "fallback", c.fallback);
  c.retry_ms = get<uint32_t>(d, "retry_ms", c.retry_ms);
  TORCH_CHECK(!c.address.empty(), "inagg: no switch address");
  TORCH_CHECK(!c.job.empty(), "inagg: no job name");
  return c;
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
  m.doc() = "inagg's torch.distributed backend (all_reduce through an inagg switch)";
#ifdef INAGG_TORCH2 /* a c10d::Backend, which torch.distributed wraps in its ProcessGroup */
  py::object base = py::module::import("torch._C._distributed_c10d").attr("Backend");
#else
  py::object base = py::module::import("torch.distributed").attr("ProcessGroup");
#endif
  py::class_<ProcessGroupInagg, c10::intrusive_ptr<ProcessGroupInagg>>(m, "ProcessGroupInagg",
                                                                      base)
      .def(py::init([](int rank, int size, c10::intrusive_ptr<BaseGroup> gloo,
                       c10::intrusive_ptr<BaseGroup> fallback, const py::dict& cfg) {
             SwitchConfig c = configFrom(cfg);
             py::gil_scoped_release nogil; /* joining waits for every rank */
             return c10::make_intrusive<ProcessGroupInagg>(rank, size, std::move(gloo),
                                                           std::move(fallback), c);
           }),
           py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("fallback"),
           py::arg("config"))
      .def("shutdown", &ProcessGroupInagg::shutdown, py::call_guard<py::gil_scoped_release>(),
           "leave the switch job (inagg_comm_destroy); later all_reduce calls go to Gloo")
      .def("switch_calls", &ProcessGroupInagg::switchCalls)
      .def("error_feedback", &ProcessGroupInagg::errorFeedback,
           "(tensors with an error-feedback residual, calls sent without one)")
      .def("delegated_calls", &ProcessGroupInagg::delegatedCalls)
      .def("gloo", &ProcessGroupInagg::gloo)
      .def_property_readonly("switch_address", &ProcessGroupInagg::address)
      .def_property_readonly("job", &ProcessGroupInagg::job)
      .def("fallback_stats", [](ProcessGroupInagg& pg) {
        inagg_torch::FallbackStats f = pg.fallbackStats();
        py::dict d;
        d["enabled"] = f.enabled;
        d["on_switch"] = f.on_switch;
        d["fallbacks"] = f.fallbacks;
        d["returns"] = f.returns;
        d["all_reduce_on_gloo"] = f.gloo_calls;
        d["salvaged"] = f.salvaged;
        d["chunks_handed_on"] = f.chunks_handed_on;
        d["chunks_reduced"] = f.chunks_reduced;
        d["stall_ms_total"] = f.stall_ms_total;
        d["last_cause"] = f.last_cause;
        return d;
      })
      .def("handoffs", [](ProcessGroupInagg& pg) {
        auto h = pg.handoffs();
        py::dict d;
        d["progress_wakes"] = h.first;
        d["futures_on_completers"] = h.second;
        return d;
      })
      .def("wire_stats", [](ProcessGroupInagg& pg) {
        inagg_stats_t s = pg.wireStats();
        py::dict d;
        d["packets_sent"] = s.packets_sent;
        d["packets_received"] = s.packets_received;
        d["retransmissions"] = s.retransmissions;
        d["bytes_sent"] = s.bytes_sent;
        d["bytes_received"] = s.bytes_received;
        return d;
      });
}
