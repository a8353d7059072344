// Per link, period, breakdown and value: redirects, summed by _sum. Each interval's breakdowns
// are emitted twice, under its UTC day ("d2026-11-28") and its UTC month ("m2026-11"), so that a
// range of days and a range of months are each one query: a year of a link's countries is 12
// grouped rows per value, not 365. Group level 4 is a link's value of a breakdown in a period.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  var day = 'd' + doc.start.slice(0, 10), month = 'm' + doc.start.slice(0, 7);
  for (var id in doc.links) {
    var by = doc.links[id].by || {};
    for (var dimension in by) {
      var values = by[dimension];
      for (var value in values) {
        if (values[value] > 0) {
          emit([id, day, dimension, value], values[value]);
          emit([id, month, dimension, value], values[value]);
        }
      }
    }
  }
}
