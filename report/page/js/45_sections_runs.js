const MARKS = {
  pruned: { label: 'pruned', pointStyle: 'crossRot', colour: '#dc2626', radius: 7, width: 2.5 },
  paused: { label: 'paused', pointStyle: 'rect', colour: '#f97316', radius: 5, width: 1 },
  promoted: { label: 'promoted', pointStyle: 'triangle', colour: '#16a34a', radius: 6, width: 1 },
};

// The curves' datasets (one per curve, in its trial's state's colour), the marks' (one per kind), and the states seen.
function curveDatasets(d) {
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
    // A finalist (budget.finalists) trains a configuration again, out of the pruner's reach: dashed.
    const finalist = isNum(c.finalist_of);
    const note = finalist ? `; finalist: trial ${fmtValue(c.finalist_of)}'s configuration again` : '';
    return {
      hpKey: `c${i}:${str(c.trial)}`, label: `trial ${fmtValue(c.trial)}`, data: pts, showLine: true,
      borderDash: finalist ? [5, 3] : [], hpNote: note,
      borderColor: withAlpha(colour, 0.55), backgroundColor: withAlpha(colour, 0.55), borderWidth: 1.5,
      pointRadius: pts.length === 1 ? 3 : 0, pointHoverRadius: 4, pointHitRadius: 4, hpState: state,
      normalized: true,  // sorted by resource above
    };
  });
  const markSets = Object.entries(MARKS).map(([kind, m]) => ({
    hpKey: `mark:${kind}`, hpMark: true, label: m.label, data: marks[kind], showLine: false,
    pointStyle: m.pointStyle, pointRadius: m.radius, pointHoverRadius: m.radius + 2, borderWidth: m.width,
    borderColor: m.colour, backgroundColor: kind === 'pruned' ? m.colour : withAlpha(m.colour, 0.85),
  }));
  return { datasets, markSets, seenStates };
}

function renderCurves(d) {
  const empty = d.curves.length === 0;
  setHidden('hp-curves-empty', !empty);
  setHidden('hp-curves-body', empty);
  if (empty) return 0;

  const { datasets, markSets, seenStates } = curveDatasets(d);

  upsertChart('curves', $('hp-curves-chart'), {
    type: 'scatter',
    // Marks first so that they draw on top of the lines (datasets draw last-to-first).
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
              const what = `${ctx.dataset.hpState}${ctx.dataset.hpNote || ''}`;
              return `trial ${fmtValue(r.trial)} (${what}): ${res} ${fmtNum(r.x)} → ${fmtNum(r.y)}`;
            },
          },
        },
      },
    },
  });
  const states = [...seenStates].sort((a, b) => STATE_ORDER.indexOf(a) - STATE_ORDER.indexOf(b));
  $('hp-curves-key').replaceChildren(...states.map((s) => stateChip(s, undefined, stateColour(s))));
  setHidden('hp-curves-finalists', !d.curves.some((c) => isNum(c.finalist_of)));
  return datasets.length;
}

// The timeline's rows: lanes by id (unique), in the data's order; bars on a lane the list lacks still get a row.
function timelineLanes(d, bars) {
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
  return { lanes, laneLabel };
}

// One dataset per state (in STATE_ORDER) of its bars, each [start, end] in seconds since t0.
function timelineDatasets(bars, t0, endOf) {
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
  return states.map((s) => ({
    hpKey: `state:${s}`, label: s, data: byState.get(s), grouped: false,
    backgroundColor: withAlpha(stateColour(s), 0.8), borderColor: stateColour(s), borderWidth: 1,
    borderSkipped: false, minBarLength: 2, barPercentage: 0.85, categoryPercentage: 0.9,
  }));
}

function renderTimeline(d) {
  const bars = d.bars.filter((b) => isNum(b.start));
  const empty = bars.length === 0;
  setHidden('hp-timeline-empty', !empty);
  setHidden('hp-timeline-body', empty);
  if (empty) return 0;

  const { lanes, laneLabel } = timelineLanes(d, bars);

  const t0 = minOf(bars.map((b) => b.start));
  const endOf = (b) => (isNum(b.end) ? b.end : (d.generated !== null ? d.generated : b.start));
  const span = Math.max(1, maxOf(bars.map((b) => endOf(b) - t0)));
  const datasets = timelineDatasets(bars, t0, endOf);

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

// The Error column's cell: the error's last line, cut to fit.
function trialErrorCell(t) {
  const e = str(t.error);
  // Only the last line fits; the whole tail of stderr is in the tooltip.
  const lines = e.trim().split('\n');
  const last = lines[lines.length - 1];
  const shown = last.length > 80 ? `${last.slice(0, 79)}…` : last;
  // A block inside the cell, because table layout ignores a cell's own max-width.
  return el('td', { title: e || null }, el('div', { className: 'hp-error', text: shown }));
}

// The Log column's cell: the log's path, its start cut off when long.
function trialLogCell(t) {
  // The end of a log path (trial directory, rank) is what tells rows apart: keep that end.
  const log = str(t.log);
  return el('td', { className: 'hp-mono', title: log || null },
    el('div', { className: 'hp-log', text: log.length > 48 ? `…${log.slice(-47)}` : log }));
}

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
        if (isNum(t.finalist_of)) {
          td.append(el('span', { className: 'hp-muted', text: ` ≡${fmtValue(t.finalist_of)}` }));
          td.title = `finalist: trial ${fmtValue(t.finalist_of)}'s configuration again (budget.finalists)`;
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
    { key: 'error', label: 'Error', sort: (t) => str(t.error) || null, cell: trialErrorCell },
    { key: 'log', label: 'Log', sort: (t) => str(t.log) || null, cell: trialLogCell },
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

