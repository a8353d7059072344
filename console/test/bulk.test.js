// A bulk change, its record and its undo, held to the cases src/bulk.rs is held to.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  bulkChange, KEPT_BEFORE, PART, partId, readRecord, recordParts, undoPlan,
} from '../bulk.js';

const shared = (name) => JSON.parse(readFileSync(new URL(`../../tests/${name}`, import.meta.url), 'utf8'));

test('a bulk change makes each link what the shared table says', () => {
  const table = shared('bulk_cases.json');
  assert.ok(table.cases.length >= 6);
  for (const c of table.cases) assert.deepEqual(bulkChange(c.doc, c.change), c.after, JSON.stringify(c));
});

test('an undo does what tests/undo_cases.json says, as src/bulk.rs plan_undo does', () => {
  const table = shared('undo_cases.json');
  assert.ok(table.cases.length >= 6);
  for (const c of table.cases) {
    const record = readRecord(c.batch, c.record);
    if (c.steps === null) {
      assert.equal(record, null, c.why);
      continue;
    }
    assert.deepEqual(undoPlan(record, c.current), c.steps, c.why);
    assert.deepEqual(record.ignored, c.ignored, c.why);
  }
});

test('a record is written in parts of at most 500 links, a link too long to keep without its fields', () => {
  const edit = { by: 'ed', at: '2026-12-01T10:00:00.000Z', batch: 'bulk-1' };
  const writes = Array.from({ length: 1200 }, (_, i) => ({
    id: `L${String(i).padStart(4, '0')}`,
    before: { _id: 'x', _rev: '1-a', url: 'https://a.example/', ...(i === 3 ? { notes: 'n'.repeat(KEPT_BEFORE) } : {}) },
    after: {},
  }));
  const parts = recordParts('bulk-1', edit, writes);
  assert.deepEqual(parts.map((p) => p.writes.length), [PART, PART, 200]);
  assert.equal(parts[0].doc._id, '~batch:bulk-1:0001');
  assert.deepEqual(parts[0].doc.links[0], { id: 'L0000', rev: '1-a', before: { url: 'https://a.example/' } });
  assert.equal(parts[0].doc.links[3].before, null);
  assert.deepEqual([parts[2].doc.part, parts[2].doc.parts, parts[2].doc.by], [3, 3, 'ed']);
  assert.equal(partId('bulk-1', 2), '~batch:bulk-1:0002');
  // What the console writes is read back as the CLI reads it, whatever order CouchDB keeps the
  // fields of `edit` in.
  const record = readRecord('bulk-1', parts.map((p) => p.doc));
  assert.equal(record.members.length, 1200);
  const now = { _id: 'L0000', _rev: '2-b', url: 'https://b.example/', edit: { batch: 'bulk-1', at: edit.at, by: 'ed' },
    _revisions: { start: 2, ids: ['b', 'a'] } };
  assert.deepEqual(undoPlan({ ...record, members: record.members.slice(0, 1) }, [now])[0].step, 'restore');
});
