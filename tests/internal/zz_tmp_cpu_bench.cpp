#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
using namespace qd::backend;
using Clock = std::chrono::steady_clock;
static double ns_since(Clock::time_point t) { return std::chrono::duration<double, std::nano>(Clock::now() - t).count(); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static void noop(void*) {}
static int32_t empty_kernel(const qd_host_kernel_info*, void* const*) { return 0; }
static std::atomic<bool> gate_open;
static void gate(void*) { while (!gate_open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50)); }
static void busy_1ms(void*) { auto t = Clock::now(); while (Clock::now() - t < std::chrono::milliseconds(1)) {} }

int main(int argc, char** argv) {
  std::unique_ptr<Driver> d; make_cpu_driver(&d);
  ContextParams p; p.worker_threads = argc > 1 ? atoi(argv[1]) : 0;
  std::unique_ptr<Context> ctx; d->create_context(p, &ctx);
  std::shared_ptr<Stream> s; ctx->create_stream(0, 0, &s);
  std::shared_ptr<Kernel> k; ctx->kernel_from_host_fn(empty_kernel, "empty", &k);
  LaunchDims dims = {{1,1,1},{1,1,1},0};
  // 1. enqueue onto a busy stream
  const int N = 20000;
  const bool only_fj = argc > 2;
  for (int what = 0; what < (only_fj ? 0 : 3); ++what) {
    std::vector<double> r;
    for (int rep = 0; rep < 7; ++rep) {
      gate_open = false; s->host_fn(gate, nullptr);
      uint64_t v = 1; qd_arg args[8]; for (auto& a : args) a = {&v, 8};
      auto t = Clock::now();
      for (int i = 0; i < N; ++i) {
        if (what == 0) s->host_fn(noop, nullptr);
        else if (what == 1) s->launch(*k, dims, nullptr, 0);
        else s->launch(*k, dims, args, 8);
      }
      r.push_back(ns_since(t) / N);
      gate_open = true; s->synchronize();
    }
    printf("enqueue onto busy stream (%s): %.1f ns\n", what == 0 ? "host_fn" : what == 1 ? "launch 0 args" : "launch 8 args", median(r));
  }
  // 2. fork/join of 8 empty tasks
  {
    std::shared_ptr<Stream> parent; ctx->create_stream(0, 0, &parent);
    std::vector<std::shared_ptr<Stream>> ch(8); std::vector<std::shared_ptr<Event>> joins(8);
    for (int i = 0; i < 8; ++i) { ctx->create_stream(0, 0, &ch[i]); ctx->create_event(false, &joins[i]); }
    std::shared_ptr<Event> fork; ctx->create_event(false, &fork);
    std::vector<double> r;
    for (int it = 0; it < 2000; ++it) {
      auto t = Clock::now();
      parent->record(*fork);
      for (int i = 0; i < 8; ++i) { ch[i]->wait(*fork); ch[i]->launch(*k, dims, nullptr, 0); ch[i]->record(*joins[i]); }
      for (int i = 0; i < 8; ++i) parent->wait(*joins[i]);
      parent->synchronize();
      r.push_back(ns_since(t));
    }
    std::sort(r.begin(), r.end());
    printf("fork/join 8 empty: median %.2f us, p10 %.2f p90 %.2f\n", r[r.size()/2]/1000, r[r.size()/10]/1000, r[r.size()*9/10]/1000);
  }
  // 2b. launch onto idle streams, workers awake; and fork/join enqueue-only
  {
    std::vector<std::shared_ptr<Stream>> ch(8);
    for (auto& c : ch) ctx->create_stream(0, 0, &c);
    std::vector<double> first, others, enq;
    std::shared_ptr<Stream> parent; ctx->create_stream(0, 0, &parent);
    std::vector<std::shared_ptr<Event>> joins(8);
    for (auto& j : joins) ctx->create_event(false, &j);
    std::shared_ptr<Event> fork; ctx->create_event(false, &fork);
    for (int it = 0; it < 2000; ++it) {
      for (int i = 0; i < 8; ++i) { auto t = Clock::now(); ch[i]->launch(*k, dims, nullptr, 0); (i ? others : first).push_back(ns_since(t)); }
      for (auto& c : ch) c->synchronize();
      auto t = Clock::now();
      parent->record(*fork);
      for (int i = 0; i < 8; ++i) { ch[i]->wait(*fork); ch[i]->launch(*k, dims, nullptr, 0); ch[i]->record(*joins[i]); }
      for (int i = 0; i < 8; ++i) parent->wait(*joins[i]);
      enq.push_back(ns_since(t));
      parent->synchronize();
    }
    printf("launch onto idle stream, workers awake: first %.0f ns, others %.0f ns; fork/join enqueue-only %.2f us\n", median(first), median(others), median(enq)/1000);
  }
  // 3. fan-out 8 x 1ms vs serial
  if (!only_fj) {
    std::vector<std::shared_ptr<Stream>> ch(8);
    for (auto& c : ch) ctx->create_stream(0, 0, &c);
    std::vector<double> par, ser;
    for (int rep = 0; rep < 5; ++rep) {
      auto t = Clock::now();
      for (auto& c : ch) c->host_fn(busy_1ms, nullptr);
      ctx->synchronize();
      par.push_back(ns_since(t));
      t = Clock::now();
      for (int i = 0; i < 8; ++i) s->host_fn(busy_1ms, nullptr);
      s->synchronize();
      ser.push_back(ns_since(t));
    }
    printf("fan-out 8x1ms: parallel %.2f ms serial %.2f ms speedup %.2fx\n", median(par)/1e6, median(ser)/1e6, median(ser)/median(par));
  }
  // 4. ping-pong: events across two streams vs condition variable
  if (!only_fj) {
    const int R = 20000;
    std::shared_ptr<Stream> a, b; ctx->create_stream(0, 0, &a); ctx->create_stream(0, 0, &b);
    std::vector<std::shared_ptr<Event>> ea(R), eb(R);
    for (int i = 0; i < R; ++i) { ctx->create_event(false, &ea[i]); ctx->create_event(false, &eb[i]); }
    std::vector<double> qd, cvr;
    for (int rep = 0; rep < 5; ++rep) {
      gate_open = false; a->host_fn(gate, nullptr);
      for (int i = 0; i < R; ++i) {
        if (i) a->wait(*eb[i-1]);
        a->host_fn(noop, nullptr); a->record(*ea[i]);
        b->wait(*ea[i]); b->host_fn(noop, nullptr); b->record(*eb[i]);
      }
      auto t = Clock::now(); gate_open = true;
      b->synchronize();
      qd.push_back(ns_since(t) / R);
      // cv ping-pong
      std::mutex m; std::condition_variable cv; int turn = 0; 
      auto t2 = Clock::now();
      std::thread other([&]{ for (int i = 0; i < R; ++i) { std::unique_lock<std::mutex> l(m); cv.wait(l, [&]{ return turn == 1; }); turn = 0; cv.notify_all(); } });
      for (int i = 0; i < R; ++i) { std::unique_lock<std::mutex> l(m); turn = 1; cv.notify_all(); cv.wait(l, [&]{ return turn == 0; }); }
      other.join();
      cvr.push_back(ns_since(t2) / R);
    }
    printf("ping-pong per round: qd events %.0f ns, condition_variable %.0f ns, ratio %.2f\n", median(qd), median(cvr), median(qd)/median(cvr));
  }
  ctx->synchronize(); ctx->shutdown();
}
