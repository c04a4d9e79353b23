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

