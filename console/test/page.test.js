// What the page's Content-Security-Policy (src/console/mod.rs: scripts and styles from the
// console itself, nothing inline, nothing evaluated) and its weight ask of the files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const dir = new URL('../', import.meta.url);
// Every module of the page's own: the console's folder and views/ (tests and vendored code aside).
const own = [...readdirSync(dir).filter((f) => f.endsWith('.js')), ...readdirSync(new URL('views/', dir)).map((f) => `views/${f}`)];
const read = (name) => readFileSync(new URL(name, dir), 'utf8');

test('no inline script or style, nothing evaluated', () => {
  const page = read('index.html');
  assert.doesNotMatch(page, /<script(?![^>]*\bsrc=)[^>]*>/, 'an inline script');
  assert.doesNotMatch(page, /<style|\sstyle=/, 'an inline style');
  for (const name of own) {
    const code = read(name);
    assert.doesNotMatch(code, /\bstyle=/, `${name}: an inline style`);
    assert.doesNotMatch(code, /\beval\(|new Function\(|innerHTML|dangerouslySetInnerHTML/, `${name}: evaluated code or markup`);
  }
});

// The bound was 40 KB until passwords and visit limits came (41.3 KB with them, 2026-11-29), 44 KB
// until live counts followed the proxies' own interval (43.5 KB before, 44.3 KB with it).
test('every module the page imports is one the console serves, and all of them weigh under 46 KB gzipped', () => {
  const served = readFileSync(new URL('../src/console/route.rs', dir), 'utf8');
  const names = [...served.matchAll(/include_bytes!\("\.\.\/\.\.\/console\/([^"]+)"\)/g)].map((m) => m[1]);
  for (const name of own) assert.ok(names.includes(name), `${name} is not among the console's assets`);
  const weight = names.reduce((sum, name) => sum + gzipSync(readFileSync(new URL(name, dir)), { level: 9 }).length, 0);
  assert.ok(weight < 46 * 1024, `${weight} bytes gzipped`);
});
