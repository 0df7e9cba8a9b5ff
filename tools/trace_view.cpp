#include "trace_view.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace qd_tool {

namespace {

// The page. The trace is embedded as JSON text in a <script type="application/json"> element
// and drawn by the inline script below into an SVG element.
const char *const kHead = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>qd trace</title>
<style>
body{font:13px system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
header{padding:8px 12px;border-bottom:1px solid #ddd;background:#fff}
#wrap{overflow:hidden;position:relative}
svg{display:block;user-select:none}
.lane-label{font-size:12px;fill:#333}
.proc-label{font-size:12px;font-weight:bold;fill:#000}
#tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #888;padding:4px 6px;
 font-size:12px;display:none;white-space:pre;box-shadow:2px 2px 4px rgba(0,0,0,.2)}
</style></head><body>
<header><b>qd trace</b> <span id="summary"></span>
 &nbsp; wheel: zoom, drag: pan, double-click: reset</header>
<div id="wrap"><svg id="view" xmlns="http://www.w3.org/2000/svg"></svg></div>
<div id="tip"></div>
<script type="application/json" id="trace">
)HTML";

const char *const kTail = R"HTML(
</script>
<script>
(function(){
const data = JSON.parse(document.getElementById('trace').textContent);
const events = Array.isArray(data) ? data : (data.traceEvents || []);
const procName = {}, laneName = {}, laneSort = {};
const slices = [], starts = {}, ends = {}, marks = [];
for (const e of events) {
  const key = e.pid + ':' + e.tid;
  if (e.ph === 'M') {
    if (e.name === 'process_name') procName[e.pid] = e.args.name;
    else if (e.name === 'thread_name') laneName[key] = e.args.name;
    else if (e.name === 'thread_sort_index') laneSort[key] = e.args.sort_index;
  } else if (e.ph === 'X') { slices.push(e); if (!(key in laneName)) laneName[key] = 'track ' + e.tid; }
  else if (e.ph === 's') starts[e.id] = e;
  else if (e.ph === 'f') ends[e.id] = e;
  else if (e.ph === 'i' || e.ph === 'I') marks.push(e);
}
const lanes = Object.keys(laneName).sort((a, b) => {
  const [pa, ta] = a.split(':').map(Number), [pb, tb] = b.split(':').map(Number);
  if (pa !== pb) return pa - pb;
  return (laneSort[a] ?? ta) - (laneSort[b] ?? tb);
});
const laneIndex = {}; lanes.forEach((k, i) => laneIndex[k] = i);
let t0 = Infinity, t1 = -Infinity;
for (const s of slices) { t0 = Math.min(t0, s.ts); t1 = Math.max(t1, s.ts + (s.dur || 0)); }
for (const m of marks) { t0 = Math.min(t0, m.ts); t1 = Math.max(t1, m.ts); }
if (!isFinite(t0)) { t0 = 0; t1 = 1; }
if (t1 <= t0) t1 = t0 + 1;
document.getElementById('summary').textContent = slices.length + ' slices on ' + lanes.length +
  ' lanes, ' + Object.keys(ends).length + ' dependencies, ' + ((t1 - t0) / 1000).toFixed(3) + ' ms';
const NS = 'http://www.w3.org/2000/svg', LABEL = 230, LANE = 22, TOP = 24;
const svg = document.getElementById('view');
const width = () => Math.max(600, document.getElementById('wrap').clientWidth || 1200);
let v0 = t0, v1 = t1;
const colors = {launch:'#4e79a7','host callback':'#f28e2b',memcpy:'#59a14f',memset:'#76b7b2',
  alloc:'#edc948',free:'#b07aa1','event record':'#9c755f','event wait':'#bab0ac',enqueue:'#d3d3d3'};
const tip = document.getElementById('tip');
function el(name, attrs, parent) {
  const n = document.createElementNS(NS, name);
  for (const k in attrs) n.setAttribute(k, attrs[k]);
  (parent || svg).appendChild(n); return n;
}
function x(t) { return LABEL + (t - v0) / (v1 - v0) * (width() - LABEL - 10); }
function describe(s) {
  let text = s.name + '\n' + (s.cat || '') + '  start ' + ((s.ts - t0) / 1000).toFixed(4) + ' ms';
  if (s.dur !== undefined) text += '  duration ' + s.dur.toFixed(3) + ' us';
  if (s.args) for (const k in s.args) text += '\n' + k + ': ' + s.args[k];
  return text;
}
function draw() {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const w = width(), h = TOP + lanes.length * LANE + 10;
  svg.setAttribute('width', w); svg.setAttribute('height', h);
  const defs = el('defs', {});
  const marker = el('marker', {id:'arrow', viewBox:'0 0 10 10', refX:'10', refY:'5',
    markerWidth:'6', markerHeight:'6', orient:'auto-start-reverse'}, defs);
  el('path', {d:'M 0 0 L 10 5 L 0 10 z', fill:'#c0392b'}, marker);
  let lastPid = null;
  lanes.forEach((k, i) => {
    const y = TOP + i * LANE, pid = k.split(':')[0];
    el('rect', {x:0, y:y, width:w, height:LANE, fill: i % 2 ? '#f2f2f2' : '#fff', class:'lane'});
    if (pid !== lastPid) {
      const t = el('text', {x:4, y:y - 3, class:'proc-label'}); t.textContent = procName[pid] || ('process ' + pid);
      lastPid = pid;
    }
    const t = el('text', {x:12, y:y + 15, class:'lane-label'}); t.textContent = laneName[k];
  });
  const ticks = 8;
  for (let i = 0; i <= ticks; i++) {
    const t = v0 + (v1 - v0) * i / ticks, xx = x(t);
    el('line', {x1:xx, y1:TOP - 6, x2:xx, y2:h, stroke:'#e0e0e0'});
    const label = el('text', {x:xx + 2, y:TOP - 8, 'font-size':'10', fill:'#666'});
    label.textContent = ((t - t0) / 1000).toFixed(3) + ' ms';
  }
  for (const s of slices) {
    const lane = laneIndex[s.pid + ':' + s.tid]; if (lane === undefined) continue;
    const a = x(s.ts), b = x(s.ts + (s.dur || 0));
    if (b < LABEL || a > w) continue;
    const r = el('rect', {x:Math.max(a, LABEL), y:TOP + lane * LANE + 3, width:Math.max(1, b - Math.max(a, LABEL)),
      height:LANE - 6, fill: colors[s.cat] || '#7f7f7f', class:'slice'});
    r.addEventListener('mousemove', ev => { tip.style.display = 'block'; tip.textContent = describe(s);
      tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px'; });
    r.addEventListener('mouseleave', () => tip.style.display = 'none');
  }
  for (const id in ends) {
    const s = starts[id], f = ends[id]; if (!s) continue;
    const ls = laneIndex[s.pid + ':' + s.tid], lf = laneIndex[f.pid + ':' + f.tid];
    if (ls === undefined || lf === undefined) continue;
    el('line', {x1:x(s.ts), y1:TOP + ls * LANE + LANE / 2, x2:x(f.ts), y2:TOP + lf * LANE + LANE / 2,
      stroke:'#c0392b', 'stroke-width':'1', 'marker-end':'url(#arrow)', class:'flow'});
  }
  for (const m of marks) {
    const lane = laneIndex[m.pid + ':' + m.tid], xx = x(m.ts);
    const y0 = lane === undefined ? TOP : TOP + lane * LANE, y1 = lane === undefined ? h : y0 + LANE;
    const line = el('line', {x1:xx, y1:y0, x2:xx, y2:y1, stroke:'#e31a1c', 'stroke-width':'2', class:'mark'});
    line.addEventListener('mousemove', ev => { tip.style.display = 'block'; tip.textContent = m.name;
      tip.style.left = (ev.clientX + 12) + 'px'; tip.style.top = (ev.clientY + 12) + 'px'; });
    line.addEventListener('mouseleave', () => tip.style.display = 'none');
  }
}
svg.addEventListener('wheel', ev => {
  ev.preventDefault();
  const rect = svg.getBoundingClientRect(), px = ev.clientX - rect.left;
  const t = v0 + (px - LABEL) / (width() - LABEL - 10) * (v1 - v0);
  const k = ev.deltaY < 0 ? 0.8 : 1.25;
  v0 = t - (t - v0) * k; v1 = t + (v1 - t) * k; draw();
}, {passive:false});
let drag = null;
svg.addEventListener('mousedown', ev => drag = {x:ev.clientX, v0:v0, v1:v1});
window.addEventListener('mouseup', () => drag = null);
window.addEventListener('mousemove', ev => {
  if (!drag) return;
  const dt = (ev.clientX - drag.x) / (width() - LABEL - 10) * (drag.v1 - drag.v0);
  v0 = drag.v0 - dt; v1 = drag.v1 - dt; draw();
});
svg.addEventListener('dblclick', () => { v0 = t0; v1 = t1; draw(); });
window.addEventListener('resize', draw);
draw();
document.body.setAttribute('data-lanes', String(lanes.length));
document.body.setAttribute('data-slices', String(slices.length));
})();
</script></body></html>
)HTML";

int usage() {
    std::fprintf(stderr, "usage: qd trace view TRACE.json -o PAGE.html\n");
    return 2;
}

}  // namespace

int run_trace(int argc, char **argv) {
    if (argc < 1 || std::strcmp(argv[0], "view") != 0) return usage();
    const char *in = nullptr, *out = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (!in) {
            in = argv[i];
        } else {
            return usage();
        }
    }
    if (!in || !out) return usage();
    std::ifstream file(in, std::ios::binary);
    if (!file) {
        std::fprintf(stderr, "qd trace view: cannot read '%s'\n", in);
        return 1;
    }
    std::string json((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const size_t first = json.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || (json[first] != '{' && json[first] != '[')) {
        std::fprintf(stderr, "qd trace view: '%s' is not a trace (JSON object or array)\n", in);
        return 1;
    }
    // Inside <script>, "</" could end the element: write it as "<\/" (the same JSON string).
    std::string safe;
    safe.reserve(json.size());
    for (size_t i = 0; i < json.size(); ++i) {
        safe += json[i];
        if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') safe += '\\';
    }
    std::ofstream page(out, std::ios::binary);
    page << kHead << safe << kTail;
    if (!page) {
        std::fprintf(stderr, "qd trace view: cannot write '%s'\n", out);
        return 1;
    }
    std::printf("qd trace view: wrote %s\n", out);
    return 0;
}

}  // namespace qd_tool
