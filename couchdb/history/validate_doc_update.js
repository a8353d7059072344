// The history database's validate_doc_update (docs/reference.md, "History"): only the recorder
// (the role `couchlink setup` gives the proxy's account, `<db>:recorder`) writes entries, each
// once and never changed, so an editor can neither forge nor erase what they did; the links
// database's readers and editors read them. A CouchDB admin may also delete entries (to purge
// history by hand). Plain ES5: it runs in CouchDB's JavaScript engine.
function (newDoc, oldDoc, userCtx, secObj) {
  // Written in by `couchlink setup`.
  var WRITER_ROLES = ["links:recorder"];
  var roles = userCtx.roles || [];
  function hasRole(role) { return roles.indexOf(role) !== -1; }
  function refuse(reason) { throw({ forbidden: reason }); }
  var isAdmin = hasRole('_admin');

  if (!isAdmin && !WRITER_ROLES.some(hasRole)) {
    if (!userCtx.name) {
      throw({ unauthorized: 'Please log in.' });
    }
    refuse('Only couchlink records history; your account "' + userCtx.name + '" may read it.');
  }
  if (newDoc._deleted === true) {
    if (isAdmin) { return; }
    refuse('History is never deleted by the recorder.');
  }
  if (oldDoc && !isAdmin) {
    refuse('A history entry is written once and never changed.');
  }
  var rfc3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+\-]\d\d:\d\d)$/;
  function time(value, what, nullable) {
    if (nullable && value === null) { return; }
    if (typeof value !== 'string' || !rfc3339.test(value)) { refuse(what + ' must be a UTC time, like "2026-11-28T13:00:00Z".'); }
  }
  function rev(value, what) {
    if (typeof value !== 'string' || !/^[1-9][0-9]*-[0-9a-z]+$/.test(value)) { refuse(what + ' must be a CouchDB revision, like "3-a1b2".'); }
  }
  function object(value, what) {
    if (value !== null && (typeof value !== 'object' || Array.isArray(value))) { refuse(what + ' must be an object or null.'); }
  }
  if (typeof newDoc.link !== 'string' || !/^[A-Za-z0-9]{5}$/.test(newDoc.link)) {
    refuse('"link" is the link\'s ID: 5 letters or digits.');
  }
  time(newDoc.recorded_at, '"recorded_at"', false);
  if (newDoc.type === 'change') {
    rev(newDoc.rev, '"rev"');
    if (newDoc.parent !== null) { rev(newDoc.parent, '"parent"'); }
    if (['created', 'changed', 'deleted', 'baseline'].indexOf(newDoc.kind) === -1) {
      refuse('"kind" is one of created, changed, deleted, baseline.');
    }
    object(newDoc.before, '"before"');
    object(newDoc.after, '"after"');
    if (newDoc.by !== null && (typeof newDoc.by !== 'string' || newDoc.by.length === 0)) { refuse('"by" names an account, or is null.'); }
    if (newDoc.batch !== null && typeof newDoc.batch !== 'string') { refuse('"batch" names a bulk change, or is null.'); }
    time(newDoc.at, '"at"', true);
    if (typeof newDoc.late !== 'boolean') { refuse('"late" is true or false.'); }
  } else if (newDoc.type === 'gap') {
    rev(newDoc.first, '"first"');
    rev(newDoc.last, '"last"');
    if (typeof newDoc.missing !== 'number' || newDoc.missing < 1 || newDoc.missing % 1 !== 0) {
      refuse('"missing" counts the revisions not recorded: a whole number, 1 or more.');
    }
    time(newDoc.from, '"from"', false);
    time(newDoc.to, '"to"', false);
  } else {
    refuse('A history document says "type": "change" or "gap".');
  }
  var id = newDoc.link + '/' + (newDoc.type === 'gap' ? newDoc.first : newDoc.rev);
  var number = id.substring(6).split('-');
  var expected = newDoc.link + '/' + ('0000000000' + number[0]).slice(-10) + '-' + number[1];
  if (newDoc._id !== expected) {
    refuse('A history entry\'s ID is its link and revision, "' + expected + '".');
  }
}
