// couchlink console: links by when they were made, for "newest first" (descending=true): the
// console's `created`, or the time an import's source gave; links with neither sort last.
function (doc) {
  if (doc._id.charAt(0) === '_' || typeof doc.url !== 'string') { return; }
  var created = typeof doc.created === 'string' ? doc.created
    : (doc.imported_from && typeof doc.imported_from.created === 'string') ? doc.imported_from.created : '';
  emit(created, null);
}
