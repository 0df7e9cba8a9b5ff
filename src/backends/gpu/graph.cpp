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
#include <string>
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
                std::vector<NativeGraphNode> kernel_nodes, bool conditionals)
        : dc(std::move(dc)),
          graph(graph),
          calls(std::move(calls)),
          kernel_nodes(std::move(kernel_nodes)),
          conditionals(conditionals) {}
    ~GraphSource() { dc->release_graph(graph); }
    GraphSource(const GraphSource &) = delete;
    GraphSource &operator=(const GraphSource &) = delete;

    std::shared_ptr<DeviceContext> dc;
    const NativeGraph graph;
    const std::vector<std::unique_ptr<GraphHostCall>> calls;
    // The kernel node of each launch, in launch order (null where the driver did not say):
    // what set_kernel_args names in an executable instantiated from this graph.
    const std::vector<NativeGraphNode> kernel_nodes;
    const bool conditionals;  // the graph has conditional nodes (GpuGraph::update)
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
        if (r != t.success && source->conditionals && source_->conditionals) {
            // The driver updates no conditional node's parameters, and each capture made its
            // own handles; the core checked that the shapes match. The graph takes from's
            // source and is instantiated again at its next use (the executable is freed once
            // the launches in flight are done).
            dc_->release_graph_exec(exec_);
            exec_ = nullptr;
            source_ = std::move(source);
            return QD_SUCCESS;
        }
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
    // was), serialised with launches and updates like them. A driver that rebinds by source
    // (HIP) takes the node's parameters from the graph the executable now holds (its source,
    // from's after an update) and replaces only the arguments.
    qd_status set_kernel_args(uint32_t index, Kernel &kernel, const LaunchDims &dims,
                              const qd_arg *args, uint32_t num_args) override {
        const DriverTable &t = dc_->t;
        const Fn set = t.rebind_by_source ? Fn::graph_exec_kernel_node_set_args
                                          : Fn::graph_exec_kernel_node_set_params;
        const Fn missing =
            !has_entry(t, Fn::stream_get_capture_info) ? Fn::stream_get_capture_info : set;
        if (!has_entry(t, Fn::stream_get_capture_info) || !has_entry(t, set))
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
        const std::vector<NativeGraphNode> &held = source_->kernel_nodes;
        if (index >= nodes.size() || nodes[index] == nullptr ||
            (t.rebind_by_source && (index >= held.size() || held[index] == nullptr)))
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "%s did not name the node of kernel launch %u while the graph was "
                            "captured (%s), so it cannot be rebound; nothing changed",
                            t.api_name, index, symbol_name(t, Fn::stream_get_capture_info));
        void *params[QD_MAX_ARGS];
        for (uint32_t i = 0; i < num_args; ++i) params[i] = const_cast<void *>(args[i].data);
        // The driver copies the values before it returns, as cuLaunchKernel does.
        Result r = 0;
        if (t.rebind_by_source) {
            r = t.graph_exec_kernel_node_set_args(exec_, nodes[index], held[index],
                                                  num_args ? params : nullptr);
        } else {
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
            r = t.graph_exec_kernel_node_set_params(exec_, nodes[index], &p);
        }
        if (r != t.success) return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, set, nullptr);
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
        release_body_streams();
    }

    qd_status start() {
        DriverEntry entry(*dc_, true, origin_->last_kernel());
        if (!entry.ok()) return entry.status();
        const DriverTable &t = dc_->t;
        Result r = t.stream_begin_capture(origin_->own(), t.capture_mode);
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

    qd_status begin_conditional(Stream &lane, qd_conditional_kind kind, uint32_t bodies,
                                uint64_t condition, uint64_t *handle) override;
    qd_status next_branch(Stream &lane, bool *done) override;
    qd_status end_conditional(Stream &lane, bool *done) override;

    qd_status end(std::shared_ptr<Graph> *out) override {
        DriverEntry entry(*dc_, true, origin_->last_kernel());
        if (!entry.ok()) return entry.status();  // abandoned by the destructor if it can be
        const DriverTable &t = dc_->t;
        NativeGraph graph = nullptr;
        Result r = t.stream_end_capture(origin_->own(), &graph);
        finish();
        if (r == t.success && graph && !failed_.empty()) {
            dc_->release_graph(graph);
            return qd::fail(QD_ERROR_INVALID_OPERATION,
                            "the capture failed at a conditional (%s); nothing was recorded",
                            failed_.c_str());
        }
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
        auto source = std::make_shared<GraphSource>(dc_, graph, std::move(calls_),
                                                    std::move(kernel_nodes_), conditionals_);
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
        // The bodies' captures first (their graphs belong to their nodes), innermost first.
        for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
            NativeGraph body = nullptr;
            dc_->t.stream_end_capture(it->body, &body);
            it->lane->redirect(it->outer);
        }
        open_.clear();
        NativeGraph graph = nullptr;
        dc_->t.stream_end_capture(origin_->own(), &graph);
        finish();
        if (graph) dc_->release_graph(graph);
    }

    // The driver's version, read once.
    int driver_version() {
        if (driver_version_ < 0) {
            int v = 0;
            driver_version_ = dc_->t.driver_get_version(&v) == dc_->t.success ? v : 0;
        }
        return driver_version_;
    }
    // Conditionals (below).
    struct OpenConditional {
        std::shared_ptr<GpuStream> lane;  // the stream that opened it
        NativeStream outer = nullptr;     // where lane's operations went before it
        NativeStream body = nullptr;      // the capture's stream recording the current body
        NativeGraphNode node = nullptr;
        std::vector<NativeGraph> bodies;  // the node's, owned by it
        uint32_t branch = 0;
        ConditionalHandle handle = 0;
        qd_conditional_kind kind = QD_CONDITIONAL_IF;
        uint64_t condition = 0;
    };
    qd_status refuse_conditionals(qd_conditional_kind kind, uint32_t bodies);
    OpenConditional *innermost(const Stream &lane);
    qd_status set_condition(NativeStream stream, ConditionalHandle handle, uint64_t condition,
                            const char *last_kernel);
    // The stream left behind where a step cannot be undone: the capture fails at its end.
    void note_failed();
    void release_body_streams();

    std::shared_ptr<GpuStream> origin_;
    int driver_version_ = -1;  // the driver's version, read at its first use
    std::shared_ptr<DeviceContext> dc_;
    bool started_ = false;
    bool ended_ = false;
    std::vector<std::unique_ptr<GraphHostCall>> calls_;
    std::vector<NativeGraphNode> kernel_nodes_;  // per captured launch (launched())
    bool nodes_lost_ = false;
    std::vector<OpenConditional> open_;       // innermost last
    std::vector<NativeStream> spare_;         // body streams not recording a body now
    std::vector<NativeStream> body_streams_;  // every body stream made (destroyed at the end)
    std::string failed_;                      // why a conditional broke the capture, if it did
    bool conditionals_ = false;               // a conditional node was added
};

// --- Conditionals -----------------------------------------------------------------------------
//
// A conditional node is added to the graph the lane's stream S records into (the capture's
// graph, or an enclosing body), after S's current dependencies and, with a condition word,
// after qd's condition kernel (DeviceContext::condition_kernel) queued on S, which sets the
// node's value from the word. Each body is then recorded by a stream of the capture's own
// (one per open conditional, reused) capturing into the body graph the node made
// (stream_begin_capture_to_graph), and the lane's operations go there
// (GpuStream::redirect). A WHILE with a word ends its body with the condition kernel again, so
// the loop decides after each iteration from what the body wrote. The end restores the lane
// and makes the node S's dependency set: what follows runs after the whole conditional.

qd_status GpuCapture::refuse_conditionals(qd_conditional_kind kind, uint32_t bodies) {
    const DriverTable &t = dc_->t;
    const char *versions =
        "conditional nodes need CUDA 12.3 (IF, WHILE) and 12.8 (IF_ELSE, SWITCH); HIP has none";
    for (Fn fn : {Fn::graph_conditional_handle_create, Fn::graph_add_node,
                  Fn::stream_begin_capture_to_graph, Fn::stream_update_capture_dependencies,
                  Fn::stream_get_capture_info})
        if (!has_entry(t, fn))
            return qd::fail(QD_ERROR_NOT_SUPPORTED,
                            "qd_stream_begin_conditional: this %s driver cannot put a "
                            "conditional node into a driver graph: it lacks %s (%s); nothing "
                            "was queued and the capture goes on",
                            t.api_name, symbol_name(t, fn), versions);
    // CU_GRAPH_COND_TYPE_SWITCH, and an IF with two bodies, are CUDA 12.8.
    const int minimum = kind == QD_CONDITIONAL_SWITCH || bodies > 1 ? 12080 : 12030;
    const int version = driver_version();
    if (version < minimum)
        return qd::fail(QD_ERROR_NOT_SUPPORTED,
                        "qd_stream_begin_conditional: a %s conditional node needs a %s driver "
                        "of version %d.%d or newer, and this one reports %d.%d (%d); nothing "
                        "was queued and the capture goes on",
                        kind == QD_CONDITIONAL_IF        ? "IF"
                        : kind == QD_CONDITIONAL_WHILE   ? "WHILE"
                        : kind == QD_CONDITIONAL_IF_ELSE ? "IF_ELSE"
                                                         : "SWITCH",
                        t.api_name, minimum / 1000, minimum % 1000 / 10, version / 1000,
                        version % 1000 / 10, version);
    return QD_SUCCESS;
}

GpuCapture::OpenConditional *GpuCapture::innermost(const Stream &lane) {
    for (auto it = open_.rbegin(); it != open_.rend(); ++it)
        if (it->lane.get() == &lane) return &*it;
    return nullptr;
}

qd_status GpuCapture::set_condition(NativeStream stream, ConditionalHandle handle,
                                    uint64_t condition, const char *last_kernel) {
    const DriverTable &t = dc_->t;
    NativeFunction fn = nullptr;
    qd_status st = dc_->condition_kernel(&fn);
    if (st != QD_SUCCESS) return st;
    void *params[] = {&handle, &condition};
    Result r = t.launch_kernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_LAUNCH_FAILED, Fn::launch_kernel, last_kernel);
    return QD_SUCCESS;
}

void GpuCapture::note_failed() {
    if (failed_.empty()) failed_ = qd::last_error_message();
    if (failed_.empty()) failed_ = "a driver call failed";
}

void GpuCapture::release_body_streams() {
    for (NativeStream b : body_streams_) dc_->release_stream(b, true);
    body_streams_.clear();
    spare_.clear();
}

qd_status GpuCapture::begin_conditional(Stream &lane, qd_conditional_kind kind, uint32_t bodies,
                                        uint64_t condition, uint64_t *handle) {
    if (qd_status st = refuse_conditionals(kind, bodies); st != QD_SUCCESS) return st;
    auto &s = static_cast<GpuStream &>(lane);
    DriverEntry entry(*dc_, false, s.last_kernel());  // makes the context current
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    // Everything that may throw or be refused first: a refusal queues nothing.
    if (condition != 0) {
        NativeFunction fn = nullptr;
        if (qd_status st = dc_->condition_kernel(&fn); st != QD_SUCCESS) return st;
    }
    OpenConditional open;
    open.lane = s.shared_from_this();
    open.outer = s.native();
    open.kind = kind;
    open.condition = condition;
    open.bodies.resize(bodies);
    open_.reserve(open_.size() + 1);
    spare_.reserve(body_streams_.size() + 1);
    body_streams_.reserve(body_streams_.size() + 1);
    if (spare_.empty()) {
        NativeStream b = nullptr;
        Result r = t.stream_create(&b, t.stream_non_blocking_flag, 0);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::stream_create, nullptr);
        body_streams_.push_back(b);
        spare_.push_back(b);
    }
    // The graph the lane records into, and its place there.
    int status = 0;
    unsigned long long id = 0;
    NativeGraph graph = nullptr;
    const NativeGraphNode *deps = nullptr;
    size_t n = 0;
    Result r = t.stream_get_capture_info(open.outer, &status, &id, &graph, &deps, &n);
    if (r != t.success || graph == nullptr)
        return dc_->fail_call(r != t.success ? r : t.invalid_value, QD_ERROR_INVALID_OPERATION,
                              Fn::stream_get_capture_info, s.last_kernel());
    // The value is assigned its default at every launch of the graph, so a stale value is
    // never repeated: 0, except for a WHILE without a word, whose body's own kernels decide
    // each next iteration (qd.h: the first one always runs).
    const unsigned initial = condition == 0 && kind == QD_CONDITIONAL_WHILE ? 1 : 0;
    r = t.graph_conditional_handle_create(&open.handle, graph, dc_->native, initial,
                                          t.conditional_assign_default);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::graph_conditional_handle_create,
                              s.last_kernel());
    // From here a failure leaves at most the condition kernel behind in the graph: it sets a
    // value no node reads and adds an edge that orders nothing new.
    if (condition != 0) {
        if (qd_status st = set_condition(open.outer, open.handle, condition, s.last_kernel());
            st != QD_SUCCESS)
            return st;
        r = t.stream_get_capture_info(open.outer, &status, &id, &graph, &deps, &n);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_get_capture_info,
                                  s.last_kernel());
    }
    GraphNodeParams p{};
    p.type = t.graph_node_conditional;
    p.conditional.handle = open.handle;
    p.conditional.type = kind == QD_CONDITIONAL_WHILE    ? t.conditional_while
                         : kind == QD_CONDITIONAL_SWITCH ? t.conditional_switch
                                                         : t.conditional_if;
    p.conditional.size = bodies;
    p.conditional.ctx = dc_->native;
    r = t.graph_add_node(&open.node, graph, deps, n, &p);
    if (r != t.success || p.conditional.bodies == nullptr)
        return dc_->fail_call(r != t.success ? r : t.invalid_value, QD_ERROR_INVALID_OPERATION,
                              Fn::graph_add_node, s.last_kernel());
    for (uint32_t i = 0; i < bodies; ++i) open.bodies[i] = p.conditional.bodies[i];
    // An unreached node with empty bodies is left behind if the body cannot be captured.
    open.body = spare_.back();
    r = t.stream_begin_capture_to_graph(open.body, open.bodies[0], nullptr, nullptr, 0,
                                        t.capture_mode);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_begin_capture_to_graph,
                              s.last_kernel());
    spare_.pop_back();
    conditionals_ = true;
    *handle = open.handle;
    s.redirect(open.body);
    open_.push_back(std::move(open));
    return QD_SUCCESS;
}

qd_status GpuCapture::next_branch(Stream &lane, bool *done) {
    *done = false;
    OpenConditional *c = innermost(lane);
    if (!c || c->branch + 1 >= c->bodies.size())
        return qd::fail(QD_ERROR_INTERNAL,
                        "qd_stream_next_branch: no next body in the driver "
                        "capture");
    DriverEntry entry(*dc_, true, c->lane->last_kernel());
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    NativeGraph body = nullptr;
    Result r = t.stream_end_capture(c->body, &body);
    *done = true;  // the body's capture is over either way
    if (r == t.success) {
        c->branch += 1;
        r = t.stream_begin_capture_to_graph(c->body, c->bodies[c->branch], nullptr, nullptr, 0,
                                            t.capture_mode);
        if (r == t.success) return QD_SUCCESS;
        dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_begin_capture_to_graph,
                       c->lane->last_kernel());
    } else {
        dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_end_capture,
                       c->lane->last_kernel());
    }
    // The lane records into the enclosing graph again; the capture fails at its end.
    note_failed();
    c->lane->redirect(c->outer);
    spare_.push_back(c->body);  // reserved at begin_conditional
    open_.erase(open_.begin() + (c - open_.data()));
    return qd::fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_next_branch: the driver could not capture the next body (%s); "
                    "the capture fails at its end",
                    failed_.c_str());
}

qd_status GpuCapture::end_conditional(Stream &lane, bool *done) {
    *done = false;
    OpenConditional *c = innermost(lane);
    if (!c)
        return qd::fail(QD_ERROR_INTERNAL,
                        "qd_stream_end_conditional: no conditional of this stream in the driver "
                        "capture");
    DriverEntry entry(*dc_, true, c->lane->last_kernel());
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    // A WHILE decides again after each iteration, from the word as the body left it.
    if (c->kind == QD_CONDITIONAL_WHILE && c->condition != 0)
        if (qd_status st = set_condition(c->body, c->handle, c->condition, c->lane->last_kernel());
            st != QD_SUCCESS)
            return st;  // nothing changed but a kernel in the body: the conditional stays open
    NativeGraph body = nullptr;
    Result r = t.stream_end_capture(c->body, &body);
    *done = true;
    c->lane->redirect(c->outer);
    spare_.push_back(c->body);  // reserved at begin_conditional
    NativeGraphNode node = c->node;
    const NativeStream outer = c->outer;
    const char *last = c->lane->last_kernel();
    open_.erase(open_.begin() + (c - open_.data()));
    if (r != t.success) {
        dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_end_capture, last);
        note_failed();
        return qd::fail(QD_ERROR_INVALID_OPERATION,
                        "qd_stream_end_conditional: the driver could not end the body's capture "
                        "(%s); the capture fails at its end",
                        failed_.c_str());
    }
    r = t.stream_update_capture_dependencies(outer, &node, 1, t.set_capture_dependencies);
    if (r != t.success) {
        dc_->fail_call(r, QD_ERROR_INVALID_OPERATION, Fn::stream_update_capture_dependencies, last);
        note_failed();
        return qd::fail(QD_ERROR_INVALID_OPERATION,
                        "qd_stream_end_conditional: the driver could not order the work after "
                        "the conditional (%s); the capture fails at its end",
                        failed_.c_str());
    }
    return QD_SUCCESS;
}

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
