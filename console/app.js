// The couchlink console: one more CouchDB client, like Fauxton. Every read and write goes to
// CouchDB through the console's couch/ passage with the visitor's own session; CouchDB decides.
// Stored values are only ever rendered as text (htm escapes them), and a target is a link only
// when it is http(s).
//
// The files, one concern each: client.js (every request, one error shape, cancellation), the
// pure rules by the Rust modules they mirror (link.js, form.js, history.js, bulk.js, chart.js),
// router.js (a URL per screen), views/ (the screens), and this one: the session, its client,
// the databases offered, and which screen the URL names.
import { html, render, useEffect, useMemo, useState } from './vendor/htm-preact-standalone.mjs';
import { createClient } from './client.js';
import { formatRoute, parseRoute } from './router.js';
import { ClientContext, Failure, useClient } from './views/common.js';
import { Editor } from './views/editor.js';
import { LinkPage } from './views/link.js';
import { TagPage } from './views/tag.js';
import { Links } from './views/list.js';

function Login({ client, onIn }) {
  const [error, setError] = useState(null);
  async function submit(e) {
    e.preventDefault();
    const form = new FormData(e.target);
    try {
      await client.logIn(form.get('name'), form.get('password'));
      onIn();
    } catch (e) { setError(e); }
  }
  return html`<form onSubmit=${submit} aria-label="Log in">
    <h2>Log in with your CouchDB account</h2>
    <label for="name">Account</label><input id="name" name="name" type="text" autocomplete="username" required />
    <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required />
    <p><button type="submit">Log in</button></p>
    <${Failure} error=${error} />
  </form>`;
}

// The screen the address names, followed through back, forward and pasted URLs.
function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

// Where links go and how screens are opened, for one database.
function screens(db) {
  const href = (route) => formatRoute({ db, q: '', pages: [], ...route });
  return { href, to: (route) => { location.hash = href(route); } };
}

// A link's page or its edit form, once its document is read.
function LinkScreen({ site, route, editor, go }) {
  const client = useClient();
  const [doc, setDoc] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (route.page !== 'edit') return undefined;
    const controller = new AbortController();
    setDoc(null);
    setError(null);
    client.doc(site, route.id, { signal: controller.signal }).then(setDoc, (e) => { if (!controller.signal.aborted) setError(e); });
    return () => controller.abort();
  }, [site, route.page, route.id]);
  if (route.page === 'link') return html`<${LinkPage} site=${site} id=${route.id} editor=${editor} go=${go} />`;
  if (error) return html`<${Failure} error=${error} />`;
  if (!doc) return html`<p>Loading ${route.id}…</p>`;
  const back = () => go.to({ page: 'link', id: route.id });
  return html`<${Editor} site=${site} doc=${doc} onSaved=${back} onCancel=${back} />`;
}

function App() {
  // Who is logged in, logging in and out, the databases: no writes, so no writer.
  const guest = useMemo(() => createClient(), []);
  const [session, setSession] = useState(undefined);
  const [sites, setSites] = useState(null);
  const [failure, setFailure] = useState(null);
  const hash = useRoute();
  async function refresh() {
    setFailure(null);
    try {
      const user = await guest.session();
      if (!user || !user.name) { setSession(null); return; }
      // The databases this account may read (the console asks CouchDB as this visitor).
      setSites(await guest.sites());
      setSession(user);
    } catch (e) {
      if (e.status === 401) setSession(null); else setFailure(e);
    }
  }
  useEffect(() => { refresh(); }, []);
  // The session's client, every write stating its account: the one the views are handed.
  const name = session ? session.name : null;
  const client = useMemo(() => name && createClient({ writer: name }), [name]);
  async function logout() {
    try { await guest.logOut(); } catch (e) { /* the session ends with the page either way */ }
    setSession(null);
  }
  const title = html`<header><h1>couchlink console</h1></header>`;
  if (failure) return html`${title}<${Failure} error=${failure} retry=${refresh} />`;
  if (session === undefined) return html`<p>Loading the console…</p>`;
  if (session === null) return html`${title}<${Login} client=${guest} onIn=${refresh} />`;
  const route = parseRoute(hash, sites[0] ? sites[0].db : '');
  const site = sites.find((s) => s.db === route.db);
  const editor = site && (session.roles.includes('_admin') || session.roles.includes(site.editor_role));
  const go = screens(route.db);
  return html`<header><h1>couchlink console</h1>
      <span>${session.name}${editor ? ' (editor)' : ' (reader)'}</span>
      ${sites.length > 1 && html`<label for="db" class="inline">Database</label>
        <select id="db" value=${route.db} onChange=${(e) => screens(e.target.value).to({ page: 'list' })}>
          ${sites.map((s) => html`<option value=${s.db} selected=${s === site}>${s.db}</option>`)}</select>`}
      <button onClick=${logout}>Log out</button></header>
    <${ClientContext.Provider} value=${client}>${sites.length === 0 ? html`<p>This account may read none of the console's databases.</p>`
      : !site ? html`<p class="error" role="alert">This account may not read the database ${route.db}, or the console does not offer it.</p>
          <p><a href=${screens(sites[0].db).href({ page: 'list' })}>Open ${sites[0].db}</a></p>`
      : route.page === 'list' ? html`<${Links} site=${site} route=${route} editor=${editor} go=${go} />`
      : route.page === 'tag' ? html`<${TagPage} site=${site} tag=${route.tag} go=${go} />`
      : route.page === 'new' ? html`<${Editor} site=${site} doc=${{}} onSaved=${(id) => go.to({ page: 'link', id })} onCancel=${() => go.to({ page: 'list' })} />`
      : html`<${LinkScreen} site=${site} route=${route} editor=${editor} go=${go} />`}<//>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
