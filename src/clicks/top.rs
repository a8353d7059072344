//! The values visitors send (countries, referrer hosts, campaign values), counted per link and
//! interval so that the most frequent are the ones kept whatever order they come in and however
//! many others come with them (docs/reference.md, "Live counts").
//!
//! Exact while a breakdown has at most [`EXACT`] distinct values. Past that it is a
//! Misra-Gries summary (Misra and Gries 1982; merged as Agarwal et al. 2012 show): the counters
//! are cut down to [`KEPT`] by taking the (`KEPT`+1)-th largest count off each and dropping those
//! left at zero, the mass taken off going to [`OTHER_VERSIONS`]. Every count kept is then at most
//! `total / (KEPT + 1)` below the true one and never above it, through any merging of serving
//! threads' summaries and documents read back, and a value with more than that share of the
//! redirects is always among those counted: junk spread thin cannot push it out. The total is
//! always exact, `(other)` holding what is not kept by name.
//!
//! Plain: one map, cut in one pass when it has grown to [`EXACT`] + 1; cutting costs
//! `O(EXACT)` once per `EXACT - KEPT` new values, `O(1)` a value.

use std::collections::HashMap;

use super::OTHER_VERSIONS;

/// Counters kept after a cut.
pub const KEPT: usize = 1024;
/// Distinct values counted exactly; one more and the counters are cut to [`KEPT`].
pub const EXACT: usize = 2 * KEPT;

/// One breakdown's values over an interval (or a merge of several).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Top {
    counts: HashMap<Box<str>, u64, foldhash::fast::RandomState>,
    /// Counted as other: values too long, a document's own `(other)`, and what cuts took off.
    other: u64,
}

impl Top {
    /// Counts `n` under `value` ([`OTHER_VERSIONS`]: as other).
    pub fn add(&mut self, value: &str, n: u64) {
        if n == 0 {
            return;
        }
        if value == OTHER_VERSIONS {
            self.other += n;
        } else if let Some(count) = self.counts.get_mut(value) {
            *count += n;
        } else {
            self.counts.insert(value.into(), n);
            if self.counts.len() > EXACT {
                self.cut();
            }
        }
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Top) {
        for (value, n) in &other.counts {
            self.add(value, *n);
        }
        self.other += other.other;
    }

    /// Takes the (`KEPT`+1)-th largest count off every counter and drops those left at zero.
    fn cut(&mut self) {
        let mut counts: Vec<u64> = self.counts.values().copied().collect();
        let (_, kth, _) = counts.select_nth_unstable_by(KEPT, |a, b| b.cmp(a));
        let cut = *kth;
        let mut taken = 0;
        self.counts.retain(|_, count| {
            let off = (*count).min(cut);
            taken += off;
            *count -= off;
            *count > 0
        });
        self.other += taken;
    }

    /// Every value counted by name and its count, in no order, then [`OTHER_VERSIONS`] if any.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        let other = (self.other > 0).then_some((OTHER_VERSIONS, self.other));
        self.counts.iter().map(|(v, n)| (&**v, *n)).chain(other)
    }

    /// Everything counted, by name or as other.
    pub fn total(&self) -> u64 {
        self.other + self.counts.values().sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact counts of a stream, the oracle.
    fn exact(stream: &[(String, u64)]) -> HashMap<String, u64> {
        let mut counts = HashMap::new();
        for (v, n) in stream {
            *counts.entry(v.clone()).or_default() += n;
        }
        counts
    }

    fn summary(stream: &[(String, u64)]) -> Top {
        let mut top = Top::default();
        for (v, n) in stream {
            top.add(v, *n);
        }
        top
    }

    /// Holds `top` to the bound against the exact counts of what it summarises.
    fn within_bound(top: &Top, truth: &HashMap<String, u64>) {
        let total: u64 = truth.values().sum();
        assert_eq!(top.total(), total, "the total is exact");
        let bound = total / (KEPT as u64 + 1);
        let kept: HashMap<&str, u64> = top.iter().filter(|(v, _)| *v != OTHER_VERSIONS).collect();
        for (value, true_count) in truth {
            let counted = kept.get(value.as_str()).copied().unwrap_or(0);
            assert!(counted <= *true_count, "{value}: {counted} counted of {true_count}");
            assert!(true_count - counted <= bound, "{value}: {counted} counted of {true_count}, bound {bound}");
        }
        if truth.len() <= EXACT {
            assert_eq!(kept.len(), truth.len(), "exact while few");
        }
    }

    /// Skewed (a few values most of the stream) or uniform, in any order.
    fn stream() -> impl Strategy<Value = Vec<(String, u64)>> {
        (1usize..6000, prop::bool::ANY, 1u64..4).prop_flat_map(|(distinct, skewed, weight)| {
            let value = if skewed {
                // Zipf-like: value k drawn with weight about 1/k.
                (0.0f64..1.0).prop_map(move |u| ((distinct as f64).powf(u) as usize).min(distinct) - 1).boxed()
            } else {
                (0..distinct).boxed()
            };
            prop::collection::vec((value, 1..=weight), 1..20_000)
                .prop_map(|draws| draws.into_iter().map(|(k, n)| (format!("host{k}.example"), n)).collect())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn counts_kept_are_within_the_bound_of_exact_counts_however_split_and_merged(
            stream in stream(),
            threads in 1usize..5,
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            within_bound(&summary(&stream), &exact(&stream));
            // Dealt to serving threads round-robin, each thread's counts then merged, and the
            // merge split at arbitrary points (documents read back) and merged again.
            let mut shares = vec![Vec::new(); threads];
            for (k, draw) in stream.iter().enumerate() {
                shares[k % threads].push(draw.clone());
            }
            let mut merged = Top::default();
            for share in &shares {
                merged.merge(&summary(share));
            }
            within_bound(&merged, &exact(&stream));
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len())).collect();
            at.sort_unstable();
            let mut pieces = Top::default();
            let mut from = 0;
            for to in at.into_iter().chain([stream.len()]) {
                pieces.merge(&summary(&stream[from..to.max(from)]));
                from = to.max(from);
            }
            within_bound(&pieces, &exact(&stream));
        }
    }

    #[test]
    fn junk_spread_thin_does_not_push_out_the_values_with_a_share() {
        let mut top = Top::default();
        // 40 junk values first, then real referrers among 50,000 values seen once each.
        for k in 0..40 {
            top.add(&format!("junk{k}.example"), 1);
        }
        for k in 0..50_000u64 {
            top.add(&format!("once{k}.example"), 1);
            if k % 100 == 0 {
                top.add("news.example", 1);
            }
            if k % 250 == 0 {
                top.add("mail.example", 1);
            }
        }
        let kept: HashMap<&str, u64> = top.iter().collect();
        let bound = top.total() / (KEPT as u64 + 1);
        assert!(kept["news.example"] + bound >= 500 && kept["news.example"] <= 500, "{}", kept["news.example"]);
        assert!(kept["mail.example"] + bound >= 200, "{}", kept["mail.example"]);
        assert!(kept.len() <= EXACT + 1);
        assert_eq!(top.total(), 40 + 50_000 + 500 + 200);
    }
}
