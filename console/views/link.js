// A link's page: its short URL, status, target, QR tag and clicks; the editor's buttons.
import { html, useState } from '../vendor/htm-preact-standalone.mjs';
import { client } from '../client.js';
import { isWeb, linkStatus } from '../model.js';
import { ColourPicker, Failure, StatusText, useLoad } from './common.js';

function Clicks({ site, id }) {
  const since = new Date(Date.now() - 89 * 86400000).toISOString().slice(0, 10).split('-');
  const counts = useLoad(async (signal) => {
    if (!site.clicks_db) return null;
    const [days, versions] = await Promise.all([
      client.view(site.clicks_db, 'clicks', 'by_link', { group_level: 4, startkey: [id, ...since], endkey: [id, {}] }, { signal }),
      client.view(site.clicks_db, 'clicks', 'by_version', { group: true, startkey: [id], endkey: [id, {}] }, { signal }),
    ]);
    return { days, versions };
  }, [site, id]);
  if (!site.clicks_db) return html`<p>Live counts are off for this database.</p>`;
  if (counts.error) return html`<section aria-label="Clicks"><h3>Clicks</h3><p>The clicks could not be read.</p><${Failure} error=${counts.error} retry=${counts.retry} /></section>`;
  if (counts.loading) return html`<p>Loading clicks…</p>`;
  const { days, versions } = counts.value;
  return html`<section aria-label="Clicks">
    <h3>Clicks per day, last 90 days</h3>
    ${days.length === 0 ? html`<p>No clicks counted yet.</p>` : html`<div class="scroll"><table>
      <thead><tr><th>Day (UTC)</th><th>Redirects</th><th>Bots</th><th>New visitors</th><th>404s</th></tr></thead>
      <tbody>${days.map((r) => html`<tr><td>${r.key.slice(1).join('-')}</td>${r.value.map((v) => html`<td>${v}</td>`)}</tr>`)}</tbody>
    </table></div>`}
    <h3>Per target version</h3>
    ${versions.length === 0 ? html`<p>None yet.</p>` : html`<div class="scroll"><table>
      <thead><tr><th>Location</th><th>Redirects</th></tr></thead>
      <tbody>${versions.map((r) => html`<tr><td class="cut">${r.key[1]}</td><td>${r.value}</td></tr>`)}</tbody>
    </table></div>`}
  </section>`;
}

// The tag in the colours picked; colours too alike are refused by the console with the
// contrast they have: asked first, so the page can say why rather than show a broken picture.
function Tag({ site, id, short }) {
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
  const [changed, setChanged] = useState(0);
  const [copied, setCopied] = useState(false);
  const [failed, setFailed] = useState(null);
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
    <p>Status: <${StatusText} of=${linkStatus(doc)} /></p>
    <p>Points to: ${isWeb(doc.url) ? html`<a href=${doc.url} rel="noopener noreferrer">${doc.url}</a>` : html`<code>${String(doc.url)}</code>`}</p>
    ${Array.isArray(doc.tags) && html`<p>Tags: ${doc.tags.map(String).join(', ')}</p>`}
    <${Tag} site=${site} id=${id} short=${short} />
    ${editor && html`<p><button onClick=${() => go.to({ page: 'edit', id })}>Edit</button>
      ${doc.inactive ? html` <button onClick=${() => setInactive(false)}>Reactivate</button>` : html` <button onClick=${() => setInactive(true)}>Deactivate</button>`}</p>`}
    <${Failure} error=${failed} />
    <${Clicks} site=${site} id=${id} />
  </article>`;
}

