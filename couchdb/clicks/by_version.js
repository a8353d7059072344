// Per link and target version (the Location sent): redirects, summed by _sum.
function (doc) {
  if (doc.type !== 'clicks') { return; }
  for (var id in doc.links) {
    var versions = doc.links[id].versions || {};
    for (var location in versions) {
      emit([id, location], versions[location]);
    }
  }
}
