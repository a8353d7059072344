// couchlink's validate_doc_update: CouchDB runs it on every write to the links database
// (admins included, design documents excepted) and refuses the write with the reason below,
// which Fauxton shows as "Save failed: <reason>". docs/reference.md, "Link documents" and "Who may do what".
// A refusal of a field starts with that field's path in brackets, "[url] ...", "[targets.2]
// ...", "[targets.2.split.1.url] ..." (rules and variants counted from 1, as the words count
// them), so that clients (the console, `couchlink create` and `import`) place it by that path,
// never by the wording; a refusal of the write itself (the account, a deletion) has none.
// docs/reference.md, "Refusals"; tests/refusal_fields.json holds a case for every field.
// Plain ES5: it runs in CouchDB's JavaScript engine (SpiderMonkey or QuickJS).
function (newDoc, oldDoc, userCtx, secObj) {
  // This database's editor roles, written in by `couchlink setup` (COUCHLINK_EDITOR_ROLE; the
  // shared "editor" too while an admin has not dropped it with --drop-shared-roles).
  var EDITOR_ROLES = ["links:editor"];
  var roles = userCtx.roles || [];
  function hasRole(role) { return roles.indexOf(role) !== -1; }
  function refuse(field, reason) { throw({ forbidden: (field ? '[' + field + '] ' : '') + reason }); }

  var dbAdmins = (secObj && secObj.admins) || {};
  var isAdmin = hasRole('_admin') ||
    (dbAdmins.names || []).indexOf(userCtx.name) !== -1 ||
    (dbAdmins.roles || []).some(hasRole);

  // Section 2: who may write.
  if (!isAdmin && !EDITOR_ROLES.some(hasRole)) {
    if (!userCtx.name) {
      throw({ unauthorized: 'Please log in to change links.' });
    }
    refuse(null, 'Your account "' + userCtx.name + '" may not change links in this database. ' +
      'Ask a CouchDB admin for the "' + EDITOR_ROLES[0] + '" role.');
  }
  // A write that names its own revision (`new_edits: false`, as replication does) writes a
  // revision beside the current one, past the conflict check, and its `oldDoc` is whatever
  // ancestor it names: replicating links in is for admins. CouchDB hands an edit its parent's
  // `_rev` (and `oldDoc` that revision), a new document none.
  if (!isAdmin && typeof newDoc._rev === 'string' && (!oldDoc || oldDoc._rev !== newDoc._rev)) {
    refuse(null, 'Revisions are made by CouchDB: a write naming its own revision ("new_edits": false, as ' +
      'replication does) is for a CouchDB admin.');
  }
  if (newDoc._deleted === true) {
    if (isAdmin) { return; }
    refuse(null, 'Links cannot be deleted: the short URL may already be printed, and a deleted ID ' +
      'could later point somewhere else. Set "inactive": true to switch the link off instead.');
  }

  // Section 1: what a link document holds. First how deep it nests: a link needs a few
  // levels (a rule's query values are six down), and one nested past what the proxies and the
  // history read whole (src/couch.rs, MAX_DEPTH) would stop them at it.
  function deeper(value, level) {
    if (level > 32) { return true; }
    if (value === null || typeof value !== 'object') { return false; }
    for (var key in value) {
      if (deeper(value[key], level + 1)) { return true; }
    }
    return false;
  }
  if (deeper(newDoc, 0)) {
    refuse(null, 'The document is nested more than 32 levels deep (objects and lists within each other): a link ' +
      'needs a few.');
  }
  if (!/^[A-Za-z0-9]{5}$/.test(newDoc._id)) {
    refuse('_id', 'The document ID "' + newDoc._id + '" cannot be a short link: it must be exactly 5 ' +
      'letters or digits (A-Z, a-z, 0-9), like "H83if". In Fauxton, replace the ID it proposes.');
  }
  var url = newDoc.url;
  if (typeof url !== 'string' || url.length === 0) {
    refuse('url', 'Every link needs a "url": the address to send people to, like "https://example.com/page".');
  }
  // A target ("url", "fallback"), served only as written: the proxy sends exactly this text as
  // the Location (src/domain/target.rs checks the same rules; tests/target_cases.json holds the
  // cases both must agree on). Each refusal names the field.
  function checkTarget(url, name, path) {
    // A reason that does not name the field (the host, the port) is said of it.
    function say(reason) {
      var named = name === 'url' || reason.indexOf('"' + name + '"') !== -1;
      refuse(path, named ? reason : 'In the "' + name + '": ' + reason.charAt(0).toLowerCase() + reason.substring(1));
    }
    var bytes = 0;
    for (var i = 0; i < url.length; i++) {
      var c = url.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff) { bytes += 4; i++; }
      else { bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3; }
    }
    if (bytes > 2048) {
      say('The "' + name + '" is too long (' + bytes + ' bytes): at most 2048 bytes are allowed.');
    }
    if (!/^[\x21-\x7e]*$/.test(url)) {
      var hint = '';
      // A suggestion only where it is certain: the host already plain ASCII.
      if (/^https?:\/\/[\x21-\x7e]+([\/?#]|$)/.test(url)) {
        try { hint = ' Written that way it is "' + encodeURI(url.replace(/[\s\u200b-\u200f\u202a-\u202e\u2060\ufeff]/g, '')) + '".'; } catch (e) { hint = ''; }
      }
      say('The "' + name + '" must not contain spaces, line breaks, invisible characters or letters outside ' +
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
        say('The "' + name + '" path holds a character that must be percent-encoded (one of " < > \\ ^ ` { | }).');
      }
      if (query !== null && !/^[A-Za-z0-9\-._~!$&()*+,;=:@\/%?]*$/.test(query)) {
        say('The "' + name + '" query holds a character that must be percent-encoded (\' is written %27).');
      }
      if (fragment !== null && !/^[A-Za-z0-9\-._~!$&'()*+,;=:@\/%?]*$/.test(fragment)) {
        say('The "' + name + '" fragment (after #) holds a character that must be percent-encoded.');
      }
      if (/%(?![0-9A-Fa-f]{2})/.test(tail)) {
        say('In the "' + name + '", % must be followed by two hex digits (write a % sign as %25).');
      }
      var segments = path.split('/');
      for (var s = 0; s < segments.length; s++) {
        if (/^(\.|%2e){1,2}$/i.test(segments[s])) {
          say('The "' + name + '" path must not have "." or ".." parts: write the path they lead to.');
        }
      }
    }
    if (url.charAt(0) === '/') {
      if (url.charAt(1) === '/') {
        say('An internal redirect "' + name + '" starts with a single "/" followed by a link ID, like "/H83if".');
      }
      checkTail(url);
    } else {
      var scheme = /^([A-Za-z][A-Za-z0-9+.\-]*):/.exec(url);
      if (!scheme) {
        say('The "' + name + '" must start with "http://" or "https://" (or be an internal redirect ' +
          'starting with "/", like "/H83if").');
      }
      if (scheme[1] !== 'http' && scheme[1] !== 'https') {
        say('Only "http://" and "https://" addresses are allowed (in lower case), not "' +
          scheme[1] + ':".');
      }
      if (url.substring(scheme[1].length, scheme[1].length + 3) !== '://') {
        say('The "' + name + '" must spell out "' + scheme[1] + '://" followed by the host name, like "https://example.com/".');
      }
      var rest = url.substring(scheme[1].length + 3);
      var end = rest.search(/[\/?#]/);
      var authority = end === -1 ? rest : rest.substring(0, end);
      var tail = end === -1 ? '' : rest.substring(end);
      if (authority.indexOf('@') !== -1) {
        say('The "' + name + '" must not have a user name or password before the host ("...@").');
      }
      var colon = authority.lastIndexOf(':');
      var host = colon === -1 ? authority : authority.substring(0, colon);
      var port = colon === -1 ? null : authority.substring(colon + 1);
      if (host.length === 0 || host.length > 253) {
        say('The "' + name + '" has no host name after "' + scheme[1] + '://", like "https://example.com/".');
      }
      var labels = host.split('.');
      if (/^[0-9.]*$/.test(host)) {
        var quad = labels.length === 4;
        for (var l = 0; l < labels.length; l++) {
          if (!/^(0|[1-9][0-9]{0,2})$/.test(labels[l]) || Number(labels[l]) > 255) { quad = false; }
        }
        if (!quad) {
          say('An IP address host is four numbers from 0 to 255 without leading zeros, like "203.0.113.7".');
        }
      } else {
        for (var k = 0; k < labels.length; k++) {
          if (!/^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?$/.test(labels[k])) {
            say('The host name must be lower-case letters, digits and "-" between dots (an ' +
              'international name in its xn-- form), like "example.com".');
          }
        }
        if (/^([0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1])) {
          say('The host name must not end in a number, like "example.123".');
        }
      }
      if (port !== null) {
        if (!/^[1-9][0-9]{0,4}$/.test(port) || Number(port) > 65535) {
          say('The port must be a number from 1 to 65535, like "https://example.com:8443/".');
        }
        if (Number(port) === (scheme[1] === 'https' ? 443 : 80)) {
          say('Leave out the port ' + port + ': it is the default for ' + scheme[1] + '.');
        }
      }
      checkTail(tail);
    }
  }
  checkTarget(url, 'url', 'url');
  if (newDoc.hasOwnProperty('inactive') && typeof newDoc.inactive !== 'boolean') {
    refuse('inactive', '"inactive" must be true or false (without quotes).');
  }
  if (newDoc.hasOwnProperty('oob') && typeof newDoc.oob !== 'boolean') {
    refuse('oob', '"oob" must be true or false (without quotes): true when the "url" carries an out-of-band invitation.');
  }
  if (newDoc.hasOwnProperty('fallback')) {
    if (typeof newDoc.fallback !== 'string' || newDoc.fallback.length === 0) {
      refuse('fallback', '"fallback" must be an address, like "https://example.com/campaign-ended": where people ' +
        'go while the link is inactive, expired or not yet started.');
    }
    checkTarget(newDoc.fallback, 'fallback', 'fallback');
  }
  // A link's password: only its Argon2id hash in the PHC string format, within bounds that keep
  // one check's cost known to a proxy (src/domain/password.rs, PasswordHash::parse, refuses the
  // same; tests/password_cases.json holds both to the same cases). Never the password itself.
  if (newDoc.hasOwnProperty('password')) {
    var phc = typeof newDoc.password === 'string' &&
      /^\$argon2id\$v=19\$m=([1-9][0-9]{0,5}),t=([1-9][0-9]{0,5}),p=([1-9][0-9]{0,5})\$([^$]*)\$([^$]*)$/.exec(newDoc.password);
    if (!phc) {
      refuse('password', '"password" holds only a password\'s hash ("$argon2id$v=19$m=19456,t=2,p=1$...$..."), never ' +
        'the password itself: set it with the console or `couchlink create --password-file`, or remove the field.');
    }
    var m = Number(phc[1]), t = Number(phc[2]), p = Number(phc[3]);
    if (m < 7168 || m > 65536 || t > 5 || p > 4 || m * t < 35840 || m * t > 65536) {
      refuse('password', 'The password\'s hash must use m=7168 to 65536 (KiB of memory), t=1 to 5 (passes) and ' +
        'p=1 to 4 (lanes), with m times t 35840 to 65536 (at least OWASP\'s cheapest setting, at most what ' +
        'one check may cost a proxy).');
    }
    function unpadded(text, min, max) {
      return text.length >= min && text.length <= max && text.length % 4 !== 1 && /^[A-Za-z0-9+\/]*$/.test(text);
    }
    if (!unpadded(phc[4], 22, 86) || !unpadded(phc[5], 43, 43)) {
      refuse('password', 'The password\'s hash must have a salt of 16 to 64 bytes and a hash of 32 bytes, in base64 ' +
        'without padding.');
    }
  }
  // A visit limit (src/domain/link.rs, Link::from_doc, reads the same; tests/link_status.json).
  if (newDoc.hasOwnProperty('max_visits')) {
    var max = newDoc.max_visits;
    if (typeof max !== 'number' || max % 1 !== 0 || max < 1 || max > 1000000000) {
      refuse('max_visits', '"max_visits" must be a whole number from 1 to 1000000000 (without quotes): the redirects ' +
        'after which the link acts as expired (its "fallback", or 404).');
    }
  }
  if (newDoc.hasOwnProperty('max_visits_bots') && typeof newDoc.max_visits_bots !== 'boolean') {
    refuse('max_visits_bots', '"max_visits_bots" must be true or false (without quotes): true when bots\' redirects ' +
      'count toward "max_visits" too.');
  }
  if (newDoc.hasOwnProperty('targets')) {
    // Kept in step with src/visitor/mod.rs (Os::NAMES, Device::NAMES) and src/domain/link.rs
    // (Rule::from_value).
    var ALLOWED = {
      os: ['ios', 'android', 'windows', 'macos', 'linux', 'chromeos'],
      device: ['mobile', 'tablet', 'desktop'],
      lang: null,
      country: null,
      query: null
    };
    var targets = newDoc.targets;
    if (!Array.isArray(targets)) {
      refuse('targets', '"targets" must be a list of rules, like [{"when": {"os": ["ios"]}, "url": ' +
        '"https://apps.apple.com/app/id123"}]: the first rule that matches a visitor sends them to its "url".');
    }
    for (var r = 0; r < targets.length; r++) {
      var rule = targets[r];
      var which = 'Rule ' + (r + 1) + ' of "targets"';
      var at = 'targets.' + (r + 1);
      if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) {
        refuse(at, which + ' must be an object with "when" and "url", like {"when": {"os": ["android"]}, "url": "https://play.google.com/store/apps/details?id=..."}.');
      }
      for (var key in rule) {
        if (key !== 'when' && key !== 'url' && key !== 'split') {
          refuse(at, which + ' has "' + key + '": a rule holds only "when" (its conditions) and "url" or "split".');
        }
      }
      var split = rule.hasOwnProperty('split');
      if (split && rule.hasOwnProperty('url')) {
        refuse(at, which + ' has both "url" and "split": give one (a split sends each visitor to one of its variants).');
      }
      var when = rule.when;
      if (split && !rule.hasOwnProperty('when')) {
        when = {};
      }
      if (typeof when !== 'object' || when === null || Array.isArray(when)) {
        refuse(at, which + ' needs "when", its conditions, like {"os": ["ios"]} or {"device": ["mobile"], "lang": ["fr"]}.');
      }
      var conditions = 0;
      for (var c in when) {
        if (!ALLOWED.hasOwnProperty(c)) {
          refuse(at, which + ': "' + c + '" is no condition; a rule can ask for "os", "device", "lang", "country" and "query".');
        }
        var values = when[c];
        if (c === 'query') {
          if (typeof values !== 'object' || values === null || Array.isArray(values) || Object.keys(values).length === 0) {
            refuse(at, which + ': "query" must be an object of parameter names, each with a list of values, like ' +
              '{"utm_source": ["flyer", "poster"]}.');
          }
          for (var name in values) {
            var wanted = values[name];
            if (name === '' || !Array.isArray(wanted) || wanted.length === 0) {
              refuse(at, which + ': "query"."' + name + '" must be a list of one or more values, like ["flyer"].');
            }
            for (var q = 0; q < wanted.length; q++) {
              if (typeof wanted[q] !== 'string') {
                refuse(at, which + ': "query"."' + name + '" holds ' + JSON.stringify(wanted[q]) + ': values are text, like "flyer".');
              }
            }
          }
          conditions++;
          continue;
        }
        if (!Array.isArray(values) || values.length === 0) {
          refuse(at, which + ': "' + c + '" must be a list of one or more values, like ' +
            (c === 'lang' ? '["fr", "de"]' : c === 'country' ? '["IE", "GB"]' : '["' + ALLOWED[c][0] + '"]') + '.');
        }
        for (var v = 0; v < values.length; v++) {
          var value = values[v];
          if (c === 'lang') {
            if (typeof value !== 'string' || !/^[A-Za-z]{1,8}$/.test(value)) {
              refuse(at, which + ': "lang" holds ' + JSON.stringify(value) + ': use language codes without a ' +
                'region, like "fr" or "de" (a visitor\'s preferred language, fr-CH included, is matched by its "fr").');
            }
          } else if (c === 'country') {
            if (typeof value !== 'string' || !/^[A-Z]{2}$/.test(value)) {
              refuse(at, which + ': "country" holds ' + JSON.stringify(value) + ': use ISO 3166-1 codes of two ' +
                'letters in upper case, like "IE" or "GB".');
            }
          } else if (ALLOWED[c].indexOf(value) === -1) {
            refuse(at, which + ': "' + c + '" holds ' + JSON.stringify(value) + '; allowed: ' +
              ALLOWED[c].join(', ') + ' (lower case).');
          }
        }
        conditions++;
      }
      if (split) {
        var variants = rule.split;
        if (!Array.isArray(variants) || variants.length < 2 || variants.length > 16) {
          refuse(at, which + ': "split" must be a list of 2 to 16 variants, like [{"weight": 50, "url": ' +
            '"https://example.com/a"}, {"weight": 50, "url": "https://example.com/b"}].');
        }
        var total = 0;
        var seen = {};
        for (var s = 0; s < variants.length; s++) {
          var variant = variants[s];
          var named = which + ': variant ' + (s + 1) + ' of "split"';
          var variantAt = at + '.split.' + (s + 1);
          if (typeof variant !== 'object' || variant === null || Array.isArray(variant)) {
            refuse(variantAt, named + ' must be an object with "weight" and "url".');
          }
          for (var vk in variant) {
            if (vk !== 'weight' && vk !== 'url') {
              refuse(variantAt, named + ' has "' + vk + '": a variant holds only "weight" and "url".');
            }
          }
          var weight = variant.weight;
          if (typeof weight !== 'number' || weight % 1 !== 0 || weight < 0 || weight > 1000000) {
            refuse(variantAt, named + ': "weight" must be a whole number from 0 to 1000000 (its share of the visitors).');
          }
          total += weight;
          if (typeof variant.url !== 'string' || variant.url.length === 0) {
            refuse(variantAt, named + ' needs a "url": where its visitors go.');
          }
          if (seen.hasOwnProperty(variant.url)) {
            refuse(variantAt, named + ': "url" ' + variant.url + ' is another variant\'s too.');
          }
          seen[variant.url] = true;
          checkTarget(variant.url, 'url" of variant ' + (s + 1) + ' of rule ' + (r + 1) + ' of "targets', variantAt + '.url');
        }
        if (total === 0) {
          refuse(at, which + ': every variant of "split" has weight 0; give one a share of the visitors.');
        }
        continue;
      }
      if (conditions === 0) {
        refuse(at, which + ' has no condition: give "os", "device", "lang", "country" or "query" (a rule without one would ' +
          'take every visitor; change "url" instead, or make it a "split").');
      }
      if (typeof rule.url !== 'string' || rule.url.length === 0) {
        refuse(at, which + ' needs a "url": where the visitors it matches go.');
      }
      checkTarget(rule.url, 'url" of rule ' + (r + 1) + ' of "targets', at + '.url');
    }
  }
  var rfc3339 = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+\-]([01]\d|2[0-3]):[0-5]\d)$/;
  function instant(name, example) {
    var t = newDoc[name];
    if (typeof t !== 'string' || !rfc3339.test(t) || isNaN(Date.parse(t.replace(/:60(\.\d+)?/, ':59')))) {
      refuse(name, '"' + name + '" must be a date and time with its time zone, like "' + example + '".');
    }
    return Date.parse(t.replace(/:60(\.\d+)?/, ':59'));
  }
  var expires = newDoc.hasOwnProperty('expires') ? instant('expires', '2026-12-31T23:59:59Z') : null;
  var validFrom = newDoc.hasOwnProperty('valid_from') ? instant('valid_from', '2026-12-01T09:00:00+01:00') : null;
  if (expires !== null && validFrom !== null && validFrom >= expires) {
    refuse('valid_from', '"valid_from" must come before "expires": as written, the link would never work.');
  }
  // Section 5c: who made the change, as the client states it for the history (the console and
  // the CLI do; Fauxton and curl need not). A stated writer must be the account writing; an
  // "edit" carried over unchanged from the revision before states nothing about this one.
  if (newDoc.hasOwnProperty('edit')) {
    var edit = newDoc.edit;
    if (typeof edit !== 'object' || edit === null || Array.isArray(edit)) {
      refuse('edit', '"edit" says who made this change, like {"by": "' + (userCtx.name || 'maria') +
        '", "at": "2026-11-28T09:00:00Z"}; leave it out, or as it was, to state nothing.');
    }
    var carried = oldDoc && JSON.stringify(oldDoc.edit) === JSON.stringify(edit);
    if (!carried) {
      for (var ek in edit) {
        if (['by', 'at', 'batch', 'restores'].indexOf(ek) === -1) {
          refuse('edit', '"edit" holds "by", "at", "batch" and "restores", not "' + ek + '".');
        }
      }
      if (edit.by !== userCtx.name) {
        refuse('edit', '"edit" names ' + String(JSON.stringify(edit.by)).substring(0, 80) + ' as the writer, but this change is made by "' +
          userCtx.name + '": state your own account, or leave "edit" as it was.');
      }
      if (edit.hasOwnProperty('at') && (typeof edit.at !== 'string' || !rfc3339.test(edit.at))) {
        refuse('edit', '"edit" "at" must be a date and time with its time zone, like "2026-11-28T09:00:00Z".');
      }
      if (edit.hasOwnProperty('batch') && (typeof edit.batch !== 'string' || !/^[A-Za-z0-9._:-]{1,64}$/.test(edit.batch))) {
        refuse('edit', '"edit" "batch" names a bulk change: 1 to 64 letters, digits, ".", "_", ":" or "-".');
      }
      if (edit.hasOwnProperty('restores') && (typeof edit.restores !== 'string' || !/^[1-9][0-9]*-[0-9a-z]+$/.test(edit.restores))) {
        refuse('edit', '"edit" "restores" names the revision restored, like "3-a1b2".');
      }
    }
  }
}
