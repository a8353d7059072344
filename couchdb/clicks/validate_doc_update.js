// The clicks database's validate_doc_update: only couchlink proxies (the role `couchlink setup`
// gives the proxy's account, COUCHLINK_PROXY_ROLE) write counts, each document once, in the
// shape docs/reference.md ("Live counts") documents; everyone else who may read the links may
// read them. A CouchDB admin may also delete and replace counts (rolling old intervals up into
// daily documents, docs/operations.md). Plain ES5: it runs in CouchDB's JavaScript engine.
function (newDoc, oldDoc, userCtx, secObj) {
  // Written in by `couchlink setup`.
  var WRITER_ROLES = ["links:proxy"];
  var roles = userCtx.roles || [];
  function hasRole(role) { return roles.indexOf(role) !== -1; }
  function refuse(reason) { throw({ forbidden: reason }); }
  var isAdmin = hasRole('_admin');
  // The breakdowns a link's counts may hold (src/clicks/by.rs, Dimension::ALL).
  var DIMENSIONS = ['country', 'device', 'os', 'browser', 'referrer', 'utm_source', 'utm_medium', 'utm_campaign',
    'variant'];

  if (!isAdmin && !WRITER_ROLES.some(hasRole)) {
    if (!userCtx.name) {
      throw({ unauthorized: 'Please log in.' });
    }
    refuse('Only couchlink proxies write counts; your account "' + userCtx.name + '" may read them.');
  }
  if (newDoc._deleted === true) {
    if (isAdmin) { return; }
    refuse('Counts are never deleted by a proxy.');
  }
  if (oldDoc && !isAdmin) {
    refuse('Counts are written once and never changed.');
  }
  function count(value, what) {
    if (typeof value !== 'number' || value < 0 || Math.floor(value) !== value) {
      refuse(what + ' must be a whole number, 0 or more.');
    }
  }
  if (newDoc.type !== 'clicks') { refuse('A counts document says "type": "clicks".'); }
  if (typeof newDoc.proxy !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(newDoc.proxy)) {
    refuse('"proxy" names the proxy: letters, digits, ".", "_" or "-".');
  }
  if (typeof newDoc.run !== 'string' || !/^[0-9a-f]{1,16}$/.test(newDoc.run)) {
    refuse('"run" is the proxy process\'s identity: lower-case hex digits.');
  }
  if (typeof newDoc.start !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(newDoc.start)) {
    refuse('"start" is the interval\'s start, like "2026-11-26T15:31:00Z".');
  }
  count(newDoc.seconds, '"seconds"');
  if (newDoc.seconds < 1 || newDoc.seconds > 86400) { refuse('"seconds" is 1 to 86400.'); }
  count(newDoc.part, '"part"');
  if (newDoc._id !== newDoc.start + '/' + newDoc.proxy + '/' + newDoc.run + '/' + newDoc.part) {
    refuse('The ID of a counts document is start/proxy/run/part.');
  }
  count(newDoc.unknown_not_found, '"unknown_not_found"');
  var links = newDoc.links;
  if (typeof links !== 'object' || links === null || Array.isArray(links)) {
    refuse('"links" is an object of counts by link ID.');
  }
  for (var id in links) {
    if (!/^[A-Za-z0-9]{5}$/.test(id)) { refuse('"' + id + '" is not a link ID.'); }
    var c = links[id];
    if (typeof c !== 'object' || c === null) { refuse('The counts of ' + id + ' are an object.'); }
    count(c.redirects, id + '\'s "redirects"');
    count(c.bot_redirects, id + '\'s "bot_redirects"');
    count(c.new_visitors, id + '\'s "new_visitors"');
    count(c.not_found, id + '\'s "not_found"');
    if (c.versions !== undefined) {
      if (typeof c.versions !== 'object' || c.versions === null) { refuse(id + '\'s "versions" is an object.'); }
      for (var location in c.versions) { count(c.versions[location], id + '\'s redirects to ' + location); }
    }
    if (c.by !== undefined) {
      if (typeof c.by !== 'object' || c.by === null || Array.isArray(c.by)) { refuse(id + '\'s "by" is an object.'); }
      for (var dimension in c.by) {
        if (DIMENSIONS.indexOf(dimension) === -1) { refuse(id + '\'s "by" has no breakdown "' + dimension + '".'); }
        var values = c.by[dimension];
        if (typeof values !== 'object' || values === null || Array.isArray(values)) {
          refuse(id + '\'s "by.' + dimension + '" is an object of counts by value.');
        }
        for (var value in values) { count(values[value], id + '\'s "by.' + dimension + '" of ' + value); }
      }
    }
  }
}
