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
  // Several objectives have no best: their goals, and how many trials the Pareto set holds.
  const front = frontOf(d);
  const goals = front
    ? [item('Objectives', ...front.objectives.flatMap((o, i) => [i ? ', ' : '', str(o.metric), ' ',
      sub(o.direction === 'maximize' ? '(maximize)' : '(minimize)')])),
    item('Pareto set', String(front.members.size), sub(' trials'))]
    : [item('Metric', d.metric, ' ', sub(d.minimize ? '(minimize)' : '(maximize)')),
      item('Best', d.best ? fmtNum(d.bestValue) : '—', d.best ? sub(bestNote(d)) : null)];
  const items = [
    item('Study', str(s.name) || '—'),
    ...goals,
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

// Which trial the best is, and with finalists of how many runs of its configuration it is the mean
// (with rerun_top, that a model of every run picked it).
function bestNote(d) {
  const trial = ` trial ${fmtValue(d.best.number)}`;
  if (d.bestByModel) return `${trial}, the model's pick of every run`;
  return d.bestRuns > 1 ? `${trial}, the mean of its configuration's ${fmtValue(d.bestRuns)} runs` : trial;
}

// The history chart's datasets: the best value so far (one objective only), then the trials by state.
function historyDatasets(d) {
  const point = (t) => ({ x: t.number, y: t.value, trial: t.number, state: t.state });
  const completed = d.valued.filter((t) => t.state === 'completed');
  const pruned = d.valued.filter((t) => t.state === 'pruned');
  const other = d.valued.filter((t) => t.state !== 'completed' && t.state !== 'pruned');
  let bestSoFar = null;
  // With several objectives the first one's best so far is no study's best: no line.
  const bestLine = frontOf(d) ? [] : completed.filter((t) => isNum(t.number)).map((t) => {
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
  return datasets;
}

function renderHistory(d) {
  const empty = d.valued.length === 0;
  setHidden('hp-history-empty', !empty);
  setHidden('hp-history-box', empty);
  if (empty) return 0;  // the chart, if any, stays (hidden) and is updated when data comes back

  const datasets = historyDatasets(d);
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

// One axis per parameter, then the objective's; objective is that last axis's scale.
function parallelAxes(d) {
  const axes = d.params.map((p) => ({
    name: p.name,
    scale: paramScale(p, d.valued.map((t) => own(t.params, p.name))),
    get: (t) => own(t.params, p.name),
  }));
  const values = d.valued.map((t) => t.value);
  const objective = paramScale({ name: d.metric, type: 'float', low: minOf(values), high: maxOf(values) }, values);
  axes.push({ name: d.metric, scale: objective, get: (t) => t.value, isObjective: true });
  return { axes, objective };
}

// One line per trial with a value, darker and more saturated the better its value; pruned trials dashed.
function parallelDatasets(d, axes, objective) {
  const lines = d.valued.map((t) => {
    const n = objective.norm(t.value);
    const goodness = d.minimize ? 1 - n : n;
    return { t, goodness: isNum(goodness) ? goodness : 0.5 };
  });
  // Datasets draw last-to-first, so the best trials go first and end up on top.
  lines.sort((a, b) => b.goodness - a.goodness);

  // Point markers on hundreds of lines cost more than they show.
  const many = lines.length > 150;
  return lines.map(({ t, goodness: g }) => {
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
}

// The table under the parallel chart: each axis's kind and range.
function parallelAxesTable(axes) {
  const tbody = $('hp-parallel-axes').tBodies[0];
  tbody.replaceChildren(...axes.map((a) => el('tr', null,
    el('td', { text: a.isObjective ? `${a.name} (objective)` : a.name }),
    el('td', { text: a.scale.kind }),
    el('td', { className: 'hp-num', text: a.scale.low }),
    el('td', { className: 'hp-num', text: a.scale.high }),
    el('td', { text: a.scale.categories }))));
}

function renderParallel(d) {
  const empty = d.valued.length === 0;
  setHidden('hp-parallel-empty', !empty);
  setHidden('hp-parallel-body', empty);
  if (empty) return 0;

  const { axes, objective } = parallelAxes(d);
  const datasets = parallelDatasets(d, axes, objective);

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

  parallelAxesTable(axes);
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

// One card per parameter; rebuilt only when the search space itself changes.
function sliceCards(d, grid) {
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
}

// A parameter's slice points: the trials with a value whose parameter value the axis can show.
function slicePoints(d, p, categorical, log) {
  const pts = [];
  for (const t of d.valued) {
    const v = own(t.params, p.name);
    if (v === undefined || v === null) continue;
    if (categorical) pts.push({ x: fmtValue(v), y: t.value, trial: t.number, state: t.state });
    else if (isNum(v) && (!log || v > 0)) pts.push({ x: v, y: t.value, trial: t.number, state: t.state });
  }
  return pts;
}

// A slice's x axis: the choices (and any values outside them), or a range over the values and the bounds.
function sliceXAxis(p, pts, categorical, log) {
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
  return x;
}

// Draws parameter p's slice (the i-th card); returns how many points it shows.
function renderSliceChart(d, p, i) {
  const categorical = p.type === 'categorical';
  const log = Boolean(p.log) && !categorical;
  const pts = slicePoints(d, p, categorical, log);
  const x = sliceXAxis(p, pts, categorical, log);
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
}

function renderSlices(d) {
  const grid = $('hp-slices-grid');
  const empty = d.valued.length === 0 || d.params.length === 0;
  const emptyNote = $('hp-slices-empty');
  emptyNote.hidden = !empty;
  emptyNote.textContent = d.params.length === 0 ? 'The study has no parameters.' : 'No trial has a value yet.';
  grid.hidden = empty;

  sliceCards(d, grid);
  if (empty) return 0;

  const counts = d.params.map((p, i) => renderSliceChart(d, p, i));
  return counts.length ? counts[0] : 0;
}

