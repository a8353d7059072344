// A link's history, as the proxies recorded it: each change newest first (who, when, the fields
// that changed, before and after), each gap said as a gap; for editors, "Restore this version",
// which writes the version back as a new revision (recorded in turn). CouchDB decides the write;
// a conflict (someone saved meanwhile) is shown, never written over.
import { html, useEffect, useState } from '../vendor/htm-preact-standalone.mjs';
import { changes, restoring } from '../history.js';
import { Failure, useClient, useLoad } from './common.js';

// A field kept as its size and digest (too long for the history) says so.
const shown = (v) => (v === null ? '(none)' : typeof v === 'string' ? v
  : v.large && Object.keys(v).length === 1 ? `(${v.large.bytes} bytes, too long to keep: its digest ${String(v.large.blake2b).slice(0, 12)}…)`
    : JSON.stringify(v));

function Change({ entry, current, editor, onRestore }) {
  // When it was recorded; the writer's own word on when it wrote, beside it as stated.
  const when = entry.recorded_at;
  const who = entry.by ? `by ${entry.by}` : 'writer not stated';
  const fields = entry.before || entry.kind === 'created' ? changes(entry)
    : Object.entries(entry.after || {}).filter(([k]) => k !== 'edit').map(([k, v]) => [k, null, v]);
  const isCurrent = entry.rev === current._rev;
  return html`<li class="change" aria-label=${`Revision ${entry.rev}`}>
    <p><time datetime=${when}>${when.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC')}</time> · ${entry.kind} · ${who}
      ${entry.at && html` · stated ${entry.at}`}${entry.batch && html` · bulk change ${entry.batch}`}${entry.late && ' · recorded late'}
      ${entry.by && entry.after && entry.after.edit && entry.after.edit.restores && html` · restores ${entry.after.edit.restores}`}
      ${isCurrent && html` · <strong>current</strong>`}</p>
    ${!entry.before && entry.kind === 'changed' && html`<p class="notice">What it was before is not recorded.</p>`}
    <table><thead><tr><th scope="col">Field</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
      <tbody>${fields.map(([k, b, a]) => html`<tr><th scope="row">${k}</th><td>${shown(b)}</td><td>${shown(a)}</td></tr>`)}</tbody></table>
    ${editor && !isCurrent && entry.after && html`<p><button onClick=${() => onRestore(entry)}>Restore this version</button></p>`}
  </li>`;
}

function Gap({ entry }) {
  return html`<li class="gap" aria-label=${`Gap ${entry.first}`}><p class="notice">${entry.missing} change(s) not recorded:
    made between ${entry.from} and ${entry.to} while no proxy recorded, and compacted away before one started.</p></li>`;
}

export function History({ site, current, editor, onRestored }) {
  const client = useClient();
  const [failed, setFailed] = useState(null);
  const [done, setDone] = useState(0);
  const entries = useLoad((signal) => client.history(site, current._id, { signal }), [site, current._id, current._rev, done]);
  // The current revision is recorded within a second of its write: asked again until it is
  // (ten times at most: no proxy may be recording).
  const [tries, setTries] = useState(0);
  const waiting = entries.value && !entries.value.some((e) => e.rev === current._rev) && tries < 10;
  useEffect(() => {
    if (!waiting) return undefined;
    const timer = setTimeout(() => { setTries((n) => n + 1); entries.refresh(); }, 1000);
    return () => clearTimeout(timer);
  }, [waiting, entries.value]);
  if (!site.history_db) return html`<p>History is off for this database.</p>`;
  async function restore(entry) {
    setFailed(null);
    try {
      await client.put(site, current._id, restoring(entry, current), {}, { restores: entry.rev });
      setDone((n) => n + 1);
      onRestored();
    } catch (e) { setFailed(e); }
  }
  return html`<section aria-label="History"><h3>History</h3>
    <${Failure} error=${failed} />
    ${entries.error ? html`<${Failure} error=${entries.error} retry=${entries.retry} />`
      : !entries.value ? html`<p>Loading the history…</p>`
      : !entries.value.length ? html`<p>No change recorded yet (a proxy records each within a second).</p>`
      : html`<ol class="history">${entries.value.map((e) => (e.type === 'gap' ? html`<${Gap} entry=${e} />`
        : html`<${Change} entry=${e} current=${current} editor=${editor} onRestore=${restore} />`))}</ol>`}
  </section>`;
}
