// The list of links: newest first, or those a word begins in (ID, URL, title or tag), a page
// at a time; each with its clicks today, in 7 days and in all; ticks for a print sheet and, for
// editors, a bulk change.
import { html, useEffect, useState } from '../vendor/htm-preact-standalone.mjs';
import { isCancelled } from '../client.js';
import { sumClicks } from '../chart.js';
import { linkStatus, PAGE, uniqueRows } from '../link.js';
import { ColourPicker, Failure, StatusText, useClient, useLoad } from './common.js';
import { BulkForm } from './bulk.js';
import { TopLinks } from './overview.js';

// One page of rows (PAGE, and one more to know whether there is a next page), from `after`
// (the first row of the page: [key, id]), the search's view or the newest first.
function rowsOf(client, site, q, after, signal) {
  const word = q.trim().toLowerCase().split(/\s+/)[0] || '';
  const params = { include_docs: true, limit: PAGE + 1 };
  if (after) Object.assign(params, { startkey: after[0], startkey_docid: after[1] });
  if (word) {
    if (!after) params.startkey = word;
    params.endkey = word + '\ufff0';
    return client.view(site.db, 'console', 'search', params, { signal });
  }
  return client.view(site.db, 'console', 'recent', { descending: true, ...params }, { signal });
}

// A print sheet of the links ticked in the list: made by the console as `couchlink qr --sheet`
// makes it, from the IDs and titles the page read from CouchDB.
function SheetForm({ site, selected, onClear }) {
  const client = useClient();
  const [colours, setColours] = useState({ fg: '#000000', bg: '#ffffff' });
  const [paper, setPaper] = useState('a4');
  const [size, setSize] = useState('30');
  const [titles, setTitles] = useState(true);
  const [made, setMade] = useState(null);
  const [error, setError] = useState(null);
  const ids = [...selected.keys()];
  async function make(e) {
    e.preventDefault();
    setError(null);
    setMade(null);
    const request = { tags: ids.map((id) => ({ id, title: selected.get(id) })), paper, size_mm: Number(size), fg: colours.fg, bg: colours.bg, titles };
    try {
      const pdf = await client.sheet(site, request);
      if (made) URL.revokeObjectURL(made.url);
      setMade({ url: URL.createObjectURL(pdf), count: ids.length, kb: Math.ceil(pdf.size / 1024) });
    } catch (e) { setError(e); }
  }
  return html`<form onSubmit=${make} aria-label="Print sheet"><fieldset><legend>Print sheet of ${ids.length} tag${ids.length === 1 ? '' : 's'}</legend>
    <label class="inline" for="s-paper">Paper</label>
    <select id="s-paper" value=${paper} onChange=${(e) => setPaper(e.target.value)}><option value="a4">A4</option><option value="letter">Letter</option></select>
    <label class="inline" for="s-size">Tag size (mm)</label>
    <input id="s-size" type="number" min="10" max="250" value=${size} onInput=${(e) => setSize(e.target.value)} />
    <label class="inline"><input type="checkbox" checked=${titles} onChange=${(e) => setTitles(e.target.checked)} /> Titles under the tags</label>
    <${ColourPicker} colours=${colours} onChange=${setColours} prefix="s" />
    <p><button type="submit">Make the sheet (PDF)</button> <button type="button" onClick=${onClear}>Clear the selection</button></p>
    <${Failure} error=${error} />
    ${made && html`<p class="notice"><a href=${made.url} download="couchlink-sheet.pdf">Download the sheet (${made.count} tags, PDF, ${made.kb} KB)</a></p>`}
  </fieldset></form>`;
}

export function Links({ site, route, editor, go }) {
  const client = useClient();
  const { q, pages } = route;
  const after = pages.length ? pages[pages.length - 1] : null;
  const [search, setSearch] = useState(q);
  useEffect(() => setSearch(q), [q]);
  const rows = useLoad(async (signal) => uniqueRows(await rowsOf(client, site, q, after, signal)), [site, q, JSON.stringify(after)]);
  // Clicks per row, asked once the rows are shown, cancelled with them.
  const [clicks, setClicks] = useState({});
  useEffect(() => {
    if (!site.clicks_db || !rows.value) return undefined;
    const controller = new AbortController();
    for (const r of rows.value.slice(0, PAGE)) {
      client.view(site.clicks_db, 'clicks', 'by_link', { group_level: 4, startkey: [r.id], endkey: [r.id, {}] }, { signal: controller.signal })
        .then((days) => setClicks((all) => ({ ...all, [r.id]: sumClicks(days) })))
        .catch((e) => { if (!isCancelled(e)) setClicks((all) => ({ ...all, [r.id]: null })); });
    }
    return () => controller.abort();
  }, [rows.value]);
  // Links ticked for a print sheet, kept across pages and searches: ID to title.
  const [selected, setSelected] = useState(new Map());
  useEffect(() => setSelected(new Map()), [site]);
  const tick = (r) => (e) => {
    const next = new Map(selected);
    if (e.target.checked) next.set(r.id, typeof r.doc.title === 'string' ? r.doc.title : ''); else next.delete(r.id);
    setSelected(next);
  };
  function submit(e) {
    e.preventDefault();
    go.to({ page: 'list', q: search, pages: [] });
  }
  const c = (id, k) => (clicks[id] === null ? '?' : clicks[id] ? clicks[id][k] : '…');
  const shown = rows.value || [];
  return html`<section aria-label="Links">
    ${editor && html`<p><button onClick=${() => go.to({ page: 'new' })}>New link</button></p>`}
    <form onSubmit=${submit} role="search" aria-label="Search links">
      <label for="search">Search by ID, URL, title or tag (a word's beginning)</label>
      <input id="search" type="search" value=${search} onInput=${(e) => setSearch(e.target.value)} />
      <button type="submit">Search</button>
    </form>
    <${Failure} error=${rows.error} retry=${rows.retry} />
    ${rows.loading ? html`<p>Loading links…</p>` : !rows.error && html`<div class="scroll"><table aria-label="Links of ${site.db}">
      <thead><tr><th><span class="hidden">Print</span></th><th>ID</th><th>Status</th><th>Points to</th><th class="wide">Title</th><th class="wide">Today</th><th class="wide">7 days</th><th>Total</th></tr></thead>
      <tbody>${shown.slice(0, PAGE).map((r) => html`<tr>
        <td><input type="checkbox" aria-label=${`Tick ${r.id}`} checked=${selected.has(r.id)} onChange=${tick(r)} /></td>
        <td class="id"><a href=${go.href({ page: 'link', id: r.id })}>${r.id}</a></td>
        <td class="words"><${StatusText} of=${linkStatus(r.doc)} /></td>
        <td>${String(r.doc.url)}</td><td class="wide">${typeof r.doc.title === 'string' ? r.doc.title : ''}</td>
        <td class="wide">${c(r.id, 'today')}</td><td class="wide">${c(r.id, 'week')}</td><td>${c(r.id, 'total')}</td></tr>`)}</tbody></table></div>
      ${shown.length === 0 && html`<p>No links${q ? ' match' : ' yet'}.</p>`}`}
    <p>${pages.length > 0 && html`<button onClick=${() => go.to({ page: 'list', q, pages: pages.slice(0, -1) })}>Previous page</button>`}
      ${shown.length > PAGE && html` <button onClick=${() => go.to({ page: 'list', q, pages: [...pages, [shown[PAGE].key, shown[PAGE].id]] })}>Next page</button>`}</p>
    ${shown.length > 0 && html`<p><button onClick=${() => { const next = new Map(selected); for (const r of shown.slice(0, PAGE)) next.set(r.id, typeof r.doc.title === 'string' ? r.doc.title : ''); setSelected(next); }}>Tick every link shown</button></p>`}
    ${selected.size > 0 && html`<${SheetForm} site=${site} selected=${selected} onClear=${() => setSelected(new Map())} />`}
    ${selected.size > 0 && editor && html`<${BulkForm} site=${site} selected=${selected} />`}
    ${site.clicks_db && !q && pages.length === 0 && html`<${TopLinks} site=${site} />`}
  </section>`;
}
