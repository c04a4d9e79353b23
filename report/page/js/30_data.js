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
  // The best as `hyperpack best` names it (constraints met; with finalists the best mean of a configuration's
  // runs); data written without it: the best completed value.
  let best = null;
  let bestValue = null;
  let bestRuns = 1;
  let bestByModel = false;  // budget.rerun_top: the model's pick of every run
  if ('best' in data) {
    const named = obj(data.best);
    if (isNum(named.trial)) best = trials.find((t) => t.number === named.trial) || null;
    if (best) {
      bestValue = isNum(named.value) ? named.value : best.value;
      bestRuns = isNum(named.runs) ? named.runs : 1;
      bestByModel = named.by_model === true;
    }
  } else {
    for (const t of trials) {
      if (t.state === 'completed' && isNum(t.value) && (!best || better(t.value, best.value))) best = t;
    }
    bestValue = best ? best.value : null;
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
    bestValue,
    bestRuns,
    bestByModel,
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

