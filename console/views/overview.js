// The database's overview: its top links today, in the last 7 days or this month (UTC), from
// the live counts' views, live as a link's clicks are.
import { html, useState } from '../vendor/htm-preact-standalone.mjs';
import { topLinks, topQuery } from '../chart.js';
import { BarChart, ChartCard } from './charts.js';
import { Failure, useClient, useCountsInterval, useEveryInterval, useLoad } from './common.js';

const PERIODS = { today: 'today', week: 'the last 7 days', month: 'this month' };

export function TopLinks({ site }) {
  const client = useClient();
  const [period, setPeriod] = useState('today');
  const top = useLoad(async (signal) => {
    const { view, params } = topQuery(period);
    return topLinks(await client.view(site.clicks_db, 'clicks', view, params, { signal }));
  }, [site, period]);
  useEveryInterval(useCountsInterval(site), top.refresh);
  const title = `Top links, ${PERIODS[period]} (UTC)`;
  let body;
  if (top.error) body = html`<${Failure} error=${top.error} retry=${top.retry} />`;
  else if (!top.value) body = html`<p>Loading the top links…</p>`;
  else if (top.value.length === 0) body = html`<p>No redirects counted ${PERIODS[period]}.</p>`;
  else {
    const chart = html`<${BarChart} title=${title} values=${top.value.map((l) => ({ label: l.id, value: l.redirects }))} />`;
    body = html`<${ChartCard} title=${title} chart=${chart} header=${['link', 'redirects']}
      rows=${top.value.map((l) => [l.id, l.redirects])} file=${`${site.db}-top-links-${period}.csv`} />`;
  }
  return html`<section aria-label="Top links">
    <label class="inline" for="top-period">Top links</label>
    <select id="top-period" value=${period} onChange=${(e) => setPeriod(e.target.value)}>
      ${Object.entries(PERIODS).map(([value, name]) => html`<option value=${value}>${name}</option>`)}</select>
    ${body}
  </section>`;
}
