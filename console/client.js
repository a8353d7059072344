// The console's one way to its server: CouchDB through the console's couch/ passage (with the
// visitor's own session: CouchDB decides), and the console's own answers (console.json, QR
// tags, print sheets), which use CouchDB's error shape too. Every failure is one CouchError:
// the HTTP status (0: no answer), CouchDB's `error` and `reason`, and the field a refusal of the
// validation function names. A request superseded by a newer one is cancelled (`latest`).
// The app makes one per session and hands it to the views (views/common.js, ClientContext).

import { COUNTS_INTERVAL_QUERY } from './chart.js';
import { stating } from './history.js';
import { refusalOf } from './link.js';

export class CouchError extends Error {
  constructor(status, error, reason) {
    const refusal = refusalOf(reason);
    super(refusal.message);
    this.name = 'CouchError';
    this.status = status;
    this.error = error;
    this.reason = reason;
    // The document field the refusal names (`targets.2.url`), and the form field it belongs under.
    this.field = refusal.field;
    this.form = refusal.form;
  }
}

// Whether `e` is a request cancelled because a newer one replaced it (nothing to show).
export const isCancelled = (e) => e && e.name === 'AbortError';

const enc = encodeURIComponent;
const key = (value) => enc(JSON.stringify(value));

// `fetcher` is the browser's fetch; `base` the console's address (the page's own by default);
// `writer` the account every write states as its writer (the history records it; CouchDB
// refuses another name): the session's.
export function createClient({ fetcher = (...args) => globalThis.fetch(...args), base = '', writer = null } = {}) {
  // Every URL asked: `path` under `base`, its own path kept, or relative to the page.
  const at = (path) => (base ? new URL(path, base.endsWith('/') ? base : `${base}/`).href : path);
  async function call(path, { method = 'GET', body, signal, raw = false } = {}) {
    const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    let response;
    try {
      response = await fetcher(at(path), init);
    } catch (e) {
      if (isCancelled(e)) throw e;
      throw new CouchError(0, 'unreachable', `The console did not answer: ${e.message}`);
    }
    if (response.ok && raw) return response;
    let parsed = null;
    try { parsed = await response.json(); } catch (e) {
      if (isCancelled(e)) throw e;
      parsed = null;
    }
    if (!response.ok) {
      const said = parsed && typeof parsed === 'object' ? parsed : {};
      throw new CouchError(response.status, String(said.error || 'http'), String(said.reason || said.error || `HTTP ${response.status}`));
    }
    return parsed;
  }
  const couch = (path, options) => call('couch' + path, options);
  const db = (name) => `/${enc(name)}`;
  return {
    // The session: its userCtx (name null when nobody is logged in).
    session: async (options) => (await couch('/_session', options)).userCtx,
    logIn: (name, password) => couch('/_session', { method: 'POST', body: { name, password } }),
    logOut: () => couch('/_session', { method: 'DELETE' }),
    // The databases this visitor may read, as the console offers them.
    sites: async (options) => (await call('console.json', options)).sites,
    doc: (site, id, options) => couch(`${db(site.db)}/${enc(id)}`, options),
    // Writes `doc` as `id`: CouchDB's `{ok, id, rev}`; a 409 is a CouchError like any refusal.
    // The writer is stated unless `extra` is null (a write that keeps the document's `edit`).
    put: (site, id, doc, options, extra = {}) =>
      couch(`${db(site.db)}/${enc(id)}`, { method: 'PUT', body: extra ? stating(doc, writer, new Date(), extra) : doc, ...options }),
    // The links `ids` as stored (null for one that is not there), in their order.
    docs: async (site, ids, options) => {
      const rows = (await couch(`${db(site.db)}/_all_docs?include_docs=true&keys=${key(ids)}`, options)).rows;
      return rows.map((r) => (r.doc && !r.value?.deleted ? r.doc : null));
    },
    // What each link of a bulk change states: the writer, now, and `extra` (its `batch`).
    editOf: (extra, now = new Date()) => ({ by: writer, at: now.toISOString(), ...extra }),
    // Writes `docs` at once through `_bulk_docs`, each stating `edit` (one for the whole
    // change): CouchDB checks each. Each link's outcome by ID: {ok, rev} or {error, reason} (a
    // stale revision is a `conflict`, never written over).
    bulk: async (site, docs, edit, options) => {
      const body = { docs: docs.map((d) => ({ ...d, edit })) };
      const rows = await couch(`${db(site.db)}/_bulk_docs`, { method: 'POST', body, ...options });
      return new Map(rows.map((r) => [r.id, r]));
    },
    // A bulk change's record (console/bulk.js), all its parts at once, in the history
    // database: each part's outcome by ID.
    record: async (site, parts, options) => {
      const rows = await couch(`${db(site.history_db)}/_bulk_docs`, { method: 'POST', body: { docs: parts }, ...options });
      return new Map(rows.map((r) => [r.id, r]));
    },
    // The documents under bulk change `name`'s record, with their conflicts.
    recorded: async (site, name, options) => {
      const prefix = `~batch:${name}:`;
      const rows = (await couch(`${db(site.history_db)}/_all_docs?include_docs=true&conflicts=true`
        + `&startkey=${key(prefix)}&endkey=${key(`${prefix}\ufff0`)}`, options)).rows;
      return rows.map((r) => r.doc).filter(Boolean);
    },
    // The links `ids` as they are now, each with its ancestry (`_revisions`; null: none), a
    // few at a time.
    withAncestry: (site, ids, options) => each(ids, async (id) => {
      try {
        return await couch(`${db(site.db)}/${enc(id)}?revs=true`, options);
      } catch (e) {
        if (e.status === 404) return null;
        throw e;
      }
    }, 8),
    // Link `id` at revision `rev` (null when CouchDB no longer holds it).
    revision: async (site, id, rev, options) => {
      try {
        return await couch(`${db(site.db)}/${enc(id)}?rev=${enc(rev)}`, options);
      } catch (e) {
        if (e.status === 404) return null;
        throw e;
      }
    },
    // A link's history entries (changes and gaps), newest first.
    history: async (site, id, options) => {
      const rows = (await couch(`${db(site.history_db)}/_all_docs?include_docs=true&descending=true`
        + `&startkey=${key(`${id}/\ufff0`)}&endkey=${key(`${id}/`)}`, options)).rows;
      return rows.map((r) => r.doc).filter(Boolean);
    },
    // A view's rows: `params` as CouchDB takes them, keys JSON-encoded here.
    view: async (dbName, design, view, params = {}, options) => {
      const query = Object.entries(params).map(([k, v]) => `${k}=${/key$/.test(k) ? key(v) : enc(String(v))}`).join('&');
      return (await couch(`${db(dbName)}/_design/${enc(design)}/_view/${enc(view)}?${query}`, options)).rows;
    },
    // The newest counts documents' `seconds` (chart.js, countsInterval).
    countsSeconds: async (dbName, options) =>
      (await couch(`${db(dbName)}/_find`, { method: 'POST', body: COUNTS_INTERVAL_QUERY, ...options })).docs,
    // Whether the console makes the tag in these colours (it refuses colours scanners cannot
    // tell apart, saying their contrast): resolves when it does.
    tagMade: (site, id, query, options) => call(`qr/${enc(site.db)}/${enc(id)}.svg${query}`, { raw: true, ...options }).then(() => true),
    // A link password's Argon2id hash, made by the console (the page writes it into the
    // document; the password itself goes nowhere else).
    passwordHash: async (password, options) =>
      (await call('password', { method: 'POST', body: { password }, ...options })).password,
    // A print sheet: the PDF as a Blob.
    sheet: async (site, request, options) =>
      (await call(`qr/${enc(site.db)}/sheet.pdf`, { method: 'POST', body: request, raw: true, ...options })).blob(),
  };
}

// `ask(item)` for each of `items`, at most `width` at once (a tag's links: CouchDB answers each
// link's view in a few milliseconds, and a page should not queue hundreds of requests at once),
// the answers in the items' order.
export async function each(items, ask, width = 4) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await ask(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

// A source of AbortSignals each of which cancels the one before: the newest search wins, an
// older one answered late is never shown.
export function latest() {
  let current = null;
  return () => {
    if (current) current.abort();
    current = new AbortController();
    return current.signal;
  };
}
