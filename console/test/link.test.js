// A link document's pure rules, held to the same tables of cases as the Rust side.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  linkStatus, passwordProblem, randomId, refusalOf, targetProblem, uniqueRows,
} from '../link.js';

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
