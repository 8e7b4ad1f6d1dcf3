// ranklog report: draws the plots as inline SVG from the JSON embedded in the page. No network,
// no libraries: a few small chart functions written for this report.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"];
  const CATEGORY_COLORS = {
    "CUDA OOM": "#d62728", "CUDA error": "#e377c2", "NCCL error": "#9467bd",
    "NCCL/collective timeout": "#7f7f7f", "Ray actor death": "#8c564b", "host OOM kill": "#ff7f0e",
    "non-finite loss/gradients": "#bcbd22", "uncaught exception": "#1f77b4", "hang/silence": "#17becf",
    "unknown": "#333333"
  };
  const W = 860, H = 300, M = {left: 64, right: 16, top: 16, bottom: 44};

  function el(tag, attrs, parent) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  function text(parent, x, y, content, attrs) {
    const node = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    node.textContent = content;
    return node;
  }

  function extent(values) {
    let lo = Infinity, hi = -Infinity;
    for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (!isFinite(lo)) return [0, 1];
    if (lo === hi) return [lo - 1, hi + 1];
    return [lo, hi];
  }

  function ticks(lo, hi, count) {
    const span = hi - lo, raw = span / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(f => f * mag).find(s => span / s <= count) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function frame(container, xDomain, yDomain, opts) {
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "class": "chart"});
    el("title", {}, svg).textContent = opts.title || "";
    const x = v => M.left + (v - xDomain[0]) / (xDomain[1] - xDomain[0]) * (W - M.left - M.right);
    const y = v => H - M.bottom - (v - yDomain[0]) / (yDomain[1] - yDomain[0]) * (H - M.top - M.bottom);
    const axis = el("g", {"class": "axis"}, svg);
    el("line", {x1: M.left, x2: W - M.right, y1: H - M.bottom, y2: H - M.bottom}, axis);
    el("line", {x1: M.left, x2: M.left, y1: M.top, y2: H - M.bottom}, axis);
    for (const t of (opts.xTicks || ticks(xDomain[0], xDomain[1], 8))) {
      el("line", {x1: x(t), x2: x(t), y1: H - M.bottom, y2: H - M.bottom + 4}, axis);
      text(axis, x(t), H - M.bottom + 16, (opts.xFormat || String)(t), {"text-anchor": "middle"});
    }
    for (const t of (opts.yTicks || ticks(yDomain[0], yDomain[1], 5))) {
      el("line", {x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), "class": "grid"}, axis);
      text(axis, M.left - 6, y(t) + 4, (opts.yFormat || String)(t), {"text-anchor": "end"});
    }
    if (opts.xLabel) text(axis, (M.left + W - M.right) / 2, H - 8, opts.xLabel, {"text-anchor": "middle", "class": "label"});
    if (opts.yLabel) text(axis, 14, (M.top + H - M.bottom) / 2, opts.yLabel,
                          {"text-anchor": "middle", "class": "label", transform: `rotate(-90 14 ${(M.top + H - M.bottom) / 2})`});
    container.appendChild(svg);
    return {svg, x, y};
  }

  function legend(container, entries) {
    const box = document.createElement("div");
    box.className = "legend";
    for (const [name, color] of entries) {
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(name));
      box.appendChild(item);
    }
    container.appendChild(box);
  }

  function empty(container, message) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = message;
    container.appendChild(p);
  }

  function seconds(v) {
    if (v >= 120) return +(v / 60).toFixed(v >= 1200 ? 0 : 1) + "m";
    return (Number.isInteger(v) ? String(v) : String(+v.toFixed(2))) + "s";
  }

  function lineChart(container, series, opts) {
    const points = series.flatMap(s => s.points.filter(p => p[1] !== null));
    if (!points.length) { empty(container, opts.emptyText || "no data"); return; }
    const xDom = extent(points.map(p => p[0])), yDom = extent(points.map(p => p[1]));
    if (opts.zeroBased) yDom[0] = Math.min(0, yDom[0]);
    const f = frame(container, xDom, yDom, opts);
    series.forEach((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      let d = "", pen = false;
      for (const [px, py] of s.points) {
        if (py === null) { pen = false; continue; }
        d += (pen ? "L" : "M") + f.x(px).toFixed(1) + "," + f.y(py).toFixed(1);
        pen = true;
      }
      el("path", {d: d, fill: "none", stroke: color, "stroke-width": 1.6, "class": "series"}, f.svg);
      for (const p of s.points) {
        if (p[2]) {  // non-finite values at this x
          const mark = el("line", {x1: f.x(p[0]), x2: f.x(p[0]), y1: M.top, y2: H - M.bottom, "class": "nonfinite"}, f.svg);
          el("title", {}, mark).textContent = `${s.name}: ${p[2]} non-finite value(s) at ${opts.xName || "x"} ${p[0]}`;
        }
      }
    });
    for (const [mx, label] of (opts.marks || [])) {
      const line = el("line", {x1: f.x(mx), x2: f.x(mx), y1: M.top, y2: H - M.bottom, "class": "mark"}, f.svg);
      el("title", {}, line).textContent = label;
    }
    if (series.length > 1 || opts.legend) legend(container, series.map((s, i) => [s.name, s.color || PALETTE[i % PALETTE.length]]));
  }

  function timelineChart(container, data) {
    const points = data.timeline;
    if (!points.length) { empty(container, "no errors"); return; }
    const ranks = points.map(p => p.rank === null ? -1 : p.rank);
    const xDom = extent(points.map(p => p.t)), yDom = extent(ranks);
    yDom[0] -= 0.5; yDom[1] += 0.5;
    const yTicks = ticks(yDom[0], yDom[1], 10).filter(v => Number.isInteger(v) && v >= -1);
    const f = frame(container, xDom, yDom, {title: "first error per rank", xLabel: "time since the first record (clock-corrected)",
      yLabel: "rank", xFormat: seconds, yTicks: yTicks, yFormat: v => v === -1 ? "none" : String(v)});
    const used = new Map();
    for (const p of points) {
      const color = CATEGORY_COLORS[p.category] || "#333333";
      used.set(p.category || "unknown", color);
      const shape = p.consequence
        ? el("circle", {cx: f.x(p.t), cy: f.y(p.rank === null ? -1 : p.rank), r: 4, fill: "none", stroke: color, "stroke-width": 1.5}, f.svg)
        : el("rect", {x: f.x(p.t) - 5, y: f.y(p.rank === null ? -1 : p.rank) - 5, width: 10, height: 10, fill: color, "class": "cause"}, f.svg);
      el("title", {}, shape).textContent = `${p.host} rank ${p.rank === null ? "-" : p.rank} +${seconds(p.t)}: ${p.category || p.level}\n${p.msg}`;
    }
    legend(container, [...used.entries()].map(([name, color]) => [name, color]).concat([["hollow = consequence", "#ffffff"]]));
  }

  function volumeChart(container, data) {
    const v = data.volume, hosts = Object.keys(v.hosts);
    if (!hosts.length) { empty(container, "no records"); return; }
    const step = v.bucket_ns / 1e9;
    const series = hosts.map(h => ({name: h, points: v.hosts[h].map((c, i) => [i * step, c / step])}));
    lineChart(container, series, {title: "log volume per node", xLabel: "time since the first record",
      yLabel: "records/s", xFormat: seconds, zeroBased: true, legend: true, xName: "t"});
  }

  function curve(container, points, name, yLabel, marks) {
    lineChart(container, [{name: name, points: points}], {title: name, xLabel: "step", yLabel: yLabel, xName: "step",
      marks: marks, emptyText: `no ${name} found in the logs`});
  }

  function stepTimes(container, data, marks) {
    const st = data.step_times || {series: []};
    lineChart(container, st.series, {title: "time per step: the median rank, the flagged and the slowest ranks",
      xLabel: "step", yLabel: "seconds per step (" + (st.basis || "no steps") + ")", xName: "step", marks: marks,
      legend: true, zeroBased: true, emptyText: "no training steps found in the logs"});
  }

  function main() {
    const data = JSON.parse(document.getElementById("report-data").textContent);
    const marks = data.verdict.step !== null && data.verdict.status === "failure"
      ? [[data.verdict.step, "verdict: " + data.verdict.summary]] : [];
    timelineChart(document.getElementById("plot-timeline"), data);
    volumeChart(document.getElementById("plot-volume"), data);
    curve(document.getElementById("plot-loss"), data.curves.loss, "loss", "loss (mean over ranks)", marks);
    curve(document.getElementById("plot-throughput"), data.curves.throughput, "throughput", "throughput (mean over ranks)", marks);
    stepTimes(document.getElementById("plot-step-times"), data,
      data.verdict.status === "degraded" ? [[data.verdict.step, "first slow step: " + data.verdict.summary]] : marks);
    document.body.setAttribute("data-rendered", "true");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
