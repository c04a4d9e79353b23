// ---------------------------------------------------------------------------------------------------------------
// Several objectives: the Pareto front, a scatter per pair of objectives (the front's members solid, dominated
// trials faded, trials that break a constraint crossed out), and the front's hypervolume over trials.

function frontOf(d) {
  const front = obj(d.raw.front);
  const objectives = arr(front.objectives).filter((o) => o && typeof o.metric === 'string');
  if (objectives.length < 2) return null;
  const members = new Set(arr(front.members).filter(isNum));
  const hv = arr(front.hypervolume).filter((p) => p && isNum(p.trial) && isNum(p.value));
  return { objectives, members, hv, reference: arr(front.reference) };
}

// The trials that have every objective's value, each with them in the objectives' order.
function frontPoints(d, objectives) {
  const out = [];
  for (const t of d.trials) {
    if (t.state !== 'completed') continue;
    const values = obj(t.values);
    const v = objectives.map((o) => own(values, o.metric));
    if (v.every(isNum)) out.push({ trial: t.number, values: v, feasible: t.feasible !== false });
  }
  return out;
}

function frontDatasets(pts, i, j, members) {
  const xy = (p) => ({ x: p.values[i], y: p.values[j], trial: p.trial });
  const on = pts.filter((p) => p.feasible && members.has(p.trial)).map(xy).sort((a, b) => a.x - b.x);
  const off = pts.filter((p) => p.feasible && !members.has(p.trial)).map(xy);
  const broken = pts.filter((p) => !p.feasible).map(xy);
  const datasets = [];
  if (on.length) {
    datasets.push({
      hpKey: 'front', label: 'Pareto front', data: on, order: 0,
      backgroundColor: withAlpha(STATE_COLOURS.completed, 0.9), borderColor: STATE_COLOURS.completed,
      pointRadius: 5, pointHoverRadius: 7,
    });
  }
  if (off.length) {
    datasets.push({
      hpKey: 'dominated', label: 'dominated', data: off, order: 1,
      backgroundColor: withAlpha(STATE_COLOURS.completed, 0.15), borderColor: withAlpha(STATE_COLOURS.completed, 0.3),
      pointRadius: 4, pointHoverRadius: 6,
    });
  }
  if (broken.length) {
    datasets.push({
      hpKey: 'broken', label: 'breaks a constraint', data: broken, order: 2, pointStyle: 'crossRot',
      borderColor: STATE_COLOURS.failed, backgroundColor: STATE_COLOURS.failed, borderWidth: 2,
      pointRadius: 5, pointHoverRadius: 7,
    });
  }
  return datasets;
}

// One card per pair of objectives; rebuilt only when the objectives change.
function frontGrid(objectives) {
  const grid = $('hp-front-grid');
  const pairs = [];
  for (let i = 0; i < objectives.length; i += 1) for (let j = i + 1; j < objectives.length; j += 1) pairs.push([i, j]);
  const signature = JSON.stringify(objectives.map((o) => o.metric));
  if (grid.dataset.signature !== signature) {
    for (const key of Object.keys(charts)) if (key.startsWith('front:')) dropChart(key);
    grid.replaceChildren(...pairs.map(([i, j], k) => el('div', { className: 'hp-slice' },
      el('h3', null, `${objectives[j].metric} against ${objectives[i].metric}`),
      el('div', { className: 'hp-chart' },
        el('canvas', { id: `hp-front-${k}`, role: 'img', 'aria-label': `Front: ${objectives[j].metric} against ${objectives[i].metric}` })))));
    grid.dataset.signature = signature;
  }
  return pairs;
}

function renderFront(d) {
  const front = frontOf(d);
  setHidden('front', !front);
  setHidden('hp-nav-front', !front);
  if (!front) return 0;
  const pts = frontPoints(d, front.objectives);
  const empty = pts.length === 0;
  setHidden('hp-front-empty', !empty);
  setHidden('hp-front-body', empty);
  if (empty) return 0;
  const label = (o) => `${o.metric} (${o.direction === 'maximize' ? 'maximize' : 'minimize'})`;
  frontGrid(front.objectives).forEach(([i, j], k) => {
    upsertChart(`front:${k}`, $(`hp-front-${k}`), {
      type: 'scatter',
      data: { datasets: frontDatasets(pts, i, j, front.members) },
      options: {
        scales: {
          x: { title: axisTitle(label(front.objectives[i])), ticks: numberTicks },
          y: { title: axisTitle(label(front.objectives[j])), ticks: numberTicks },
        },
        plugins: {
          tooltip: pointTooltip((r) => `trial ${fmtValue(r.trial)}: ${front.objectives[i].metric} = ${fmtNum(r.x)}, ` +
            `${front.objectives[j].metric} = ${fmtNum(r.y)}`),
        },
      },
    });
  });
  const hv = front.hv.map((p) => ({ x: p.trial, y: p.value }));
  setHidden('hp-front-hv-box', hv.length === 0);
  if (hv.length) {
    upsertChart('front:hv', $('hp-front-hv-chart'), {
      type: 'line',
      data: {
        datasets: [{
          hpKey: 'hv', label: 'hypervolume of the front', data: hv, stepped: true, borderColor: '#111827',
          borderWidth: 1.5, pointRadius: 2, fill: false,
        }],
      },
      options: {
        parsing: false,
        scales: { x: { type: 'linear', min: 0, title: axisTitle('trial'), ticks: { precision: 0 } },
          y: { title: axisTitle('hypervolume'), ticks: numberTicks } },
        plugins: { legend: { display: false } },
      },
    });
  }
  $('hp-front-note').textContent = front.reference.length
    ? `Hypervolume against the reference point (${front.reference.map(fmtNum).join(', ')}): 10% of each ` +
      'objective\'s range beyond its worst value among the trials that meet the constraints.'
    : '';
  return pts.length;
}
