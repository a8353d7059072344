// Per link and target version (what the link decided, "(other)" past 32 an interval): redirects,
// summed by _sum.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  for (var id in doc.links) {
    var versions = doc.links[id].versions || {};
    for (var location in versions) {
      emit([id, location], versions[location]);
    }
  }
}
