// A link's edit form, and a new link's: the fields, its rules, and CouchDB's refusal shown under
// the field it names. A conflict (someone saved meanwhile) is never written over unasked.
import { html, useState } from '../vendor/htm-preact-standalone.mjs';
import { CouchError } from '../client.js';
import { CONDITIONS, fromForm, toForm, toRule } from '../form.js';
import { randomId } from '../link.js';
import { FieldRefusal, useClient } from './common.js';

function Rules({ rules, onChange }) {
  const edit = (i, field) => (e) => onChange(rules.map((r, j) => (j === i ? { ...r, [field]: e.target.value } : r)));
  return html`<fieldset>
    <legend>Rules: the first whose conditions all hold sends the visitor to its URL, or splits them</legend>
    ${rules.map((rule, i) => html`<fieldset aria-label=${`Rule ${i + 1}`}>
      <legend>Rule ${i + 1}</legend>
      ${CONDITIONS.map(([name, label]) => html`<label for=${`r${i}-${name}`}>${label}</label>
        <input id=${`r${i}-${name}`} type="text" value=${rule[name]} onInput=${edit(i, name)} />`)}
      <label for=${`r${i}-query`}>Query parameters (utm_source=flyer,poster; utm_medium=print)</label>
      <input id=${`r${i}-query`} type="text" value=${rule.query} onInput=${edit(i, 'query')} />
      ${Object.keys(rule.other).length > 0 && html`<p>Other conditions, kept as they are: <code>${JSON.stringify(rule.other)}</code></p>`}
      <label for=${`r${i}-url`}>Rule ${i + 1}'s URL</label>
      <input id=${`r${i}-url`} type="url" value=${rule.url} onInput=${edit(i, 'url')} />
      <label for=${`r${i}-split`}>Or a split instead of one URL: a weight and a URL a line (each visitor keeps their variant)</label>
      <textarea id=${`r${i}-split`} rows="3" value=${rule.split} onInput=${edit(i, 'split')}></textarea>
      <p><button type="button" onClick=${() => onChange(rules.filter((_, j) => j !== i))}>Remove rule ${i + 1}</button></p>
    </fieldset>`)}
    <p><button type="button" onClick=${() => onChange([...rules, toRule({})])}>Add a rule</button></p>
  </fieldset>`;
}

// Stores `body` as `id`, or under a fresh random ID (another on 409): the ID saved.
async function save(client, site, id, body) {
  if (id) {
    await client.put(site, id, body);
    return id;
  }
  for (let tries = 0; tries < 5; tries++) {
    const fresh = randomId();
    try {
      await client.put(site, fresh, body);
      return fresh;
    } catch (e) {
      if (e.status !== 409) throw e;
    }
  }
  throw new CouchError(409, 'conflict', 'five fresh IDs were all taken: try again');
}

export function Editor({ site, doc, onSaved, onCancel }) {
  const client = useClient();
  const creating = !doc._rev;
  const [form, setForm] = useState(toForm(doc));
  const [id, setId] = useState(creating ? '' : doc._id);
  const [error, setError] = useState(null);
  const [conflict, setConflict] = useState(null);
  const set = (field) => (e) => setForm({ ...form, [field]: e.target.value });

  async function submit(e) {
    e.preventDefault();
    setError(null);
    const body = fromForm(form, doc);
    delete body._id;
    if (creating) body.created = new Date().toISOString();
    try {
      // The console hashes a new password; only the hash is written.
      if (form.password && !form.removePassword) {
        try {
          body.password = await client.passwordHash(form.password);
        } catch (e) {
          setError({ form: 'password', message: e.message });
          return;
        }
      }
      onSaved(await save(client, site, creating ? id : doc._id, body));
    } catch (e) {
      if (e.status === 409 && creating && id) {
        setError({ form: 'id', message: `The ID ${id} is taken: choose another, or leave it empty for a fresh one.` });
      } else if (e.status === 409 && !creating) {
        try {
          setConflict({ mine: body, theirs: await client.doc(site, doc._id) });
        } catch (again) { setError(again); }
      } else {
        setError(e);
      }
    }
  }

  async function keepMine() {
    try {
      await client.put(site, doc._id, { ...conflict.mine, _rev: conflict.theirs._rev });
      onSaved(doc._id);
    } catch (e) {
      setConflict(null);
      setError(e);
    }
  }

  if (conflict) {
    return html`<section aria-label="Conflict">
      <h2>Someone else saved ${doc._id} meanwhile</h2>
      <p>Nothing was overwritten. Choose which version to keep.</p>
      <div class="conflict">
        <div><h3>Yours</h3><pre>${JSON.stringify(conflict.mine, null, 2)}</pre><button onClick=${keepMine}>Keep mine</button></div>
        <div><h3>Saved meanwhile</h3><pre>${JSON.stringify(conflict.theirs, null, 2)}</pre><button onClick=${() => onSaved(doc._id)}>Keep theirs</button></div>
      </div>
    </section>`;
  }
  const field = (name, label, type = 'text', extra = {}) => html`<label for=${`f-${name}`}>${label}</label>
    <input id=${`f-${name}`} type=${type} value=${form[name]} onInput=${set(name)} ...${extra} />
    <${FieldRefusal} error=${error} field=${name} />`;
  return html`<form onSubmit=${submit} aria-label=${creating ? 'New link' : `Edit ${doc._id}`}>
    <h2>${creating ? 'New link' : `Edit ${doc._id}`}</h2>
    ${creating && html`<label for="f-id">ID (empty: a fresh random one)</label>
      <input id="f-id" type="text" value=${id} onInput=${(e) => setId(e.target.value)} pattern="[A-Za-z0-9]{5}" />
      <${FieldRefusal} error=${error} field="id" />`}
    ${field('url', 'Target URL', 'url', { required: true })}
    ${field('title', 'Title')}
    ${field('tags', 'Tags (comma-separated)')}
    ${field('valid_from', 'Valid from (date, time and zone, like 2026-12-01T09:00:00+01:00)')}
    ${field('expires', 'Expires (date, time and zone, like 2026-12-31T23:59:59Z)')}
    ${field('fallback', 'Fallback URL (where people go once it has expired or is inactive)', 'url')}
    <fieldset aria-label="Password">
      <legend>Password: visitors' browsers ask for it before the link opens</legend>
      ${form.protected && html`<p>This link asks for a password.</p>
        <label><input id="f-remove-password" type="checkbox" checked=${form.removePassword}
          onChange=${(e) => setForm({ ...form, removePassword: e.target.checked })} /> Remove the password</label>`}
      <label for="f-password">${form.protected ? 'New password (empty: keep it)' : 'Password (empty: none)'}</label>
      <input id="f-password" type="password" autocomplete="new-password" value=${form.password} onInput=${set('password')}
        disabled=${form.removePassword} />
      <${FieldRefusal} error=${error} field="password" />
    </fieldset>
    ${field('max_visits', 'At most this many visits, then as expired (empty: no limit)', 'number', { min: 1 })}
    <label><input id="f-max-visits-bots" type="checkbox" checked=${form.max_visits_bots}
      onChange=${(e) => setForm({ ...form, max_visits_bots: e.target.checked })} /> Bots' visits count too</label>
    <${Rules} rules=${form.targets} onChange=${(targets) => setForm({ ...form, targets })} />
    <${FieldRefusal} error=${error} field="targets" />
    <${FieldRefusal} error=${error} field="" />
    <p><button type="submit">Save</button> <button type="button" onClick=${onCancel}>Cancel</button></p>
  </form>`;
}
