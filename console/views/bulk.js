// A bulk change of the links ticked in the list (url, tags, status, expires, valid_from, a rule
// added or the rules replaced, a password or visit limit set or removed): the change asked, a preview of every link and
// each field it changes (nothing written yet), then the writes through `_bulk_docs` (CouchDB
// checks each document; a link edited meanwhile is a conflict, never written over), the
// change's record written to the history database first (console/bulk.js), the outcome per
// link, and "Undo this change", which puts every link back from that record but those changed
// since.
import { html, useState } from '../vendor/htm-preact-standalone.mjs';
import { batchName, bulkChange, readRecord, recordParts, undoPlan } from '../bulk.js';
import { changes } from '../history.js';
import { Failure, useClient } from './common.js';

const shown = (v) => (v === null ? '(none)' : typeof v === 'string' ? v : JSON.stringify(v));
// A field's value in the preview; a password's hash says only that there is one.
const shownAs = (k, v) => (k === 'password' && v !== null && v !== undefined ? '(a password)' : shown(v));

// The change the form asks for (empty fields: untouched).
function changeOf(form) {
  const change = {};
  if (form.url.trim()) change.url = form.url.trim();
  if (form.add.trim()) change.add_tags = [form.add.trim()];
  if (form.remove.trim()) change.remove_tags = [form.remove.trim()];
  if (form.status !== 'keep') change.inactive = form.status === 'deactivate';
  for (const [name, value] of [['expires', form.expires], ['valid_from', form.validFrom]]) {
    const v = value.trim();
    if (v) change[name] = v === 'none' ? null : v;
  }
  if (form.removePassword) change.password = null;
  const max = form.maxVisits.trim();
  if (max && max !== 'none' && !/^\d+$/.test(max)) throw new Error('The visits: a whole number, or none.');
  if (max) change.max_visits = max === 'none' ? null : Number(max);
  if (form.rule.trim()) {
    let rule;
    try { rule = JSON.parse(form.rule); } catch (e) { throw new Error(`The rule is not JSON: ${e.message}`); }
    if (form.ruleMode === 'replace') change.replace_rules = [rule]; else change.add_rule = rule;
  }
  return change;
}

function Outcomes({ label, rows }) {
  return html`<table aria-label=${label}><thead><tr><th scope="col">Link</th><th scope="col">Outcome</th></tr></thead>
    <tbody>${rows.map(([id, said]) => html`<tr><th scope="row">${id}</th><td>${said}</td></tr>`)}</tbody></table>`;
}

const outcome = (r) => (!r ? 'not written' : r.ok ? 'applied'
  : r.error === 'conflict' ? 'edited by someone else meanwhile: nothing written over' : `refused: ${r.reason || r.error}`);

const UNDONE = {
  'changed since': 'changed since the change read it, and not by the change alone: left as it is',
  missing: 'no such link any more',
  'read back': 'too long to keep in the record, and CouchDB no longer holds it as it was: left as it is',
  'not changed': 'as the change found it: nothing to undo',
};

// Writes `writes` ({id, before, after}) as bulk change `batch`, its record first (every part
// at once) where the site keeps a history: each link's outcome by ID. A record CouchDB refuses
// stops it before any link is written (undo could not put them back).
async function writeChange(client, site, batch, writes, undoes = null) {
  const edit = client.editOf({ batch });
  const parts = recordParts(batch, edit, writes, undoes);
  if (site.history_db) {
    const recorded = await client.record(site, parts.map((p) => p.doc));
    const refused = [...recorded.values()].find((r) => !r.ok);
    if (refused) throw new Error(`The change's record was not written (${refused.reason || refused.error}): no link was changed.`);
  }
  const results = new Map();
  for (const part of parts) {
    for (const [id, r] of await client.bulk(site, part.writes.map((w) => w.after), edit)) results.set(id, r);
  }
  return results;
}

export function BulkForm({ site, selected }) {
  const client = useClient();
  const [form, setForm] = useState({ url: '', add: '', remove: '', status: 'keep', expires: '', validFrom: '', rule: '', ruleMode: 'add',
    password: '', removePassword: false, maxVisits: '' });
  const [plan, setPlan] = useState(null);
  const [done, setDone] = useState(null);
  const [undone, setUndone] = useState(null);
  const [error, setError] = useState(null);
  const ids = [...selected.keys()];
  const set = (name) => (e) => setForm({ ...form, [name]: e.target.value });
  async function preview(e) {
    e.preventDefault();
    setError(null); setDone(null); setUndone(null);
    try {
      const change = changeOf(form);
      // One hash for every link, made by the console; the password itself is written nowhere.
      if (form.password && !form.removePassword) change.password = await client.passwordHash(form.password);
      const docs = await client.docs(site, ids);
      setPlan(ids.map((id, i) => ({ id, before: docs[i], after: docs[i] && bulkChange(docs[i], change) })));
    } catch (e) { setError(e); }
  }
  async function apply() {
    setError(null);
    const writes = plan.filter((p) => p.after);
    const batch = batchName();
    const results = new Map();
    try {
      for (const [id, r] of await writeChange(client, site, batch, writes)) results.set(id, r);
    } catch (e) { setError(e); }
    setDone({ batch, rows: plan.map((p) => [p.id, !p.before ? 'no such link' : !p.after ? 'unchanged' : outcome(results.get(p.id))]) });
  }
  async function undo() {
    setError(null);
    try {
      // The change's own record, written before its links: nothing waits for a recorder.
      const record = readRecord(done.batch, await client.recorded(site, done.batch));
      if (!record) throw new Error(`No record of ${done.batch}: it cannot be undone here.`);
      const current = await client.withAncestry(site, record.members.map((m) => m.id));
      const steps = undoPlan(record, current);
      for (const s of steps.filter((s) => s.step === 'read back')) {
        const was = await client.revision(site, s.id, s.rev);
        if (!was) continue;
        const fields = Object.fromEntries(Object.entries(was).filter(([k]) => !k.startsWith('_') && k !== 'edit'));
        Object.assign(s, { step: 'restore', doc: { ...fields, _id: s.id, _rev: s.current } });
      }
      const writes = steps.filter((s) => s.step === 'restore')
        .map((s) => ({ id: s.id, before: current[record.members.findIndex((m) => m.id === s.id)], after: s.doc }));
      const results = writes.length ? await writeChange(client, site, batchName(new Date(), undefined, 'undo'), writes, done.batch) : new Map();
      setUndone(steps.map((s) => [s.id, s.step === 'restore' ? outcome(results.get(s.id)) : UNDONE[s.step]]));
    } catch (e) { setError(e); }
  }
  const changing = plan ? plan.filter((p) => p.after).length : 0;
  return html`<form onSubmit=${preview} aria-label="Change these links"><fieldset><legend>Change ${ids.length} link${ids.length === 1 ? '' : 's'}</legend>
    <label for="b-url">Point to</label><input id="b-url" type="url" value=${form.url} onInput=${set('url')} />
    <label for="b-add">Add the tag</label><input id="b-add" type="text" value=${form.add} onInput=${set('add')} />
    <label for="b-remove">Remove the tag</label><input id="b-remove" type="text" value=${form.remove} onInput=${set('remove')} />
    <label for="b-status">Status</label>
    <select id="b-status" value=${form.status} onChange=${set('status')}>
      <option value="keep">as it is</option><option value="deactivate">deactivate</option><option value="reactivate">reactivate</option></select>
    <label for="b-expires">Expires (a time with its zone; none removes it)</label><input id="b-expires" type="text" value=${form.expires} onInput=${set('expires')} />
    <label for="b-valid-from">Valid from (likewise)</label><input id="b-valid-from" type="text" value=${form.validFrom} onInput=${set('validFrom')} />
    <label for="b-rule">A rule (JSON, as in "targets", like {"when": {"os": ["ios"]}, "url": "https://apps.apple.com/app/id1"})</label>
    <textarea id="b-rule" rows="2" value=${form.rule} onInput=${set('rule')}></textarea>
    <label for="b-rule-mode">The rule</label>
    <select id="b-rule-mode" value=${form.ruleMode} onChange=${set('ruleMode')}>
      <option value="add">added after the others</option><option value="replace">replaces the rules</option></select>
    <label for="b-max-visits">At most this many visits (none removes the limit)</label>
    <input id="b-max-visits" type="text" value=${form.maxVisits} onInput=${set('maxVisits')} />
    <label for="b-password">Ask for this password (empty: as it is)</label>
    <input id="b-password" type="password" autocomplete="new-password" value=${form.password} onInput=${set('password')}
      disabled=${form.removePassword} />
    <label><input id="b-remove-password" type="checkbox" checked=${form.removePassword}
      onChange=${(e) => setForm({ ...form, removePassword: e.target.checked })} /> Remove the password</label>
    <p><button type="submit">Preview the change</button></p>
    <${Failure} error=${error} />
  </fieldset></form>
  ${plan && html`<table aria-label="Preview"><thead><tr><th scope="col">Link</th><th scope="col">Field</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
    <tbody>${plan.flatMap((p) => (!p.before ? [html`<tr><th scope="row">${p.id}</th><td colspan="3">no such link</td></tr>`]
      : !p.after ? [html`<tr><th scope="row">${p.id}</th><td colspan="3">unchanged</td></tr>`]
      : changes({ before: p.before, after: p.after }).filter(([k]) => !k.startsWith('_')).map(([k, b, a]) => html`<tr><th scope="row">${p.id}</th><td>${k}</td><td>${shownAs(k, b)}</td><td>${shownAs(k, a)}</td></tr>`)))}</tbody></table>
    ${!done && changing > 0 && html`<p><button onClick=${apply}>Apply to ${changing} link${changing === 1 ? '' : 's'}</button></p>`}`}
  ${done && html`<p class="notice">Bulk change ${done.batch}</p><${Outcomes} label="Result" rows=${done.rows} />
    ${!site.history_db ? html`<p>History is off for this database: the change cannot be undone.</p>`
      : !undone && html`<p><button onClick=${undo}>Undo this change</button></p>`}`}
  ${undone && html`<${Outcomes} label="Undone" rows=${undone} />`}`;
}
