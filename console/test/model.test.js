// The console's pure rules, held to the same tables of cases as the Rust side.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  bulkChange, changes, fromForm, linkStatus, passwordProblem, randomId, refusalOf, restoring, stating, sumClicks, targetProblem, toForm, uniqueRows, visits,
} from '../model.js';

const shared = (name) => JSON.parse(readFileSync(new URL(`../../tests/${name}`, import.meta.url), 'utf8'));

test('a link status is what tests/link_status.json says, as domain::Link decides it', () => {
  const table = shared('link_status.json');
  const now = new Date(table.now);
  assert.ok(table.cases.length >= 25);
  for (const c of table.cases) {
    const got = linkStatus(c.doc, now);
    assert.equal(got.status, c.status, JSON.stringify(c.doc));
    assert.equal(got.field, c.field, JSON.stringify(c.doc));
  }
  assert.ok(table.cases.some((c) => /^javascript:/i.test(c.doc.url) && c.status === 'refused'));
});

test('a target is served as tests/target_cases.json says, as the proxy serves it', () => {
  const cases = shared('target_cases.json');
  assert.ok(cases.length >= 50);
  for (const c of cases) assert.equal(targetProblem(c.url) === null, c.ok, `${JSON.stringify(c.url)}: ${targetProblem(c.url)}`);
});

// The validation function itself, run here as CouchDB runs it: every refusal of a field names
// it in brackets, and the model places it under the form field the table says.
test('every refusal of the validation function is placed by the field it names', () => {
  const source = readFileSync(new URL('../../couchdb/validate_doc_update.js', import.meta.url), 'utf8');
  const validate = (0, eval)(`(${source.replace(/^\s*\/\/.*$/gm, '')})`);
  const table = shared('refusal_fields.json');
  assert.ok(table.cases.length >= 30);
  for (const c of table.cases) {
    const user = c.user || { name: 'ed', roles: ['links:editor'] };
    let thrown = null;
    try { validate(c.doc, null, { db: 'links', ...user }, {}); } catch (e) { thrown = e; }
    assert.ok(thrown && thrown.forbidden, `${JSON.stringify(c.doc)} was let through`);
    const refusal = refusalOf(thrown.forbidden);
    assert.equal(refusal.field, c.field, thrown.forbidden);
    assert.equal(refusal.form, c.form, thrown.forbidden);
    assert.ok(!refusal.message.startsWith('['), thrown.forbidden);
  }
});

// A link's password field: only an Argon2id hash within bounds, as the proxy's reader decides
// (src/domain/password.rs holds itself to the same table).
test('the validation function takes the password hashes tests/password_cases.json takes, and no other', () => {
  const source = readFileSync(new URL('../../couchdb/validate_doc_update.js', import.meta.url), 'utf8');
  const validate = (0, eval)(`(${source.replace(/^\s*\/\/.*$/gm, '')})`);
  const table = shared('password_cases.json');
  assert.ok(table.cases.some((c) => c.ok) && table.cases.some((c) => !c.ok));
  for (const c of table.cases) assert.equal(passwordProblem(c.password) === null, c.ok, `the model: ${c.why}`);
  for (const c of table.cases) {
    let thrown = null;
    const doc = { _id: 'H83if', url: 'https://example.com/', password: c.password };
    try { validate(doc, null, { db: 'links', name: 'ed', roles: ['links:editor'] }, {}); } catch (e) { thrown = e; }
    assert.equal(thrown === null, c.ok, `${c.why}: ${thrown && thrown.forbidden}`);
    if (thrown) assert.equal(refusalOf(thrown.forbidden).field, 'password', thrown.forbidden);
  }
});

test('rewording a refusal cannot move it: only the bracketed path counts', () => {
  assert.deepEqual(refusalOf('[expires] The "url" and "targets" are fine; "expires" is not.'),
    { field: 'expires', form: 'expires', message: 'The "url" and "targets" are fine; "expires" is not.' });
  assert.equal(refusalOf('[targets.3.split.2.url] x').form, 'targets');
  assert.equal(refusalOf('[inactive] x').form, '');
  assert.deepEqual(refusalOf('"url" must be...'), { field: null, form: '', message: '"url" must be...' });
  for (const odd of ['[url]x', '[] x', '[a..b] x', '[url ] x']) assert.equal(refusalOf(odd).field, null, odd);
});

test('the form keeps what it does not show, and writes back what it edits', () => {
  const doc = {
    _id: 'H83if', _rev: '1-a', url: 'https://example.com/', inactive: true, owner: 'ops', tags: ['a', 'b'],
    targets: [{ when: { os: ['ios'], weather: ['rain'] }, url: 'https://apps.example/' },
      { split: [{ weight: 1, url: 'https://a.example/' }, { weight: 3, url: 'https://b.example/' }] }],
  };
  const form = toForm(doc);
  assert.equal(form.tags, 'a, b');
  assert.deepEqual(fromForm(form, doc), doc);
  const edited = fromForm({ ...form, tags: '', title: ' Spring ', expires: '' }, doc);
  assert.equal(edited.title, 'Spring');
  assert.equal(edited.tags, undefined);
  assert.equal(edited.owner, 'ops');
  assert.equal(fromForm(toForm({ url: 'https://x.example/' }), {}).inactive, false);
});

test('a visit limit is edited as a number, and its visits left read from the proxies\' counts', () => {
  const doc = { _id: 'Coupn', url: 'https://example.com/', max_visits: 500 };
  const form = toForm(doc);
  assert.equal(form.max_visits, '500');
  assert.deepEqual(fromForm(form, doc), { ...doc, inactive: false });
  assert.equal(fromForm({ ...form, max_visits: ' ' }, doc).max_visits, undefined);
  assert.equal(fromForm({ ...form, max_visits: 'lots' }, doc).max_visits, 'lots', 'left for the validation function to refuse');
  assert.equal(fromForm({ ...form, max_visits_bots: true }, doc).max_visits_bots, true);
  const rows = [{ key: ['Coupn'], value: [120, 20, 90, 3] }];
  assert.deepEqual(visits(doc, rows), { used: 100, left: 400 });
  assert.deepEqual(visits({ ...doc, max_visits_bots: true }, rows), { used: 120, left: 380 });
  assert.deepEqual(visits({ ...doc, max_visits: 50 }, rows), { used: 100, left: 0 });
  assert.deepEqual(visits(doc, []), { used: 0, left: 500 });
  assert.equal(visits({ url: 'https://example.com/' }, rows), null);
});

test('a password is never shown in the form: kept as its hash, or removed when asked', () => {
  const doc = { _id: 'H83if', url: 'https://example.com/', password: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA' };
  const form = toForm(doc);
  assert.equal(form.protected, true);
  assert.equal(form.password, '', 'the hash is not put in the password field');
  assert.equal(fromForm(form, doc).password, doc.password, 'kept when nothing is asked');
  assert.equal('password' in fromForm({ ...form, removePassword: true }, doc), false);
  assert.equal(toForm({ url: 'https://example.com/' }).protected, false);
});

test('clicks are summed by UTC day into today, 7 days and in all', () => {
  const now = new Date('2026-06-10T08:00:00Z');
  const rows = [
    { key: ['H83if', '2026', '06', '10'], value: [3, 1, 2, 0] },
    { key: ['H83if', '2026', '06', '04'], value: [5, 0, 1, 0] },
    { key: ['H83if', '2026', '06', '03'], value: [7, 0, 0, 0] },
  ];
  assert.deepEqual(sumClicks(rows, now), { today: 3, week: 8, total: 15 });
});

test('a fresh ID is 5 letters or digits, bytes of 248 and above drawn again', () => {
  const bytes = [255, 248, 0, 61, 62, 123, 247, 1, 2, 3];
  let at = 0;
  const id = randomId((n) => Uint8Array.from({ length: n }, () => bytes[at++ % bytes.length]));
  assert.equal(id, 'A9A99'); // 255 and 248 drawn again; 247 kept
  assert.match(randomId(), /^[A-Za-z0-9]{5}$/);
});

test('a link found by several of its words is listed once', () => {
  const doc = { url: 'https://x.example/' };
  const rows = [{ id: 'A', doc }, { id: 'A', doc }, { id: 'B', doc: null }, { id: 'C', doc }];
  assert.deepEqual(uniqueRows(rows).map((r) => r.id), ['A', 'C']);
});

test('what a history entry says changed is as the shared table says', () => {
  const table = shared('history_cases.json');
  assert.ok(table.cases.length >= 5);
  for (const c of table.cases) assert.deepEqual(changes(c), c.changed, JSON.stringify(c));
});

test('a write states its writer, and a restore what it restores, never the old edit', () => {
  const now = new Date('2026-11-28T09:00:00.123Z');
  assert.deepEqual(stating({ url: 'u', edit: { by: 'old' } }, 'maria', now), { url: 'u', edit: { by: 'maria', at: '2026-11-28T09:00:00.123Z' } });
  assert.deepEqual(stating({ url: 'u' }, null, now), { url: 'u' }, 'no session: nothing stated');
  const entry = { rev: '2-b', after: { url: 'https://a.example/', tags: ['x'], edit: { by: 'ed' } } };
  const restored = restoring(entry, { _id: 'H83if', _rev: '5-e', url: 'https://z.example/' });
  assert.deepEqual(stating(restored, 'maria', now, { restores: entry.rev }), {
    _id: 'H83if', _rev: '5-e', url: 'https://a.example/', tags: ['x'],
    edit: { by: 'maria', at: '2026-11-28T09:00:00.123Z', restores: '2-b' },
  });
});

test('a bulk change makes each link what the shared table says', () => {
  const table = shared('bulk_cases.json');
  assert.ok(table.cases.length >= 6);
  for (const c of table.cases) assert.deepEqual(bulkChange(c.doc, c.change), c.after, JSON.stringify(c));
});

