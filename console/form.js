// The edit form, pure: a link document as the fields a person edits, and back (fields the form
// does not show are kept as they are). CouchDB's validation function judges what it makes
// (console/test/form.test.js).

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
