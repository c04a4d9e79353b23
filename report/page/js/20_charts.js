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

