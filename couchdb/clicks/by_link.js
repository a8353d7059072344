// Per link and UTC hour: [redirects, bot_redirects, new_visitors, not_found], summed by _sum.
// Group level 2 is a link's year, 3 its month, 4 its day, 5 its hour; 1 all its time.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  var s = doc.start;
  var y = s.slice(0, 4), m = s.slice(5, 7), d = s.slice(8, 10), h = s.slice(11, 13);
  for (var id in doc.links) {
    var c = doc.links[id];
    emit([id, y, m, d, h], [c.redirects, c.bot_redirects, c.new_visitors, c.not_found]);
  }
}
