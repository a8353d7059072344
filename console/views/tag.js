// A tag's page: every link with that tag (a print run, a campaign), and their clicks added up:
// over time, by breakdown, per link.
import { html } from '../vendor/htm-preact-standalone.mjs';
import { Failure, useClient, useCountsInterval, useLoad } from './common.js';
import { Clicks } from './link.js';

// Links a tag's page adds up, at most: each is a request or two per refresh.
export const MOST_LINKS = 200;

export function TagPage({ site, tag, go }) {
  const client = useClient();
  const interval = useCountsInterval(site);
  // The console's search view has each tag as a key (lower case); the documents say it as
  // written, and only those that carry the tag itself count.
  const links = useLoad(async (signal) => {
    const rows = await client.view(site.db, 'console', 'search', { key: tag.toLowerCase(), include_docs: true, limit: MOST_LINKS + 1 }, { signal });
    return rows.filter((r) => r.doc && Array.isArray(r.doc.tags) && r.doc.tags.includes(tag)).map((r) => r.doc);
  }, [site, tag]);
  const back = html`<p><a href=${go.href({ page: 'list' })}>Back to the links</a></p>`;
  if (links.error) return html`${back}<${Failure} error=${links.error} retry=${links.retry} />`;
  if (!links.value) return html`<p>Loading the links tagged ${tag}…</p>`;
  const docs = links.value.slice(0, MOST_LINKS);
  return html`<article aria-label=${`Tag ${tag}`}>
    ${back}
    <h2>Tag: ${tag}</h2>
    <p>${docs.length} link${docs.length === 1 ? '' : 's'} with this tag${links.value.length > MOST_LINKS ? html`, the first ${MOST_LINKS} counted here` : ''}:
      ${docs.map((d, i) => html`${i ? ', ' : ''}<a href=${go.href({ page: 'link', id: d._id })}>${typeof d.title === 'string' && d.title ? `${d.title} (${d._id})` : d._id}</a>`)}</p>
    ${docs.length ? html`<${Clicks} site=${site} ids=${docs.map((d) => d._id)} name=${`tag-${tag}`} interval=${interval} />` : ''}
  </article>`;
}
