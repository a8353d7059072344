//! `couchlink clicks`: the live counts every proxy writes (docs/reference.md, "Live counts"),
//! read from the clicks database's view: per link, in all or per month, day or hour.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::CouchArgs;
use crate::clicks::by::Dimension;
use crate::clicks::doc::DESIGN_DOC;
use crate::couch::{CouchClient, CouchError, ViewQuery};
use crate::domain::LinkId;

/// Flags of `couchlink clicks`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("couchdb_user", |a| a.help("A CouchDB account that may read links (a reader or an editor)")))]
pub struct ClicksArgs {
    /// The links to show (all that were counted, without any).
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// Counts in all, or per UTC month, day or hour; or redirects per value of a breakdown
    /// (`campaign`: `utm_source`, `utm_medium` and `utm_campaign`).
    #[arg(long, value_enum, default_value_t = Grouping::Total)]
    pub by: Grouping,
    /// From this UTC day on (YYYY-MM-DD).
    #[arg(long, value_parser = parse_day)]
    pub since: Option<String>,
    /// Up to this UTC day, included (YYYY-MM-DD).
    #[arg(long, value_parser = parse_day)]
    pub until: Option<String>,
    /// Redirects per target version (each `Location` sent) instead of per period.
    #[arg(long, conflicts_with_all = ["by", "since", "until"])]
    pub versions: bool,
    /// With admin credentials: roll every day before this one (YYYY-MM-DD) up into daily
    /// documents, its one-minute documents deleted (docs/operations.md, "Live counts on disk").
    #[arg(long, value_name = "DAY", value_parser = parse_day, conflicts_with_all = ["ids", "by", "since", "until", "versions"])]
    pub roll_up_until: Option<String>,
    /// With admin credentials: roll up every UTC day that ended more than DAYS days ago (the
    /// hours of the last DAYS days are kept), as `--roll-up-until` does.
    #[arg(long, value_name = "DAYS", conflicts_with_all = ["ids", "by", "since", "until", "versions", "roll_up_until"])]
    pub roll_up_older_than: Option<u32>,
    /// With `--roll-up-older-than`: again every SECONDS until SIGTERM or SIGINT, a round's
    /// failure said on stderr and tried again next round (the one process a default install
    /// runs: docs/operations.md, "Live counts on disk").
    #[arg(long, value_name = "SECONDS", requires = "roll_up_older_than", value_parser = clap::value_parser!(u64).range(1..))]
    pub every: Option<u64>,
    /// How to print them.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The clicks database [default: <db>_clicks].
    #[arg(long, env = "COUCHLINK_CLICKS_DB", value_parser = crate::domain::CompanionDb::parse)]
    pub clicks_db: Option<crate::domain::CompanionDb>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub couch: CouchArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub on: super::DomainChoice,
}

/// What `--by` names: a period, or breakdowns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Grouping {
    /// In all.
    Total,
    /// Per UTC month.
    Month,
    /// Per UTC day.
    Day,
    /// Per UTC hour.
    Hour,
    /// Per country (with `COUCHLINK_GEOIP` on the proxies).
    Country,
    /// Per kind of device (a bot's redirects under `bot`).
    Device,
    /// Per operating system.
    Os,
    /// Per browser family.
    Browser,
    /// Per referrer host.
    Referrer,
    /// Per `utm_source`, `utm_medium` and `utm_campaign`.
    Campaign,
    /// Per split variant (`R.V`: rule R's variant V).
    Variant,
}

impl Grouping {
    /// The period it names, or the breakdowns.
    pub fn split(self) -> Result<Period, &'static [Dimension]> {
        use Dimension as D;
        Ok(match self {
            Grouping::Total => Period::Total,
            Grouping::Month => Period::Month,
            Grouping::Day => Period::Day,
            Grouping::Hour => Period::Hour,
            Grouping::Country => return Err(&[D::Country]),
            Grouping::Device => return Err(&[D::Device]),
            Grouping::Os => return Err(&[D::Os]),
            Grouping::Browser => return Err(&[D::Browser]),
            Grouping::Referrer => return Err(&[D::Referrer]),
            Grouping::Campaign => return Err(&[D::UtmSource, D::UtmMedium, D::UtmCampaign]),
            Grouping::Variant => return Err(&[D::Variant]),
        })
    }
}

/// How counts are grouped in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// In all.
    Total,
    /// Per UTC month.
    Month,
    /// Per UTC day.
    Day,
    /// Per UTC hour.
    Hour,
}

impl Period {
    /// The view's group level for this period (its key is `[id, year, month, day, hour]`).
    fn group_level(self) -> usize {
        match self {
            Period::Total => 1,
            Period::Month => 3,
            Period::Day => 4,
            Period::Hour => 5,
        }
    }
}

/// How counts are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns, for a terminal.
    Table,
    /// One JSON document.
    Json,
    /// Comma-separated, with a header.
    Csv,
}

fn parse_day(s: &str) -> Result<String, String> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(s, format).map(|_| s.to_owned()).map_err(|_| format!("{s:?} is not a day as YYYY-MM-DD"))
}

/// Why the counts could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ClicksError {
    /// An argument that is no link ID.
    #[error("{0:?} is not a link ID (5 letters or digits)")]
    BadId(String),
    /// Counting is off.
    #[error("COUCHLINK_CLICKS_DB is off: there are no counts to show")]
    Off,
    /// The clicks database cannot be used (the links database itself, say).
    #[error(transparent)]
    Companion(#[from] crate::domain::CompanionError),
    /// The clicks database has no view yet.
    #[error("{0} has no counts view: run `couchlink setup` (with admin credentials) for this database")]
    NoView(String),
    /// CouchDB refused or could not be reached.
    #[error("cannot read the counts")]
    Couch(#[from] CouchError),
    /// Writing to stdout failed.
    #[error("cannot write the counts")]
    Write(#[from] std::io::Error),
    /// The async runtime could not start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// Rolling up stopped.
    #[error(transparent)]
    Rollup(#[from] crate::clicks::rollup::RollupError),
    /// A view's row is not of the shape couchlink's views emit (a document written by hand, or
    /// a view changed).
    #[error("{view} has a row keyed {key}, not {expected}: is _design/clicks couchlink's own? (`couchlink setup`)")]
    Shape {
        /// The view.
        view: &'static str,
        /// The key found.
        key: String,
        /// The shape expected.
        expected: &'static str,
    },
}

/// Rows read from a view per request: a database of years of counts is never read whole.
const VIEW_PAGE: usize = 1000;

/// Every row of the clicks view `view` between the query's keys, `page` rows a request: each
/// page starts at the last key of the one before (a grouped view's keys are distinct, so that
/// row alone repeats).
pub async fn view_rows(
    couch: &CouchClient,
    view: &str,
    query: ViewQuery,
    page: usize,
) -> Result<Vec<(Value, Value)>, ClicksError> {
    let page_size = page.max(2);
    let mut rows: Vec<(Value, Value)> = Vec::new();
    let mut query = ViewQuery { limit: Some(page_size), ..query };
    loop {
        let page = couch.view(DESIGN_DOC, view, &query).await.map_err(|e| no_view(couch, e))?;
        let full = page.len() == page_size;
        let repeated = usize::from(rows.last().is_some_and(|(last, _)| page.first().is_some_and(|(k, _)| k == last)));
        rows.extend(page.into_iter().skip(repeated));
        match rows.last() {
            Some((last, _)) if full => query.start_key = last.clone(),
            _ => return Ok(rows),
        }
    }
}

/// The parts of a `by_link` key: `[ID, year, month, day, hour]` cut at `level`, all strings.
fn link_key(key: &Value, level: usize) -> Result<Vec<&str>, ClicksError> {
    let parts: Option<Vec<&str>> = key.as_array().map(|k| k.iter().filter_map(Value::as_str).collect());
    match parts {
        Some(parts)
            if parts.len() == level.min(5)
                && key.as_array().is_some_and(|k| k.len() == parts.len())
                && LinkId::parse(parts[0]).is_ok()
                && parts[1..].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            Ok(parts)
        }
        _ => Err(ClicksError::Shape {
            view: "by_link",
            key: key.to_string(),
            expected: "[ID, year, month, day, hour] (strings)",
        }),
    }
}

/// One row of counts: a link, the period (empty for all time), and its four numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The link.
    pub id: String,
    /// `2026`, `2026-11`, `2026-11-26` or `2026-11-26T15`, or empty for all time.
    pub period: String,
    /// Redirects, bot redirects, new visitors, 404s.
    pub counts: [u64; 4],
}

impl ClicksArgs {
    /// Reads the counts and prints them.
    pub fn execute(mut self) -> Result<(), ClicksError> {
        for id in &self.ids {
            LinkId::parse(id).map_err(|_| ClicksError::BadId(id.clone()))?;
        }
        // An ID named twice is one link: its rows once, not its counts twice.
        let mut seen = std::collections::HashSet::new();
        self.ids.retain(|id| seen.insert(id.clone()));
        let place = self.clicks_db.clone().unwrap_or_default();
        let db = place.resolve(crate::domain::Companion::Clicks, &self.couch.db)?.ok_or(ClicksError::Off)?;
        let couch = CouchClient::new(&self.couch.clone().into())?.for_database(&db);
        let runtime = super::current_thread_runtime().map_err(ClicksError::Runtime)?;
        let out = &mut std::io::stdout().lock();
        if let Some(until) = &self.roll_up_until {
            let until = time::Date::parse(until, time::macros::format_description!("[year]-[month]-[day]"))
                .expect("checked by the flag's parser");
            let days = runtime.block_on(crate::clicks::rollup::roll_up(&couch, until))?;
            for day in &days {
                writeln!(out, "{}: {} documents rolled into {}", day.day, day.deleted, day.parts)?;
            }
            if days.is_empty() {
                writeln!(out, "nothing to roll up before {}", self.roll_up_until.as_deref().unwrap_or_default())?;
            }
            return Ok(());
        }
        if let Some(days) = self.roll_up_older_than {
            return runtime.block_on(roll_up_rounds(&couch, days, self.every, out));
        }
        if self.versions {
            let rows = runtime.block_on(versions(&couch, &self.ids))?;
            return print_versions(&rows, self.format, out);
        }
        let (since, until) = (self.since.as_deref(), self.until.as_deref());
        match self.by.split() {
            Ok(period) => {
                let rows = runtime.block_on(read(&couch, &self.ids, period, since, until))?;
                print(&rows, period, self.format, out)
            }
            Err(dimensions) => {
                let rows = runtime.block_on(read_by(&couch, &self.ids, dimensions, since, until))?;
                print_by(&rows, self.format, out)
            }
        }
    }
}

/// The rows of `ids` (all links without any) per `by`, between `since` and `until` (days).
pub async fn read(
    couch: &CouchClient,
    ids: &[String],
    by: Period,
    since: Option<&str>,
    until: Option<&str>,
) -> Result<Vec<Row>, ClicksError> {
    // A time range is read per day, then added up to the period asked for.
    let level = if since.is_some() || until.is_some() { by.group_level().max(4) } else { by.group_level() };
    let mut rows: Vec<Row> = Vec::new();
    for (start, end) in key_ranges(ids) {
        let query = ViewQuery { group_level: Some(level), start_key: start, end_key: end, limit: None };
        for (key, value) in view_rows(couch, "by_link", query, VIEW_PAGE).await? {
            let parts = link_key(&key, level)?;
            let day = parts.get(1..4).map(|d| d.join("-"));
            if day.as_deref().is_some_and(|d| since.is_some_and(|s| d < s) || until.is_some_and(|u| d > u)) {
                continue;
            }
            let period = period(&parts[1..by.group_level().min(parts.len())]);
            let counts = numbers(&value);
            match rows.last_mut() {
                Some(last) if last.id == parts[0] && last.period == period => {
                    for (sum, n) in last.counts.iter_mut().zip(counts) {
                        *sum += n;
                    }
                }
                _ => rows.push(Row { id: parts[0].to_owned(), period, counts }),
            }
        }
    }
    Ok(rows)
}

/// Rolls up the days older than `days`, once, or every `every` seconds until SIGTERM or SIGINT.
async fn roll_up_rounds(
    couch: &CouchClient,
    days: u32,
    every: Option<u64>,
    out: &mut impl Write,
) -> Result<(), ClicksError> {
    // Caught before the first round: a SIGTERM during it ends the rounds once it is done.
    let mut stop = std::pin::pin!(crate::lifecycle::shutdown_signal_caught());
    loop {
        let today = time::OffsetDateTime::now_utc().date();
        let until = today - time::Duration::days(i64::from(days));
        match crate::clicks::rollup::roll_up(couch, until).await {
            Ok(rolled) => {
                for day in &rolled {
                    writeln!(out, "{}: {} documents rolled into {}", day.day, day.deleted, day.parts)?;
                }
                if rolled.is_empty() {
                    writeln!(out, "nothing to roll up before {until}")?;
                }
                out.flush()?;
            }
            // Nothing is lost by a round that stops (each day is rolled up whole or taken up
            // again): said, and tried again next round.
            Err(e) if every.is_some() => eprintln!("couchlink clicks: {}", crate::errors::Causes(&e)),
            Err(e) => return Err(e.into()),
        }
        let Some(every) = every else { return Ok(()) };
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(every)) => {}
            () = &mut stop => return Ok(()),
        }
    }
}

/// Redirects of one link per value of a breakdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRow {
    /// The link.
    pub id: String,
    /// The breakdown.
    pub dimension: Dimension,
    /// Its value (`(none)`, `(other)` and `other` as documented).
    pub value: String,
    /// Redirects.
    pub redirects: u64,
}

/// The redirects of `ids` (all links without any) per value of `dimensions`, between `since`
/// and `until` (days; in all without either), from the `by_dimension` view: days when a range is
/// asked, else months (a twelfth of the rows), each link's values most counted first.
pub async fn read_by(
    couch: &CouchClient,
    ids: &[String],
    dimensions: &[Dimension],
    since: Option<&str>,
    until: Option<&str>,
) -> Result<Vec<ValueRow>, ClicksError> {
    let days = since.is_some() || until.is_some();
    let (from, to) = match (days, since, until) {
        (true, since, until) => (format!("d{}", since.unwrap_or("")), format!("d{}", until.unwrap_or("9999"))),
        (false, ..) => ("m".to_owned(), "m\u{fff0}".to_owned()),
    };
    let ranges: Vec<(Value, Value)> = if ids.is_empty() {
        vec![(Value::Null, Value::Null)]
    } else {
        ids.iter().map(|id| (json!([id, from]), json!([id, to, {}]))).collect()
    };
    let mut sums: std::collections::BTreeMap<(String, Dimension, String), u64> = Default::default();
    for (start, end) in ranges {
        let query = ViewQuery { group_level: Some(4), start_key: start, end_key: end, limit: None };
        for (key, value) in view_rows(couch, "by_dimension", query, VIEW_PAGE).await? {
            let shape = || ClicksError::Shape {
                view: "by_dimension",
                key: key.to_string(),
                expected: "[ID, \"d\" day or \"m\" month, breakdown, value] (strings)",
            };
            let [Value::String(id), Value::String(period), Value::String(name), Value::String(v)] =
                key.as_array().map(Vec::as_slice).unwrap_or_default()
            else {
                return Err(shape());
            };
            let dimension = Dimension::parse(name).ok_or_else(shape)?;
            LinkId::parse(id).map_err(|_| shape())?;
            // Without IDs every key is read: those of the other kind of period, or out of
            // the range, are left.
            if !dimensions.contains(&dimension) || period.as_str() < from.as_str() || period.as_str() > to.as_str() {
                continue;
            }
            *sums.entry((id.clone(), dimension, v.clone())).or_default() += value.as_u64().unwrap_or(0);
        }
    }
    let mut rows: Vec<ValueRow> = sums
        .into_iter()
        .map(|((id, dimension, value), redirects)| ValueRow { id, dimension, value, redirects })
        .collect();
    rows.sort_by(|a, b| {
        (&a.id, a.dimension).cmp(&(&b.id, b.dimension)).then(b.redirects.cmp(&a.redirects)).then(a.value.cmp(&b.value))
    });
    Ok(rows)
}

/// Prints `rows` of breakdowns as `format` says.
pub fn print_by(rows: &[ValueRow], format: Format, out: &mut impl Write) -> Result<(), ClicksError> {
    match format {
        Format::Json => {
            let rows: Vec<Value> = rows
                .iter()
                .map(|r| json!({"link": r.id, "dimension": r.dimension.name(), "value": r.value, "redirects": r.redirects}))
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&json!({"clicks": rows})).expect("JSON serialises"))?;
        }
        Format::Csv => {
            writeln!(out, "link,dimension,value,redirects")?;
            for r in rows {
                // A value is what a visitor sent (a campaign, a host): quoted (RFC 4180).
                writeln!(out, "{},{},\"{}\",{}", r.id, r.dimension.name(), r.value.replace('"', "\"\""), r.redirects)?;
            }
        }
        Format::Table => {
            if rows.is_empty() {
                writeln!(out, "no counts by these breakdowns yet")?;
                return Ok(());
            }
            let width = rows.iter().map(|r| r.value.chars().count()).max().unwrap_or(0).max(5);
            writeln!(out, "link   breakdown     {:<width$}  redirects", "value")?;
            for r in rows {
                writeln!(out, "{}  {:<12}  {:<width$}  {:>9}", r.id, r.dimension.name(), r.value, r.redirects)?;
            }
        }
    }
    Ok(())
}

/// The view's key ranges of `ids`, each `[id]` to `[id, {}]`; without any, the whole view.
fn key_ranges(ids: &[String]) -> Vec<(Value, Value)> {
    if ids.is_empty() {
        vec![(Value::Null, Value::Null)]
    } else {
        ids.iter().map(|id| (json!([id]), json!([id, {}]))).collect()
    }
}

/// `["2026", "11", "26", "15"]` (or a prefix of it) as `2026-11-26T15`.
fn period(parts: &[&str]) -> String {
    match parts {
        [] => String::new(),
        [y] => (*y).to_owned(),
        [y, m] => format!("{y}-{m}"),
        [y, m, d] => format!("{y}-{m}-{d}"),
        [y, m, d, h, ..] => format!("{y}-{m}-{d}T{h}"),
    }
}

fn numbers(value: &Value) -> [u64; 4] {
    let mut counts = [0; 4];
    for (n, v) in counts.iter_mut().zip(value.as_array().into_iter().flatten()) {
        *n = v.as_u64().unwrap_or(0);
    }
    counts
}

/// A view that does not exist is a setup not run, said so.
fn no_view(couch: &CouchClient, e: CouchError) -> ClicksError {
    match e {
        CouchError::Refused { status: 404, .. } => ClicksError::NoView(couch.database().to_owned()),
        e => ClicksError::Couch(e),
    }
}

/// Redirects per link and target version.
async fn versions(couch: &CouchClient, ids: &[String]) -> Result<Vec<(String, String, u64)>, ClicksError> {
    let mut rows = Vec::new();
    for (start, end) in key_ranges(ids) {
        let query = ViewQuery { group_level: Some(2), start_key: start, end_key: end, limit: None };
        for (key, value) in view_rows(couch, "by_version", query, VIEW_PAGE).await? {
            match key.as_array().map(Vec::as_slice).unwrap_or_default() {
                [Value::String(id), Value::String(location)] if LinkId::parse(id).is_ok() => {
                    rows.push((id.clone(), location.clone(), value.as_u64().unwrap_or(0)))
                }
                _ => {
                    let (view, expected) = ("by_version", "[ID, version] (strings)");
                    return Err(ClicksError::Shape { view, key: key.to_string(), expected });
                }
            }
        }
    }
    Ok(rows)
}

const COLUMNS: [&str; 4] = ["redirects", "bot_redirects", "new_visitors", "not_found"];

/// Prints `rows` as `format` says.
pub fn print(rows: &[Row], by: Period, format: Format, out: &mut impl Write) -> Result<(), ClicksError> {
    let by_name = match by {
        Period::Total => None,
        Period::Month => Some("month"),
        Period::Day => Some("day"),
        Period::Hour => Some("hour"),
    };
    match format {
        Format::Json => {
            let rows: Vec<Value> = rows
                .iter()
                .map(|r| {
                    let mut row = json!({"link": r.id});
                    if let Some(name) = by_name {
                        row[name] = json!(r.period);
                    }
                    for (column, n) in COLUMNS.iter().zip(r.counts) {
                        row[*column] = json!(n);
                    }
                    row
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&json!({"clicks": rows})).expect("JSON serialises"))?;
        }
        Format::Csv => {
            let head: Vec<&str> = ["link"].into_iter().chain(by_name).chain(COLUMNS).collect();
            writeln!(out, "{}", head.join(","))?;
            for r in rows {
                let period = by_name.map(|_| format!("{},", r.period)).unwrap_or_default();
                let [a, b, c, d] = r.counts;
                writeln!(out, "{},{period}{a},{b},{c},{d}", r.id)?;
            }
        }
        Format::Table => {
            if rows.is_empty() {
                writeln!(out, "no counts yet (a proxy writes them once an interval, COUCHLINK_CLICKS_INTERVAL_SECS)")?;
                return Ok(());
            }
            let width = rows.iter().map(|r| r.period.len()).max().unwrap_or(0).max(by_name.map_or(0, str::len));
            let period_head = by_name.unwrap_or_default();
            writeln!(out, "link   {period_head:<width$}  redirects  bots  new visitors  404s")?;
            for r in rows {
                let [a, b, c, d] = r.counts;
                writeln!(out, "{}  {:<width$}  {a:>9}  {b:>4}  {c:>12}  {d:>4}", r.id, r.period)?;
            }
        }
    }
    Ok(())
}

fn print_versions(rows: &[(String, String, u64)], format: Format, out: &mut impl Write) -> Result<(), ClicksError> {
    match format {
        Format::Json => {
            let rows: Vec<Value> =
                rows.iter().map(|(id, l, n)| json!({"link": id, "location": l, "redirects": n})).collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&json!({"versions": rows})).expect("JSON serialises"))?;
        }
        Format::Csv => {
            writeln!(out, "link,location,redirects")?;
            for (id, location, n) in rows {
                // A Location is visible ASCII; quoted for its commas.
                writeln!(out, "{id},\"{}\",{n}", location.replace('"', "\"\""))?;
            }
        }
        Format::Table => {
            for (id, location, n) in rows {
                writeln!(out, "{id}  {n:>9}  {location}")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_by_link_key_of_another_shape_is_an_error_naming_it() {
        assert_eq!(link_key(&json!(["H83if", "2026", "11", "26"]), 4).unwrap(), ["H83if", "2026", "11", "26"]);
        assert_eq!(link_key(&json!(["H83if"]), 1).unwrap(), ["H83if"]);
        for key in [
            json!([]),
            json!("H83if"),
            json!(["H83if", 2026, "11", "26"]),
            json!(["H83if", "2026"]),
            json!(["toolong", "2026", "11", "26"]),
            json!(["H83if", "20x6", "11", "26"]),
            json!(null),
        ] {
            let refused = link_key(&key, 4).unwrap_err();
            assert!(refused.to_string().contains("not [ID, year, month, day, hour]"), "{key}: {refused}");
        }
    }

    #[test]
    fn periods_read_as_dates() {
        assert_eq!(period(&[]), "");
        assert_eq!(period(&["2026", "11"]), "2026-11");
        assert_eq!(period(&["2026", "11", "26", "15"]), "2026-11-26T15");
        assert!(parse_day("2026-11-26").is_ok() && parse_day("26/11/2026").is_err());
    }

    #[test]
    fn rows_print_in_every_format() {
        let rows = [Row { id: "H83if".into(), period: "2026-11-26".into(), counts: [12, 3, 5, 1] }];
        let mut csv = Vec::new();
        print(&rows, Period::Day, Format::Csv, &mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "link,day,redirects,bot_redirects,new_visitors,not_found\nH83if,2026-11-26,12,3,5,1\n"
        );
        let mut json = Vec::new();
        print(&rows, Period::Day, Format::Json, &mut json).unwrap();
        let value: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["clicks"][0]["new_visitors"], 5);
        assert_eq!(value["clicks"][0]["day"], "2026-11-26");
        let mut table = Vec::new();
        print(&rows, Period::Day, Format::Table, &mut table).unwrap();
        assert!(String::from_utf8(table).unwrap().contains("H83if  2026-11-26         12     3             5     1"));
    }

    #[test]
    fn breakdowns_print_in_every_format() {
        let row = |value: &str, redirects| ValueRow {
            id: "H83if".into(),
            dimension: Dimension::UtmSource,
            value: value.into(),
            redirects,
        };
        let rows = [row("flyer, A4", 7), row("(none)", 2)];
        let mut csv = Vec::new();
        print_by(&rows, Format::Csv, &mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "link,dimension,value,redirects\nH83if,utm_source,\"flyer, A4\",7\nH83if,utm_source,\"(none)\",2\n"
        );
        let mut json = Vec::new();
        print_by(&rows, Format::Json, &mut json).unwrap();
        let value: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            value["clicks"][0],
            json!({"link": "H83if", "dimension": "utm_source", "value": "flyer, A4", "redirects": 7})
        );
        let mut table = Vec::new();
        print_by(&rows, Format::Table, &mut table).unwrap();
        assert!(String::from_utf8(table).unwrap().contains("H83if  utm_source    flyer, A4          7"));
        assert_eq!(Grouping::Campaign.split().unwrap_err().len(), 3);
        assert_eq!(Grouping::Day.split(), Ok(Period::Day));
    }
}
