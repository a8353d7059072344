// Pieces every screen uses: the session's client, how a failure reads, a refusal under its
// field, a tag's colours.
import { createContext, html, useContext, useEffect, useRef, useState } from '../vendor/htm-preact-standalone.mjs';
import { isCancelled } from '../client.js';
import { countsInterval, untilNextAsk } from '../chart.js';

// The session's client (client.js), handed down by the app: every view asks through the one
// it is given, so a test renders a view with a client of its own.
export const ClientContext = createContext(null);

export function useClient() {
  const client = useContext(ClientContext);
  if (!client) throw new Error('a view rendered outside a ClientContext has no client to ask');
  return client;
}

// Any failure the same way: CouchDB's words (or the console's), and what to do about a few.
export function Failure({ error, retry }) {
  if (!error) return null;
  const text = error.status === 0 ? error.message
    : error.status === 401 ? `${error.message} (log in again)`
    : error.message || String(error);
  return html`<p class="error" role="alert">${text}${retry && html` <button type="button" onClick=${retry}>Try again</button>`}</p>`;
}

// The refusal whose field belongs under this form field (`''`: the form as a whole).
export function FieldRefusal({ error, field }) {
  if (!error || (error.form ?? '') !== field) return null;
  return html`<p class="error" role="alert" id=${`e-${field}`}>${error.message}</p>`;
}

// A tag's two colours. The console refuses colours phone readers cannot tell apart, and says
// their contrast (docs/reference.md, `couchlink qr --fg`).
export function ColourPicker({ colours, onChange, prefix }) {
  return html`<p class="colours">
    <label class="inline" for=${prefix + '-fg'}>Modules</label>
    <input id=${prefix + '-fg'} type="color" value=${colours.fg} onInput=${(e) => onChange({ ...colours, fg: e.target.value })} />
    <label class="inline" for=${prefix + '-bg'}>Ground</label>
    <input id=${prefix + '-bg'} type="color" value=${colours.bg} onInput=${(e) => onChange({ ...colours, bg: e.target.value })} /></p>`;
}

export const statusClass = (status) => `status-${status.replace(/ /g, '-')}`;

// A link's status as text: a refused document says which field and why.
export function StatusText({ of }) {
  return html`<span class=${statusClass(of.status)} title=${of.why || ''}>${of.status}${of.field ? ` (${of.field})` : ''}</span>`;
}

// Waits for `load(signal)` and keeps what it gives or its failure; the request is cancelled
// when the screen goes or what it asks changes. `retry` asks again from scratch; `refresh` asks
// again keeping what is shown until the answer comes (live counts), and only while `deps` are
// those it was shown for, so a screen never shows one link's data under another's name; none
// while an answer is awaited (under 10 s), so a slow screen's refresh is not cancelled by the next.
export function useLoad(load, deps) {
  const [state, setState] = useState({ value: null, error: null, loading: true });
  const [again, setAgain] = useState({ n: 0, quiet: false });
  const shown = useRef(null);
  const busy = useRef(0);
  const key = JSON.stringify(deps);
  useEffect(() => {
    const controller = new AbortController();
    if (!(again.quiet && shown.current === key)) setState({ value: null, error: null, loading: true });
    shown.current = key;
    // An answer that arrives after its request was superseded is dropped, whatever its state.
    const current = () => !controller.signal.aborted;
    busy.current = Date.now();
    load(controller.signal).then(
      (value) => { if (current()) { busy.current = 0; setState({ value, error: null, loading: false }); } },
      (error) => { if (current()) { busy.current = 0; if (!isCancelled(error)) setState({ value: null, error, loading: false }); } },
    );
    return () => controller.abort();
  }, [key, again]);
  return {
    ...state,
    retry: () => setAgain(({ n }) => ({ n: n + 1, quiet: false })),
    refresh: () => { if (Date.now() - busy.current > 10000) setAgain(({ n }) => ({ n: n + 1, quiet: true })); },
  };
}

// Calls the latest `tick` just after each interval of `seconds` the proxies write (untilNextAsk):
// new counts show within one interval and about 2 s.
export function useEveryInterval(seconds, tick) {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!seconds) return undefined;
    let timer;
    const next = () => { timer = setTimeout(() => { latest.current(); next(); }, untilNextAsk(Date.now(), seconds)); };
    next();
    return () => clearTimeout(timer);
  }, [seconds]);
}

// The proxies' interval as their newest counts documents state it, read at once and each minute;
// the console's own until one is read.
export function useCountsInterval(site) {
  const client = useClient();
  const db = site.clicks_db;
  const [stated, setStated] = useState({});
  const read = () => db && client.countsSeconds(db).then((docs) => setStated({ db, docs }), () => {});
  useEffect(() => { read(); }, [db]);
  const seconds = countsInterval(stated.db === db && stated.docs, site.clicks_interval_secs);
  useEveryInterval(db && Math.max(seconds, 60), read);
  return seconds;
}
