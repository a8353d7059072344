// A bulk change's entries (docs/reference.md, "History"): [batch, link] -> the revision it
// wrote, for undo. Entries written with a stated batch only.
function (doc) {
  if (doc.type === 'change' && doc.batch) {
    emit([doc.batch, doc.link], doc.rev);
  }
}
