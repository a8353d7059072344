// A link's page: its short URL, status, target, QR tag and clicks; the editor's buttons.
import { html, useState } from '../vendor/htm-preact-standalone.mjs';
import { each } from '../client.js';
import { breakdowns, buckets, DIMENSIONS, dimensionQuery, keyOf, series, UNITS, visits } from '../chart.js';
import { isWeb, linkStatus } from '../link.js';
import { BarChart, ChartCard, RowChart } from './charts.js';
import { History } from './history.js';
import { ColourPicker, Failure, StatusText, useClient, useCountsInterval, useEveryInterval, useLoad } from './common.js';

const day = (offset) => new Date(Date.now() - offset * 86400000).toISOString().slice(0, 10);

// Clicks over time (per hour, day or month over the range picked, UTC), as a chart, a table
// and a CSV, and each breakdown of the range; for one link also its redirects per target
// version, all time. `ids`: one link's, or a tag's links (their counts added up); `name` names
// the CSV files; `interval`: how often to ask again (useCountsInterval).
export function Clicks({ site, ids, name, interval }) {
  const client = useClient();
  const [unit, setUnit] = useState('day');
  const [range, setRange] = useState({ from: day(29), to: day(0) });
  const labels = buckets(new Date(`${range.from}T00:00:00Z`), new Date(`${range.to}T23:59:59Z`), unit);
  const one = ids.length === 1 ? ids[0] : null;
  const counts = useLoad(async (signal) => {
    if (!site.clicks_db || !labels || !labels.length) return null;
    const [first, last] = [keyOf(labels[0]), keyOf(labels[labels.length - 1])];
    const view = (v, params) => client.view(site.clicks_db, 'clicks', v, params, { signal });
    const perLink = await each(ids, (id) => Promise.all([
      view('by_link', { group_level: UNITS[unit].level, startkey: [id, ...first], endkey: [id, ...last, {}] }),
      view('by_dimension', dimensionQuery(id, range.from, range.to)),
    ]));
    const versions = one ? await view('by_version', { group: true, startkey: [one], endkey: [one, {}] }) : [];
    const rows = perLink.flatMap(([r]) => r);
    const byLink = ids.map((id, i) => [id, perLink[i][0].reduce((n, r) => n + r.value[0], 0)]);
    return { rows: series(rows, labels), versions, by: breakdowns(perLink.flatMap(([, b]) => b)), byLink };
  }, [site, ids.join(' '), unit, range.from, range.to]);
  // Live: asked again once each interval the proxies write, what is shown kept meanwhile.
  useEveryInterval(site.clicks_db && interval, counts.refresh);
  if (!site.clicks_db) return html`<p>Live counts are off for this database.</p>`;
  const pick = html`<form class="range" aria-label="Clicks over time" onSubmit=${(e) => e.preventDefault()}>
    <label class="inline" for="c-unit">Per</label>
    <select id="c-unit" value=${unit} onChange=${(e) => setUnit(e.target.value)}>
      <option value="hour">hour</option><option value="day">day</option><option value="month">month</option></select>
    <label class="inline" for="c-from">From</label>
    <input id="c-from" type="date" value=${range.from} onChange=${(e) => e.target.value && setRange({ ...range, from: e.target.value })} />
    <label class="inline" for="c-to">to</label>
    <input id="c-to" type="date" value=${range.to} onChange=${(e) => e.target.value && setRange({ ...range, to: e.target.value })} />
  </form>`;
  let body;
  if (!labels) body = html`<p class="error" role="alert">Too many ${unit}s for one chart: pick a shorter range or a longer unit.</p>`;
  else if (!labels.length) body = html`<p class="error" role="alert">The range ends before it starts.</p>`;
  else if (counts.error) body = html`<p>The clicks could not be read.</p><${Failure} error=${counts.error} retry=${counts.retry} />`;
  else if (!counts.value) body = html`<p>Loading clicks…</p>`;
  else {
    const { rows, versions, by, byLink } = counts.value;
    const title = `Redirects per ${unit} (UTC), ${range.from} to ${range.to}`;
    const chart = html`<${BarChart} title=${title} values=${rows.map((r) => ({ label: r.label, value: r.redirects }))} />`;
    const table = rows.map((r) => [r.label, r.redirects, r.bots, r.newVisitors, r.notFound]);
    body = html`<${ChartCard} title=${title} chart=${chart} header=${[unit, 'redirects', 'bots', 'new visitors', '404s']}
        rows=${table} file=${`${name}-clicks-per-${unit}.csv`} />
      <${Breakdowns} name=${name} by=${by} range=${range} />
      ${one ? html`<h3>Per target version (all time)</h3>
      ${versions.length === 0 ? html`<p>None yet.</p>` : html`<div class="scroll"><table>
        <thead><tr><th>Location</th><th>Redirects</th></tr></thead>
        <tbody>${versions.map((r) => html`<tr><td>${r.key[1]}</td><td>${r.value}</td></tr>`)}</tbody>
      </table></div>`}` : html`<${ChartCard} title=${`Redirects per link, ${range.from} to ${range.to}`}
        chart=${html`<${RowChart} title="Redirects per link" values=${byLink.map(([id, n]) => ({ label: id, value: n }))} />`}
        header=${['link', 'redirects']} rows=${byLink} file=${`${name}-per-link-${range.from}-${range.to}.csv`} />`}`;
  }
  return html`<section aria-label="Clicks"><h3>Clicks</h3>${pick}${body}</section>`;
}

// Each breakdown of the range's redirects as a card: bars, table, CSV. One the proxies did not
// count (countries without a GeoIP database) is not shown.
function Breakdowns({ name, by, range }) {
  const shown = DIMENSIONS.filter(([d]) => by[d] && by[d].length);
  if (!shown.length) return html`<p>No breakdowns counted in this range.</p>`;
  return html`<div class="breakdowns">${shown.map(([d, name]) => {
    const title = `${name}, ${range.from} to ${range.to}`;
    const chart = html`<${RowChart} title=${title} values=${by[d]} />`;
    return html`<${ChartCard} title=${title} chart=${chart} header=${[d, 'redirects']}
      rows=${by[d].map((v) => [v.label, v.value])} file=${`${name}-${d}-${range.from}-${range.to}.csv`} />`;
  })}</div>`;
}

// A limited link's visits used and left, as every proxy counted them, asked again each interval.
function Visits({ site, doc, interval }) {
  const client = useClient();
  const rows = useLoad((signal) => client.view(site.clicks_db, 'clicks', 'by_link',
    { group_level: 1, startkey: [doc._id], endkey: [doc._id, {}] }, { signal }), [site, doc._id, doc._rev]);
  useEveryInterval(interval, rows.refresh);
  const v = rows.value && visits(doc, rows.value);
  return v && html`<p>Visits: ${v.used} of ${doc.max_visits} (${v.left} left)</p>`;
}

// The tag in the colours picked; colours too alike are refused by the console with the
// contrast they have: asked first, so the page can say why rather than show a broken picture.
function Tag({ site, id, short }) {
  const client = useClient();
  const [colours, setColours] = useState({ fg: '#000000', bg: '#ffffff' });
  const query = `?fg=${encodeURIComponent(colours.fg)}&bg=${encodeURIComponent(colours.bg)}`;
  const made = useLoad((signal) => client.tagMade(site, id, query, { signal }), [site, id, query]);
  const qr = `qr/${encodeURIComponent(site.db)}/${encodeURIComponent(id)}`;
  return html`<div class="tag">
    <${ColourPicker} colours=${colours} onChange=${setColours} prefix="t" />
    ${made.error ? html`<${Failure} error=${made.error} />` : html`<img src=${qr + '.svg' + query} alt=${`QR tag of ${short}`} />
    <p><a href=${qr + '.svg' + query} download=${id + '.svg'}>Download the tag (SVG)</a> · <a href=${qr + '.png' + query} download=${id + '.png'}>Download the tag (PNG)</a></p>`}</div>`;
}

export function LinkPage({ site, id, editor, go }) {
  const client = useClient();
  const [changed, setChanged] = useState(0);
  const [copied, setCopied] = useState(false);
  const [failed, setFailed] = useState(null);
  const interval = useCountsInterval(site);
  const link = useLoad((signal) => client.doc(site, id, { signal }), [site, id, changed]);
  const short = `${site.public_url.replace(/\/$/, '')}/${id}`;
  async function setInactive(inactive) {
    setFailed(null);
    try {
      await client.put(site, id, { ...link.value, inactive });
      setChanged((n) => n + 1);
    } catch (e) { setFailed(e); }
  }
  const back = html`<p><a href=${go.href({ page: 'list' })}>Back to the links</a></p>`;
  if (link.error) return html`${back}<${Failure} error=${link.error} retry=${link.retry} />`;
  if (!link.value) return html`<p>Loading ${id}…</p>`;
  const doc = link.value;
  return html`<article aria-label=${`Link ${id}`}>
    ${back}
    <h2>${typeof doc.title === 'string' && doc.title ? doc.title : id}</h2>
    <p>Short URL: <output aria-label="Short URL">${short}</output>
      <button onClick=${() => navigator.clipboard.writeText(short).then(() => setCopied(true))}>Copy the short URL</button>
      ${copied && html`<span class="notice"> copied</span>`}</p>
    <p>Status: <${StatusText} of=${linkStatus(doc)} />${typeof doc.password === 'string' && ', asks for a password'}</p>
    ${typeof doc.max_visits === 'number' && site.clicks_db && html`<${Visits} site=${site} doc=${doc} interval=${interval} />`}
    <p>Points to: ${isWeb(doc.url) ? html`<a href=${doc.url} rel="noopener noreferrer">${doc.url}</a>` : html`<code>${String(doc.url)}</code>`}</p>
    ${Array.isArray(doc.tags) && html`<p>Tags: ${doc.tags.map(String).map((t, i) => html`${i ? ', ' : ''}<a href=${go.href({ page: 'tag', tag: t })}>${t}</a>`)}</p>`}
    <${Tag} site=${site} id=${id} short=${short} />
    ${editor && html`<p><button onClick=${() => go.to({ page: 'edit', id })}>Edit</button>
      ${doc.inactive ? html` <button onClick=${() => setInactive(false)}>Reactivate</button>` : html` <button onClick=${() => setInactive(true)}>Deactivate</button>`}</p>`}
    <${Failure} error=${failed} />
    <${Clicks} site=${site} ids=${[id]} name=${id} interval=${interval} />
    <${History} site=${site} current=${doc} editor=${editor} onRestored=${() => setChanged((n) => n + 1)} />
  </article>`;
}

