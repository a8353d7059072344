// A link document, pure, as the proxy reads it: its status (domain::Link), its targets
// (domain::target), its password hash (domain::password), where CouchDB's refusal of it
// belongs (domain::refusal), a fresh ID as `couchlink create` draws one, and the list's rows.
// No DOM and no network, so `node --test` runs it (console/test/link.test.js) against the
// tables the Rust side is held to.

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


// The list's rows: a link whose several words begin alike is found once, rows without their
// document (deleted meanwhile) are left out.
export function uniqueRows(rows) {
  const seen = new Set();
  return rows.filter((r) => r.doc && !seen.has(r.id) && seen.add(r.id));
}
