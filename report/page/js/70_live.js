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
