// A chart as a card: its title, the bars (SVG drawn from chart.js's geometry, no inline style:
// colours come from app.css, in a palette colour-blind readers tell apart), the same numbers as
// a table beside it, and a CSV of that table.
import { html } from '../vendor/htm-preact-standalone.mjs';
import { barChart, csv, rowChart } from '../chart.js';

export function BarChart({ title, values }) {
  const c = barChart(values);
  return html`<svg class="chart" viewBox=${`0 0 ${c.width} ${c.height}`} role="img" aria-label=${title}>
    <line class="axis" x1="40" y1=${c.baseline} x2=${c.width} y2=${c.baseline} />
    <text class="tick" x="36" y="10" text-anchor="end">${c.top}</text>
    <text class="tick" x="36" y=${c.baseline} text-anchor="end">0</text>
    ${c.bars.map((b) => html`<rect class="bar" x=${b.x} y=${b.y} width=${b.w} height=${b.h}><title>${b.label}: ${b.value}</title></rect>`)}
    ${c.ticks.map((t) => html`<text class="tick" x=${t.x} y=${c.height - 4} text-anchor="middle">${t.label}</text>`)}
  </svg>`;
}

// Named values as horizontal bars, a label left of each (hosts and campaigns are long).
export function RowChart({ title, values }) {
  const c = rowChart(values);
  const cut = (s) => (s.length > 15 ? `${s.slice(0, 14)}…` : s);
  return html`<svg class="chart" viewBox=${`0 0 ${c.width} ${c.height}`} role="img" aria-label=${title}>
    ${c.bars.map((b) => html`<g>
      <text class="tick" x=${c.label - 6} y=${b.textY} text-anchor="end">${cut(b.label)}</text>
      <rect class="bar" x=${b.x} y=${b.y} width=${b.w} height=${b.h}><title>${b.label}: ${b.value}</title></rect>
      <text class="tick" x=${b.x + b.w + 4} y=${b.textY}>${b.value}</text></g>`)}
  </svg>`;
}

// `rows` under `header`, as a table and as `file` (CSV); `chart` drawn above them.
export function ChartCard({ title, chart, header, rows, file }) {
  // A data: URL rather than a blob: one: nothing to revoke, and the text is the link's own.
  const url = `data:text/csv;charset=utf-8,${encodeURIComponent(csv(header, rows))}`;
  return html`<figure class="card" aria-label=${title}>
    <figcaption>${title} <a href=${url} download=${file}>Download CSV</a></figcaption>
    ${chart}
    <div class="table"><table>
      <thead><tr>${header.map((h) => html`<th>${h}</th>`)}</tr></thead>
      <tbody>${rows.map((r) => html`<tr>${r.map((v) => html`<td>${v}</td>`)}</tr>`)}</tbody>
    </table></div>
  </figure>`;
}
