// The history database's validate_doc_update (docs/reference.md, "History"): only the recorder
// (the role `couchlink setup` gives the proxy's account, `<db>:recorder`) writes entries, each
// once and never changed, and the recorders' checkpoint; an editor of the links database writes
// the record of their own bulk change (its links and what each was before, once, in their own
// name), so that undo never depends on the recorders' progress; nobody else writes anything,
// so a reader can neither forge, erase nor skip what was done. The links database's readers
// and editors read it all. A CouchDB admin may also delete documents (to purge history by
// hand). Plain ES5: it runs in CouchDB's JavaScript engine.
function (newDoc, oldDoc, userCtx, secObj) {
  // Written in by `couchlink setup`.
  var WRITER_ROLES = ["links:recorder"];
  var EDITOR_ROLES = ["links:editor"];
  var roles = userCtx.roles || [];
  function hasRole(role) { return roles.indexOf(role) !== -1; }
  function refuse(reason) { throw({ forbidden: reason }); }
  var isAdmin = hasRole('_admin');
  var isRecorder = WRITER_ROLES.some(hasRole);
  var isEditor = EDITOR_ROLES.some(hasRole);

  if (!isAdmin && !isRecorder && !isEditor) {
    if (!userCtx.name) {
      throw({ unauthorized: 'Please log in.' });
    }
    refuse('Your account "' + userCtx.name + '" may read the history, not write it: couchlink records it, and ' +
      'editors of the links record their bulk changes.');
  }
  if (newDoc._deleted === true) {
    if (isAdmin) { return; }
    refuse('History is never deleted but by a CouchDB admin.');
  }
  // A write that names its own revision (`new_edits: false`) lands beside the one written
  // first, as a conflict CouchDB may pick as the winner, and reaches this function with no
  // `oldDoc`: "written once" would mean nothing. CouchDB hands an edit its parent's `_rev`.
  if (!isAdmin && typeof newDoc._rev === 'string' && (!oldDoc || oldDoc._rev !== newDoc._rev)) {
    refuse('History is written by couchlink, revision by revision as CouchDB makes them: a write naming its ' +
      'own revision ("new_edits": false) is for a CouchDB admin.');
  }
  // The forms the links' validation function accepts in "edit" (tests/edit_cases.json holds
  // both functions and the recorder to the same cases).
  var rfc3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+\-]([01]\d|2[0-3]):[0-5]\d)$/;
  var batchName = /^[A-Za-z0-9._:-]{1,64}$/;
  function time(value, what, nullable) {
    if (nullable && value === null) { return; }
    if (typeof value !== 'string' || !rfc3339.test(value)) { refuse(what + ' must be a time, like "2026-11-28T13:00:00Z".'); }
  }
  // Any revision CouchDB takes: a number, a dash, and any text (a replicating client's own).
  function rev(value, what) {
    if (typeof value !== 'string' || value.length === 0) { refuse(what + ' must be a CouchDB revision, like "3-a1b2".'); }
  }
  function object(value, what) {
    if (value !== null && (typeof value !== 'object' || Array.isArray(value))) { refuse(what + ' must be an object or null.'); }
  }
  function link(value, what) {
    if (typeof value !== 'string' || !/^[A-Za-z0-9]{5}$/.test(value)) { refuse(what + ' is a link\'s ID: 5 letters or digits.'); }
  }
  function count(value, what, least) {
    if (typeof value !== 'number' || value < least || value % 1 !== 0) { refuse(what + ' must be a whole number, ' + least + ' or more.'); }
  }

  if (newDoc.type === 'checkpoint') {
    // Where the recorders are in the links database's changes, and which of them records.
    if (!isAdmin && !isRecorder) { refuse('Only couchlink\'s recorder keeps its place in the history.'); }
    if (newDoc._id !== '~recorder') { refuse('The recorders\' checkpoint is "~recorder".'); }
    if (!newDoc.hasOwnProperty('seq')) { refuse('"seq" is where the recorders are in the links\' changes.'); }
    time(newDoc.began, '"began"', false);
    if (newDoc.holder !== null && (typeof newDoc.holder !== 'string' || newDoc.holder.length === 0)) {
      refuse('"holder" names the recorder that records, or is null (handed over).');
    }
    return;
  }
  if (newDoc.type === 'batch') {
    // A bulk change as its writer made it: its links, and the revision and fields each had.
    if (!isAdmin && !isEditor) { refuse('Only an editor of the links records a bulk change.'); }
    if (oldDoc && !isAdmin) { refuse('A bulk change is recorded once and never changed.'); }
    if (newDoc.by !== userCtx.name) {
      refuse('A bulk change is recorded in its writer\'s own name: "by" must be "' + userCtx.name + '".');
    }
    if (typeof newDoc.batch !== 'string' || !batchName.test(newDoc.batch)) {
      refuse('"batch" names the bulk change: 1 to 64 letters, digits, ".", "_", ":" or "-".');
    }
    count(newDoc.part, '"part"', 1);
    count(newDoc.parts, '"parts"', newDoc.part);
    var part = String(newDoc.part);
    while (part.length < 4) { part = '0' + part; }
    var expectedBatch = '~batch:' + newDoc.batch + ':' + part;
    if (newDoc._id !== expectedBatch) { refuse('This part of a bulk change\'s record is "' + expectedBatch + '".'); }
    time(newDoc.at, '"at"', false);
    if (typeof newDoc.edit !== 'object' || newDoc.edit === null || newDoc.edit.by !== userCtx.name || newDoc.edit.batch !== newDoc.batch) {
      refuse('"edit" is what each link of the bulk change states: its writer and its batch.');
    }
    if (newDoc.undoes !== null && (typeof newDoc.undoes !== 'string' || !batchName.test(newDoc.undoes))) {
      refuse('"undoes" names the bulk change this one undoes, or is null.');
    }
    if (!Array.isArray(newDoc.links) || newDoc.links.length === 0) { refuse('"links" lists the bulk change\'s links.'); }
    for (var i = 0; i < newDoc.links.length; i++) {
      var member = newDoc.links[i];
      if (typeof member !== 'object' || member === null) { refuse('"links" holds objects with "id", "rev" and "before".'); }
      link(member.id, '"links".' + i + '."id"');
      rev(member.rev, '"links".' + i + '."rev"');
      object(member.before, '"links".' + i + '."before"');
    }
    return;
  }

  // An entry.
  if (!isAdmin && !isRecorder) {
    refuse('Only couchlink records history; your account "' + userCtx.name + '" may read it.');
  }
  if (oldDoc && !isAdmin) {
    refuse('A history entry is written once and never changed.');
  }
  link(newDoc.link, '"link"');
  time(newDoc.recorded_at, '"recorded_at"', false);
  if (newDoc.type === 'change') {
    rev(newDoc.rev, '"rev"');
    if (newDoc.parent !== null) { rev(newDoc.parent, '"parent"'); }
    if (['created', 'changed', 'deleted', 'baseline', 'conflict'].indexOf(newDoc.kind) === -1) {
      refuse('"kind" is one of created, changed, deleted, baseline, conflict.');
    }
    object(newDoc.before, '"before"');
    object(newDoc.after, '"after"');
    if (newDoc.by !== null && (typeof newDoc.by !== 'string' || newDoc.by.length === 0)) { refuse('"by" names an account, or is null.'); }
    if (newDoc.batch !== null && (typeof newDoc.batch !== 'string' || !batchName.test(newDoc.batch))) {
      refuse('"batch" names a bulk change, or is null.');
    }
    time(newDoc.at, '"at"', true);
    if (typeof newDoc.late !== 'boolean') { refuse('"late" is true or false.'); }
    if (newDoc.hasOwnProperty('large')) {
      // Fields too long to keep: their size and digest.
      object(newDoc.large, '"large"');
      for (var side in newDoc.large) {
        if (side !== 'before' && side !== 'after') { refuse('"large" holds "before" and "after".'); }
        for (var field in newDoc.large[side]) {
          var kept = newDoc.large[side][field];
          if (typeof kept !== 'object' || kept === null || typeof kept.bytes !== 'number' ||
              typeof kept.blake2b !== 'string' || !/^[0-9a-f]{64}$/.test(kept.blake2b)) {
            refuse('"large" keeps a field\'s "bytes" and "blake2b".');
          }
        }
      }
    }
  } else if (newDoc.type === 'gap') {
    rev(newDoc.first, '"first"');
    rev(newDoc.last, '"last"');
    count(newDoc.missing, '"missing" (the revisions not recorded)', 1);
    time(newDoc.from, '"from"', false);
    time(newDoc.to, '"to"', false);
    if (newDoc.hasOwnProperty('reason') && ['compacted', 'refused'].indexOf(newDoc.reason) === -1) {
      refuse('"reason" is compacted or refused.');
    }
  } else {
    refuse('A history document says "type": "change", "gap", "batch" or "checkpoint".');
  }
  // Its ID is its link and revision: the revision's number in ten digits (or more), then its
  // hash as it is, or "~" and a digest of the revision when the hash is not plain (src/history/entry.rs, entry_id).
  var revision = newDoc.type === 'gap' ? newDoc.first : newDoc.rev;
  var parts = /^(\d{1,20})-([\s\S]*)$/.exec(revision);
  var number = parts ? parts[1].replace(/^0+/, '') || '0' : '0';
  while (number.length < 10) { number = '0' + number; }
  var prefix = newDoc.link + '/' + number + '-';
  var plain = parts && /^[0-9a-z]{1,64}$/.test(parts[2]);
  var expected = plain ? prefix + parts[2] : prefix + '~';
  if (plain ? newDoc._id !== expected
      : newDoc._id.substring(0, expected.length) !== expected || !/^[0-9a-f]{32}$/.test(newDoc._id.substring(expected.length))) {
    refuse('A history entry\'s ID is its link and revision, "' + expected + (plain ? '' : '<digest>') + '".');
  }
}
