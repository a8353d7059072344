// _design/import, view by_source: each imported link under [system, key], the key an import
// recognises a row by (its short URL there, else its code, else its URL; src/transfer/entry.rs,
// stored_key). A second import of the same file finds its earlier rows here, whatever IDs they
// got, without reading the whole database.
function (doc) {
  var from = doc.imported_from;
  if (!from || typeof from.system !== 'string') return;
  var key = [from.short_url, from.code, doc.url].filter(function (k) { return typeof k === 'string'; })[0];
  if (key !== undefined) emit([from.system, key], null);
}
