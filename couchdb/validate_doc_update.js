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
  // Served only as written: the proxy sends exactly this text as the Location (src/domain/target.rs
  // checks the same rules; tests/target_cases.json holds the cases both must agree on).
  var bytes = 0;
  for (var i = 0; i < url.length; i++) {
    var c = url.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) { bytes += 4; i++; }
    else { bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3; }
  }
  if (bytes > 2048) {
    refuse('The "url" is too long (' + bytes + ' bytes): at most 2048 bytes are allowed.');
  }
  if (!/^[\x21-\x7e]*$/.test(url)) {
    var hint = '';
    // A suggestion only where it is certain: the host already plain ASCII.
    if (/^https?:\/\/[\x21-\x7e]+([\/?#]|$)/.test(url)) {
      try { hint = ' Written that way it is "' + encodeURI(url.replace(/[\s\u200b-\u200f\u202a-\u202e\u2060\ufeff]/g, '')) + '".'; } catch (e) { hint = ''; }
    }
    refuse('The "url" must not contain spaces, line breaks, invisible characters or letters outside ' +
      'A-Z: write other scripts percent-encoded (as a browser shows them when copied) and an ' +
      'international host name in its xn-- form.' + hint);
  }
  function checkTail(tail) {
    var hash = tail.indexOf('#');
    var fragment = hash === -1 ? null : tail.substring(hash + 1);
    var beforeFragment = hash === -1 ? tail : tail.substring(0, hash);
    var q = beforeFragment.indexOf('?');
    var query = q === -1 ? null : beforeFragment.substring(q + 1);
    var path = q === -1 ? beforeFragment : beforeFragment.substring(0, q);
    if (!/^[A-Za-z0-9\-._~!$&'()*+,;=:@\/%]*$/.test(path)) {
      refuse('The "url" path holds a character that must be percent-encoded (one of " < > \\ ^ ` { | }).');
    }
    if (query !== null && !/^[A-Za-z0-9\-._~!$&()*+,;=:@\/%?]*$/.test(query)) {
      refuse('The "url" query holds a character that must be percent-encoded (\' is written %27).');
    }
    if (fragment !== null && !/^[A-Za-z0-9\-._~!$&'()*+,;=:@\/%?]*$/.test(fragment)) {
      refuse('The "url" fragment (after #) holds a character that must be percent-encoded.');
    }
    if (/%(?![0-9A-Fa-f]{2})/.test(tail)) {
      refuse('In the "url", % must be followed by two hex digits (write a % sign as %25).');
    }
    var segments = path.split('/');
    for (var s = 0; s < segments.length; s++) {
      if (/^(\.|%2e){1,2}$/i.test(segments[s])) {
        refuse('The "url" path must not have "." or ".." parts: write the path they lead to.');
      }
    }
  }
  if (url.charAt(0) === '/') {
    if (url.charAt(1) === '/') {
      refuse('An internal redirect "url" starts with a single "/" followed by a link ID, like "/H83if".');
    }
    checkTail(url);
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
    if (url.substring(scheme[1].length, scheme[1].length + 3) !== '://') {
      refuse('The "url" must spell out "' + scheme[1] + '://" followed by the host name, like "https://example.com/".');
    }
    var rest = url.substring(scheme[1].length + 3);
    var end = rest.search(/[\/?#]/);
    var authority = end === -1 ? rest : rest.substring(0, end);
    var tail = end === -1 ? '' : rest.substring(end);
    if (authority.indexOf('@') !== -1) {
      refuse('The "url" must not have a user name or password before the host ("...@").');
    }
    var colon = authority.lastIndexOf(':');
    var host = colon === -1 ? authority : authority.substring(0, colon);
    var port = colon === -1 ? null : authority.substring(colon + 1);
    if (host.length === 0 || host.length > 253) {
      refuse('The "url" has no host name after "' + scheme[1] + '://", like "https://example.com/".');
    }
    var labels = host.split('.');
    if (/^[0-9.]*$/.test(host)) {
      var quad = labels.length === 4;
      for (var l = 0; l < labels.length; l++) {
        if (!/^(0|[1-9][0-9]{0,2})$/.test(labels[l]) || Number(labels[l]) > 255) { quad = false; }
      }
      if (!quad) {
        refuse('An IP address host is four numbers from 0 to 255 without leading zeros, like "203.0.113.7".');
      }
    } else {
      for (var k = 0; k < labels.length; k++) {
        if (!/^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?$/.test(labels[k])) {
          refuse('The host name must be lower-case letters, digits and "-" between dots (an ' +
            'international name in its xn-- form), like "example.com".');
        }
      }
      if (/^([0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1])) {
        refuse('The host name must not end in a number, like "example.123".');
      }
    }
    if (port !== null) {
      if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) {
        refuse('The port must be a number from 1 to 65535, like "https://example.com:8443/".');
      }
      if (Number(port) === (scheme[1] === 'https' ? 443 : 80)) {
        refuse('Leave out the port ' + port + ': it is the default for ' + scheme[1] + '.');
      }
    }
    checkTail(tail);
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
