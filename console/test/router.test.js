// A URL per screen: what each address opens, and back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatRoute, parseRoute } from '../router.js';

test('each screen has an address that opens it again', () => {
  const routes = [
    { db: 'links', page: 'list', q: '', pages: [] },
    { db: 'links', page: 'list', q: 'spring flyer', pages: [['spring', 'H83if'], ['spring', 'Zz9aa']] },
    { db: 'links', page: 'list', q: '', pages: [['2026-11-28T10:00:00Z', 'H83if']] },
    { db: 'acme_links', page: 'link', id: 'H83if' },
    { db: 'acme/links', page: 'edit', id: 'H83if' },
    { db: 'links', page: 'new' },
    { db: 'links', page: 'tag', tag: 'spring flyer/2026' },
  ];
  for (const route of routes) assert.deepEqual(parseRoute(formatRoute(route)), route, formatRoute(route));
  assert.equal(formatRoute(routes[3]), '#/acme_links/link/H83if');
  assert.equal(formatRoute(routes[4]), '#/acme%2Flinks/link/H83if/edit');
  assert.equal(formatRoute(routes[6]), '#/links/tag/spring%20flyer%2F2026');
});

test('an empty or mistyped address opens the first database\'s list', () => {
  const list = { db: 'links', page: 'list', q: '', pages: [] };
  for (const hash of ['', '#', '#/', '#/%E0%A4%A/link/x', '#/links/links?pages=notjson', '#/links/nothing/here/at/all']) {
    assert.deepEqual(parseRoute(hash, 'links'), list, hash);
  }
  assert.deepEqual(parseRoute('#/other', 'links'), { db: 'other', page: 'list', q: '', pages: [] });
  assert.deepEqual(parseRoute('#/links/links?pages=[[1,2]]', 'x').pages, []);
});
