// ---------------------------------------------------------------------------------------------------------------

const SECTIONS = [
  ['summary', renderSummary],
  ['history', renderHistory],
  ['front', renderFront],
  ['parallel', renderParallel],
  ['importance', renderImportance],
  ['slices', renderSlices],
  ['curves', renderCurves],
  ['timeline', renderTimeline],
  ['cost', renderCost],
  ['trials', renderTrials],
  ['events', renderEvents],
];
const POINT_KEYS = ['history', 'front', 'parallel', 'slices', 'curves', 'timeline', 'cost', 'importance', 'trials', 'events'];

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

