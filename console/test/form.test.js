// The edit form and back: nothing it does not show is lost.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromForm, toForm } from '../form.js';

test('the form keeps what it does not show, and writes back what it edits', () => {
  const doc = {
    _id: 'H83if', _rev: '1-a', url: 'https://example.com/', inactive: true, owner: 'ops', tags: ['a', 'b'],
    targets: [{ when: { os: ['ios'], weather: ['rain'] }, url: 'https://apps.example/' },
      { split: [{ weight: 1, url: 'https://a.example/' }, { weight: 3, url: 'https://b.example/' }] }],
  };
  const form = toForm(doc);
  assert.equal(form.tags, 'a, b');
  assert.deepEqual(fromForm(form, doc), doc);
  const edited = fromForm({ ...form, tags: '', title: ' Spring ', expires: '' }, doc);
  assert.equal(edited.title, 'Spring');
  assert.equal(edited.tags, undefined);
  assert.equal(edited.owner, 'ops');
  assert.equal(fromForm(toForm({ url: 'https://x.example/' }), {}).inactive, false);
});

test('a visit limit is edited as a number', () => {
  const doc = { _id: 'Coupn', url: 'https://example.com/', max_visits: 500 };
  const form = toForm(doc);
  assert.equal(form.max_visits, '500');
  assert.deepEqual(fromForm(form, doc), { ...doc, inactive: false });
  assert.equal(fromForm({ ...form, max_visits: ' ' }, doc).max_visits, undefined);
  assert.equal(fromForm({ ...form, max_visits: 'lots' }, doc).max_visits, 'lots', 'left for the validation function to refuse');
  assert.equal(fromForm({ ...form, max_visits_bots: true }, doc).max_visits_bots, true);
});

test('a password is never shown in the form: kept as its hash, or removed when asked', () => {
  const doc = { _id: 'H83if', url: 'https://example.com/', password: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA' };
  const form = toForm(doc);
  assert.equal(form.protected, true);
  assert.equal(form.password, '', 'the hash is not put in the password field');
  assert.equal(fromForm(form, doc).password, doc.password, 'kept when nothing is asked');
  assert.equal('password' in fromForm({ ...form, removePassword: true }, doc), false);
  assert.equal(toForm({ url: 'https://example.com/' }).protected, false);
});
