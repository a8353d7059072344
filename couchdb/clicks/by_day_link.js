// Per UTC day and link: redirects, summed by _sum, for a day's (or a few days') top links.
// Group level 4 is a link's day.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  var s = doc.start;
  var y = s.slice(0, 4), m = s.slice(5, 7), d = s.slice(8, 10);
  for (var id in doc.links) {
    if (doc.links[id].redirects > 0) { emit([y, m, d, id], doc.links[id].redirects); }
  }
}
