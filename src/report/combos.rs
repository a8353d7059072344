//! With `--by`, each line's breakdown values numbered ([`Values`]) and their combination as one
//! number ([`Combos`]), so that a line costs the counting engine one more lookup whatever the
//! number of breakdowns (see [`count`](super::count)).

use std::collections::HashMap;
use std::sync::Arc;

use super::breakdown::Breakdown;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Each distinct value of each breakdown, numbered in the order first seen.
#[derive(Default)]
pub(super) struct Values {
    pub(super) names: Vec<(Breakdown, Arc<str>)>,
    /// Per breakdown (by its place in [`Breakdown::ALL`]), each value's number.
    pub(super) numbers: [Map<Box<str>, u32>; MAX_BREAKDOWNS],
}

impl Values {
    pub(super) fn number(&mut self, breakdown: Breakdown, value: &str) -> u32 {
        let numbers = &mut self.numbers[breakdown as usize];
        if let Some(&n) = numbers.get(value) {
            return n;
        }
        self.names.push((breakdown, value.into()));
        let n = self.names.len() as u32 - 1;
        numbers.insert(value.into(), n);
        n
    }
}

/// The most breakdowns a line has (every [`Breakdown`]).
pub(super) const MAX_BREAKDOWNS: usize = Breakdown::ALL.len();

/// Words a combination's values pack into, two a word.
pub(super) const PACKED: usize = MAX_BREAKDOWNS.div_ceil(2);

/// A line's value numbers, one per breakdown asked for, the rest `u32::MAX`.
pub(super) type ComboKey = [u32; MAX_BREAKDOWNS];

/// The combination of a line without breakdowns: number 0 in every partial.
pub(super) const NO_COMBO: u32 = 0;

/// Each distinct combination of values, numbered in the order first seen (0: none).
pub(super) struct Combos {
    pub(super) keys: Vec<ComboKey>,
    /// Each key's number, the key packed in words: compared inline, where the array of 32-bit
    /// numbers was compared by a call per line.
    pub(super) numbers: Map<[u64; PACKED], u32>,
}

impl Default for Combos {
    fn default() -> Combos {
        let none = [u32::MAX; MAX_BREAKDOWNS];
        Combos { keys: vec![none], numbers: [(Combos::packed(&none), NO_COMBO)].into_iter().collect() }
    }
}

impl Combos {
    /// The value numbers of combination `combo`.
    pub(super) fn values(&self, combo: u32) -> &[u32] {
        let key = &self.keys[combo as usize];
        &key[..key.iter().position(|&v| v == u32::MAX).unwrap_or(key.len())]
    }

    pub(super) fn packed(key: &ComboKey) -> [u64; PACKED] {
        // An odd last value goes alone in its word.
        std::array::from_fn(|i| u64::from(key[2 * i]) << 32 | u64::from(key.get(2 * i + 1).copied().unwrap_or(0)))
    }

    pub(super) fn number(&mut self, key: ComboKey) -> u32 {
        *self.numbers.entry(Combos::packed(&key)).or_insert_with(|| {
            self.keys.push(key);
            self.keys.len() as u32 - 1
        })
    }
}
