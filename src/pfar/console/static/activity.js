// The activity page's charts: drawn with the vendored uPlot from the figures the page
// embeds (#activity-data, the operator API's `activity` record), so no request is made.
// Each chart has a table of the same figures after it; once the charts are drawn the
// tables fold away (a click opens them), and without JavaScript they stay open.
(function () {
  "use strict";
  const holder = document.getElementById("activity-data");
  if (!holder || typeof uPlot === "undefined") return;
  const data = JSON.parse(holder.textContent);
  const days = data.days;
  const xs = days.map(function (d) { return Date.parse(d.day + "T00:00:00Z") / 1000; });
  const colours = ["#1f5fbf", "#c2571a", "#1d6b2f", "#8a3ab9", "#a11d1d", "#2b8a8a", "#6b6b00"];
  const HEIGHT = 220;
  const drawn = [];

  function utc(ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); }
  function usd(v) { return v == null ? "" : "$" + v.toFixed(4); }
  function count(v) { return v == null ? "" : String(v); }

  function line(label, i, values, format) {
    return {
      label: label,
      stroke: colours[i % colours.length],
      width: 2,
      points: { show: true, size: 5 },
      value: function (u, v) { return format(v); },
    };
  }

  function chart(id, series, values, options) {
    const el = document.getElementById(id);
    if (!el) return;
    const opts = Object.assign({
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      tzDate: utc,
      series: [{ label: "Day", value: "{YYYY}-{MM}-{DD}" }].concat(series),
      scales: { x: { time: true } },
      axes: [{ space: 50 }, { size: 56 }],
      legend: { live: true },
    }, options || {});
    drawn.push([new uPlot(opts, [xs].concat(values), el), el]);
  }

  chart("chart-tasks",
    [line("Tasks created", 0, null, count), line("Steps started", 1, null, count)],
    [days.map(function (d) { return d.tasks; }), days.map(function (d) { return d.steps; })]);

  chart("chart-tokens",
    [line("Input tokens", 0, null, count), line("Output tokens", 1, null, count)],
    [days.map(function (d) { return d.input_tokens; }),
     days.map(function (d) { return d.output_tokens; })]);

  const models = data.models.map(function (m) { return [m.provider, m.model]; });
  chart("chart-cost",
    models.map(function (m, i) { return line(m[0] + "/" + m[1], i, null, usd); }),
    models.map(function (m) {
      return days.map(function (d) {
        const found = d.models.find(function (c) { return c.provider === m[0] && c.model === m[1]; });
        return found ? found.cost_usd : 0;
      });
    }),
    { axes: [{ space: 50 }, { size: 64, values: function (u, vs) { return vs.map(function (v) { return "$" + v; }); } }] });

  // cost by template over the whole window: one bar a template
  const templates = data.templates;
  const el = document.getElementById("chart-templates");
  if (el && templates.length) {
    const names = templates.map(function (t) { return t.template_id || "(gone)"; });
    const at = names.map(function (_, i) { return i; });
    const opts = {
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      series: [
        { label: "Template", value: function (u, i) { return i == null ? "" : names[i]; } },
        {
          label: "Cost", fill: colours[0] + "99", stroke: colours[0], width: 1,
          paths: uPlot.paths.bars({ size: [0.6, 80] }), points: { show: false },
          value: function (u, v) { return usd(v); },
        },
      ],
      scales: { x: { time: false, range: function () { return [-0.5, names.length - 0.5]; } } },
      axes: [
        { splits: function () { return at; },
          values: function (u, vs) { return vs.map(function (i) { return names[i] || ""; }); } },
        { size: 64, values: function (u, vs) { return vs.map(function (v) { return "$" + v; }); } },
      ],
    };
    drawn.push([new uPlot(opts, [at, templates.map(function (t) { return t.cost_usd; })], el), el]);
  }

  document.querySelectorAll("details.figures").forEach(function (d) { d.open = false; });

  let pending = null;
  window.addEventListener("resize", function () {
    if (pending !== null) return;
    pending = setTimeout(function () {
      pending = null;
      drawn.forEach(function (pair) {
        pair[0].setSize({ width: Math.max(200, pair[1].clientWidth), height: HEIGHT });
      });
    }, 100);
  });
})();
