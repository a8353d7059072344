// Per UTC day, the whole database: [redirects, bot_redirects, new_visitors, not_found,
// unknown_not_found], summed by _sum. Group level 1 is a year, 2 a month, 3 a day.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  var s = doc.start;
  var r = 0, b = 0, n = 0, k = 0;
  for (var id in doc.links) {
    var c = doc.links[id];
    r += c.redirects; b += c.bot_redirects; n += c.new_visitors; k += c.not_found;
  }
  emit([s.slice(0, 4), s.slice(5, 7), s.slice(8, 10)], [r, b, n, k, doc.unknown_not_found]);
}
