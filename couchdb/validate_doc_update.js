// couchlink's validate_doc_update: CouchDB runs it on every write to the links database
// (admins included, design documents excepted) and refuses the write with the reason below,
// which Fauxton shows as "Save failed: <reason>". Contracts §1 and §2.
// Plain ES5: it runs in CouchDB's JavaScript engine (SpiderMonkey or QuickJS).
function (newDoc, oldDoc, userCtx, secObj) {
  // This database's editor roles, written in by `couchlink setup` (COUCHLINK_EDITOR_ROLE; the
  // shared "editor" too while an admin has not dropped it with --drop-shared-roles).
  var EDITOR_ROLES = ["links:editor"];
  var roles = userCtx.roles || [];
  function hasRole(role) { return roles.indexOf(role) !== -1; }
  function refuse(reason) { throw({ forbidden: reason }); }

  var dbAdmins = (secObj && secObj.admins) || {};
  var isAdmin = hasRole('_admin') ||
    (dbAdmins.names || []).indexOf(userCtx.name) !== -1 ||
    (dbAdmins.roles || []).some(hasRole);

  // Section 2: who may write.
  if (!isAdmin && !EDITOR_ROLES.some(hasRole)) {
    if (!userCtx.name) {
      throw({ unauthorized: 'Please log in to change links.' });
    }
    refuse('Your account "' + userCtx.name + '" may not change links in this database. ' +
      'Ask a CouchDB admin for the "' + EDITOR_ROLES[0] + '" role.');
  }
  if (newDoc._deleted === true) {
    if (isAdmin) { return; }
    refuse('Links cannot be deleted: the short URL may already be printed, and a deleted ID ' +
      'could later point somewhere else. Set "inactive": true to switch the link off instead.');
  }

  // Section 1: what a link document holds.
  if (!/^[A-Za-z0-9]{5}$/.test(newDoc._id)) {
    refuse('The document ID "' + newDoc._id + '" cannot be a short link: it must be exactly 5 ' +
      'letters or digits (A-Z, a-z, 0-9), like "H83if". In Fauxton, replace the ID it proposes.');
  }
  var url = newDoc.url;
  if (typeof url !== 'string' || url.length === 0) {
    refuse('Every link needs a "url": the address to send people to, like "https://example.com/page".');
  }
  if (/[\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]/.test(url)) {
    refuse('The "url" must not contain spaces, line breaks or other invisible characters.');
  }
  var bytes = 0;
  for (var i = 0; i < url.length; i++) {
    var c = url.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) { bytes += 4; i++; }
    else { bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3; }
  }
  if (bytes > 2048) {
    refuse('The "url" is too long (' + bytes + ' bytes): at most 2048 bytes are allowed.');
  }
  if (url.charAt(0) === '/') {
    if (url.charAt(1) === '/') {
      refuse('An internal redirect "url" starts with a single "/" followed by a link ID, like "/H83if".');
    }
  } else {
    var scheme = /^([A-Za-z][A-Za-z0-9+.\-]*):/.exec(url);
    if (!scheme) {
      refuse('The "url" must start with "http://" or "https://" (or be an internal redirect ' +
        'starting with "/", like "/H83if").');
    }
    if (scheme[1] !== 'http' && scheme[1] !== 'https') {
      refuse('Only "http://" and "https://" addresses are allowed (in lower case), not "' +
        scheme[1] + ':".');
    }
    var authority = /^https?:\/\/([^\/?#]*)/.exec(url);
    var host = authority ? authority[1].replace(/^.*@/, '').replace(/:\d*$/, '') : '';
    if (!host) {
      refuse('The "url" has no host name after "' + scheme[1] + '://", like "https://example.com/".');
    }
  }
  if (newDoc.hasOwnProperty('inactive') && typeof newDoc.inactive !== 'boolean') {
    refuse('"inactive" must be true or false (without quotes).');
  }
  if (newDoc.hasOwnProperty('oob') && typeof newDoc.oob !== 'boolean') {
    refuse('"oob" must be true or false (without quotes): true when the "url" carries an out-of-band invitation.');
  }
  if (newDoc.hasOwnProperty('expires')) {
    var e = newDoc.expires;
    var rfc3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+\-]([01]\d|2[0-3]):[0-5]\d)$/;
    if (typeof e !== 'string' || !rfc3339.test(e) || isNaN(Date.parse(e.replace(/:60(\.\d+)?/, ':59')))) {
      refuse('"expires" must be a date and time with its time zone, like "2026-12-31T23:59:59Z".');
    }
  }
}
