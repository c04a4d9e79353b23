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

