// The couchlink console: one more CouchDB client, like Fauxton. Every read and write goes to
// CouchDB through the console's /couch/ passage with the user's own session; CouchDB decides.
// Stored values are only ever rendered as text (htm escapes them), and a target is a link only
// when it is http(s).
import { html, render, useState, useEffect } from './vendor/htm-preact-standalone.mjs';

const PAGE = 50;

async function couch(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: 'application/json', ...headers }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  let response;
  try {
    response = await fetch('couch' + path, init);
  } catch (e) {
    return { status: 0, body: { error: 'unreachable', reason: 'The console did not answer: ' + e.message } };
  }
  let parsed = null;
  try { parsed = await response.json(); } catch (e) { parsed = null; }
  return { status: response.status, body: parsed };
}

const reason = (answer) => (answer.body && (answer.body.reason || answer.body.error)) || `HTTP ${answer.status}`;
const enc = encodeURIComponent;
const q = (value) => enc(JSON.stringify(value));

function status(doc, now = new Date()) {
  if (doc.inactive) return 'inactive';
  if (doc.expires && new Date(doc.expires) <= now) return 'expired';
  if (doc.valid_from && new Date(doc.valid_from) > now) return 'not yet started';
  return 'live';
}

// A fresh link ID, uniform over the 62^5 IDs as `couchlink create` draws them: bytes of 248 and
// above are drawn again (248 = 4 x 62), so that no letter is likelier than another.
function randomId() {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let id = '';
  while (id.length < 5) {
    for (const b of crypto.getRandomValues(new Uint8Array(8))) {
      if (b < 248 && id.length < 5) id += alphabet[b % 62];
    }
  }
  return id;
}

const isWeb = (url) => typeof url === 'string' && /^https?:\/\//i.test(url);

function Login({ onIn }) {
  const [error, setError] = useState('');
  async function submit(e) {
    e.preventDefault();
    const form = new FormData(e.target);
    const answer = await couch('POST', '/_session', { name: form.get('name'), password: form.get('password') });
    if (answer.status === 200) onIn(); else setError(reason(answer));
  }
  return html`<form onSubmit=${submit} aria-label="Log in">
    <h2>Log in with your CouchDB account</h2>
    <label for="name">Account</label><input id="name" name="name" type="text" autocomplete="username" required />
    <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required />
    <p><button type="submit">Log in</button></p>
    ${error && html`<p class="error" role="alert">${error}</p>`}
  </form>`;
}

function Clicks({ site, id }) {
  const [days, setDays] = useState(null);
  const [versions, setVersions] = useState([]);
  useEffect(() => {
    if (!site.clicks_db) return;
    const since = new Date(Date.now() - 89 * 86400000).toISOString().slice(0, 10).split('-');
    couch('GET', `/${enc(site.clicks_db)}/_design/clicks/_view/by_link?group_level=4&startkey=${q([id, ...since])}&endkey=${q([id, {}])}`)
      .then((a) => setDays(a.status === 200 ? a.body.rows : []));
    couch('GET', `/${enc(site.clicks_db)}/_design/clicks/_view/by_version?group=true&startkey=${q([id])}&endkey=${q([id, {}])}`)
      .then((a) => setVersions(a.status === 200 ? a.body.rows : []));
  }, [site, id]);
  if (!site.clicks_db) return html`<p>Live counts are off for this database.</p>`;
  if (days === null) return html`<p>Loading clicks…</p>`;
  return html`<section aria-label="Clicks">
    <h3>Clicks per day, last 90 days</h3>
    ${days.length === 0 ? html`<p>No clicks counted yet.</p>` : html`<table>
      <thead><tr><th>Day (UTC)</th><th>Redirects</th><th>Bots</th><th>New visitors</th><th>404s</th></tr></thead>
      <tbody>${days.map((r) => html`<tr><td>${r.key.slice(1).join('-')}</td>${r.value.map((v) => html`<td>${v}</td>`)}</tr>`)}</tbody>
    </table>`}
    <h3>Per target version</h3>
    ${versions.length === 0 ? html`<p>None yet.</p>` : html`<table>
      <thead><tr><th>Location</th><th>Redirects</th></tr></thead>
      <tbody>${versions.map((r) => html`<tr><td>${r.key[1]}</td><td>${r.value}</td></tr>`)}</tbody>
    </table>`}
  </section>`;
}

// A rule of `targets` as the form edits it: the conditions it knows as text (lists
// comma-separated; query parameters as `name=value,value; name=value`), its URL or its split
// (`WEIGHT URL` a line), and any other condition kept as it was (the editor never drops what it
// cannot show). CouchDB's validation function judges the result and names the field it refuses.
const CONDITIONS = [
  ['os', 'Operating systems (ios, android, windows, macos, linux, chromeos)'],
  ['device', 'Devices (mobile, tablet, desktop)'],
  ['lang', 'Languages (fr, de, pt-br)'],
  ['country', 'Countries (IE, GB: ISO codes in capitals)'],
];
const EDITED = ['os', 'device', 'lang', 'country', 'query'];
function queryText(query) {
  if (!query || typeof query !== 'object') return '';
  return Object.entries(query).map(([name, values]) => `${name}=${Array.isArray(values) ? values.join(',') : ''}`).join('; ');
}
function queryOf(text) {
  const query = {};
  for (const part of text.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    const values = part.slice(at + 1).split(',').map((v) => v.trim()).filter(Boolean);
    if (name && values.length) query[name] = values;
  }
  return query;
}
function splitText(split) {
  return (Array.isArray(split) ? split : []).map((v) => `${v && v.weight} ${v && v.url}`).join('\n');
}
function splitOf(text) {
  return text.split('\n').map((line) => line.trim()).filter(Boolean).map((line) => {
    const [weight, ...url] = line.split(/\s+/);
    return { weight: /^\d+$/.test(weight) ? Number(weight) : weight, url: url.join(' ') };
  });
}
function toRule(rule) {
  const when = (rule && rule.when) || {};
  const form = { url: (rule && typeof rule.url === 'string' && rule.url) || '', other: {} };
  for (const [name] of CONDITIONS) form[name] = Array.isArray(when[name]) ? when[name].join(', ') : '';
  form.query = queryText(when.query);
  form.split = splitText(rule && rule.split);
  for (const name of Object.keys(when)) if (!EDITED.includes(name)) form.other[name] = when[name];
  return form;
}
function fromRule(form) {
  const when = { ...form.other };
  for (const [name] of CONDITIONS) {
    const values = form[name].split(',').map((v) => v.trim()).filter(Boolean);
    if (values.length) when[name] = values;
  }
  const query = queryOf(form.query);
  if (Object.keys(query).length) when.query = query;
  const split = splitOf(form.split);
  if (split.length) return Object.keys(when).length ? { when, split } : { split };
  return { when, url: form.url.trim() };
}

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


function toForm(doc) {
  return {
    url: String(doc.url || ''), title: String(doc.title || ''), tags: (Array.isArray(doc.tags) ? doc.tags : []).join(', '),
    expires: doc.expires || '', valid_from: doc.valid_from || '', fallback: doc.fallback || '',
    targets: Array.isArray(doc.targets) ? doc.targets.map(toRule) : [],
  };
}

function fromForm(form, base) {
  const doc = { ...base };
  for (const field of ['url', 'title', 'expires', 'valid_from', 'fallback']) {
    const value = form[field].trim();
    if (value) doc[field] = value; else delete doc[field];
  }
  const tags = form.tags.split(',').map((t) => t.trim()).filter(Boolean);
  if (tags.length) doc.tags = tags; else delete doc.tags;
  if (form.targets.length) doc.targets = form.targets.map(fromRule); else delete doc.targets;
  if (doc.inactive === undefined) doc.inactive = false;
  return doc;
}

// The field a refusal of the validation function is about: the one it names (the first, in
// quotes), a rule's for "targets", the "url" for a reason about an address that names none (the
// validation names every other field), and none for a refusal of the whole edit.
const REFUSAL_FIELDS = ['targets', 'valid_from', 'expires', 'fallback', 'url', 'title', 'tags', 'id'];
function fieldOf(text) {
  if (/^(Your account|Links cannot|The document ID)/.test(text)) return /document ID/.test(text) ? 'id' : '';
  if (text.includes('"targets"')) return 'targets';
  let best = null;
  for (const field of REFUSAL_FIELDS) {
    const at = text.indexOf(`"${field}"`);
    if (at !== -1 && (best === null || at < best.at)) best = { field, at };
  }
  return best ? best.field : 'url';
}

function Refusal({ errors, field }) {
  return errors[field] ? html`<p class="error" role="alert" id=${`e-${field}`}>${errors[field]}</p>` : null;
}

function Editor({ site, doc, onSaved, onCancel }) {
  const creating = !doc._rev;
  const [form, setForm] = useState(toForm(doc));
  const [id, setId] = useState(creating ? '' : doc._id);
  const [errors, setErrors] = useState({});
  const setError = (text) => setErrors(text ? { [fieldOf(text)]: text } : {});
  const [conflict, setConflict] = useState(null);
  const set = (field) => (e) => setForm({ ...form, [field]: e.target.value });

  async function save(body) {
    if (!creating || id) {
      const target = creating ? id : doc._id;
      return [target, await couch('PUT', `/${enc(site.db)}/${enc(target)}`, body)];
    }
    // A fresh random ID, another one on conflict.
    for (let tries = 0; tries < 5; tries++) {
      const fresh = randomId();
      const answer = await couch('PUT', `/${enc(site.db)}/${enc(fresh)}`, body);
      if (answer.status !== 409) return [fresh, answer];
    }
    return [null, { status: 409, body: { reason: 'five fresh IDs were all taken: try again' } }];
  }

  async function submit(e) {
    e.preventDefault();
    setError('');
    const body = fromForm(form, doc);
    delete body._id;
    if (creating) body.created = new Date().toISOString();
    const [saved, answer] = await save(body);
    if (answer.status === 201 || answer.status === 202) { onSaved(saved); return; }
    if (answer.status === 409 && creating) {
      setErrors({ id: saved ? `The ID ${saved} is taken: choose another, or leave it empty for a fresh one.` : reason(answer) });
      return;
    }
    if (answer.status === 409 && !creating) {
      const theirs = await couch('GET', `/${enc(site.db)}/${enc(doc._id)}`);
      setConflict({ mine: body, theirs: theirs.body });
      return;
    }
    setError(reason(answer));
  }

  async function keepMine() {
    const body = { ...conflict.mine, _rev: conflict.theirs._rev };
    const answer = await couch('PUT', `/${enc(site.db)}/${enc(doc._id)}`, body);
    if (answer.status === 201 || answer.status === 202) onSaved(doc._id); else { setConflict(null); setError(reason(answer)); }
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
  return html`<form onSubmit=${submit} aria-label=${creating ? 'New link' : `Edit ${doc._id}`}>
    <h2>${creating ? 'New link' : `Edit ${doc._id}`}</h2>
    ${creating && html`<label for="f-id">ID (empty: a fresh random one)</label>
      <input id="f-id" type="text" value=${id} onInput=${(e) => setId(e.target.value)} pattern="[A-Za-z0-9]{5}" />
      <${Refusal} errors=${errors} field="id" />`}
    <label for="f-url">Target URL</label><input id="f-url" type="url" value=${form.url} onInput=${set('url')} required />
    <${Refusal} errors=${errors} field="url" />
    <label for="f-title">Title</label><input id="f-title" type="text" value=${form.title} onInput=${set('title')} />
    <${Refusal} errors=${errors} field="title" />
    <label for="f-tags">Tags (comma-separated)</label><input id="f-tags" type="text" value=${form.tags} onInput=${set('tags')} />
    <${Refusal} errors=${errors} field="tags" />
    <label for="f-valid_from">Valid from (date, time and zone, like 2026-12-01T09:00:00+01:00)</label>
    <input id="f-valid_from" type="text" value=${form.valid_from} onInput=${set('valid_from')} />
    <${Refusal} errors=${errors} field="valid_from" />
    <label for="f-expires">Expires (date, time and zone, like 2026-12-31T23:59:59Z)</label>
    <input id="f-expires" type="text" value=${form.expires} onInput=${set('expires')} />
    <${Refusal} errors=${errors} field="expires" />
    <label for="f-fallback">Fallback URL (where people go once it has expired or is inactive)</label>
    <input id="f-fallback" type="url" value=${form.fallback} onInput=${set('fallback')} />
    <${Refusal} errors=${errors} field="fallback" />
    <${Rules} rules=${form.targets} onChange=${(targets) => setForm({ ...form, targets })} />
    <${Refusal} errors=${errors} field="targets" />
    <${Refusal} errors=${errors} field="" />
    <p><button type="submit">Save</button> <button type="button" onClick=${onCancel}>Cancel</button></p>
  </form>`;
}

// A tag's two colours. The console refuses colours phone readers cannot tell apart, and says
// their contrast (docs/reference.md, `couchlink qr --fg`).
function ColourPicker({ colours, onChange, prefix }) {
  return html`<p class="colours">
    <label class="inline" for=${prefix + '-fg'}>Modules</label>
    <input id=${prefix + '-fg'} type="color" value=${colours.fg} onInput=${(e) => onChange({ ...colours, fg: e.target.value })} />
    <label class="inline" for=${prefix + '-bg'}>Ground</label>
    <input id=${prefix + '-bg'} type="color" value=${colours.bg} onInput=${(e) => onChange({ ...colours, bg: e.target.value })} /></p>`;
}

// A print sheet of the links ticked in the list: made by the console as `couchlink qr --sheet`
// makes it, from the IDs and titles the page read from CouchDB.
function SheetForm({ site, selected, onClear }) {
  const [colours, setColours] = useState({ fg: '#000000', bg: '#ffffff' });
  const [paper, setPaper] = useState('a4');
  const [size, setSize] = useState('30');
  const [titles, setTitles] = useState(true);
  const [made, setMade] = useState(null);
  const [error, setError] = useState('');
  const ids = [...selected.keys()];
  async function make(e) {
    e.preventDefault();
    setError(''); setMade(null);
    const body = { tags: ids.map((id) => ({ id, title: selected.get(id) })), paper, size_mm: Number(size), fg: colours.fg, bg: colours.bg, titles };
    const r = await fetch(`qr/${enc(site.db)}/sheet.pdf`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    if (!r.ok) { setError((await r.json().catch(() => ({}))).reason || `HTTP ${r.status}`); return; }
    if (made) URL.revokeObjectURL(made.url);
    const pdf = await r.blob();
    setMade({ url: URL.createObjectURL(pdf), count: ids.length, kb: Math.ceil(pdf.size / 1024) });
  }
  return html`<form onSubmit=${make} aria-label="Print sheet"><fieldset><legend>Print sheet of ${ids.length} tag${ids.length === 1 ? '' : 's'}</legend>
    <label class="inline" for="s-paper">Paper</label>
    <select id="s-paper" value=${paper} onChange=${(e) => setPaper(e.target.value)}><option value="a4">A4</option><option value="letter">Letter</option></select>
    <label class="inline" for="s-size">Tag size (mm)</label>
    <input id="s-size" type="number" min="10" max="250" value=${size} onInput=${(e) => setSize(e.target.value)} />
    <label class="inline"><input type="checkbox" checked=${titles} onChange=${(e) => setTitles(e.target.checked)} /> Titles under the tags</label>
    <${ColourPicker} colours=${colours} onChange=${setColours} prefix="s" />
    <p><button type="submit">Make the sheet (PDF)</button> <button type="button" onClick=${onClear}>Clear the selection</button></p>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${made && html`<p class="notice"><a href=${made.url} download="couchlink-sheet.pdf">Download the sheet (${made.count} tags, PDF, ${made.kb} KB)</a></p>`}
  </fieldset></form>`;
}

function LinkPage({ site, id, editor, onBack }) {
  const [doc, setDoc] = useState(null);
  const [error, setError] = useState('');
  const [editing, setEditing] = useState(false);
  const [copied, setCopied] = useState(false);
  const [colours, setColours] = useState({ fg: '#000000', bg: '#ffffff' });
  const [tagError, setTagError] = useState('');
  const tagQuery = `?fg=${enc(colours.fg)}&bg=${enc(colours.bg)}`;
  // Colours too alike are refused by the console with the contrast they have: asked first, so
  // the page can say why rather than show a broken picture.
  useEffect(() => {
    fetch(`qr/${enc(site.db)}/${enc(id)}.svg${tagQuery}`).then(async (r) => {
      setTagError(r.ok ? '' : ((await r.json().catch(() => ({}))).reason || `HTTP ${r.status}`));
    });
  }, [site, id, tagQuery]);
  const load = () => couch('GET', `/${enc(site.db)}/${enc(id)}`).then((a) => (a.status === 200 ? setDoc(a.body) : setError(reason(a))));
  useEffect(() => { load(); }, [site, id]);
  const short = `${site.public_url.replace(/\/$/, '')}/${id}`;
  async function setInactive(inactive) {
    const answer = await couch('PUT', `/${enc(site.db)}/${enc(id)}`, { ...doc, inactive });
    if (answer.status === 201 || answer.status === 202) load(); else setError(reason(answer));
  }
  if (error) return html`<p class="error" role="alert">${error}</p><button onClick=${onBack}>Back to the links</button>`;
  if (!doc) return html`<p>Loading ${id}…</p>`;
  if (editing) return html`<${Editor} site=${site} doc=${doc} onSaved=${() => { setEditing(false); load(); }} onCancel=${() => setEditing(false)} />`;
  const qr = `qr/${enc(site.db)}/${enc(id)}`;
  return html`<article aria-label=${`Link ${id}`}>
    <p><button onClick=${onBack}>Back to the links</button></p>
    <h2>${typeof doc.title === 'string' && doc.title ? doc.title : id}</h2>
    <p>Short URL: <output aria-label="Short URL">${short}</output>
      <button onClick=${() => navigator.clipboard.writeText(short).then(() => setCopied(true))}>Copy the short URL</button>
      ${copied && html`<span class="notice"> copied</span>`}</p>
    <p>Status: <span class=${`status-${status(doc).replace(/ /g, "-")}`}>${status(doc)}</span></p>
    <p>Points to: ${isWeb(doc.url) ? html`<a href=${doc.url} rel="noopener noreferrer">${doc.url}</a>` : html`<code>${String(doc.url)}</code>`}</p>
    ${Array.isArray(doc.tags) && html`<p>Tags: ${doc.tags.map(String).join(', ')}</p>`}
    <div class="tag">
      <${ColourPicker} colours=${colours} onChange=${setColours} prefix="t" />
      ${tagError ? html`<p class="error" role="alert">${tagError}</p>` : html`<img src=${qr + '.svg' + tagQuery} alt=${`QR tag of ${short}`} />
      <p><a href=${qr + '.svg' + tagQuery} download=${id + '.svg'}>Download the tag (SVG)</a> · <a href=${qr + '.png' + tagQuery} download=${id + '.png'}>Download the tag (PNG)</a></p>`}</div>
    ${editor && html`<p><button onClick=${() => setEditing(true)}>Edit</button>
      ${doc.inactive ? html` <button onClick=${() => setInactive(false)}>Reactivate</button>` : html` <button onClick=${() => setInactive(true)}>Deactivate</button>`}</p>`}
    <${Clicks} site=${site} id=${id} />
  </article>`;
}

// One request per link shown: its clicks per day, summed here into today, 7 days and in all.
async function clicksOf(site, id) {
  const a = await couch('GET', `/${enc(site.clicks_db)}/_design/clicks/_view/by_link?group_level=4&startkey=${q([id])}&endkey=${q([id, {}])}`);
  if (a.status !== 200) return null;
  const day = (offset) => new Date(Date.now() - offset * 86400000).toISOString().slice(0, 10);
  const today = day(0), week = day(6);
  const sum = { today: 0, week: 0, total: 0 };
  for (const row of a.body.rows) {
    const d = row.key.slice(1).join('-');
    sum.total += row.value[0];
    if (d >= week) sum.week += row.value[0];
    if (d === today) sum.today += row.value[0];
  }
  return sum;
}

function Links({ site, editor, onOpen, onNew }) {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState('');
  const [pages, setPages] = useState([null]);
  const [clicks, setClicks] = useState({});
  const [search, setSearch] = useState('');
  const [asked, setAsked] = useState('');
  // Links ticked for a print sheet, kept across pages and searches: ID to title.
  const [selected, setSelected] = useState(new Map());
  useEffect(() => { setSelected(new Map()); }, [site]);
  const tick = (r) => (e) => {
    const next = new Map(selected);
    if (e.target.checked) next.set(r.id, typeof r.doc.title === 'string' ? r.doc.title : ''); else next.delete(r.id);
    setSelected(next);
  };
  const after = pages[pages.length - 1];
  useEffect(() => {
    setRows(null);
    const word = asked.trim().toLowerCase().split(/\s+/)[0] || '';
    let path;
    if (word) {
      const from = after ? `startkey=${q(after.key)}&startkey_docid=${enc(after.id)}` : `startkey=${q(word)}`;
      path = `/${enc(site.db)}/_design/console/_view/search?include_docs=true&limit=${PAGE + 1}&${from}&endkey=${q(word + '\ufff0')}`;
    } else {
      const from = after ? `&startkey=${q(after.key)}&startkey_docid=${enc(after.id)}` : '';
      path = `/${enc(site.db)}/_design/console/_view/recent?descending=true&include_docs=true&limit=${PAGE + 1}${from}`;
    }
    couch('GET', path).then((a) => {
      if (a.status !== 200) { setError(reason(a)); setRows([]); return; }
      setError('');
      // A link whose several words begin alike is found once.
      const seen = new Set();
      setRows(a.body.rows.filter((r) => r.doc && !seen.has(r.id) && seen.add(r.id)));
      if (site.clicks_db) {
        for (const r of a.body.rows.slice(0, PAGE)) {
          clicksOf(site, r.id).then((c) => c && setClicks((all) => ({ ...all, [r.id]: c })));
        }
      }
    });
  }, [site, after, asked]);
  function submit(e) { e.preventDefault(); setPages([null]); setAsked(search); }
  const c = (id, k) => (clicks[id] ? clicks[id][k] : '…');
  return html`<section aria-label="Links">
    ${editor && html`<p><button onClick=${onNew}>New link</button></p>`}
    <form onSubmit=${submit} role="search" aria-label="Search links">
      <label for="search">Search by ID, URL, title or tag (a word's beginning)</label>
      <input id="search" type="search" value=${search} onInput=${(e) => setSearch(e.target.value)} />
      <button type="submit">Search</button>
    </form>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${rows === null ? html`<p>Loading links…</p>` : html`<table aria-label="Links of ${site.db}">
      <thead><tr><th><span class="hidden">Print</span></th><th>ID</th><th>Status</th><th>Points to</th><th class="wide">Title</th><th>Today</th><th class="wide">7 days</th><th>Total</th></tr></thead>
      <tbody>${rows.slice(0, PAGE).map((r) => html`<tr>
        <td><input type="checkbox" aria-label=${`Print ${r.id}`} checked=${selected.has(r.id)} onChange=${tick(r)} /></td>
        <td><a href="#" onClick=${(e) => { e.preventDefault(); onOpen(r.id); }}>${r.id}</a></td>
        <td class=${`status-${status(r.doc).replace(/ /g, "-")}`}>${status(r.doc)}</td>
        <td>${String(r.doc.url)}</td><td class="wide">${typeof r.doc.title === 'string' ? r.doc.title : ''}</td>
        <td>${c(r.id, 'today')}</td><td class="wide">${c(r.id, 'week')}</td><td>${c(r.id, 'total')}</td></tr>`)}</tbody></table>
      ${rows.length === 0 && html`<p>No links${asked ? ' match' : ' yet'}.</p>`}`}
    <p>${pages.length > 1 && html`<button onClick=${() => setPages(pages.slice(0, -1))}>Previous page</button>`}
      ${rows && rows.length > PAGE && html` <button onClick=${() => setPages([...pages, rows[PAGE]])}>Next page</button>`}</p>
    ${selected.size > 0 && html`<${SheetForm} site=${site} selected=${selected} onClear=${() => setSelected(new Map())} />`}
  </section>`;
}

function App() {
  const [session, setSession] = useState(undefined);
  const [sites, setSites] = useState([]);
  const [site, setSite] = useState(null);
  const [view, setView] = useState({ page: 'list' });
  async function refresh() {
    const answer = await couch('GET', '/_session');
    const user = answer.status === 200 ? answer.body.userCtx : null;
    if (!user || !user.name) { setSession(null); return; }
    // The databases this account may read (the console asks CouchDB as this visitor); 403: none.
    let readable = [];
    try {
      const r = await fetch('console.json', { credentials: 'same-origin' });
      if (r.status === 401) { setSession(null); return; }
      if (r.ok) readable = (await r.json()).sites;
    } catch (e) { readable = []; }
    setSites(readable);
    setSite(readable[0] || null);
    setSession(user);
  }
  useEffect(() => { refresh(); }, []);
  async function logout() {
    await couch('DELETE', '/_session');
    setSession(null);
    setView({ page: 'list' });
  }
  if (session === undefined) return html`<p>Loading the console…</p>`;
  if (session === null) return html`<header><h1>couchlink console</h1></header><${Login} onIn=${refresh} />`;
  const editor = site && (session.roles.includes('_admin') || session.roles.includes(site.editor_role));
  return html`<header><h1>couchlink console</h1>
      <span>${session.name}${editor ? ' (editor)' : ' (reader)'}</span>
      ${sites.length > 1 && html`<label for="db" class="inline">Database</label>
        <select id="db" onChange=${(e) => { setSite(sites[e.target.selectedIndex]); setView({ page: 'list' }); }}>
          ${sites.map((s) => html`<option value=${s.db} selected=${s === site}>${s.db}</option>`)}</select>`}
      <button onClick=${logout}>Log out</button></header>
    ${!site ? html`<p>This account may read none of the console's databases.</p>`
      : view.page === 'link' ? html`<${LinkPage} site=${site} id=${view.id} editor=${editor} onBack=${() => setView({ page: 'list' })} />`
      : view.page === 'new' ? html`<${Editor} site=${site} doc=${{}} onSaved=${(id) => setView({ page: 'link', id })} onCancel=${() => setView({ page: 'list' })} />`
      : html`<${Links} site=${site} editor=${editor} onOpen=${(id) => setView({ page: 'link', id })} onNew=${() => setView({ page: 'new' })} />`}`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
