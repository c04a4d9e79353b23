// hyperpack study page: renders the study data (#hp-data, or the dashboard's URL in live mode) with Chart.js 3.
'use strict';

(function () {

// ---------------------------------------------------------------------------------------------------------------
// Error accounting comes first, so that anything failing later (Chart.js included) is counted for the tests.
let errorCount = 0;

function describe(x) {
  if (x instanceof Error) return x.stack || `${x.name}: ${x.message}`;
  if (typeof x === 'string') return x;
  try { return JSON.stringify(x); } catch (_) { return String(x); }
}

function recordError(message) {
  errorCount += 1;
  const body = document.body;
  if (!body) return;
  body.dataset.errors = String(errorCount);
  let pre = document.getElementById('hp-errors');
  if (!pre) {
    pre = document.createElement('pre');
    pre.id = 'hp-errors';
    pre.hidden = true;
    body.appendChild(pre);
  }
  pre.textContent += message + '\n';
}

// Capture phase so that failed resource loads (which do not bubble) are counted too.
window.addEventListener('error', (e) => {
  const where = e.filename ? ` (${e.filename}:${e.lineno}:${e.colno})` : '';
  const what = e.message || (e.error && describe(e.error)) ||
    (e.target && e.target !== window ? `failed to load ${e.target.tagName || 'resource'}` : 'unknown error');
  recordError(`error: ${what}${where}`);
}, true);
window.addEventListener('unhandledrejection', (e) => recordError(`unhandled rejection: ${describe(e.reason)}`));
// The event bubbles from the element to the document and then the window: listen once, on the document.
document.addEventListener('securitypolicyviolation',
  (e) => recordError(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || '(inline)'}`));
const consoleError = console.error.bind(console);
console.error = (...args) => {
  recordError(`console.error: ${args.map(describe).join(' ')}`);
  consoleError(...args);
};

// ---------------------------------------------------------------------------------------------------------------
// Small helpers. Everything from the data is untrusted: it only ever reaches the page through textContent.

const $ = (id) => document.getElementById(id);
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const arr = (v) => (Array.isArray(v) ? v : []);
const obj = (v) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});
const str = (v) => (v === null || v === undefined ? '' : String(v));
const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
const own = (o, k) => (hasOwn(o, k) ? o[k] : undefined);
// Loops rather than Math.min(...xs): spreading a large study's values overflows the call stack.
const minOf = (xs) => xs.reduce((m, x) => (x < m ? x : m), Infinity);
const maxOf = (xs) => xs.reduce((m, x) => (x > m ? x : m), -Infinity);

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null) continue;
      if (k === 'text') node.textContent = v;
      else if (k === 'className') node.className = v;
      else if (k === 'style') Object.assign(node.style, v);
      else node.setAttribute(k, v);
    }
  }
  for (const c of children) {
    if (c !== null && c !== undefined) node.append(c);  // append() inserts strings as text nodes
  }
  return node;
}

function trimZeros(s) {
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

// Compact numbers: 4 significant digits, exponent outside [1e-3, 1e5).
function fmtNum(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1e6) return String(v);
  if (a < 1e-3 || a >= 1e5) {
    const [m, e] = v.toExponential(3).split('e');
    return `${trimZeros(m)}e${Number(e)}`;
  }
  return String(Number(v.toPrecision(4)));
}

// Parameter values may be numbers, strings or booleans.
function fmtValue(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number') return fmtNum(v);
  if (typeof v === 'object') return describe(v);
  return String(v);
}

const pad2 = (n) => String(n).padStart(2, '0');

// m:ss or h:mm:ss; what the timeline's axis shows.
function fmtClock(seconds) {
  if (!isNum(seconds)) return '—';
  const sign = seconds < 0 ? '-' : '';
  const s = Math.round(Math.abs(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${sign}${h}:${pad2(m)}:${pad2(s % 60)}` : `${sign}${m}:${pad2(s % 60)}`;
}

// Durations: short ones in seconds (a clock would show 0:00), longer ones as a clock.
function fmtDuration(seconds) {
  if (!isNum(seconds)) return '—';
  if (Math.abs(seconds) < 60) return `${fmtNum(Number(seconds.toFixed(1)))} s`;
  return fmtClock(seconds);
}

// Local wall-clock time, in a fixed format so that it reads the same in every locale.
function fmtTime(epoch) {
  if (!isNum(epoch)) return '—';
  const d = new Date(epoch * 1000);
  if (Number.isNaN(d.getTime())) return '—';
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
    `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

// A tick step for a time axis that falls on round clock values.
function niceTimeStep(span) {
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const want = span / 8;
  for (const s of steps) if (s >= want) return s;
  return Math.ceil(want / 86400) * 86400;
}

const STATE_COLOURS = {
  completed: '#2563eb',
  running: '#16a34a',
  pending: '#cbd5e1',
  failed: '#dc2626',
  pruned: '#7c8796',
  paused: '#eab308',
  interrupted: '#8b5cf6',
  node_lost: '#db2777',
};
const STATE_ORDER = Object.keys(STATE_COLOURS);
const stateColour = (s) => STATE_COLOURS[s] || '#64748b';

function withAlpha(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function stateDot(state) {
  return el('span', { className: 'hp-dot', style: { background: stateColour(state) } });
}

function stateChip(label, count, colour) {
  const chip = el('span', { className: 'hp-chip' });
  chip.append(el('span', { className: 'hp-dot', style: { background: colour } }), label);
  if (count !== undefined) chip.append(el('b', { text: String(count) }));
  return chip;
}

function setHidden(id, hidden) {
  const node = $(id);
  if (node) node.hidden = hidden;
}

// ---------------------------------------------------------------------------------------------------------------
// Chart plumbing.

const charts = {};

if (typeof Chart !== 'undefined') {
  // Synchronous drawing: the blank-canvas check reads pixels right after render(), and live updates should not
  // animate every 2 s.
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.responsive = true;
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily || 'system-ui, sans-serif';
  Chart.defaults.font.size = 12;
  Chart.defaults.color = '#3e4c59';
  Chart.defaults.borderColor = 'rgba(0, 0, 0, 0.08)';
  Chart.defaults.plugins.legend.labels.boxWidth = 10;
  Chart.defaults.plugins.legend.labels.boxHeight = 10;
  Chart.defaults.plugins.legend.labels.usePointStyle = true;
  // Points on an axis bound would be cut in half at the chart area's edge; let them draw a little past it.
  Chart.defaults.datasets.scatter.clip = 8;
  Chart.defaults.datasets.line.clip = 8;
}

// Creates the chart the first time, and afterwards updates it in place, so that a live page does not flicker and
// keeps what the user toggled in a legend: datasets that keep their hpKey keep their object (and Chart.js its state).
function upsertChart(key, canvas, config) {
  if (typeof Chart === 'undefined') throw new Error('Chart.js is not loaded');
  let chart = charts[key];
  if (chart && (chart.canvas !== canvas || !canvas.isConnected || chart.config.type !== config.type)) {
    chart.destroy();
    delete charts[key];
    chart = undefined;
  }
  if (!chart) {
    // The blank check reads pixels back after every render: ask for a canvas kept in memory for that.
    canvas.getContext('2d', { willReadFrequently: true });
    charts[key] = new Chart(canvas, config);
    return charts[key];
  }
  const previous = new Map(chart.data.datasets.map((d) => [d.hpKey, d]));
  chart.data.labels = config.data.labels || [];
  chart.data.datasets = config.data.datasets.map((d) => {
    const old = d.hpKey !== undefined ? previous.get(d.hpKey) : undefined;
    if (!old) return d;
    previous.delete(d.hpKey);  // reuse an object once, even if the data repeats a key
    return Object.assign(old, d);
  });
  chart.options = config.options;
  chart.resize();  // the box may just have been unhidden or resized; a no-op otherwise
  chart.update('none');
  return chart;
}

function dropChart(key) {
  if (charts[key]) {
    charts[key].destroy();
    delete charts[key];
  }
}

function axisTitle(text) {
  return { display: Boolean(text), text: str(text) };
}

const numberTicks = { callback: (v) => fmtNum(v) };

// Log axes: label only decades when the range is wide, and 1-2-5 when it is narrower, formatted compactly.
function logTicks() {
  return {
    autoSkip: true,
    callback(value) {
      const span = Math.log10(this.max / this.min);
      if (!Number.isFinite(span) || span < 1) return fmtNum(value);
      const mantissa = Number((value / 10 ** Math.floor(Math.log10(value) + 1e-9)).toFixed(6));
      const keep = span > 2 ? [1] : [1, 2, 5];
      return keep.includes(mantissa) ? fmtNum(value) : '';
    },
  };
}

function pointTooltip(lines) {
  return {
    callbacks: {
      title: () => '',
      label: (ctx) => lines(ctx.raw || {}, ctx),
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The data, defended: every field may be missing or null.

function prepare(raw) {
  const data = obj(raw);
  const study = obj(data.study);
  const minimize = study.direction !== 'maximize';
  const params = arr(data.params).filter((p) => p && typeof p === 'object' && typeof p.name === 'string');
  const trials = arr(data.trials).filter((t) => t && typeof t === 'object')
    .map((t) => ({ ...t, params: obj(t.params), state: str(t.state) || 'unknown' }));
  const order = (t) => (isNum(t.number) ? t.number : Number.MAX_VALUE);  // trials without a number last
  trials.sort((a, b) => order(a) - order(b));
  const valued = trials.filter((t) => isNum(t.value));
  const better = (a, b) => (minimize ? a < b : a > b);
  let best = null;
  for (const t of trials) {
    if (t.state === 'completed' && isNum(t.value) && (!best || better(t.value, best.value))) best = t;
  }
  const timeline = obj(data.timeline);
  return {
    raw: data,
    study,
    minimize,
    better,
    metric: str(study.metric) || 'objective',
    params,
    trials,
    valued,
    best,
    curves: arr(data.curves).filter((c) => c && typeof c === 'object'),
    importance: data.importance && typeof data.importance === 'object' ? data.importance : null,
    importanceNote: str(data.importance_note),
    lanes: arr(timeline.lanes).filter((l) => l && typeof l === 'object'),
    bars: arr(timeline.bars).filter((b) => b && typeof b === 'object'),
    events: arr(data.events).filter((e) => e && typeof e === 'object'),
    generated: isNum(data.generated) ? data.generated : null,
  };
}

// Maps a parameter's values to [0, 1] for the parallel-coordinates chart, and describes the mapping.
function paramScale(p, values) {
  if (p.type === 'categorical') {
    const choices = arr(p.choices);
    const keys = choices.map((c) => JSON.stringify(c));
    const n = choices.length;
    return {
      kind: 'categorical',
      norm(v) {
        const i = keys.indexOf(JSON.stringify(v));
        if (i < 0) return null;
        return n > 1 ? i / (n - 1) : 0.5;
      },
      low: n ? fmtValue(choices[0]) : '—',
      high: n ? fmtValue(choices[n - 1]) : '—',
      categories: choices.map(fmtValue).join(', '),
    };
  }
  // Numeric: the search space's bounds, or the data's own range when the bounds are unusable.
  const nums = values.filter(isNum);
  const low = isNum(p.low) ? p.low : minOf(nums);
  const high = isNum(p.high) ? p.high : maxOf(nums);
  const log = Boolean(p.log) && low > 0 && high > 0;
  const f = log ? Math.log : (x) => x;
  return {
    kind: (p.type === 'int' ? ['int', 'int, log'] : ['linear', 'log'])[log ? 1 : 0],
    norm(v) {
      if (!isNum(v) || !isNum(low) || !isNum(high)) return null;
      if (log && v <= 0) return null;
      if (high === low) return 0.5;
      return (f(v) - f(low)) / (f(high) - f(low));
    },
    low: fmtNum(isNum(low) ? low : null),
    high: fmtNum(isNum(high) ? high : null),
    categories: '',
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Sections. Each returns the number of data points it shows, for the test hooks.

function renderSummary(d) {
  const s = d.study;
  $('hp-study-name').textContent = str(s.name) || '(unnamed study)';
  setHidden('hp-live', !d.raw.live);

  const dl = $('hp-summary');
  const item = (label, ...value) => el('div', null, el('dt', { text: label }), el('dd', null, ...value));
  const sub = (text) => el('span', { className: 'hp-sub', text });
  // Cost totals per unit: GPU-seconds and CPU-seconds do not add up.
  const costByUnit = new Map();
  for (const t of d.trials) {
    if (isNum(t.cost)) costByUnit.set(str(t.cost_unit), (costByUnit.get(str(t.cost_unit)) || 0) + t.cost);
  }
  const costParts = [];
  for (const [unit, total] of costByUnit) {
    if (costParts.length) costParts.push(' + ');
    costParts.push(fmtNum(total), sub(unit ? ` ${unit}` : ''));
  }
  const items = [
    item('Study', str(s.name) || '—'),
    item('Metric', d.metric, ' ', sub(d.minimize ? '(minimize)' : '(maximize)')),
    item('Best', d.best ? fmtNum(d.best.value) : '—', d.best ? sub(` trial ${fmtValue(d.best.number)}`) : null),
    item('Trials', String(d.trials.length), sub(` ${d.valued.length} with a value`)),
    item('Tuner / pruner', `${str(s.tuner) || '—'} / ${str(s.pruner) || 'none'}`,
      s.resource ? sub(` resource: ${str(s.resource)}`) : null),
    item('Total cost', ...(costParts.length ? costParts : ['—'])),
    item('Created', fmtTime(s.created)),
    item('Generated', fmtTime(d.generated)),
  ];
  dl.replaceChildren(...items);

  const counts = new Map();
  for (const t of d.trials) counts.set(t.state, (counts.get(t.state) || 0) + 1);
  const states = [...counts.keys()].sort((a, b) => {
    const ia = STATE_ORDER.indexOf(a);
    const ib = STATE_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  $('hp-states').replaceChildren(...states.map((st) => stateChip(st, counts.get(st), stateColour(st))));
}

function renderHistory(d) {
  const empty = d.valued.length === 0;
  setHidden('hp-history-empty', !empty);
  setHidden('hp-history-box', empty);
  if (empty) return 0;  // the chart, if any, stays (hidden) and is updated when data comes back

  const point = (t) => ({ x: t.number, y: t.value, trial: t.number, state: t.state });
  const completed = d.valued.filter((t) => t.state === 'completed');
  const pruned = d.valued.filter((t) => t.state === 'pruned');
  const other = d.valued.filter((t) => t.state !== 'completed' && t.state !== 'pruned');
  let bestSoFar = null;
  const bestLine = completed.filter((t) => isNum(t.number)).map((t) => {
    if (bestSoFar === null || d.better(t.value, bestSoFar)) bestSoFar = t.value;
    return { x: t.number, y: bestSoFar };
  });

  const datasets = [];
  if (bestLine.length) {
    datasets.push({
      hpKey: 'best', type: 'line', label: 'best so far', data: bestLine, stepped: true, pointStyle: 'line',
      borderColor: '#111827', borderWidth: 1.5, pointRadius: 0, pointHitRadius: 0, fill: false, order: 0,
    });
  }
  if (completed.length) {
    datasets.push({
      hpKey: 'completed', label: 'completed', data: completed.map(point), order: 1,
      backgroundColor: withAlpha(STATE_COLOURS.completed, 0.75), borderColor: STATE_COLOURS.completed,
      pointRadius: 4, pointHoverRadius: 6,
    });
  }
  if (pruned.length) {
    datasets.push({
      hpKey: 'pruned', label: 'pruned (last reported)', data: pruned.map(point), order: 2,
      pointStyle: 'crossRot', borderColor: STATE_COLOURS.pruned, backgroundColor: STATE_COLOURS.pruned,
      borderWidth: 2, pointRadius: 5, pointHoverRadius: 7,
    });
  }
  if (other.length) {
    datasets.push({
      hpKey: 'other', label: 'other states (last reported)', data: other.map(point), order: 3,
      pointStyle: 'circle', borderColor: '#6b7280', backgroundColor: 'rgba(255, 255, 255, 0)',
      borderWidth: 1.5, pointRadius: 4, pointHoverRadius: 6,
    });
  }
  const byNumber = new Map(d.valued.map((t) => [t.number, t]));

  upsertChart('history', $('hp-history-chart'), {
    type: 'scatter',
    data: { datasets },
    options: {
      scales: {
        x: { type: 'linear', title: axisTitle('trial'), ticks: { precision: 0 } },
        y: { type: 'linear', title: axisTitle(d.metric), ticks: numberTicks },
      },
      plugins: {
        tooltip: {
          callbacks: {
            title: () => '',
            label(ctx) {
              if (ctx.dataset.hpKey === 'best') return `best so far after trial ${ctx.raw.x}: ${fmtNum(ctx.raw.y)}`;
              const t = byNumber.get(ctx.raw.trial);
              return `trial ${ctx.raw.trial} (${ctx.raw.state}): ${fmtNum(ctx.raw.y)}` +
                (t && isNum(t.duration) ? `, ${fmtDuration(t.duration)}` : '');
            },
          },
        },
      },
    },
  });
  return d.valued.length;
}

function renderParallel(d) {
  const empty = d.valued.length === 0;
  setHidden('hp-parallel-empty', !empty);
  setHidden('hp-parallel-body', empty);
  if (empty) return 0;

  const axes = d.params.map((p) => ({
    name: p.name,
    scale: paramScale(p, d.valued.map((t) => own(t.params, p.name))),
    get: (t) => own(t.params, p.name),
  }));
  const values = d.valued.map((t) => t.value);
  const objective = paramScale({ name: d.metric, type: 'float', low: minOf(values), high: maxOf(values) }, values);
  axes.push({ name: d.metric, scale: objective, get: (t) => t.value, isObjective: true });

  const lines = d.valued.map((t) => {
    const n = objective.norm(t.value);
    const goodness = d.minimize ? 1 - n : n;
    return { t, goodness: isNum(goodness) ? goodness : 0.5 };
  });
  // Datasets draw last-to-first, so the best trials go first and end up on top.
  lines.sort((a, b) => b.goodness - a.goodness);

  // Point markers on hundreds of lines cost more than they show.
  const many = lines.length > 150;
  const datasets = lines.map(({ t, goodness: g }) => {
    const colour = `hsla(222, ${Math.round(25 + 65 * g)}%, ${Math.round(80 - 50 * g)}%, ${(0.45 + 0.55 * g).toFixed(2)})`;
    return {
      hpKey: `t${t.number}`,
      label: `trial ${fmtValue(t.number)}`,
      hpTrial: t,
      // Pre-parsed ({x: category index, y}): parsing thousands of small datasets dominates a re-render.
      data: axes.map((a, i) => ({ x: i, y: a.scale.norm(a.get(t)) })),
      borderColor: colour,
      backgroundColor: colour,
      borderWidth: 1.5,
      borderDash: t.state === 'pruned' ? [5, 4] : [],
      pointRadius: many ? 0 : 2,
      pointHoverRadius: 4,
      pointHitRadius: 3,
      tension: 0,
      fill: false,
      spanGaps: false,
    };
  });

  upsertChart('parallel', $('hp-parallel-chart'), {
    type: 'line',
    data: { labels: axes.map((a) => (a.isObjective ? `${a.name} (objective)` : a.name)), datasets },
    options: {
      parsing: false,
      normalized: true,
      interaction: { mode: 'nearest', intersect: false },
      scales: {
        // offset insets the outer axes; grid.offset false keeps one vertical line on each axis.
        x: { offset: true, grid: { offset: false, color: 'rgba(0, 0, 0, 0.35)', lineWidth: 1 },
          ticks: { font: { weight: '600' } } },
        y: { suggestedMin: 0, suggestedMax: 1, ticks: { stepSize: 0.25, callback: (v) => fmtNum(v) },
          title: axisTitle('normalised') },
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: (items) => {
              const t = items.length ? items[0].dataset.hpTrial : null;
              return t ? `trial ${fmtValue(t.number)} (${t.state})` : '';
            },
            label: (ctx) => {
              const t = ctx.dataset.hpTrial;
              return axes.map((a) => `${a.name}: ${fmtValue(a.get(t))}`);
            },
          },
        },
      },
    },
  });

  const tbody = $('hp-parallel-axes').tBodies[0];
  tbody.replaceChildren(...axes.map((a) => el('tr', null,
    el('td', { text: a.isObjective ? `${a.name} (objective)` : a.name }),
    el('td', { text: a.scale.kind }),
    el('td', { className: 'hp-num', text: a.scale.low }),
    el('td', { className: 'hp-num', text: a.scale.high }),
    el('td', { text: a.scale.categories }))));
  return datasets.length;
}

function renderImportance(d) {
  const imp = d.importance;
  const values = imp ? arr(imp.values).filter((v) => v && typeof v === 'object' && isNum(v.importance)) : [];
  const empty = values.length === 0;
  setHidden('hp-importance-empty', !empty);
  setHidden('hp-importance-body', empty);
  if (empty) {
    const completed = d.trials.filter((t) => t.state === 'completed' && isNum(t.value)).length;
    // The data says why when it can (too few trials, every value the same); else a guess.
    $('hp-importance-empty').textContent = d.importanceNote
      ? `Importance is not computed: ${d.importanceNote}.`
      : d.params.length === 0
        ? 'Importance is not computed: the study has no parameters.'
        : `Importance is not computed yet: it needs more than a few completed trials (this study has ${completed}).`;
    return 0;
  }
  $('hp-importance-box').style.height = `${Math.max(120, 50 + values.length * 30)}px`;
  upsertChart('importance', $('hp-importance-chart'), {
    type: 'bar',
    data: {
      labels: values.map((v) => str(v.param)),
      datasets: [{
        hpKey: 'importance', label: 'importance', data: values.map((v) => v.importance),
        backgroundColor: withAlpha(STATE_COLOURS.completed, 0.7), borderColor: STATE_COLOURS.completed,
        borderWidth: 1, maxBarThickness: 26,
      }],
    },
    options: {
      indexAxis: 'y',
      scales: { x: { beginAtZero: true, title: axisTitle('relative importance'), ticks: numberTicks } },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { label: (ctx) => `importance ${fmtNum(ctx.raw)}` } },
      },
    },
  });
  $('hp-importance-method').textContent = str(imp.method) ? `Method: ${str(imp.method)}` : '';
  return values.length;
}

function renderSlices(d) {
  const grid = $('hp-slices-grid');
  const empty = d.valued.length === 0 || d.params.length === 0;
  const emptyNote = $('hp-slices-empty');
  emptyNote.hidden = !empty;
  emptyNote.textContent = d.params.length === 0 ? 'The study has no parameters.' : 'No trial has a value yet.';
  grid.hidden = empty;

  // One card per parameter; rebuilt only when the search space itself changes.
  const signature = JSON.stringify(d.params.map((p) => [p.name, p.type, Boolean(p.log), arr(p.choices)]));
  if (grid.dataset.signature !== signature) {
    for (const key of Object.keys(charts)) if (key.startsWith('slice:')) dropChart(key);
    grid.replaceChildren(...d.params.map((p, i) => {
      const kind = p.type === 'categorical' ? 'categorical' : `${str(p.type) || 'float'}${p.log ? ', log' : ''}`;
      return el('div', { className: 'hp-slice' },
        el('h3', null, p.name, el('span', { className: 'hp-sub', text: ` (${kind})` })),
        el('div', { className: 'hp-chart' }, el('canvas', { id: `hp-slice-${i}`, role: 'img', 'aria-label': `Slice: ${p.name}` })));
    }));
    grid.dataset.signature = signature;
  }
  if (empty) return 0;

  const counts = d.params.map((p, i) => {
    const categorical = p.type === 'categorical';
    const log = Boolean(p.log) && !categorical;
    const pts = [];
    for (const t of d.valued) {
      const v = own(t.params, p.name);
      if (v === undefined || v === null) continue;
      if (categorical) pts.push({ x: fmtValue(v), y: t.value, trial: t.number, state: t.state });
      else if (isNum(v) && (!log || v > 0)) pts.push({ x: v, y: t.value, trial: t.number, state: t.state });
    }
    let x;
    if (categorical) {
      x = { type: 'category', labels: arr(p.choices).map(fmtValue), offset: true };
      for (const pt of pts) if (!x.labels.includes(pt.x)) x.labels.push(pt.x);  // values outside the choices
    } else {
      const xs = pts.map((pt) => pt.x);
      const bounds = [p.low, p.high].filter((b) => isNum(b) && (!log || b > 0));
      const all = xs.concat(bounds);
      x = log
        ? { type: 'logarithmic', ticks: logTicks() }
        : { type: 'linear', ticks: p.type === 'int' ? { precision: 0, callback: (v) => fmtNum(v) } : numberTicks };
      if (all.length) {
        x.min = minOf(all);
        x.max = maxOf(all);
        if (x.min === x.max) {  // a one-point range would collapse the axis
          x.min = log ? x.min / 2 : x.min - 1;
          x.max = log ? x.max * 2 : x.max + 1;
        }
      }
    }
    x.title = axisTitle(p.name);
    upsertChart(`slice:${i}`, $(`hp-slice-${i}`), {
      type: 'scatter',
      data: {
        labels: categorical ? x.labels : [],
        datasets: [{
          hpKey: 'points', label: p.name, data: pts,
          backgroundColor: pts.map((pt) => withAlpha(stateColour(pt.state), 0.7)),
          borderColor: pts.map((pt) => stateColour(pt.state)),
          pointStyle: pts.map((pt) => (pt.state === 'pruned' ? 'crossRot' : 'circle')),
          borderWidth: pts.map((pt) => (pt.state === 'pruned' ? 2 : 1)),
          pointRadius: 4, pointHoverRadius: 6,
        }],
      },
      options: {
        scales: { x, y: { title: axisTitle(d.metric), ticks: numberTicks } },
        plugins: {
          legend: { display: false },
          tooltip: pointTooltip((r) => `trial ${fmtValue(r.trial)} (${r.state}): ${p.name} = ` +
            `${categorical ? r.x : fmtNum(r.x)}, ${d.metric} = ${fmtNum(r.y)}`),
        },
      },
    });
    return pts.length;
  });
  return counts.length ? counts[0] : 0;
}

const MARKS = {
  pruned: { label: 'pruned', pointStyle: 'crossRot', colour: '#dc2626', radius: 7, width: 2.5 },
  paused: { label: 'paused', pointStyle: 'rect', colour: '#f97316', radius: 5, width: 1 },
  promoted: { label: 'promoted', pointStyle: 'triangle', colour: '#16a34a', radius: 6, width: 1 },
};

function renderCurves(d) {
  const empty = d.curves.length === 0;
  setHidden('hp-curves-empty', !empty);
  setHidden('hp-curves-body', empty);
  if (empty) return 0;

  const stateOf = new Map(d.trials.map((t) => [t.number, t.state]));
  const marks = { pruned: [], paused: [], promoted: [] };
  const seenStates = new Set();
  const datasets = d.curves.map((c, i) => {
    const pts = arr(c.points)
      .filter((p) => Array.isArray(p) && isNum(p[0]) && isNum(p[1]))
      .map((p) => ({ x: p[0], y: p[1], trial: c.trial }))
      .sort((a, b) => a.x - b.x);
    const state = stateOf.get(c.trial) || 'unknown';
    seenStates.add(state);
    for (const m of arr(c.marks)) {
      if (!m || !hasOwn(MARKS, m.kind) || !isNum(m.resource) || !pts.length) continue;
      // A mark sits on its curve: at its resource, or at the last point reported before it.
      let at = pts[0];
      for (const p of pts) if (p.x <= m.resource) at = p;
      marks[m.kind].push({ x: m.resource, y: at.y, trial: c.trial, kind: m.kind });
    }
    const colour = stateColour(state);
    return {
      hpKey: `c${i}:${str(c.trial)}`, label: `trial ${fmtValue(c.trial)}`, data: pts, showLine: true,
      borderColor: withAlpha(colour, 0.55), backgroundColor: withAlpha(colour, 0.55), borderWidth: 1.5,
      pointRadius: pts.length === 1 ? 3 : 0, pointHoverRadius: 4, pointHitRadius: 4, hpState: state,
      normalized: true,  // sorted by resource above
    };
  });
  // Marks first so that they draw on top of the lines (datasets draw last-to-first).
  const markSets = Object.entries(MARKS).map(([kind, m]) => ({
    hpKey: `mark:${kind}`, hpMark: true, label: m.label, data: marks[kind], showLine: false,
    pointStyle: m.pointStyle, pointRadius: m.radius, pointHoverRadius: m.radius + 2, borderWidth: m.width,
    borderColor: m.colour, backgroundColor: kind === 'pruned' ? m.colour : withAlpha(m.colour, 0.85),
  }));

  upsertChart('curves', $('hp-curves-chart'), {
    type: 'scatter',
    data: { datasets: markSets.concat(datasets) },
    options: {
      parsing: false,  // the points are built as {x, y} already; parsing thousands of them is the cost
      interaction: { mode: 'nearest', intersect: false },
      scales: {
        x: { type: 'linear', title: axisTitle(str(d.study.resource) || 'resource'), ticks: numberTicks },
        y: { title: axisTitle(d.metric), ticks: numberTicks },
      },
      plugins: {
        legend: { labels: { filter: (item, data) => Boolean(data.datasets[item.datasetIndex].hpMark) } },
        tooltip: {
          callbacks: {
            title: () => '',
            label(ctx) {
              const r = ctx.raw || {};
              const res = str(d.study.resource) || 'resource';
              if (r.kind) return `trial ${fmtValue(r.trial)} ${r.kind} at ${res} ${fmtNum(r.x)}`;
              return `trial ${fmtValue(r.trial)} (${ctx.dataset.hpState}): ${res} ${fmtNum(r.x)} → ${fmtNum(r.y)}`;
            },
          },
        },
      },
    },
  });
  const states = [...seenStates].sort((a, b) => STATE_ORDER.indexOf(a) - STATE_ORDER.indexOf(b));
  $('hp-curves-key').replaceChildren(...states.map((s) => stateChip(s, undefined, stateColour(s))));
  return datasets.length;
}

function renderTimeline(d) {
  const bars = d.bars.filter((b) => isNum(b.start));
  const empty = bars.length === 0;
  setHidden('hp-timeline-empty', !empty);
  setHidden('hp-timeline-body', empty);
  if (empty) return 0;

  // Lanes by id (unique), in the data's order; bars on a lane the list lacks still get a row.
  const lanes = [];
  const laneLabel = new Map();
  for (const l of d.lanes) {
    const id = str(l.id);
    if (laneLabel.has(id)) continue;
    lanes.push(id);
    laneLabel.set(id, str(l.label) || id);
  }
  for (const b of bars) {
    const id = str(b.lane);
    if (!laneLabel.has(id)) { lanes.push(id); laneLabel.set(id, id); }
  }

  const t0 = minOf(bars.map((b) => b.start));
  const endOf = (b) => (isNum(b.end) ? b.end : (d.generated !== null ? d.generated : b.start));
  const span = Math.max(1, maxOf(bars.map((b) => endOf(b) - t0)));
  const byState = new Map();
  for (const b of bars) {
    const state = str(b.state) || 'unknown';
    if (!byState.has(state)) byState.set(state, []);
    const start = b.start - t0;
    const end = Math.max(start, endOf(b) - t0);
    byState.get(state).push({ x: [start, end], y: str(b.lane), trial: b.trial, state, duration: end - start });
  }
  const states = [...byState.keys()].sort((a, b) => {
    const ia = STATE_ORDER.indexOf(a);
    const ib = STATE_ORDER.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  });
  // grouped: false lets bars of different states share a row instead of splitting it per dataset.
  const datasets = states.map((s) => ({
    hpKey: `state:${s}`, label: s, data: byState.get(s), grouped: false,
    backgroundColor: withAlpha(stateColour(s), 0.8), borderColor: stateColour(s), borderWidth: 1,
    borderSkipped: false, minBarLength: 2, barPercentage: 0.85, categoryPercentage: 0.9,
  }));

  const rowHeight = Math.max(14, Math.min(28, 700 / lanes.length));
  $('hp-timeline-box').style.height = `${Math.round(80 + lanes.length * rowHeight)}px`;
  upsertChart('timeline', $('hp-timeline-chart'), {
    type: 'bar',
    data: { labels: lanes, datasets },
    options: {
      indexAxis: 'y',
      scales: {
        x: {
          type: 'linear', min: 0, max: span,
          title: axisTitle(`time since the first trial started (${fmtTime(t0)})`),
          ticks: { callback: (v) => fmtClock(v) },
          // Chart.js stretches stepSize to divide the range evenly (5:15, 10:29...); put ticks on round values.
          afterBuildTicks: (scale) => {
            const step = niceTimeStep(span);
            const ticks = [];
            for (let v = 0; v <= span + 1e-9 && ticks.length < 200; v += step) ticks.push({ value: v });
            scale.ticks = ticks;
          },
        },
        y: { ticks: { autoSkip: false, callback: (v, i) => laneLabel.get(lanes[i]) || '' } },
      },
      plugins: {
        legend: { labels: { usePointStyle: false } },
        tooltip: {
          callbacks: {
            title: (items) => (items.length ? laneLabel.get(items[0].raw.y) || '' : ''),
            label: (ctx) => `trial ${fmtValue(ctx.raw.trial)} · ${ctx.raw.state} · ${fmtDuration(ctx.raw.duration)}` +
              ` (${fmtClock(ctx.raw.x[0])} → ${fmtClock(ctx.raw.x[1])})`,
          },
        },
      },
    },
  });
  return bars.length;
}

function renderCost(d) {
  const pts = d.valued.filter((t) => isNum(t.cost))
    .map((t) => ({ x: t.cost, y: t.value, trial: t.number, state: t.state }));
  const empty = pts.length === 0;
  setHidden('hp-cost-empty', !empty);
  setHidden('hp-cost-box', empty);
  if (empty) return 0;
  const units = [...new Set(d.valued.filter((t) => isNum(t.cost)).map((t) => str(t.cost_unit)).filter(Boolean))];
  upsertChart('cost', $('hp-cost-chart'), {
    type: 'scatter',
    data: {
      datasets: [{
        hpKey: 'cost', label: 'trials', data: pts,
        backgroundColor: pts.map((p) => withAlpha(stateColour(p.state), 0.7)),
        borderColor: pts.map((p) => stateColour(p.state)),
        pointStyle: pts.map((p) => (p.state === 'pruned' ? 'crossRot' : 'circle')),
        borderWidth: pts.map((p) => (p.state === 'pruned' ? 2 : 1)),
        pointRadius: 4, pointHoverRadius: 6,
      }],
    },
    options: {
      scales: {
        x: { beginAtZero: true, title: axisTitle(`cost${units.length ? ` (${units.join(' + ')})` : ''}`), ticks: numberTicks },
        y: { title: axisTitle(d.metric), ticks: numberTicks },
      },
      plugins: {
        legend: { display: false },
        tooltip: pointTooltip((r) => `trial ${fmtValue(r.trial)} (${r.state}): cost ${fmtNum(r.x)}, ` +
          `${d.metric} ${fmtNum(r.y)}`),
      },
    },
  });
  return pts.length;
}

// --- Trials table ---

// The sort order survives live re-renders.
const trialSort = { key: 'number', descending: false };
let lastPrepared = null;

function trialColumns(d) {
  const compareNull = (v) => (v === null || v === undefined ? null : v);
  const units = [...new Set(d.trials.filter((t) => isNum(t.cost)).map((t) => str(t.cost_unit)).filter(Boolean))];
  const cols = [
    { key: 'number', label: '#', num: true, sort: (t) => t.number,
      cell: (t) => {
        const td = el('td', { className: 'hp-num', text: fmtValue(t.number) });
        if (t.retry_of !== null && t.retry_of !== undefined) {
          td.append(el('span', { className: 'hp-muted', text: ` ↻${fmtValue(t.retry_of)}` }));
          td.title = `attempt ${fmtValue(t.attempt)}, retry of trial ${fmtValue(t.retry_of)}`;
        }
        return td;
      } },
    { key: 'state', label: 'State', sort: (t) => t.state,
      cell: (t) => el('td', null, el('span', { className: 'hp-state' }, stateDot(t.state), t.state)) },
    { key: 'value', label: d.metric, num: true, sort: (t) => (isNum(t.value) ? t.value : null),
      cell: (t) => el('td', { className: 'hp-num', text: isNum(t.value) ? fmtNum(t.value) : '—',
        title: isNum(t.value) ? String(t.value) : null }) },
  ];
  d.params.forEach((p, i) => cols.push({
    key: `param:${i}`, label: p.name, num: p.type !== 'categorical',
    sort: (t) => compareNull(own(t.params, p.name)),
    cell: (t) => {
      const v = own(t.params, p.name);
      return el('td', { className: p.type !== 'categorical' ? 'hp-num' : null, text: fmtValue(v),
        title: typeof v === 'number' ? String(v) : null });
    },
  }));
  cols.push(
    { key: 'duration', label: 'Duration', num: true, sort: (t) => (isNum(t.duration) ? t.duration : null),
      cell: (t) => el('td', { className: 'hp-num', text: fmtDuration(t.duration),
        title: isNum(t.started) ? `${fmtTime(t.started)} → ${fmtTime(t.ended)}` : null }) },
    { key: 'host', label: 'Host', sort: (t) => str(t.host) || null,
      cell: (t) => el('td', { className: 'hp-nowrap', text: str(t.host) || '—' }) },
    { key: 'devices', label: 'GPUs/CPUs', num: true,
      sort: (t) => (isNum(t.gpus) ? t.gpus * 1e6 : 0) + (isNum(t.cpus) ? t.cpus : 0),
      cell: (t) => el('td', { className: 'hp-num', text: `${fmtValue(t.gpus)} / ${fmtValue(t.cpus)}` }) },
    { key: 'cost', label: units.length === 1 ? `Cost (${units[0]})` : 'Cost', num: true,
      sort: (t) => (isNum(t.cost) ? t.cost : null),
      // The unit goes in the header, unless the trials mix GPU-s and CPU-s.
      cell: (t) => el('td', { className: 'hp-num',
        text: isNum(t.cost) ? `${fmtNum(t.cost)}${units.length > 1 ? ` ${str(t.cost_unit)}` : ''}` : '—' }) },
    { key: 'error', label: 'Error', sort: (t) => str(t.error) || null,
      cell: (t) => {
        const e = str(t.error);
        // Only the last line fits; the whole tail of stderr is in the tooltip.
        const lines = e.trim().split('\n');
        const last = lines[lines.length - 1];
        const shown = last.length > 80 ? `${last.slice(0, 79)}…` : last;
        // A block inside the cell, because table layout ignores a cell's own max-width.
        return el('td', { title: e || null }, el('div', { className: 'hp-error', text: shown }));
      } },
    { key: 'log', label: 'Log', sort: (t) => str(t.log) || null,
      cell: (t) => {
        // The end of a log path (trial directory, rank) is what tells rows apart: keep that end.
        const log = str(t.log);
        return el('td', { className: 'hp-mono', title: log || null },
          el('div', { className: 'hp-log', text: log.length > 48 ? `…${log.slice(-47)}` : log }));
      } },
  );
  return cols;
}

function compareValues(a, b) {
  // Nulls last in either direction is handled by the caller; here numbers before strings.
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number') return -1;
  if (typeof b === 'number') return 1;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

function renderTrials(d) {
  const table = $('hp-trials-table');
  setHidden('hp-trials-empty', d.trials.length !== 0);
  table.parentElement.hidden = d.trials.length === 0;  // the scrolling box, border included
  const cols = trialColumns(d);
  if (!cols.some((c) => c.key === trialSort.key)) { trialSort.key = 'number'; trialSort.descending = false; }

  const head = el('tr');
  for (const c of cols) {
    const th = el('th', { className: `hp-sortable${c.num ? ' hp-num' : ''}`, text: c.label, scope: 'col',
      title: 'sort by this column' });
    if (c.key === trialSort.key) th.setAttribute('aria-sort', trialSort.descending ? 'descending' : 'ascending');
    th.addEventListener('click', () => {
      if (trialSort.key === c.key) trialSort.descending = !trialSort.descending;
      else { trialSort.key = c.key; trialSort.descending = false; }
      if (lastPrepared) renderTrials(lastPrepared);
    });
    head.append(th);
  }
  table.tHead.replaceChildren(head);

  const col = cols.find((c) => c.key === trialSort.key);
  const rows = d.trials.map((t, i) => ({ t, i, k: col.sort(t) }));
  const sign = trialSort.descending ? -1 : 1;
  rows.sort((a, b) => {
    const an = a.k === null || a.k === undefined;
    const bn = b.k === null || b.k === undefined;
    if (an || bn) return an === bn ? a.i - b.i : (an ? 1 : -1);  // unknowns always last
    return sign * compareValues(a.k, b.k) || a.i - b.i;
  });
  const frag = document.createDocumentFragment();
  for (const { t } of rows) {
    const tr = el('tr', { className: t === d.best ? 'hp-best' : null });
    for (const c of cols) tr.append(c.cell(t));
    frag.append(tr);
  }
  table.tBodies[0].replaceChildren(frag);
  return rows.length;
}

const MAX_EVENTS = 200;

function renderEvents(d) {
  const events = d.events.map((e, i) => ({ e, i }));
  // Newest first; events without a time go last, and ties keep the data's order reversed (newest written last).
  events.sort((a, b) => {
    const ta = isNum(a.e.time) ? a.e.time : -Infinity;
    const tb = isNum(b.e.time) ? b.e.time : -Infinity;
    return tb - ta || b.i - a.i;
  });
  const shown = events.slice(0, MAX_EVENTS);
  const note = $('hp-events-note');
  note.hidden = events.length <= MAX_EVENTS && events.length > 0;
  note.textContent = events.length === 0 ? 'No events yet.' : `Showing the newest ${MAX_EVENTS} of ${events.length} events.`;
  const frag = document.createDocumentFragment();
  for (const { e } of shown) {
    frag.append(el('tr', null,
      el('td', { text: fmtTime(e.time) }),
      el('td', { className: 'hp-num', text: e.trial === null || e.trial === undefined ? '' : fmtValue(e.trial) }),
      el('td', { text: str(e.kind) }),
      el('td', { text: str(e.message) })));
  }
  $('hp-events-table').tBodies[0].replaceChildren(frag);
  $('hp-events-table').parentElement.hidden = shown.length === 0;
  return shown.length;
}

// ---------------------------------------------------------------------------------------------------------------
// Test hooks: a chart that has data but drew nothing (a zero-sized box, a failed update) has uniform pixels.

// Reads the canvas in strips and stops at the first pixel that differs: a drawn chart differs within its first strips
// (legend, axis labels), so a tall canvas is not copied whole. (The first read also makes the browser rasterise what
// Chart.js drew, which it would do at the next paint anyway: that, not the copy, is most of this check's time.)
function canvasIsUniform(canvas) {
  const { width, height } = canvas;
  if (!width || !height) return true;
  const ctx = canvas.getContext('2d');
  const STRIP = 32;
  let first;
  for (let y = 0; y < height; y += STRIP) {
    const h = Math.min(STRIP, height - y);
    const pixels = new Uint32Array(ctx.getImageData(0, y, width, h).data.buffer);
    if (first === undefined) first = pixels[0];
    for (let i = 0; i < pixels.length; i += 1) if (pixels[i] !== first) return false;
  }
  return true;
}

function countBlankCharts() {
  let blank = 0;
  for (const chart of Object.values(charts)) {
    const canvas = chart.canvas;
    if (!canvas || !canvas.isConnected || canvas.getClientRects().length === 0) continue;  // hidden
    if (!chart.data.datasets.some((ds) => arr(ds.data).length > 0)) continue;
    if (canvasIsUniform(canvas)) blank += 1;
  }
  return blank;
}

// ---------------------------------------------------------------------------------------------------------------

const SECTIONS = [
  ['summary', renderSummary],
  ['history', renderHistory],
  ['parallel', renderParallel],
  ['importance', renderImportance],
  ['slices', renderSlices],
  ['curves', renderCurves],
  ['timeline', renderTimeline],
  ['cost', renderCost],
  ['trials', renderTrials],
  ['events', renderEvents],
];
const POINT_KEYS = ['history', 'parallel', 'slices', 'curves', 'timeline', 'cost', 'importance', 'trials', 'events'];

function render(data) {
  const d = prepare(data);
  lastPrepared = d;
  const points = {};
  for (const [name, fn] of SECTIONS) {
    // One broken section must not take the others down; the error is still counted.
    try {
      const n = fn(d);
      if (POINT_KEYS.includes(name)) points[name] = n;
    } catch (e) {
      console.error(`hyperpack: rendering ${name} failed:`, e);
      if (POINT_KEYS.includes(name)) points[name] = 0;
    }
  }
  const body = document.body;
  let blank = 0;
  try { blank = countBlankCharts(); } catch (e) { console.error('hyperpack: blank check failed:', e); }
  body.dataset.points = JSON.stringify(Object.fromEntries(POINT_KEYS.map((k) => [k, points[k] || 0])));
  body.dataset.blank = String(blank);
  body.dataset.errors = String(errorCount);
  body.dataset.ready = '1';
}

// ---------------------------------------------------------------------------------------------------------------
// Live mode: the dashboard serves fresh data at body[data-source]; poll it, one request at a time.

const POLL_MS = 2000;

function startPolling(url) {
  const conn = $('hp-conn');
  let lastText = null;
  let delay = POLL_MS;
  const poll = async () => {
    let text;
    let data;
    try {
      const response = await fetch(url, { cache: 'no-store', credentials: 'same-origin' });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      text = await response.text();
      data = JSON.parse(text);
      if (conn) conn.hidden = true;
    } catch (_) {
      // Expected while the dashboard restarts or the network drops: not an error of the page.
      if (conn) conn.hidden = false;
    }
    if (data !== undefined && text !== lastText) {
      lastText = text;
      const started = performance.now();
      try { render(data); } catch (e) { console.error('hyperpack: render failed:', e); }
      // A study of thousands of trials can take a second to draw: never spend more than half the time drawing.
      delay = Math.max(POLL_MS, 2 * (performance.now() - started));
    }
    setTimeout(poll, delay);
  };
  setTimeout(poll, POLL_MS);
}

function initialData() {
  const node = $('hp-data');
  const text = node ? node.textContent.trim() : '';
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    console.error('hyperpack: the embedded study data is not valid JSON:', e);
    return {};
  }
}

window.hyperpack = { render, charts };

render(initialData());
const source = document.body.dataset.source;
if (source) startPolling(source);

})();
