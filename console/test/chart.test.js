// Clicks over time: the buckets of a range, the view's rows laid on them, the bars, the CSV; a
// link's clicks summed for the list, and a limited link's visits left.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  barChart, buckets, COUNTS_INTERVAL_QUERY, countsInterval, csv, keyOf, roundUp, series, sumClicks, untilNextAsk, visits,
} from '../chart.js';

test('a range has every hour, day or month in it, and no more than a unit allows', () => {
  const from = new Date('2026-11-27T22:30:00Z'), to = new Date('2026-11-28T01:05:00Z');
  assert.deepEqual(buckets(from, to, 'hour'), ['2026-11-27T22', '2026-11-27T23', '2026-11-28T00', '2026-11-28T01']);
  assert.deepEqual(buckets(new Date('2026-02-27T12:00:00Z'), new Date('2026-03-02T00:00:00Z'), 'day'),
    ['2026-02-27', '2026-02-28', '2026-03-01', '2026-03-02']);
  assert.deepEqual(buckets(new Date('2025-11-30T00:00:00Z'), new Date('2026-02-01T00:00:00Z'), 'month'),
    ['2025-11', '2025-12', '2026-01', '2026-02']);
  assert.equal(buckets(new Date('2026-01-01T00:00:00Z'), new Date('2026-03-01T00:00:00Z'), 'hour'), null);
  assert.deepEqual(keyOf('2026-11-28T14'), ['2026', '11', '28', '14']);
});

test('the view\'s rows land on their buckets, and a bucket without counts is 0', () => {
  const rows = [
    { key: ['H83if', '2026', '11', '28', '00'], value: [3, 1, 2, 0] },
    { key: ['H83if', '2026', '11', '27', '22'], value: [5, 0, 1, 1] },
  ];
  const got = series(rows, ['2026-11-27T22', '2026-11-27T23', '2026-11-28T00']);
  assert.deepEqual(got.map((b) => b.redirects), [5, 0, 3]);
  assert.deepEqual(got[0], { label: '2026-11-27T22', redirects: 5, bots: 0, newVisitors: 1, notFound: 1 });
  const days = series([{ key: ['H83if', '2026', '11', '28'], value: [7, 0, 0, 0] }], ['2026-11-28']);
  assert.equal(days[0].redirects, 7);
  const tag = series([{ key: ['H83if', '2026', '11', '28'], value: [7, 1, 2, 0] }, { key: ['Zz9aa', '2026', '11', '28'], value: [3, 0, 1, 1] }], ['2026-11-28']);
  assert.deepEqual(tag[0], { label: '2026-11-28', redirects: 10, bots: 1, newVisitors: 3, notFound: 1 }, 'a tag\'s links add up');
});

test('bars scale to a round top, the highest reaching it only when it is round', () => {
  assert.deepEqual([0, 1, 3, 7, 10, 11, 199, 201].map(roundUp), [0, 1, 5, 10, 10, 20, 200, 500]);
  const chart = barChart([{ label: 'a', value: 50 }, { label: 'b', value: 100 }, { label: 'c', value: 0 }], { width: 340, height: 120, left: 40, bottom: 20 });
  assert.equal(chart.top, 100);
  assert.deepEqual(chart.bars.map((b) => b.h), [50, 100, 0]);
  assert.deepEqual(chart.bars.map((b) => b.y), [50, 0, 100]);
  assert.ok(chart.bars.every((b) => b.x >= 40 && b.x + b.w <= 340));
  assert.equal(barChart([], {}).top, 0);
  assert.ok(barChart(Array.from({ length: 60 }, (_, i) => ({ label: String(i), value: i }))).ticks.length <= 6);
});

test('CSV quotes what needs quoting', () => {
  assert.equal(csv(['hour', 'redirects'], [['2026-11-28T14', 3], ['a,"b"', 0]]),
    'hour,redirects\r\n2026-11-28T14,3\r\n"a,""b""",0\r\n');
});

test('top links add up a link\'s days, most first, ties by ID, at most n', async () => {
  const { topLinks, topQuery } = await import('../chart.js');
  const rows = [
    { key: ['2026', '11', '27', 'Bbbbb'], value: 4 },
    { key: ['2026', '11', '28', 'Aaaaa'], value: 5 },
    { key: ['2026', '11', '28', 'Bbbbb'], value: 1 },
    { key: ['2026', '11', '28', 'Ccccc'], value: 2 },
  ];
  assert.deepEqual(topLinks(rows), [{ id: 'Aaaaa', redirects: 5 }, { id: 'Bbbbb', redirects: 5 }, { id: 'Ccccc', redirects: 2 }]);
  assert.deepEqual(topLinks(rows, 1).map((l) => l.id), ['Aaaaa']);
  const now = new Date('2026-11-03T10:00:00Z');
  assert.deepEqual(topQuery('today', now).params, { group_level: 4, startkey: ['2026', '11', '03'], endkey: ['2026', '11', '03', {}] });
  assert.deepEqual(topQuery('week', now).params.startkey, ['2026', '10', '28']);
  assert.deepEqual(topQuery('month', now), { view: 'by_month_link', params: { group_level: 3, startkey: ['2026', '11'], endkey: ['2026', '11', {}] } });
});

test('a range of whole months asks for months, any other for days', async () => {
  const { dimensionQuery } = await import('../chart.js');
  assert.deepEqual(dimensionQuery('H83if', '2026-01-01', '2026-11-30'),
    { group_level: 4, startkey: ['H83if', 'm2026-01'], endkey: ['H83if', 'm2026-11', {}] });
  assert.deepEqual(dimensionQuery('H83if', '2024-02-01', '2024-02-29').startkey, ['H83if', 'm2024-02'], 'a leap February is whole');
  assert.deepEqual(dimensionQuery('H83if', '2026-11-01', '2026-11-28'),
    { group_level: 4, startkey: ['H83if', 'd2026-11-01'], endkey: ['H83if', 'd2026-11-28', {}] });
});

test('breakdowns add up over the periods, most first, the rest as (other)', async () => {
  const { breakdowns, rowChart } = await import('../chart.js');
  const rows = [
    { key: ['H83if', 'd2026-11-27', 'device', 'mobile'], value: 3 },
    { key: ['H83if', 'd2026-11-28', 'device', 'mobile'], value: 4 },
    { key: ['H83if', 'd2026-11-28', 'device', 'desktop'], value: 2 },
    { key: ['H83if', 'd2026-11-28', 'referrer', '(other)'], value: 1 },
    ...['a', 'b', 'c'].map((h, i) => ({ key: ['H83if', 'd2026-11-28', 'referrer', `${h}.example`], value: 5 - i })),
  ];
  const got = breakdowns(rows, 2);
  assert.deepEqual(got.device, [{ label: 'mobile', value: 7 }, { label: 'desktop', value: 2 }]);
  assert.deepEqual(got.referrer, [{ label: 'a.example', value: 5 }, { label: 'b.example', value: 4 }, { label: '(other)', value: 4 }]);
  const total = (d) => got[d].reduce((s, v) => s + v.value, 0);
  assert.equal(total('referrer'), 13, 'nothing lost to the bound');
  const c = rowChart(got.referrer);
  assert.equal(c.bars[0].w, 320 - 110 - 40, 'the most counted fills the room');
  assert.ok(c.bars[2].w < c.bars[0].w && c.bars[2].w > 0);
  assert.equal(c.height, 3 * 22);
});

test('live counts follow the proxies\' interval as their counts documents state it, the console\'s own only before one is read', () => {
  // The console set to a minute, the proxies to a second: a second.
  assert.equal(countsInterval([{ seconds: 1 }, { seconds: 1 }], 60), 1);
  assert.equal(countsInterval([{ seconds: 300 }], 60), 300, 'longer than the console\'s own, too');
  assert.equal(countsInterval([{ seconds: 60 }, { seconds: 5 }, { seconds: 86400 }], 60), 5, 'the quickest proxy');
  // Nothing counted yet, not read, or nothing a counts document may say: the console's setting.
  for (const none of [[], null, undefined, [{}], [{ seconds: 0 }], [{ seconds: 1.5 }], [{ seconds: '1' }], [null], [{ seconds: 86401 }]]) {
    assert.equal(countsInterval(none, 60), 60, JSON.stringify(none));
  }
});

test('live counts are asked for a moment after each interval the proxies write', () => {
  const at = (iso) => Date.parse(iso);
  // A minute: a second after each whole minute (UTC).
  assert.equal(untilNextAsk(at('2026-11-28T10:00:30Z'), 60), 31000);
  assert.equal(untilNextAsk(at('2026-11-28T10:00:00.500Z'), 60), 500);
  assert.equal(untilNextAsk(at('2026-11-28T10:00:01Z'), 60), 60000);
  // A second: every second, half a second after each; never two in one interval, none skipped.
  assert.equal(untilNextAsk(at('2026-11-28T10:00:00.200Z'), 1), 300);
  assert.equal(untilNextAsk(at('2026-11-28T10:00:00.500Z'), 1), 1000);
  assert.equal(untilNextAsk(at('2026-11-28T10:00:00.700Z'), 1), 800);
  for (const seconds of [1, 2, 7, 60, 3600]) {
    for (let now = at('2026-11-28T10:00:00Z'); now < at('2026-11-28T10:00:00Z') + 2 * seconds * 1000; now += 137) {
      const wait = untilNextAsk(now, seconds);
      assert.ok(wait > 0 && wait <= seconds * 1000, `${seconds} s at ${now}: ${wait}`);
      // Asked then, the next ask is a whole interval later.
      assert.equal(untilNextAsk(now + wait, seconds), seconds * 1000);
    }
  }
});

test('the page asks a clicks database\'s _find only the query the console passes', () => {
  const route = readFileSync(new URL('../../src/console/route.rs', import.meta.url), 'utf8');
  const passed = /pub const COUNTS_INTERVAL_QUERY: &str =\s*r#"(.*?)"#;/s.exec(route);
  assert.ok(passed, 'src/console/route.rs states the query');
  assert.deepEqual(COUNTS_INTERVAL_QUERY, JSON.parse(passed[1]));
});

test('clicks are summed by UTC day into today, 7 days and in all', () => {
  const now = new Date('2026-06-10T08:00:00Z');
  const rows = [
    { key: ['H83if', '2026', '06', '10'], value: [3, 1, 2, 0] },
    { key: ['H83if', '2026', '06', '04'], value: [5, 0, 1, 0] },
    { key: ['H83if', '2026', '06', '03'], value: [7, 0, 0, 0] },
  ];
  assert.deepEqual(sumClicks(rows, now), { today: 3, week: 8, total: 15 });
});

test('a limited link\'s visits left are read from the proxies\' counts', () => {
  const doc = { _id: 'Coupn', url: 'https://example.com/', max_visits: 500 };
  const rows = [{ key: ['Coupn'], value: [120, 20, 90, 3] }];
  assert.deepEqual(visits(doc, rows), { used: 100, left: 400 });
  assert.deepEqual(visits({ ...doc, max_visits_bots: true }, rows), { used: 120, left: 380 });
  assert.deepEqual(visits({ ...doc, max_visits: 50 }, rows), { used: 100, left: 0 });
  assert.deepEqual(visits(doc, []), { used: 0, left: 500 });
  assert.equal(visits({ url: 'https://example.com/' }, rows), null);
});
