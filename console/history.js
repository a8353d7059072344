// A link's history, pure (src/history, as `couchlink history` and `restore` read it): what a
// write states of its writer (domain::edit), what an entry says changed, and a recorded version
// written back (console/test/history.test.js, against tests/history_cases.json).

// A document as written by `name`: its `edit` states the writer (and the time, and any of
// `extra`: a bulk change's `batch`, the revision a restore `restores`), as the history records
// it; CouchDB refuses a stated writer who is not the account writing.
export function stating(doc, name, now = new Date(), extra = {}) {
  if (!name) return doc;
  // To the millisecond: an `edit` equal to the revision before's states nothing (it reads as
  // carried over), so two quick writes by one person must differ.
  return { ...doc, edit: { by: name, at: now.toISOString(), ...extra } };
}

// What a history entry says changed: [field, before, after] in name order (null: absent),
// `edit` left out (it says who, not what); a field kept as its size and digest (too long to
// keep) is {large: {bytes, blake2b}}. tests/history_cases.json holds the cases the CLI agrees on.
export function changes(entry) {
  const side = (name) => {
    const fields = (entry[name] && typeof entry[name] === 'object') ? entry[name] : {};
    const large = (entry.large && entry.large[name] && typeof entry.large[name] === 'object') ? entry.large[name] : {};
    const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
    return {
      names: [...Object.keys(fields), ...Object.keys(large)],
      value: (k) => (has(fields, k) ? fields[k] : has(large, k) ? { large: large[k] } : undefined),
    };
  };
  const before = side('before');
  const after = side('after');
  const names = [...new Set([...before.names, ...after.names])].filter((k) => k !== 'edit').sort();
  return names
    .map((k) => [k, before.value(k), after.value(k)])
    .filter(([, b, a]) => JSON.stringify(b) !== JSON.stringify(a) || (b === undefined) !== (a === undefined))
    .map(([k, b, a]) => [k, b === undefined ? null : b, a === undefined ? null : a]);
}

// A recorded version as a new revision over `current`: the version's fields (without its
// `edit`: the write states its own, with what it `restores`), `current`'s `_id` and `_rev`.
export function restoring(entry, current) {
  const fields = { ...entry.after };
  delete fields.edit;
  return { ...fields, _id: current._id, _rev: current._rev };
}
