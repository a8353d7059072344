// The console's rules, pure: what a link document does, the edit form and back, where a
// refusal belongs, the clicks summed for the list. No DOM and no network, so `node --test`
// runs them (console/test/model.test.js) against the tables the Rust side is held to.

export const PAGE = 50;

// A target as the proxy serves it (src/domain/target.rs; tests/target_cases.json holds both to
// the same cases): null when it is served as written, else why not.
const PATH = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;
const QUERY = /^[A-Za-z0-9\-._~!$&()*+,;=:@/%?]*$/;
const FRAGMENT = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*$/;

function tailProblem(tail) {
  const hash = tail.indexOf('#');
  const before = hash === -1 ? tail : tail.slice(0, hash);
  const q = before.indexOf('?');
  const path = q === -1 ? before : before.slice(0, q);
  if (!PATH.test(path)) return 'the path holds a character that must be percent-encoded';
  if (q !== -1 && !QUERY.test(before.slice(q + 1))) return "the query holds a character that must be percent-encoded (' as %27)";
  if (hash !== -1 && !FRAGMENT.test(tail.slice(hash + 1))) return 'the fragment holds a character that must be percent-encoded';
  if (/%(?![0-9A-Fa-f]{2})/.test(tail)) return '% is followed by two hex digits';
  if (path.split('/').some((s) => /^(\.|%2e){1,2}$/i.test(s))) return 'no . or .. path segments';
  return null;
}

export function targetProblem(url) {
  if (typeof url !== 'string' || url === '') return 'there is no url';
  if (!/^[\x21-\x7e]*$/.test(url)) return 'only visible ASCII: spaces, control characters and other scripts must be percent-encoded';
  if (url[0] === '/') return url[1] === '/' ? 'an internal redirect starts with a single /' : tailProblem(url);
  const scheme = /^https?:\/\//.exec(url);
  if (!scheme) return 'it must start with http:// or https:// in lower case';
  const rest = url.slice(scheme[0].length);
  const end = rest.search(/[/?#]/);
  const authority = end === -1 ? rest : rest.slice(0, end);
  if (authority.includes('@')) return 'no user name or password before the host';
  const colon = authority.lastIndexOf(':');
  const host = colon === -1 ? authority : authority.slice(0, colon);
  if (host.length === 0 || host.length > 253) return 'a host name of 1 to 253 characters';
  const labels = host.split('.');
  if (labels.every((l) => /^[0-9]+$/.test(l))) {
    const quad = labels.length === 4 && labels.every((l) => /^(0|[1-9][0-9]{0,2})$/.test(l) && Number(l) <= 255);
    if (!quad) return 'an IPv4 address is four numbers 0-255, without leading zeros';
  } else {
    if (!labels.every((l) => /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) {
      return 'a host is lower-case letters, digits and - between dots (xn-- for international names)';
    }
    if (/^([0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1])) return "a host name's last label is not a number";
  }
  if (colon !== -1) {
    const port = authority.slice(colon + 1);
    if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) return 'the port must be 1 to 65535, without leading zeros';
    if (Number(port) === (scheme[0] === 'https://' ? 443 : 80)) return "the scheme's default port is left out";
  }
  return tailProblem(end === -1 ? '' : rest.slice(end));
}

// Why a `password` is no hash the proxy checks, or null (src/domain/password.rs, as
// tests/password_cases.json holds both).
export function passwordProblem(text) {
  const [, m, t, p, salt, hash] = /^\$argon2id\$v=19\$m=([1-9]\d{0,5}),t=([1-9]\d{0,5}),p=([1-9]\d{0,5})\$([^$]*)\$([^$]*)$/.exec(text) || [];
  const b64 = (s, min, max) => s.length >= min && s.length <= max && s.length % 4 !== 1 && /^[A-Za-z0-9+/]*$/.test(s);
  return m && m >= 7168 && m <= 65536 && t <= 5 && p <= 4 && m * t >= 35840 && m * t <= 65536 && b64(salt, 22, 86) && b64(hash, 43, 43) ? null : 'not an Argon2id hash in bounds';
}

export const isWeb = (url) => typeof url === 'string' && /^https?:\/\//.test(url);

// A link's status at `now`, as domain::Link decides it (tests/link_status.json holds both):
// { status: 'live' | 'inactive' | 'expired' | 'not yet started' } or
// { status: 'refused', field, why } when the proxy will not serve the document as written.
const RFC3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
const present = (doc, name) => doc[name] !== undefined && doc[name] !== null;

export function linkStatus(doc, now = new Date()) {
  const refused = (field, why) => ({ status: 'refused', field, why });
  if (typeof doc.url !== 'string') return refused('url', 'the document has no string "url"');
  for (const name of ['inactive', 'oob']) {
    if (present(doc, name) && typeof doc[name] !== 'boolean') return refused(name, `"${name}" has the wrong JSON type`);
  }
  const times = {};
  for (const name of ['expires', 'valid_from']) {
    if (!present(doc, name)) continue;
    const t = doc[name];
    const ms = typeof t === 'string' && RFC3339.test(t) ? Date.parse(t.replace(/:60(\.\d+)?/, ':59')) : NaN;
    if (Number.isNaN(ms)) return refused(name, `"${name}" is not an RFC 3339 timestamp`);
    times[name] = ms;
  }
  if (present(doc, 'fallback') && typeof doc.fallback !== 'string') return refused('fallback', '"fallback" has the wrong JSON type');
  if (present(doc, 'max_visits_bots') && typeof doc.max_visits_bots !== 'boolean') return refused('max_visits_bots', 'not true or false');
  const max = doc.max_visits;
  if (present(doc, 'max_visits') && !(typeof max === 'number' && max % 1 === 0 && max >= 1 && max <= 1e9)) return refused('max_visits', 'not a whole number from 1 to 1e9');
  if (present(doc, 'password') && passwordProblem(String(doc.password))) return refused('password', 'not an Argon2id hash in bounds');
  if (present(doc, 'targets')) {
    if (!Array.isArray(doc.targets)) return refused('targets', '"targets" has the wrong JSON type');
    for (const [i, rule] of doc.targets.entries()) {
      const urls = rule && typeof rule === 'object' ? (Array.isArray(rule.split) ? rule.split.map((v) => v && v.url) : [rule.url]) : [undefined];
      const problem = urls.map(targetProblem).find((p) => p !== null);
      if (problem) return refused('targets', `rule ${i + 1} of "targets": ${problem}`);
    }
  }
  if (present(doc, 'fallback')) {
    const problem = targetProblem(doc.fallback);
    if (problem) return refused('fallback', `"fallback": ${problem}`);
  }
  const problem = targetProblem(doc.url);
  if (problem) return refused('url', `the "url" is not in the form couchlink sends (${problem})`);
  const at = now.getTime();
  if (doc.inactive === true) return { status: 'inactive' };
  if (times.valid_from !== undefined && at < times.valid_from) return { status: 'not yet started' };
  if (times.expires !== undefined && at >= times.expires) return { status: 'expired' };
  return { status: 'live' };
}

// A refusal of the validation function, by the path it names in brackets (docs/reference.md,
// "Refusals"; src/domain/refusal.rs reads the same form): never by its wording. `form` is the
// form field it is shown under, '' for the form as a whole.
const FORM_FIELD = { _id: 'id', url: 'url', fallback: 'fallback', expires: 'expires', valid_from: 'valid_from', targets: 'targets', password: 'password',
  max_visits: 'max_visits', max_visits_bots: 'max_visits' };

export function refusalOf(reason) {
  const text = String(reason);
  const named = /^\[([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)\] /.exec(text);
  if (!named) return { field: null, form: '', message: text };
  const top = named[1].split('.')[0];
  return { field: named[1], form: FORM_FIELD[top] ?? '', message: text.slice(named[0].length) };
}

// A fresh link ID, uniform over the 62^5 IDs as `couchlink create` draws them: bytes of 248 and
// above are drawn again (248 = 4 x 62), so that no letter is likelier than another.
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
export function randomId(bytes = (n) => crypto.getRandomValues(new Uint8Array(n))) {
  let id = '';
  while (id.length < 5) {
    for (const b of bytes(8)) if (b < 248 && id.length < 5) id += ALPHABET[b % 62];
  }
  return id;
}

// A rule of `targets` as the form edits it: the conditions it knows as text (lists
// comma-separated; query parameters as `name=value,value; name=value`), its URL or its split
// (`WEIGHT URL` a line), and any other condition kept as it was (the editor never drops what it
// cannot show). CouchDB's validation function judges the result.
export const CONDITIONS = [
  ['os', 'Operating systems (ios, android, windows, macos, linux, chromeos)'],
  ['device', 'Devices (mobile, tablet, desktop)'],
  ['lang', 'Languages (fr, de, pt-br)'],
  ['country', 'Countries (IE, GB: ISO codes in capitals)'],
];
const EDITED = ['os', 'device', 'lang', 'country', 'query'];
const list = (text) => text.split(',').map((v) => v.trim()).filter(Boolean);

export function queryText(query) {
  if (!query || typeof query !== 'object') return '';
  return Object.entries(query).map(([name, values]) => `${name}=${Array.isArray(values) ? values.join(',') : ''}`).join('; ');
}

export function queryOf(text) {
  const query = {};
  for (const part of text.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    const values = list(part.slice(at + 1));
    if (name && values.length) query[name] = values;
  }
  return query;
}

export const splitText = (split) => (Array.isArray(split) ? split : []).map((v) => `${v && v.weight} ${v && v.url}`).join('\n');

export function splitOf(text) {
  return text.split('\n').map((line) => line.trim()).filter(Boolean).map((line) => {
    const [weight, ...url] = line.split(/\s+/);
    return { weight: /^\d+$/.test(weight) ? Number(weight) : weight, url: url.join(' ') };
  });
}

export function toRule(rule) {
  const when = (rule && rule.when) || {};
  const form = { url: (rule && typeof rule.url === 'string' && rule.url) || '', other: {} };
  for (const [name] of CONDITIONS) form[name] = Array.isArray(when[name]) ? when[name].join(', ') : '';
  form.query = queryText(when.query);
  form.split = splitText(rule && rule.split);
  for (const name of Object.keys(when)) if (!EDITED.includes(name)) form.other[name] = when[name];
  return form;
}

export function fromRule(form) {
  const when = { ...form.other };
  for (const [name] of CONDITIONS) {
    const values = list(form[name]);
    if (values.length) when[name] = values;
  }
  const query = queryOf(form.query);
  if (Object.keys(query).length) when.query = query;
  const split = splitOf(form.split);
  if (split.length) return Object.keys(when).length ? { when, split } : { split };
  return { when, url: form.url.trim() };
}

export function toForm(doc) {
  return {
    url: String(doc.url || ''), title: String(doc.title || ''), tags: (Array.isArray(doc.tags) ? doc.tags : []).join(', '),
    expires: doc.expires || '', valid_from: doc.valid_from || '', fallback: doc.fallback || '',
    targets: Array.isArray(doc.targets) ? doc.targets.map(toRule) : [],
    // Never the hash: a new password, or its removal.
    protected: typeof doc.password === 'string', password: '', removePassword: false,
    max_visits: doc.max_visits == null ? '' : String(doc.max_visits), max_visits_bots: doc.max_visits_bots === true,
  };
}

// The document saved from `form`, on top of `base` (fields the form does not show are kept).
export function fromForm(form, base) {
  const doc = { ...base };
  for (const field of ['url', 'title', 'expires', 'valid_from', 'fallback']) {
    const value = form[field].trim();
    if (value) doc[field] = value; else delete doc[field];
  }
  const tags = list(form.tags);
  if (tags.length) doc.tags = tags; else delete doc.tags;
  if (form.targets.length) doc.targets = form.targets.map(fromRule); else delete doc.targets;
  if (form.removePassword) delete doc.password;
  const max = form.max_visits.trim();
  // Not a number: written as typed, for the validation function to refuse under its field.
  if (max) doc.max_visits = Number.isNaN(Number(max)) ? max : Number(max); else delete doc.max_visits;
  if (max && form.max_visits_bots) doc.max_visits_bots = true; else delete doc.max_visits_bots;
  if (doc.inactive === undefined) doc.inactive = false;
  return doc;
}

// The clicks view's rows of one link (`[id, y, m, d]` -> [redirects, bots, new visitors, 404s])
// summed into today, the last 7 days and in all (UTC days).
export function sumClicks(rows, now = new Date()) {
  const day = (offset) => new Date(now.getTime() - offset * 86400000).toISOString().slice(0, 10);
  const today = day(0), week = day(6);
  const sum = { today: 0, week: 0, total: 0 };
  for (const row of rows) {
    const d = row.key.slice(1).join('-');
    sum.total += row.value[0];
    if (d >= week) sum.week += row.value[0];
    if (d === today) sum.today += row.value[0];
  }
  return sum;
}

// A limited link's visits from its `by_link` rows at group level 1 ([redirects, bots, ...]), as
// the proxies count them (bots only with `max_visits_bots`): { used, left }, or null.
export function visits(doc, rows) {
  if (typeof doc.max_visits !== 'number') return null;
  const [all = 0, bots = 0] = rows.length ? rows[0].value : [];
  const used = doc.max_visits_bots ? all : all - bots;
  return { used, left: Math.max(0, doc.max_visits - used) };
}

// The list's rows: a link whose several words begin alike is found once, rows without their
// document (deleted meanwhile) are left out.
export function uniqueRows(rows) {
  const seen = new Set();
  return rows.filter((r) => r.doc && !seen.has(r.id) && seen.add(r.id));
}

// A document as written by `name`: its `edit` states the writer (and the time, and any of
// `extra`: a bulk change's `batch`, the revision a restore `restores`), as the history records
// it; CouchDB refuses a stated writer who is not the account writing.
export function stating(doc, name, now = new Date(), extra = {}) {
  if (!name) return doc;
  // To the millisecond: an `edit` equal to the revision before's states nothing (it reads as
  // carried over), so two quick writes by one person must differ.
  return { ...doc, edit: { by: name, at: now.toISOString(), ...extra } };
}

// What a history entry says changed: [field, before, after] in name order (null: absent),
// `edit` left out (it says who, not what); a field kept as its size and digest (too long to
// keep) is {large: {bytes, blake2b}}. tests/history_cases.json holds the cases the CLI agrees on.
export function changes(entry) {
  const side = (name) => {
    const fields = (entry[name] && typeof entry[name] === 'object') ? entry[name] : {};
    const large = (entry.large && entry.large[name] && typeof entry.large[name] === 'object') ? entry.large[name] : {};
    const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
    return {
      names: [...Object.keys(fields), ...Object.keys(large)],
      value: (k) => (has(fields, k) ? fields[k] : has(large, k) ? { large: large[k] } : undefined),
    };
  };
  const before = side('before');
  const after = side('after');
  const names = [...new Set([...before.names, ...after.names])].filter((k) => k !== 'edit').sort();
  return names
    .map((k) => [k, before.value(k), after.value(k)])
    .filter(([, b, a]) => JSON.stringify(b) !== JSON.stringify(a) || (b === undefined) !== (a === undefined))
    .map(([k, b, a]) => [k, b === undefined ? null : b, a === undefined ? null : a]);
}

// A recorded version as a new revision over `current`: the version's fields (without its
// `edit`: the write states its own, with what it `restores`), `current`'s `_id` and `_rev`.
export function restoring(entry, current) {
  const fields = { ...entry.after };
  delete fields.edit;
  return { ...fields, _id: current._id, _rev: current._rev };
}

// A bulk change applied to one link (src/bulk.rs, Change::apply; tests/bulk_cases.json holds
// the cases both agree on): the document it becomes, or null when it stays as it is. `change`:
// url, add_tags, remove_tags, inactive, expires, valid_from and password (a time or a hash, or
// null to remove; absent: untouched), add_rule, replace_rules.
export function bulkChange(doc, change) {
  const out = { ...doc };
  if (typeof change.url === 'string') out.url = change.url;
  const adds = change.add_tags || [];
  const removes = change.remove_tags || [];
  if (adds.length || removes.length) {
    const tags = Array.isArray(out.tags) ? [...out.tags] : [];
    for (const t of adds) if (!tags.includes(t)) tags.push(t);
    const kept = tags.filter((t) => !removes.includes(t));
    if (kept.length) out.tags = kept; else delete out.tags;
  }
  if (typeof change.inactive === 'boolean') out.inactive = change.inactive;
  for (const name of ['expires', 'valid_from', 'password']) {
    if (!Object.prototype.hasOwnProperty.call(change, name)) continue;
    if (change[name] === null) delete out[name]; else out[name] = change[name];
  }
  if (change.max_visits === null) { delete out.max_visits; delete out.max_visits_bots; }
  else if (typeof change.max_visits === 'number') out.max_visits = change.max_visits;
  if (Array.isArray(change.replace_rules)) {
    if (change.replace_rules.length) out.targets = change.replace_rules; else delete out.targets;
  }
  if (change.add_rule) out.targets = [...(Array.isArray(out.targets) ? out.targets : []), change.add_rule];
  const same = (a, b) => JSON.stringify(Object.entries(a).filter(([k]) => k !== 'edit').sort())
    === JSON.stringify(Object.entries(b).filter(([k]) => k !== 'edit').sort());
  return same(out, doc) ? null : out;
}

// A fresh bulk change's name, as `couchlink bulk` names its own: `bulk-20261128T090000-a1b2c3d4`
// (an undo's `undo-...`).
export function batchName(now = new Date(), bytes = (n) => crypto.getRandomValues(new Uint8Array(n)), kind = 'bulk') {
  const stamp = now.toISOString().slice(0, 19).replace(/[-:]/g, '');
  return `${kind}-${stamp}-${[...bytes(4)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}
