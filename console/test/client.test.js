// The client over real HTTP: a Node server of the test's own answers in CouchDB's documented
// shapes (`{"error", "reason"}`), with the delays a race needs. What CouchDB itself answers is
// the browser test's part (tests/console, on Apache CouchDB 3.5).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { CouchError, createClient, isCancelled, latest } from '../client.js';

const answers = {
  '/couch/links/H83if': [200, { _id: 'H83if', url: 'https://example.com/' }],
  '/couch/links/Refsd': [403, { error: 'forbidden', reason: '[targets.2.url] In the "url" of rule 2 of "targets": ...' }],
  '/couch/links/Whole': [403, { error: 'forbidden', reason: 'Your account "r" may not change links in this database.' }],
  '/console.json': [401, { error: 'unauthorized', reason: 'log in first' }],
  '/couch/links/_design/console/_view/recent': [200, { rows: [{ id: 'H83if' }] }],
};
const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  const wait = Number(url.searchParams.get('wait') || 0);
  const [status, body] = answers[url.pathname] || [500, 'not JSON'];
  setTimeout(() => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(typeof body === 'string' ? body : JSON.stringify({ ...body, query: url.search }));
  }, wait);
});
await new Promise((ready) => server.listen(0, '127.0.0.1', ready));
const base = `http://127.0.0.1:${server.address().port}/`;
after(() => server.close());

test('an answer is its JSON; every failure one CouchError with the field a refusal names', async () => {
  const client = createClient({ base });
  const site = { db: 'links' };
  assert.equal((await client.doc(site, 'H83if')).url, 'https://example.com/');
  await assert.rejects(client.put(site, 'Refsd', { url: 'x' }), (e) => {
    assert.ok(e instanceof CouchError);
    assert.deepEqual([e.status, e.error, e.field, e.form], [403, 'forbidden', 'targets.2.url', 'targets']);
    assert.equal(e.message, 'In the "url" of rule 2 of "targets": ...');
    return true;
  });
  await assert.rejects(client.put(site, 'Whole', {}), (e) => e.status === 403 && e.field === null && e.form === '');
  await assert.rejects(client.sites(), (e) => e.status === 401 && e.message === 'log in first');
  await assert.rejects(client.doc(site, 'Other'), (e) => e.status === 500 && e.message === 'HTTP 500');
  await assert.rejects(createClient({ base: 'http://127.0.0.1:9/' }).doc(site, 'H83if'),
    (e) => e.status === 0 && e.error === 'unreachable');
});

test('view keys are JSON, other parameters as they are', async () => {
  const client = createClient({ base });
  const rows = await client.view('links', 'console', 'recent', { startkey: ['a', {}], startkey_docid: 'H83if', limit: 51 });
  assert.deepEqual(rows, [{ id: 'H83if' }]);
});

test('a search superseded by a newer one is cancelled, and only the newer one answers', async () => {
  const client = createClient({ base });
  const next = latest();
  const slow = client.view('links', 'console', 'recent', { wait: 400 }, { signal: next() });
  const fresh = client.view('links', 'console', 'recent', { wait: 0 }, { signal: next() });
  await assert.rejects(slow, (e) => isCancelled(e));
  assert.deepEqual(await fresh, [{ id: 'H83if' }]);
});
