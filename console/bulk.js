// A bulk change, pure, as src/bulk.rs makes one (tests/bulk_cases.json and undo_cases.json
// hold both to the same cases): what it makes of each link, its name, and its record, written
// to the history database by the change's writer before any of its links (each link, the
// revision it was read at and what it was), and read back by undo, which so never waits for a
// recorder, and puts a link back only while it is still the change's own write (the child of
// the revision the change read, stating the change's edit): what a later write states makes
// nothing part of a change.

// A bulk change applied to one link (src/bulk.rs, Change::apply; tests/bulk_cases.json holds
// the cases both agree on): the document it becomes, or null when it stays as it is. `change`:
// url, add_tags, remove_tags, inactive, expires, valid_from and password (a time or a hash, or
// null to remove; absent: untouched), add_rule, replace_rules.
export function bulkChange(doc, change) {
  const out = { ...doc };
  if (typeof change.url === 'string') out.url = change.url;
  const adds = change.add_tags || [];
  const removes = change.remove_tags || [];
  if (adds.length || removes.length) {
    const tags = Array.isArray(out.tags) ? [...out.tags] : [];
    for (const t of adds) if (!tags.includes(t)) tags.push(t);
    const kept = tags.filter((t) => !removes.includes(t));
    if (kept.length) out.tags = kept; else delete out.tags;
  }
  if (typeof change.inactive === 'boolean') out.inactive = change.inactive;
  for (const name of ['expires', 'valid_from', 'password']) {
    if (!Object.prototype.hasOwnProperty.call(change, name)) continue;
    if (change[name] === null) delete out[name]; else out[name] = change[name];
  }
  if (change.max_visits === null) { delete out.max_visits; delete out.max_visits_bots; }
  else if (typeof change.max_visits === 'number') out.max_visits = change.max_visits;
  if (Array.isArray(change.replace_rules)) {
    if (change.replace_rules.length) out.targets = change.replace_rules; else delete out.targets;
  }
  if (change.add_rule) out.targets = [...(Array.isArray(out.targets) ? out.targets : []), change.add_rule];
  const same = (a, b) => JSON.stringify(Object.entries(a).filter(([k]) => k !== 'edit').sort())
    === JSON.stringify(Object.entries(b).filter(([k]) => k !== 'edit').sort());
  return same(out, doc) ? null : out;
}

// A fresh bulk change's name, as `couchlink bulk` names its own: `bulk-20261128T090000-a1b2c3d4`
// (an undo's `undo-...`).
export function batchName(now = new Date(), bytes = (n) => crypto.getRandomValues(new Uint8Array(n)), kind = 'bulk') {
  const stamp = now.toISOString().slice(0, 19).replace(/[-:]/g, '');
  return `${kind}-${stamp}-${[...bytes(4)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

// Links per part (one `_bulk_docs` each), and about how many bytes of JSON a part holds at most.
export const PART = 500;
export const PART_BYTES = 512 * 1024;
// A link whose fields are longer than this as JSON is recorded without them: undo reads that
// revision back from CouchDB.
export const KEPT_BEFORE = 64 * 1024;

const bytes = (value) => new TextEncoder().encode(JSON.stringify(value)).length;

export const partId = (batch, part) => `~batch:${batch}:${String(part).padStart(4, '0')}`;

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

// The record of `batch` from the documents under its name (read with their conflicts),
// believing only the parts its first one says it has, of its writer, without a conflicting
// revision; null without a first part. {by, edit, undoes, members: [{id, rev, before}], ignored}.
// Two `edit` objects alike, whatever the order of their fields.
const same = (a, b) => {
  const canon = (v) => (v && typeof v === 'object' ? JSON.stringify(v, Object.keys(v).sort()) : JSON.stringify(v));
  return canon(a) === canon(b);
};

export function readRecord(batch, docs) {
  const sound = (d) => d.type === 'batch' && d.batch === batch && !d._conflicts;
  const head = docs.find((d) => sound(d) && d._id === partId(batch, 1));
  if (!head || typeof head.by !== 'string') return null;
  const parts = head.parts || 1;
  const believed = (d) => sound(d) && d.by === head.by && d.parts === head.parts && same(d.edit, head.edit)
    && Number.isInteger(d.part) && d.part >= 1 && d.part <= parts && d._id === partId(batch, d.part);
  const members = [];
  for (const d of docs.filter(believed)) {
    for (const m of Array.isArray(d.links) ? d.links : []) {
      if (typeof m.id !== 'string' || typeof m.rev !== 'string') continue;
      members.push({ id: m.id, rev: m.rev, before: m.before && typeof m.before === 'object' && !Array.isArray(m.before) ? m.before : null });
    }
  }
  const ignored = docs.filter((d) => d.batch === batch && !believed(d)).map((d) => d._id);
  return { batch, by: head.by, edit: head.edit, undoes: head.undoes || null, members, ignored };
}

// A document's parent revision, from its _revisions.
function parentOf(doc) {
  const r = doc._revisions;
  return r && Array.isArray(r.ids) && r.ids.length > 1 && r.start >= 1 ? `${r.start - 1}-${r.ids[1]}` : null;
}

// What undoing `record` does to each of its links, given each as it is now (`current`, in the
// members' order, each with its _revisions; null: no such link): {id, step, doc?, rev?, current?}.
export function undoPlan(record, current) {
  return record.members.map((m, i) => {
    const doc = current[i];
    if (!doc || doc._deleted === true) return { id: m.id, step: 'missing' };
    if (doc._rev === m.rev) return { id: m.id, step: 'not changed' };
    if (!same(doc.edit, record.edit) || parentOf(doc) !== m.rev) return { id: m.id, step: 'changed since' };
    if (!m.before) return { id: m.id, step: 'read back', rev: m.rev, current: doc._rev };
    const back = { ...m.before, _id: m.id, _rev: doc._rev };
    delete back.edit;
    return { id: m.id, step: 'restore', doc: back };
  });
}
