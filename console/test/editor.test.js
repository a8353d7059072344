// A view rendered alone: the edit form, by Preact's own render into a DOM this test makes
// (linkedom, console/install.sh), with a client of the test's own. The client is the page's
// (client.js, so every URL and body is the one the page sends); its fetch is the test's, which
// records each request and answers it as CouchDB documents its answers. What CouchDB itself
// answers is the browser test's part (tests/console).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseHTML } from 'linkedom';

const { window, document } = parseHTML('<!doctype html><html><body></body></html>');
globalThis.document = document;
const { html, render } = await import('../vendor/htm-preact-standalone.mjs');
const { createClient } = await import('../client.js');
const { ClientContext } = await import('../views/common.js');
const { Editor } = await import('../views/editor.js');

// A fetch that records what it is asked and answers with the next of `answers` ([status, body]),
// or, when the test has none left, 500: a request the test did not expect shows as a failure.
function recorder(answers) {
  const asked = [];
  const fetcher = async (url, init) => {
    asked.push({ method: init.method, url, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    const [status, body] = answers.shift() || [500, { error: 'unexpected', reason: `the test did not expect ${init.method} ${url}` }];
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  };
  return { asked, fetcher };
}

// The editor of `doc` on a page of its own, with `client`; what it calls back.
function editorOf(doc, client) {
  const root = document.createElement('main');
  document.body.appendChild(root);
  const called = { saved: [], cancelled: 0 };
  const site = { db: 'links', public_url: 'https://0x1f.ie/' };
  render(html`<${ClientContext.Provider} value=${client}>
    <${Editor} site=${site} doc=${doc} onSaved=${(id) => called.saved.push(id)} onCancel=${() => { called.cancelled += 1; }} /><//>`, root);
  return { root, called };
}

// Waits (2 s at most) until `holds()` does; fails saying what the page last showed.
async function until(what, root, holds) {
  const deadline = Date.now() + 2000;
  while (!holds()) {
    if (Date.now() > deadline) assert.fail(`${what}: never, the page showing ${JSON.stringify(root.textContent)}`);
    await new Promise((next) => setTimeout(next, 5));
  }
}

// What a person does, each as a browser task of its own: what it changed is drawn before the next.
const settle = () => new Promise((next) => setTimeout(next, 0));
const type = async (field, value) => {
  field.value = value;
  field.dispatchEvent(new window.Event('input', { bubbles: true }));
  await settle();
};
const submit = (form) => form.dispatchEvent(new window.Event('submit', { bubbles: true, cancelable: true }));
const click = (button) => button.dispatchEvent(new window.Event('click', { bubbles: true, cancelable: true }));
const button = (root, text) => [...root.querySelectorAll('button')].find((b) => b.textContent === text);

const link = {
  _id: 'H83if', _rev: '3-c', url: 'https://example.com/spring', title: 'Spring', tags: ['flyer'], owner: 'ops',
  edit: { by: 'ed', at: '2026-11-01T10:00:00.000Z' },
};

test('the editor shows the link, saves what was typed as the client\'s writer, and shows a refusal under its field', async () => {
  const refusal = '"expires" must be a date and time with its time zone, like "2026-12-31T23:59:59Z".';
  const { asked, fetcher } = recorder([
    [403, { error: 'forbidden', reason: `[expires] ${refusal}` }],
    [201, { ok: true, id: 'H83if', rev: '4-d' }],
  ]);
  const { root, called } = editorOf(link, createClient({ fetcher, writer: 'maria' }));
  assert.equal(root.querySelector('h2').textContent, 'Edit H83if');
  assert.equal(root.querySelector('#f-url').value, 'https://example.com/spring');
  assert.equal(root.querySelector('#f-title').value, 'Spring');
  assert.equal(root.querySelector('#f-tags').value, 'flyer');
  assert.equal(asked.length, 0, 'an edit form of a document read already asks nothing');

  await type(root.querySelector('#f-title'), ' Spring flyer ');
  await type(root.querySelector('#f-expires'), 'tomorrow');
  submit(root.querySelector('form'));
  await until('the refusal shown', root, () => root.querySelector('#e-expires'));
  assert.equal(root.querySelector('#e-expires').textContent, refusal);
  assert.equal(root.querySelector('#e-url'), null, 'shown under its own field only');
  assert.deepEqual(called.saved, [], 'not saved');
  assert.equal(asked.length, 1);
  assert.equal(asked[0].method, 'PUT');
  assert.equal(asked[0].url, 'couch/links/H83if');
  const { edit, ...sent } = asked[0].body;
  assert.deepEqual(sent, { _rev: '3-c', url: 'https://example.com/spring', title: 'Spring flyer', tags: ['flyer'], owner: 'ops', expires: 'tomorrow', inactive: false },
    'the fields typed, those the form does not show kept, the revision it was read at');
  assert.equal(edit.by, 'maria', 'the write states the client\'s writer, never the edit it was read with');
  assert.match(edit.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  await type(root.querySelector('#f-expires'), '2026-12-31T23:59:59Z');
  submit(root.querySelector('form'));
  await until('saved', root, () => called.saved.length === 1);
  assert.deepEqual(called.saved, ['H83if']);
  assert.equal(asked.length, 2);
  assert.deepEqual([asked[1].body.title, asked[1].body.expires], ['Spring flyer', '2026-12-31T23:59:59Z']);
  root.remove();
});

test('a link saved meanwhile is shown beside the edit, and written over only when asked', async () => {
  const theirs = { ...link, _rev: '4-e', url: 'https://example.com/autumn', edit: { by: 'ed', at: '2026-11-02T10:00:00.000Z' } };
  const { asked, fetcher } = recorder([
    [409, { error: 'conflict', reason: 'Document update conflict.' }],
    [200, theirs],
    [201, { ok: true, id: 'H83if', rev: '5-f' }],
  ]);
  const { root, called } = editorOf(link, createClient({ fetcher, writer: 'maria' }));
  await type(root.querySelector('#f-url'), 'https://example.com/summer');
  submit(root.querySelector('form'));
  await until('the conflict shown', root, () => root.querySelector('section[aria-label="Conflict"]'));
  assert.equal(root.querySelector('h2').textContent, 'Someone else saved H83if meanwhile');
  const [mine, saved] = [...root.querySelectorAll('pre')].map((p) => JSON.parse(p.textContent));
  assert.equal(mine.url, 'https://example.com/summer');
  assert.deepEqual(saved, theirs);
  assert.deepEqual(asked.map((a) => `${a.method} ${a.url}`), ['PUT couch/links/H83if', 'GET couch/links/H83if']);
  assert.deepEqual(called.saved, [], 'nothing written over unasked');

  click(button(root, 'Keep mine'));
  await until('saved over theirs', root, () => called.saved.length === 1);
  assert.equal(asked[2].method, 'PUT');
  assert.equal(asked[2].body._rev, '4-e', 'written over the revision saved meanwhile, not the one read');
  assert.equal(asked[2].body.url, 'https://example.com/summer');
  assert.equal(asked[2].body.edit.by, 'maria');
  root.remove();
});

test('a view rendered without a client says so, rather than asking through another', () => {
  const root = document.createElement('main');
  assert.throws(() => render(html`<${Editor} site=${{ db: 'links' }} doc=${link} onSaved=${() => {}} onCancel=${() => {}} />`, root),
    /outside a ClientContext/);
});
