// A link's history: what an entry says changed, what a write states, a version restored.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { changes, restoring, stating } from '../history.js';

const shared = (name) => JSON.parse(readFileSync(new URL(`../../tests/${name}`, import.meta.url), 'utf8'));

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
