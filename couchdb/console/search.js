// couchlink console: a link's words, each a key, for search by prefix (startkey "flye",
// endkey "flye\ufff0"): its ID, its tags, the words of its title and of its URL, lowercased.
function (doc) {
  if (doc._id.charAt(0) === '_' || typeof doc.url !== 'string') { return; }
  var seen = {};
  // Words of one letter are too many to search by, but a tag is found whatever its length
  // (`couchlink bulk --tag q`).
  function add(word, least) {
    word = String(word).toLowerCase();
    if (word.length >= (least || 2) && word.length <= 64 && !seen[word]) { seen[word] = true; emit(word, null); }
  }
  add(doc._id);
  if (Array.isArray(doc.tags)) { doc.tags.forEach(function (tag) { if (typeof tag === 'string') { add(tag, 1); } }); }
  var text = (typeof doc.title === 'string' ? doc.title : '') + ' ' + doc.url.replace(/^[a-z]+:\/\//i, '');
  text.split(/[^A-Za-z0-9\u00C0-\uFFFF]+/).slice(0, 64).forEach(add);
}
