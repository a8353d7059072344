// A URL per screen, in the hash (the console serves one page, and CouchDB's passage is under
// couch/): back and forward move between screens, a reload keeps the one shown, a pasted URL
// opens it once the visitor has logged in.
//
//   #/{db}/links?q=word&pages=[[key,id],...]   the list, its search, and the first row of each
//                                              page after the first (CouchDB pages by key)
//   #/{db}/link/{id}                           a link
//   #/{db}/link/{id}/edit                      its edit form
//   #/{db}/new                                 a new link
//   #/{db}/tag/{tag}                           a tag's links and their clicks together
//
// parseRoute and formatRoute are pure (console/test/router.test.js); app.js's useRoute ties them
// to the browser's location.

const LIST = { page: 'list', q: '', pages: [] };

// The screen `hash` names; the list of `fallbackDb` for anything else (an empty hash, a
// mistyped one).
export function parseRoute(hash, fallbackDb = '') {
  const [path, search = ''] = String(hash).replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch (e) { return null; }
  });
  if (parts.includes(null) || parts.length === 0) return { db: fallbackDb, ...LIST };
  const [db, screen, id, more] = parts;
  if (screen === 'link' && id && parts.length === 3) return { db, page: 'link', id };
  if (screen === 'link' && id && more === 'edit' && parts.length === 4) return { db, page: 'edit', id };
  if (screen === 'new' && parts.length === 2) return { db, page: 'new' };
  if (screen === 'tag' && id && parts.length === 3) return { db, page: 'tag', tag: id };
  if ((screen === undefined || screen === 'links') && parts.length <= 2) {
    const params = new URLSearchParams(search);
    let pages = [];
    try {
      const read = JSON.parse(params.get('pages') || '[]');
      if (Array.isArray(read) && read.every((p) => Array.isArray(p) && p.length === 2 && typeof p[1] === 'string')) pages = read;
    } catch (e) { pages = []; }
    return { db, page: 'list', q: params.get('q') || '', pages };
  }
  return { db, ...LIST };
}

export function formatRoute(route) {
  const db = encodeURIComponent(route.db);
  switch (route.page) {
    case 'link': return `#/${db}/link/${encodeURIComponent(route.id)}`;
    case 'edit': return `#/${db}/link/${encodeURIComponent(route.id)}/edit`;
    case 'new': return `#/${db}/new`;
    case 'tag': return `#/${db}/tag/${encodeURIComponent(route.tag)}`;
    default: {
      const params = new URLSearchParams();
      if (route.q) params.set('q', route.q);
      if (route.pages && route.pages.length) params.set('pages', JSON.stringify(route.pages));
      const query = params.toString();
      return `#/${db}/links${query ? '?' + query : ''}`;
    }
  }
}

export const listOf = (db, q = '', pages = []) => ({ db, page: 'list', q, pages });
