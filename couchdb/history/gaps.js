// What could not be recorded (docs/reference.md, "History"): [from, link] -> revisions missing,
// summed by _sum: the database's gaps, oldest first, and how many revisions they lost.
function (doc) {
  if (doc.type === 'gap') {
    emit([doc.from, doc.link], doc.missing);
  }
}
