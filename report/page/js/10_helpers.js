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

