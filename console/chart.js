// Clicks over time, pure: the buckets of a range (every hour, day or month in it, counted or
// not), the by_link view's rows laid on them, a bar chart's geometry, and the CSV of a table;
// a link's clicks summed for the list, and a limited link's visits left (src/clicks counts
// both). The views draw what this computes (views/charts.js); `node --test` checks it.

export const UNITS = {
  // level: the by_link view's group level; width: a label's length; start: a label's first
  // instant; most: the buckets one chart shows.
  hour: { level: 5, width: 13, start: (l) => `${l}:00:00Z`, step: (t) => t.setUTCHours(t.getUTCHours() + 1), most: 24 * 31 },
  day: { level: 4, width: 10, start: (l) => `${l}T00:00:00Z`, step: (t) => t.setUTCDate(t.getUTCDate() + 1), most: 366 * 2 },
  month: { level: 3, width: 7, start: (l) => `${l}-01T00:00:00Z`, step: (t) => t.setUTCMonth(t.getUTCMonth() + 1), most: 12 * 20 },
};

// A bucket's label: `2026-11`, `2026-11-28`, `2026-11-28T14` (UTC), as the view's keys spell it.
const label = (t, unit) => t.toISOString().slice(0, UNITS[unit].width);

// The view's key parts of a bucket label: ['2026', '11', '28', '14'].
export const keyOf = (bucketLabel) => bucketLabel.split(/[-T]/);

// Every bucket from the one holding `from` to the one holding `to` (Dates), at most the unit's
// bound (null past it: the page asks for a coarser unit).
export function buckets(from, to, unit) {
  const u = UNITS[unit];
  const t = new Date(u.start(label(from, unit)));
  const end = label(to, unit);
  const out = [];
  while (label(t, unit) <= end) {
    if (out.length === u.most) return null;
    out.push(label(t, unit));
    u.step(t);
  }
  return out;
}

// The view's rows (`[id, y, m, d, h]` at the unit's group level -> [redirects, bots, new
// visitors, 404s]) on `labels`: one row per bucket, 0 where nothing was counted; the rows of
// several links added up.
export function series(rows, labels) {
  // Several links' rows (a tag's) add up per bucket.
  const counted = new Map();
  for (const r of rows) {
    const label = r.key.slice(1).join('-').replace(/^(\d{4}-\d\d-\d\d)-(\d\d)$/, '$1T$2');
    const sum = counted.get(label) || [0, 0, 0, 0];
    counted.set(label, sum.map((n, i) => n + (r.value[i] || 0)));
  }
  return labels.map((l) => {
    const [redirects, bots, newVisitors, notFound] = counted.get(l) || [0, 0, 0, 0];
    return { label: l, redirects, bots, newVisitors, notFound };
  });
}

// A bar per value, in a `width` x `height` box with room for the axis labels: the rectangles,
// the scale's top (a round number at or above the highest bar) and a few labels along x.
export function barChart(values, { width = 640, height = 180, left = 40, bottom = 20 } = {}) {
  const highest = Math.max(0, ...values.map((v) => v.value));
  const top = roundUp(highest);
  const inner = { w: width - left, h: height - bottom };
  const slot = values.length ? inner.w / values.length : inner.w;
  const bars = values.map((v, i) => {
    const h = top ? (v.value / top) * inner.h : 0;
    // At most 48 units wide (a few bars stay bars), centred in their slot.
    const w = Math.min(Math.max(slot * 0.8, 0.5), 48);
    return { x: left + i * slot + (slot - w) / 2, y: inner.h - h, w, h, label: v.label, value: v.value };
  });
  const every = Math.max(1, Math.ceil(values.length / 6));
  const ticks = values.map((v, i) => ({ x: left + i * slot + slot / 2, label: v.label })).filter((_, i) => i % every === 0);
  return { width, height, top, bars, ticks, baseline: inner.h };
}

// The least of 1, 2 or 5 times a power of ten at or above `n` (0 for 0).
export function roundUp(n) {
  if (n <= 0) return 0;
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((v) => v >= n);
}

// RFC 4180 CSV of a header and rows: a field with a comma, quote or line break is quoted.
export function csv(header, rows) {
  const field = (v) => {
    const s = String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [header, ...rows].map((r) => r.map(field).join(',')).join('\r\n') + '\r\n';
}

// The `n` links with most redirects in a top-links view's rows (the link's ID last in each
// key; several rows per link for a range of days), most first, ties by ID.
export function topLinks(rows, n = 10) {
  const sums = new Map();
  for (const r of rows) {
    const id = r.key[r.key.length - 1];
    sums.set(id, (sums.get(id) || 0) + r.value);
  }
  return [...sums].map(([id, redirects]) => ({ id, redirects }))
    .sort((a, b) => b.redirects - a.redirects || (a.id < b.id ? -1 : 1))
    .slice(0, n);
}

// The view and its query for a period's top links at `now` (UTC): today, the last 7 days, or
// this calendar month.
export function topQuery(period, now = new Date()) {
  const day = (offset) => keyOf(new Date(now.getTime() - offset * 86400000).toISOString().slice(0, 10));
  const [y, m] = day(0);
  switch (period) {
    case 'week': return { view: 'by_day_link', params: { group_level: 4, startkey: day(6), endkey: [...day(0), {}] } };
    case 'month': return { view: 'by_month_link', params: { group_level: 3, startkey: [y, m], endkey: [y, m, {}] } };
    default: return { view: 'by_day_link', params: { group_level: 4, startkey: day(0), endkey: [...day(0), {}] } };
  }
}

// The page's one `_find` of a clicks database (src/console/route.rs passes no other).
export const COUNTS_INTERVAL_QUERY = {
  selector: { _id: { $gt: null }, type: 'clicks' }, fields: ['seconds'], sort: [{ _id: 'desc' }], limit: 10,
};

// How often live counts are asked for: the shortest interval (s) the newest counts `docs` state,
// else `fallback` (the console's own setting).
export function countsInterval(docs, fallback) {
  const s = (docs || []).map((d) => d && d.seconds).filter((n) => Number.isInteger(n) && n > 0 && n <= 86400);
  return s.length ? Math.min(...s) : fallback;
}

// Milliseconds from `now` to the next ask: a second (half an interval under 2 s) after the end
// of each interval of `seconds` (UTC multiples, as the proxies count).
export function untilNextAsk(now, seconds) {
  const period = seconds * 1000;
  return period - ((now - Math.min(1000, period / 2)) % period);
}

// The breakdowns a link's counts hold (src/clicks/by.rs), in the order the page shows them, and
// what each is called there.
export const DIMENSIONS = [
  ['country', 'Countries'], ['device', 'Devices'], ['os', 'Operating systems'], ['browser', 'Browsers'],
  ['referrer', 'Referrers'], ['utm_source', 'Campaign sources'], ['utm_medium', 'Campaign media'],
  ['utm_campaign', 'Campaigns'], ['variant', 'Split variants'],
];

// The by_dimension view's query for `id` from day `from` to day `to` (YYYY-MM-DD, both in):
// whole months as months (a twelfth of the rows for a year), else days.
export function dimensionQuery(id, from, to) {
  // A calendar month ends the day before the next one's first.
  const lastOfMonth = (d) => new Date(Date.UTC(+d.slice(0, 4), +d.slice(5, 7), 0)).toISOString().slice(0, 10);
  const months = from.endsWith('-01') && to === lastOfMonth(to);
  const [start, end] = months ? [`m${from.slice(0, 7)}`, `m${to.slice(0, 7)}`] : [`d${from}`, `d${to}`];
  return { group_level: 4, startkey: [id, start], endkey: [id, end, {}] };
}

// The view's rows (`[id, period, dimension, value]` -> redirects) summed over the periods: per
// dimension, its values most counted first (ties by name), the `n` first by name and the rest
// as "(other)", which the counts' own "(other)" joins.
export function breakdowns(rows, n = 10) {
  const sums = new Map();
  for (const r of rows) {
    const [, , dimension, value] = r.key;
    if (!sums.has(dimension)) sums.set(dimension, new Map());
    const values = sums.get(dimension);
    values.set(value, (values.get(value) || 0) + r.value);
  }
  const out = {};
  for (const [dimension, values] of sums) {
    const other = values.get('(other)') || 0;
    values.delete('(other)');
    const sorted = [...values].map(([label, value]) => ({ label, value }))
      .sort((a, b) => b.value - a.value || (a.label < b.label ? -1 : 1));
    const rest = sorted.slice(n).reduce((s, v) => s + v.value, other);
    out[dimension] = rest ? [...sorted.slice(0, n), { label: '(other)', value: rest }] : sorted.slice(0, n);
  }
  return out;
}

// Horizontal bars for named values (long labels: hosts, campaigns): one row per value, the
// label left of its bar, the count right of it.
export function rowChart(values, { width = 320, row = 22, label = 110 } = {}) {
  const highest = Math.max(0, ...values.map((v) => v.value));
  const room = width - label - 40;
  const bars = values.map((v, i) => ({
    x: label, y: i * row + 3, w: highest ? Math.max((v.value / highest) * room, v.value ? 1 : 0) : 0, h: row - 6,
    label: v.label, value: v.value, textY: i * row + row / 2 + 4,
  }));
  return { width, height: Math.max(values.length, 1) * row, label, bars };
}

// The clicks view's rows of one link (`[id, y, m, d]` -> [redirects, bots, new visitors, 404s])
// summed into today, the last 7 days and in all (UTC days).
export function sumClicks(rows, now = new Date()) {
  const day = (offset) => new Date(now.getTime() - offset * 86400000).toISOString().slice(0, 10);
  const today = day(0), week = day(6);
  const sum = { today: 0, week: 0, total: 0 };
  for (const row of rows) {
    const d = row.key.slice(1).join('-');
    sum.total += row.value[0];
    if (d >= week) sum.week += row.value[0];
    if (d === today) sum.today += row.value[0];
  }
  return sum;
}

// A limited link's visits from its `by_link` rows at group level 1 ([redirects, bots, ...]), as
// the proxies count them (bots only with `max_visits_bots`): { used, left }, or null.
export function visits(doc, rows) {
  if (typeof doc.max_visits !== 'number') return null;
  const [all = 0, bots = 0] = rows.length ? rows[0].value : [];
  const used = doc.max_visits_bots ? all : all - bots;
  return { used, left: Math.max(0, doc.max_visits - used) };
}

