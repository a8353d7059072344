// Per UTC month and link: redirects, summed by _sum, for a month's top links in one row per
// link. Group level 3 is a link's month.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  var s = doc.start;
  for (var id in doc.links) {
    if (doc.links[id].redirects > 0) { emit([s.slice(0, 4), s.slice(5, 7), id], doc.links[id].redirects); }
  }
}
