// Native driver graphs: GpuCapture (a stream capture in progress) and GpuGraph (its
// instantiated graph). The core decides when they are used (core/capture/capture.h): it begins a
// capture on the origin stream, lets the operations of the capture's streams pass to the
// driver (which records them instead of running them), checks that every stream joined back,
// and ends the capture here.
//
// Host functions are the one operation whose payload outlives a call: the trampoline of a
// direct qd_launch_host_fn frees its record after its one call, but a captured host function
// runs once per launch of the graph. Its record therefore belongs to the graph's source (the
// captured native graph and its records, shared by every graph updated from it), and each
// launch of a graph with host functions queues an epilogue that holds the source until the
// launch has run, so qd_graph_destroy with launches in flight frees nothing they still call.
#include <memory>
#include <mutex>
#include <vector>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

namespace {

struct GraphHostCall {
    qd_host_fn fn;
    void *user_data;
    const DeviceContext *owner;
};

// Called once per launch of the graph; never frees its record (the source owns it).
void graph_host_trampoline(void *raw) {
    const auto *call = static_cast<const GraphHostCall *>(raw);
    CallbackScope scope(call->owner, true);
    call->fn(call->user_data);
}

// What a captured graph's launches need: the native graph (the source of updates) and the host
// function records its nodes point at. Released after the last graph and launch using it.
struct GraphSource {
    GraphSource(std::shared_ptr<DeviceContext> dc, NativeGraph graph,
                std::vector<std::unique_ptr<GraphHostCall>> calls,
                std::vector<NativeGraphNode> kernel_nodes)
        : dc(std::move(dc)),
          graph(graph),
          calls(std::move(calls)),
          kernel_nodes(std::move(kernel_nodes)) {}
    ~GraphSource() { dc->release_graph(graph); }
    GraphSource(const GraphSource &) = delete;
    GraphSource &operator=(const GraphSource &) = delete;

    std::shared_ptr<DeviceContext> dc;
    const NativeGraph graph;
    const std::vector<std::unique_ptr<GraphHostCall>> calls;
    // The kernel node of each launch, in launch order (null where the driver did not say):
    // what set_kernel_args names in an executable instantiated from this graph.
    const std::vector<NativeGraphNode> kernel_nodes;
};

// The epilogue of a launch with host functions: drops the launch's reference to its source.
// Runs on a driver callback thread; it makes no driver call (a release it causes is deferred
// by DeviceContext::release).
void release_source(void *raw) {
    auto *keep = static_cast<std::shared_ptr<GraphSource> *>(raw);
    CallbackScope scope(keep->get()->dc.get(), true);
    delete keep;
}

// Instantiated at its first launch: a graph captured only to update another one (qd_graph_update
// from a fresh capture) is never instantiated, and an update before the first launch only
// takes the other graph's source.
class GpuGraph final : public Graph {
  public:
    GpuGraph(std::shared_ptr<DeviceContext> dc, std::shared_ptr<GraphSource> source)
        : dc_(std::move(dc)), source_(std::move(source)) {}
    ~GpuGraph() override {
        if (exec_) dc_->release_graph_exec(exec_);
    }

    // One driver call (two with host functions: the epilogue). Launches and updates of one
    // graph are serialised here: the driver's executable graphs are not thread-safe.
    qd_status launch(Stream &stream) override {
        auto &s = static_cast<GpuStream &>(stream);
        DriverEntry entry(*dc_, true, s.last_kernel());
        if (!entry.ok()) return entry.status();
        const DriverTable &t = dc_->t;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!exec_) {
            ScopedCurrent current(*dc_);  // instantiate names no stream
            if (!current.ok())
                return dc_->fail_call(current.status(), QD_ERROR_INTERNAL, current.failed_entry(),
                                      nullptr);
            if (qd_status st = instantiate_locked(); st != QD_SUCCESS) return st;
        }
        Result r = t.graph_launch(exec_, s.native());
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_LAUNCH_FAILED, Fn::graph_launch, s.last_kernel());
        if (!source_->calls.empty()) {
            auto keep = std::make_unique<std::shared_ptr<GraphSource>>(source_);
            r = t.launch_host_func(s.native(), release_source, keep.get());
            // The graph is queued and may call the records: if the epilogue cannot be queued
            // (the context is failing), they must never be freed.
            if (r != t.success) {
                keep.release();
                return dc_->fail_call(r, QD_ERROR_LAUNCH_FAILED, Fn::launch_host_func,
                                      s.last_kernel());
            }
            keep.release();  // release_source owns it now
        }
        return QD_SUCCESS;
    }

    qd_status update(Graph &from) override {
        auto &f = static_cast<GpuGraph &>(from);
        std::shared_ptr<GraphSource> source = f.source();
        DriverEntry entry(*dc_);
        if (!entry.ok()) return entry.status();
        const DriverTable &t = dc_->t;
        std::lock_guard<std::mutex> lock(mutex_);
        if (!exec_) {
            source_ = std::move(source);
            return QD_SUCCESS;
        }
        GraphExecUpdateInfo info{};
        Result r = t.graph_exec_update(exec_, source->graph, &info);
        if (r != t.success) {
            if (info.result != 0)
                return qd::fail(QD_ERROR_INVALID_OPERATION,
                                "%s refused to update the graph (%s: update result %d); the "
                                "graph keeps its values",
                                t.api_name, symbol_name(t, Fn::graph_exec_update), info.result);
            return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::graph_exec_update, nullptr);
        }
        // The executable's host-function nodes now call from's records: hold them. Launches
        // already queued hold the old source through their epilogue.
        source_ = std::move(source);
        return QD_SUCCESS;
    }

    // One cuGraphExecKernelNodeSetParams on the executable (instantiated first if it never
    // was), serialised with launches and updates like them.
    qd_status set_kernel_args(uint32_t index, Kernel &kernel, const LaunchDims &dims,
                              const qd_arg *args, uint32_t num_args) override {
        const DriverTable &t = dc_->t;
        const Fn missing = !has_entry(t, Fn::stream_get_capture_info)
                               ? Fn::stream_get_capture_info
                               : Fn::graph_exec_kernel_node_set_params;
        if (!has_entry(t, Fn::stream_get_capture_info) ||
            !has_entry(t, Fn::graph_exec_kernel_node_set_params))
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "this %s driver cannot rebind a kernel node of a driver graph: it "
                            "lacks %s (rebinding needs %s); nothing changed",
                            t.api_name, symbol_name(t, missing), t.rebind_requires);
        DriverEntry entry(*dc_);
        if (!entry.ok()) return entry.status();
        std::lock_guard<std::mutex> lock(mutex_);
        if (!exec_)
            if (qd_status st = instantiate_locked(); st != QD_SUCCESS) return st;
        const std::vector<NativeGraphNode> &nodes = instantiated_from_->kernel_nodes;
        if (index >= nodes.size() || nodes[index] == nullptr)
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "%s did not name the node of kernel launch %u while the graph was "
                            "captured (%s), so it cannot be rebound; nothing changed",
                            t.api_name, index, symbol_name(t, Fn::stream_get_capture_info));
        void *params[QD_MAX_ARGS];
        for (uint32_t i = 0; i < num_args; ++i) params[i] = const_cast<void *>(args[i].data);
        KernelNodeParams p{};
        p.function = static_cast<GpuKernel &>(kernel).function();
        p.grid_x = dims.grid[0];
        p.grid_y = dims.grid[1];
        p.grid_z = dims.grid[2];
        p.block_x = dims.block[0];
        p.block_y = dims.block[1];
        p.block_z = dims.block[2];
        p.shared_mem_bytes = dims.shared_mem_bytes;
        p.params = num_args ? params : nullptr;
        // The driver copies the values before it returns, as cuLaunchKernel does.
        Result r = t.graph_exec_kernel_node_set_params(exec_, nodes[index], &p);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION,
                                  Fn::graph_exec_kernel_node_set_params, nullptr);
        return QD_SUCCESS;
    }

    // qd_graph_upload: the executable (instantiated now if no launch made it), then one
    // cuGraphUpload on the stream where the driver has it; serialised with launches, updates
    // and rebinds like them. Without the entry: refused where the table names the version it
    // needs (CUDA), else instantiated only (HIP).
    qd_status upload(Stream &stream) override {
        auto &s = static_cast<GpuStream &>(stream);
        const DriverTable &t = dc_->t;
        const bool can_upload = has_entry(t, Fn::graph_upload);
        if (!can_upload && t.upload_requires)
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "this %s driver cannot upload a graph ahead of its first launch: it "
                            "lacks %s (uploading needs %s); nothing was instantiated or queued",
                            t.api_name, symbol_name(t, Fn::graph_upload), t.upload_requires);
        DriverEntry entry(*dc_, true, s.last_kernel());
        if (!entry.ok()) return entry.status();
        std::lock_guard<std::mutex> lock(mutex_);
        if (!exec_) {
            ScopedCurrent current(*dc_);  // instantiate names no stream
            if (!current.ok())
                return dc_->fail_call(current.status(), QD_ERROR_INTERNAL, current.failed_entry(),
                                      nullptr);
            if (qd_status st = instantiate_locked(); st != QD_SUCCESS) return st;
        }
        if (!can_upload) return QD_SUCCESS;
        Result r = t.graph_upload(exec_, s.native());
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_LAUNCH_FAILED, Fn::graph_upload, s.last_kernel());
        return QD_SUCCESS;
    }

    std::shared_ptr<GraphSource> source() {
        std::lock_guard<std::mutex> lock(mutex_);
        return source_;
    }

  private:
    // With mutex_ held and this context current.
    qd_status instantiate_locked() {
        const DriverTable &t = dc_->t;
        Result r = t.graph_instantiate(&exec_, source_->graph, 0);
        if (r != t.success) {
            exec_ = nullptr;
            return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::graph_instantiate, nullptr);
        }
        // The executable's nodes are this graph's: kept alive for set_kernel_args, whatever
        // updates bring later.
        instantiated_from_ = source_;
        dc_->counters.graphs_instantiated.fetch_add(1, std::memory_order_relaxed);
        return QD_SUCCESS;
    }

    std::shared_ptr<DeviceContext> dc_;
    std::mutex mutex_;
    NativeGraphExec exec_ = nullptr;
    std::shared_ptr<GraphSource> source_;
    std::shared_ptr<GraphSource> instantiated_from_;  // the graph exec_ was instantiated from
};

class GpuCapture final : public Capture {
  public:
    explicit GpuCapture(std::shared_ptr<GpuStream> origin)
        : origin_(std::move(origin)), dc_(origin_->device_context()) {}
    ~GpuCapture() override {
        if (started_ && !ended_) abandon();
    }

    qd_status start() {
        DriverEntry entry(*dc_, true, origin_->last_kernel());
        if (!entry.ok()) return entry.status();
        const DriverTable &t = dc_->t;
        Result r = t.stream_begin_capture(origin_->native(), t.capture_mode);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_begin_capture,
                                  origin_->last_kernel());
        started_ = true;
        dc_->open_captures.fetch_add(1, std::memory_order_acq_rel);
        return QD_SUCCESS;
    }

    qd_status host_fn(Stream &lane, qd_host_fn fn, void *user_data) override {
        const DriverTable &t = dc_->t;
        if (!t.host_func_capturable)
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "a host function cannot be captured into a %s graph by this runtime: "
                            "its host functions are stream callbacks (%s), which a capture "
                            "refuses; nothing was queued and the capture goes on",
                            t.api_name, symbol_name(t, Fn::launch_host_func));
        auto &s = static_cast<GpuStream &>(lane);
        DriverEntry entry(*dc_, true, s.last_kernel());
        if (!entry.ok()) return entry.status();
        auto call = std::make_unique<GraphHostCall>(GraphHostCall{fn, user_data, dc_.get()});
        calls_.reserve(calls_.size() + 1);  // no throw after the driver call
        Result r = t.launch_host_func(s.native(), graph_host_trampoline, call.get());
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::launch_host_func, s.last_kernel());
        calls_.push_back(std::move(call));
        return QD_SUCCESS;
    }

    // Graph memory nodes from a captured cuMemAllocAsync: CUDA 11.4; HIP's capture of
    // hipMallocAsync is taken from 5.7 on (earlier runtimes crashed on memory free nodes).
    qd_status can_allocate() override {
        const DriverTable &t = dc_->t;
        const bool hip = t.kind == QD_BACKEND_HIP;
        const int minimum = hip ? 50700000 : 11040;
        if (driver_version_ < 0) {
            int v = 0;
            driver_version_ = t.driver_get_version(&v) == t.success ? v : 0;
        }
        if (driver_version_ >= minimum) return QD_SUCCESS;
        return qd::fail(QD_ERROR_NOT_SUPPORTED,
                        "an allocation inside a %s graph capture needs graph memory nodes, from "
                        "%s on (this driver reports version %d); nothing was allocated and the "
                        "capture goes on",
                        t.api_name, hip ? "HIP 5.7" : "CUDA 11.4", driver_version_);
    }

    // Right after a captured launch the stream's dependency set is the new kernel node.
    void launched(Stream &lane) override {
        const DriverTable &t = dc_->t;
        NativeGraphNode node = nullptr;
        if (has_entry(t, Fn::stream_get_capture_info)) {
            auto &s = static_cast<GpuStream &>(lane);
            DriverEntry entry(*dc_, true, s.last_kernel());
            int status = 0;
            unsigned long long id = 0;
            NativeGraph graph = nullptr;
            const NativeGraphNode *deps = nullptr;
            size_t n = 0;
            if (entry.ok() &&
                t.stream_get_capture_info(s.native(), &status, &id, &graph, &deps, &n) ==
                    t.success &&
                n == 1 && deps)
                node = deps[0];
        }
        try {
            kernel_nodes_.push_back(node);
        } catch (...) {
            nodes_lost_ = true;  // the order is lost: no node of this graph can be rebound
        }
    }

    qd_status end(std::shared_ptr<Graph> *out) override {
        DriverEntry entry(*dc_, true, origin_->last_kernel());
        if (!entry.ok()) return entry.status();  // abandoned by the destructor if it can be
        const DriverTable &t = dc_->t;
        NativeGraph graph = nullptr;
        Result r = t.stream_end_capture(origin_->native(), &graph);
        finish();
        if (r != t.success || graph == nullptr) {
            if (graph) dc_->release_graph(graph);
            if (r == t.success)
                return qd::fail(QD_ERROR_INVALID_OPERATION,
                                "%s invalidated the capture (an operation inside it failed); "
                                "nothing was recorded",
                                t.api_name);
            return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_end_capture,
                                  origin_->last_kernel());
        }
        if (nodes_lost_) kernel_nodes_.assign(kernel_nodes_.size(), nullptr);
        auto source =
            std::make_shared<GraphSource>(dc_, graph, std::move(calls_), std::move(kernel_nodes_));
        *out = std::make_shared<GpuGraph>(dc_, std::move(source));
        return QD_SUCCESS;
    }

  private:
    void finish() {
        ended_ = true;
        dc_->open_captures.fetch_sub(1, std::memory_order_acq_rel);
    }
    // Ends the driver capture and drops what it recorded (a capture the core abandons: its
    // context is being destroyed, or its end was refused before it reached here).
    void abandon() {
        if (!dc_->can_release_now() || dc_->is_shut_down()) {
            finish();
            return;
        }
        ScopedCurrent current(*dc_);
        NativeGraph graph = nullptr;
        dc_->t.stream_end_capture(origin_->native(), &graph);
        finish();
        if (graph) dc_->release_graph(graph);
    }

    std::shared_ptr<GpuStream> origin_;
    int driver_version_ = -1;  // the driver's version, read at the first can_allocate()
    std::shared_ptr<DeviceContext> dc_;
    bool started_ = false;
    bool ended_ = false;
    std::vector<std::unique_ptr<GraphHostCall>> calls_;
    std::vector<NativeGraphNode> kernel_nodes_;  // per captured launch (launched())
    bool nodes_lost_ = false;
};

}  // namespace

qd_status GpuStream::begin_capture(std::unique_ptr<Capture> *out) {
    if (!has_native_graphs(t_))
        return qd::fail(QD_ERROR_NOT_SUPPORTED,
                        "this %s driver lacks stream capture or graph entry points", t_.api_name);
    auto capture = std::make_unique<GpuCapture>(shared_from_this());
    qd_status st = capture->start();
    if (st != QD_SUCCESS) return st;
    *out = std::move(capture);
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
