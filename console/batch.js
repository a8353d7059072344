// A bulk change's record, pure (src/bulk.rs holds the same rules; tests/undo_cases.json holds
// both to the same cases): written to the history database by the change's writer as the change
// is made (each part's links, their revisions and what they were, before the links are
// written; the revisions they got, after), and read back by undo, which so never waits for a
// recorder and never believes what a later write states.

// Links per part (one `_bulk_docs` each), and about how many bytes of JSON a part holds at most.
export const PART = 500;
export const PART_BYTES = 512 * 1024;
// A link whose fields are longer than this as JSON is recorded without them: undo reads that
// revision back from CouchDB.
export const KEPT_BEFORE = 64 * 1024;

const bytes = (value) => new TextEncoder().encode(JSON.stringify(value)).length;

export const partId = (batch, part, written = false) =>
  `~batch:${batch}:${String(part).padStart(4, '0')}${written ? ':written' : ''}`;

// The record of `writes` (each {id, before: the link as read, _rev included}) as parts: each
// part's writes and its document. `edit`: what each link states ({by, at, batch}).
export function recordParts(batch, edit, writes, undoes = null) {
  const parts = [];
  let size = 0;
  for (const write of writes) {
    const fields = Object.fromEntries(Object.entries(write.before).filter(([k]) => !k.startsWith('_')));
    const member = { id: write.id, rev: write.before._rev, before: bytes(fields) <= KEPT_BEFORE ? fields : null };
    const n = bytes(member);
    const last = parts[parts.length - 1];
    if (last && last.writes.length < PART && size + n <= PART_BYTES) {
      last.writes.push(write);
      last.links.push(member);
      size += n;
    } else {
      parts.push({ writes: [write], links: [member] });
      size = n;
    }
  }
  return parts.map((p, i) => ({
    writes: p.writes,
    doc: { _id: partId(batch, i + 1), type: 'batch', batch, by: edit.by, at: edit.at, part: i + 1, parts: parts.length, edit, undoes, links: p.links },
  }));
}

// The revisions part `part` of `count` wrote: {id: rev}.
export const writtenDoc = (batch, edit, part, count, written) =>
  ({ _id: partId(batch, part, true), type: 'batch_written', batch, by: edit.by, at: edit.at, part, parts: count, written });

// The record of `batch` from the documents under its name, believing only those of the writer
// of its first part; null without one. {by, edit, members: [{id, rev, before, written}], ignored}
// where written is a revision, null (nothing written) or undefined (not recorded).
export function readRecord(batch, docs) {
  const head = docs.find((d) => d._id === partId(batch, 1) && d.type === 'batch');
  if (!head || typeof head.by !== 'string') return null;
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const mine = (id) => docs.find((d) => d._id === id && d.by === head.by && d.batch === batch && d.parts === head.parts);
  const members = [];
  for (let part = 1; part <= (head.parts || 1); part++) {
    const record = mine(partId(batch, part));
    if (!record || record.type !== 'batch' || !same(record.edit, head.edit)) continue;
    const written = mine(partId(batch, part, true));
    for (const m of Array.isArray(record.links) ? record.links : []) {
      if (typeof m.id !== 'string' || typeof m.rev !== 'string') continue;
      const rev = written && written.type === 'batch_written' ? (typeof written.written[m.id] === 'string' ? written.written[m.id] : null) : undefined;
      members.push({ id: m.id, rev: m.rev, before: m.before && typeof m.before === 'object' ? m.before : null, written: rev });
    }
  }
  const ignored = docs.filter((d) => d.batch === batch && (d.by !== head.by || d.parts !== head.parts)).map((d) => d._id);
  return { batch, by: head.by, edit: head.edit, undoes: head.undoes || null, members, ignored };
}

// What undoing `record` does to each of its links, given each as it is now (`current`, in the
// members' order; null: no such link): {id, step, doc?, rev?, current?}.
export function undoPlan(record, current) {
  return record.members.map((m, i) => {
    const doc = current[i];
    if (m.written === null) return { id: m.id, step: 'not changed' };
    if (m.written === undefined) return { id: m.id, step: 'unknown' };
    if (!doc) return { id: m.id, step: 'missing' };
    if (doc._rev !== m.written) return { id: m.id, step: 'edited since' };
    if (!m.before) return { id: m.id, step: 'read back', rev: m.rev, current: doc._rev };
    const back = { ...m.before, _id: m.id, _rev: doc._rev };
    delete back.edit;
    return { id: m.id, step: 'restore', doc: back };
  });
}
