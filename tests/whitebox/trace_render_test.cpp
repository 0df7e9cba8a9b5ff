// The trace's JSON renderer (src/core/trace/render.h) on a snapshot made by hand: the exact
// events of a context's part, and the ends of its arrows. Built from render.cpp alone, without
// the core: the renderer needs nothing of the observer.
#include <gtest/gtest.h>

#include <string>

#include "core/trace/render.h"

namespace {

using qd::core::render_trace;
using qd::core::TracePart;
using qd::core::TraceSnapshot;

TraceSnapshot::Slice slice(const char *kind, uint32_t track, double begin, double end) {
    TraceSnapshot::Slice s;
    s.kind = kind;
    s.origin = "api";
    s.track = track;
    s.thread = 0;
    s.host_begin = 1.5;
    s.host_duration = 0.25;
    s.timed = true;
    s.begin = begin;
    s.end = end;
    return s;
}

TraceSnapshot two_streams() {
    TraceSnapshot w;
    w.id = 3;
    w.backend = "cpu";
    w.recorded = 4;
    w.capacity = 16;
    w.tracks = {"default stream", "stream 1 (owned)"};
    w.threads = {0};
    TraceSnapshot::Slice launch = slice("launch", 1, 10, 12);
    launch.name = "k\"1";
    TraceSnapshot::Slice record = slice("event record", 1, 12, 12.5);
    record.record = true;
    record.serial = 7;
    TraceSnapshot::Slice wait = slice("event wait", 2, 13, 13);
    wait.wait = true;
    wait.serial = 7;
    TraceSnapshot::Slice copy = slice("memcpy", 2, 14, 15);
    copy.sized = true;
    copy.bytes = 64;
    w.slices = {launch, record, wait, copy};
    return w;
}

TEST(TraceRender, Snapshot_RendersMetadataSlicesAndArrowEnds_Exactly) {
    const TracePart part = render_trace(two_streams());
    const char *expected =
        R"j({"ph":"M","pid":3,"name":"process_name","args":{"name":"qd context 3 (cpu)"}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"name":"process_labels","args":{"labels":"operations recorded 4, dropped 0 (QD_TRACE_CAPACITY 16)"}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"tid":1,"name":"thread_name","args":{"name":"default stream"}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"tid":1,"name":"thread_sort_index","args":{"sort_index":1}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"tid":2,"name":"thread_name","args":{"name":"stream 1 (owned)"}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"tid":2,"name":"thread_sort_index","args":{"sort_index":2}},)j"
        "\n"
        R"j({"ph":"M","pid":3,"tid":100000,"name":"thread_name","args":{"name":"host thread 1 (enqueue)"}},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":100000,"ts":1.500,"dur":0.250,"name":"enqueue k\"1","cat":"enqueue"},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":1,"ts":10.000,"dur":2.000,"name":"k\"1","cat":"launch","args":{"origin":"api"}},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":100000,"ts":1.500,"dur":0.250,"name":"enqueue event record","cat":"enqueue"},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":1,"ts":12.000,"dur":0.500,"name":"event record","cat":"event record","args":{"origin":"api"}},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":100000,"ts":1.500,"dur":0.250,"name":"enqueue event wait","cat":"enqueue"},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":2,"ts":13.000,"dur":0.000,"name":"event wait","cat":"event wait","args":{"origin":"api"}},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":100000,"ts":1.500,"dur":0.250,"name":"enqueue memcpy","cat":"enqueue"},)j"
        "\n"
        R"j({"ph":"X","pid":3,"tid":2,"ts":14.000,"dur":1.000,"name":"memcpy","cat":"memcpy","args":{"origin":"api","bytes":64}})j";
    EXPECT_EQ(part.events, expected);
    ASSERT_EQ(part.records.size(), 1u);
    EXPECT_EQ(part.records[0].serial, 7u);
    EXPECT_EQ(part.records[0].tid, 1u);
    EXPECT_EQ(part.records[0].begin, 12.0);
    EXPECT_STREQ(part.records[0].name, "api");
    ASSERT_EQ(part.waits.size(), 1u);
    EXPECT_EQ(part.waits[0].serial, 7u);
    EXPECT_EQ(part.waits[0].tid, 2u);
    EXPECT_EQ(part.waits[0].next, 14.0);  // the next slice on its stream: the memcpy
}

TEST(TraceRender, FailuresUntimedSlicesAndMarkers_AreDrawnAsTheFileSays) {
    TraceSnapshot w = two_streams();
    w.slices.resize(1);
    w.slices[0].status = "QD_ERROR_DEVICE_LOST";
    w.slices[0].device_lost = true;
    TraceSnapshot::Slice untimed = slice("memset", 2, 0, 0);
    untimed.timed = false;  // only its enqueue is drawn
    w.slices.push_back(untimed);
    w.exhausted.push_back({2.0, 0, 3});
    w.lost = true;
    w.lost_message = "fault\n";
    w.dropped = 5;
    w.now = 20;
    const std::string events = render_trace(w).events;
    auto has = [&](const char *text) { return events.find(text) != std::string::npos; };
    EXPECT_TRUE(has(R"j("args":{"origin":"api","status":"QD_ERROR_DEVICE_LOST"}})j")) << events;
    EXPECT_TRUE(has(
        R"j({"ph":"i","s":"p","pid":3,"tid":1,"ts":10.000,"name":"device lost at k\"1","cat":"fault"})j"))
        << events;
    EXPECT_TRUE(has(R"j("name":"enqueue memset","cat":"enqueue"})j")) << events;
    EXPECT_FALSE(has(R"j("name":"memset","cat":"memset")j")) << events;
    EXPECT_TRUE(has(
        R"j({"ph":"i","s":"t","pid":3,"tid":100000,"ts":2.000,"name":"stream pool exhausted (3 wanted)","cat":"pool"})j"))
        << events;
    EXPECT_TRUE(has(
        R"j({"ph":"i","s":"g","pid":3,"ts":20.000,"name":"context lost: fault\u000a","cat":"fault"})j"))
        << events;
    EXPECT_TRUE(has(
        R"j({"ph":"i","s":"p","pid":3,"ts":20.000,"name":"trace full: 5 operations not recorded","cat":"overflow"})j"))
        << events;
    EXPECT_TRUE(has("dropped 5 (QD_TRACE_CAPACITY 16)")) << events;
}

}  // namespace
