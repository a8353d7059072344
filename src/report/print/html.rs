//! One self-contained HTML page: inline CSS and SVG charts, nothing fetched from anywhere, so it
//! can be mailed, archived or opened offline.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::super::breakdown::{self, Breakdown};
use super::super::line::Day;
use super::super::summary::{By, Counts, LinkReport, ValueCount};
use super::super::Report;

/// Redirects to humans, and to bots, in every chart.
pub const HUMAN: &str = "#2563eb";
/// See [`HUMAN`].
pub const BOT: &str = "#94a3b8";
/// Target versions, in order (the ninth takes the first's colour again).
pub const VERSIONS: [&str; 8] =
    ["#7c3aed", "#ea580c", "#16a34a", "#db2777", "#0891b2", "#ca8a04", "#dc2626", "#4f46e5"];
/// Bars of campaign values.
pub const CAMPAIGN: &str = "#f59e0b";
/// Device classes' shares, in the legend's order.
pub const DEVICES: [(&str, &str); 5] = [
    ("mobile", "#0d9488"),
    ("tablet", "#c026d3"),
    ("desktop", "#0284c7"),
    (breakdown::BOT, BOT),
    (breakdown::OTHER, "#cbd5e1"),
];
/// Campaign values and countries listed per breakdown (the JSON has them all).
const TOP_VALUES: usize = 8;
/// Links drawn with their own chart; the rest are in the table.
const CHARTED_LINKS: usize = 12;
/// Not-found paths listed.
const TOP_NOT_FOUND: usize = 20;

const STYLE: &str = "
:root { color-scheme: light; --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; color: var(--ink); background: #f8fafc; }
main { max-width: 1080px; margin: 0 auto; padding: 28px 24px 48px; }
h1 { font-size: 26px; margin: 0; } h2 { font-size: 18px; margin: 32px 0 12px; } h3 { margin: 0; font-size: 17px; }
.sub, .muted { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; margin-top: 20px; }
.card, article { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
.card b { display: block; font-size: 24px; font-variant-numeric: tabular-nums; }
.card span { color: var(--muted); font-size: 13px; }
article { margin-bottom: 14px; }
article header { display: flex; justify-content: space-between; align-items: baseline; gap: 12px; flex-wrap: wrap; }
svg { display: block; width: 100%; height: auto; margin-top: 8px; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
table { width: 100%; border-collapse: collapse; background: #fff; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 5px 8px; border-bottom: 1px solid var(--line); }
th { font-weight: 600; color: var(--muted); font-size: 13px; }
th:first-child, td:first-child, .text { text-align: left; }
td.text { word-break: break-all; }
.when { white-space: nowrap; }
.legend { display: flex; gap: 16px; flex-wrap: wrap; font-size: 13px; color: var(--muted); margin-top: 6px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
code { font-size: 13px; }
.by { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 12px 28px; margin-top: 14px; }
.by h4 { margin: 0 0 2px; font-size: 13px; color: var(--muted); font-weight: 600; }
";

/// Writes the page.
pub fn html(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let mut page = String::with_capacity(64 << 10);
    page_into(report, &mut page).expect("writing to a String");
    out.write_all(page.as_bytes())
}

fn page_into(report: &Report, p: &mut String) -> std::fmt::Result {
    let t = &report.totals;
    let days = report.days();
    let mut all = Counts::default();
    for l in &report.links {
        all.redirects += l.counts.redirects;
        all.human_redirects += l.counts.human_redirects;
        all.bot_redirects += l.counts.bot_redirects;
        all.new_visitors += l.counts.new_visitors;
    }
    let range = match (&report.since, &report.until) {
        (None, None) => "all lines".to_owned(),
        (since, until) => {
            format!("from {} until {}", since.as_deref().unwrap_or("the start"), until.as_deref().unwrap_or("the end"))
        }
    };
    write!(
        p,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>couchlink report</title><style>{STYLE}</style></head><body><main>\
         <h1>couchlink report</h1><p class=\"sub\">{} in {}, {}; times in UTC.</p>",
        plural(t.lines, "line"),
        plural(report.files.len() as u64, "access log file"),
        esc(&range)
    )?;
    p.push_str("<section class=\"cards\">");
    for (value, label) in [
        (thousands(all.redirects), "redirects"),
        (percent(all.human_redirects, all.redirects), "to humans"),
        (thousands(all.new_visitors), "new visitors"),
        (thousands(report.links.len() as u64), "links clicked"),
        (thousands(t.not_found.iter().map(|n| n.count).sum()), "not found"),
        (thousands(t.malformed), "malformed lines"),
    ] {
        write!(p, "<div class=\"card\"><b>{value}</b><span>{label}</span></div>")?;
    }
    p.push_str("</section>");

    p.push_str("<h2>Redirects per day</h2><article>");
    let per_day = |human: bool| -> Vec<u64> {
        days.iter()
            .map(|d| {
                let day = report.links.iter().flat_map(|l| l.days.iter().filter(|x| x.day == *d));
                day.map(|x| if human { x.human } else { x.bot }).sum()
            })
            .collect()
    };
    let series = [
        Series { label: "humans".into(), color: HUMAN, values: per_day(true) },
        Series { label: "bots".into(), color: BOT, values: per_day(false) },
    ];
    bars(p, &days, &series, 220)?;
    legend(p, &series)?;
    p.push_str("</article>");

    if !report.links.is_empty() {
        p.push_str("<h2>Links, by target version</h2>");
    }
    for link in report.links.iter().take(CHARTED_LINKS) {
        link_card(p, link, &days)?;
    }

    p.push_str(
        "<h2>All links</h2><table><tr><th>Link</th><th>Redirects</th><th>Humans</th><th>Bots</th>\
                <th>Visitors</th><th>New</th><th>Versions</th><th>Last</th></tr>",
    );
    for l in &report.links {
        let c = &l.counts;
        write!(
            p,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"when\">{}</td></tr>",
            esc(&l.id),
            thousands(c.redirects),
            thousands(c.human_redirects),
            thousands(c.bot_redirects),
            thousands(c.visitors),
            thousands(c.new_visitors),
            l.versions.len(),
            minute(&l.last_seen)
        )?;
    }
    p.push_str("</table>");

    p.push_str("<h2>Responses by status</h2><table><tr><th>Status</th><th>Responses</th></tr>");
    for (status, n) in &t.statuses {
        write!(p, "<tr><td>{}</td><td>{}</td></tr>", esc(status), thousands(*n))?;
    }
    p.push_str("</table>");
    if !t.not_found.is_empty() {
        write!(
            p,
            "<h2>Not found, by path</h2><p class=\"muted\">The top {} of {} paths.</p>",
            TOP_NOT_FOUND.min(t.not_found.len()),
            t.not_found.len()
        )?;
        p.push_str("<table><tr><th class=\"text\">Path</th><th>Requests</th></tr>");
        for n in t.not_found.iter().take(TOP_NOT_FOUND) {
            write!(p, "<tr><td class=\"text\"><code>{}</code></td><td>{}</td></tr>", esc(&n.path), thousands(n.count))?;
        }
        p.push_str("</table>");
    }
    if t.malformed > 0 {
        write!(p, "<h2>Malformed lines</h2><p class=\"muted\">{}; the first ones:</p>", plural(t.malformed, "line"))?;
        p.push_str("<table><tr><th>Where</th><th class=\"text\">Why</th><th class=\"text\">Line</th></tr>");
        for m in &t.malformed_lines {
            write!(
                p,
                "<tr><td class=\"text\">{}:{}</td><td class=\"text\">{}</td><td class=\"text\"><code>{}</code></td></tr>",
                esc(&m.file),
                m.line,
                esc(&m.reason),
                esc(&m.text)
            )?;
        }
        p.push_str("</table>");
    }
    p.push_str("</main></body></html>\n");
    Ok(())
}

fn link_card(p: &mut String, link: &LinkReport, days: &[Day]) -> std::fmt::Result {
    let c = &link.counts;
    write!(
        p,
        "<article><header><h3><code>{}</code></h3><span class=\"muted\">{} · {} · {} new · {} to humans</span></header>",
        esc(&link.id),
        plural(c.redirects, "redirect"),
        plural(c.visitors, "visitor"),
        thousands(c.new_visitors),
        percent(c.human_redirects, c.redirects)
    )?;
    let series: Vec<Series> = link
        .versions
        .iter()
        .map(|v| Series {
            label: format!("v{}", v.version),
            color: VERSIONS[(v.version - 1) % VERSIONS.len()],
            values: days.iter().map(|d| v.days.iter().find(|x| x.day == *d).map_or(0, |x| x.human + x.bot)).collect(),
        })
        .collect();
    bars(p, days, &series, 150)?;
    split(p, c.human_redirects, c.bot_redirects)?;
    p.push_str("<table><tr><th>Version</th><th class=\"text\">Location</th><th>Redirects</th><th>Visitors</th><th>First</th><th>Last</th></tr>");
    for (v, s) in link.versions.iter().zip(&series) {
        write!(
            p,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>v{}</td><td class=\"text\"><code>{}</code></td>\
             <td>{}</td><td>{}</td><td class=\"when\">{}</td><td class=\"when\">{}</td></tr>",
            s.color,
            v.version,
            esc(&v.location),
            thousands(v.counts.redirects),
            thousands(v.counts.visitors),
            minute(&v.first_seen),
            minute(&v.last_seen)
        )?;
    }
    p.push_str("</table>");
    if !link.by.is_empty() {
        breakdowns(p, &link.by)?;
    }
    p.push_str("</article>");
    Ok(())
}

/// A link's breakdowns: bars per campaign parameter used, device and OS shares, a table of
/// countries.
fn breakdowns(p: &mut String, by: &By) -> std::fmt::Result {
    p.push_str("<div class=\"by\">");
    for (b, values) in by.iter() {
        match b {
            // A parameter no redirect carried says nothing: one line, not a chart.
            b if b.is_campaign() && values.iter().all(|v| &*v.value == breakdown::NO_CAMPAIGN) => {
                write!(p, "<div><h4>{}</h4><span class=\"muted\">none carried it</span></div>", b.name())?;
            }
            b if b.is_campaign() => value_bars(p, b.name(), values)?,
            Breakdown::Device => {
                let colour = |v: &ValueCount| DEVICES.iter().find(|(d, _)| *d == &*v.value).map_or(BOT, |(_, c)| *c);
                shares(p, "device", values, colour)?;
            }
            Breakdown::Os | Breakdown::Browser => {
                let colour = |v: &ValueCount| {
                    let i = values.iter().position(|x| x.value == v.value).unwrap_or(0);
                    VERSIONS[i % VERSIONS.len()]
                };
                shares(p, if b == Breakdown::Os { "operating system" } else { "browser" }, values, colour)?;
            }
            _ => {
                write!(p, "<div><h4>country</h4><table><tr><th class=\"text\">Country</th><th>Redirects</th><th>Visitors</th></tr>")?;
                for v in values.iter().take(TOP_VALUES) {
                    write!(
                        p,
                        "<tr><td class=\"text\">{}</td><td>{}</td><td>{}</td></tr>",
                        esc(&v.value),
                        thousands(v.redirects),
                        thousands(v.visitors)
                    )?;
                }
                more(p, values.len())?;
                p.push_str("</table></div>");
            }
        }
    }
    p.push_str("</div>");
    Ok(())
}

/// "and N more" under a list cut at [`TOP_VALUES`].
fn more(p: &mut String, values: usize) -> std::fmt::Result {
    if values > TOP_VALUES {
        write!(p, "<tr><td class=\"text muted\" colspan=\"3\">and {} more</td></tr>", values - TOP_VALUES)?;
    }
    Ok(())
}

/// A horizontal bar per value, longest first, with its redirects and visitors.
fn value_bars(p: &mut String, name: &str, values: &[ValueCount]) -> std::fmt::Result {
    const ROW: usize = 20;
    let shown = &values[..values.len().min(TOP_VALUES)];
    let top = shown.iter().map(|v| v.redirects).max().unwrap_or(1).max(1) as f64;
    write!(
        p,
        "<div><h4>{}</h4><svg viewBox=\"0 0 400 {}\" role=\"img\" shape-rendering=\"crispEdges\">",
        esc(name),
        ROW * shown.len()
    )?;
    for (i, v) in shown.iter().enumerate() {
        let y = ROW * i;
        let label: String = v.value.chars().take(18).collect();
        write!(
            p,
            "<text x=\"0\" y=\"{}\">{}</text><rect x=\"130\" y=\"{}\" width=\"{:.1}\" height=\"13\" fill=\"{}\">\
             <title>{}: {} redirects, {} visitors</title></rect><text x=\"400\" y=\"{}\" text-anchor=\"end\">{}</text>",
            y + 14,
            esc(&label),
            y + 3,
            (190.0 * v.redirects as f64 / top).max(1.0),
            if &*v.value == breakdown::NO_CAMPAIGN { BOT } else { CAMPAIGN },
            esc(&v.value),
            thousands(v.redirects),
            thousands(v.visitors),
            y + 14,
            thousands(v.redirects)
        )?;
    }
    p.push_str("</svg>");
    if values.len() > TOP_VALUES {
        write!(p, "<span class=\"muted\">and {} more</span>", values.len() - TOP_VALUES)?;
    }
    p.push_str("</div>");
    Ok(())
}

/// Values' shares of the redirects, as one bar split in proportion, with a legend.
fn shares(
    p: &mut String,
    name: &str,
    values: &[ValueCount],
    colour: impl Fn(&ValueCount) -> &'static str,
) -> std::fmt::Result {
    let total = values.iter().map(|v| v.redirects).sum::<u64>().max(1) as f64;
    write!(p, "<div><h4>{}</h4><svg viewBox=\"0 0 1000 40\" role=\"img\" shape-rendering=\"crispEdges\">", esc(name))?;
    let mut x = 0.0;
    for v in values {
        let w = 1000.0 * v.redirects as f64 / total;
        write!(
            p,
            "<rect x=\"{x:.1}\" width=\"{w:.1}\" height=\"40\" fill=\"{}\"><title>{}: {} redirects, {} visitors</title></rect>",
            colour(v),
            esc(&v.value),
            thousands(v.redirects),
            thousands(v.visitors)
        )?;
        x += w;
    }
    p.push_str("</svg><div class=\"legend\">");
    for v in values {
        write!(
            p,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{} {} ({})</span>",
            colour(v),
            esc(&v.value),
            percent(v.redirects, total as u64),
            plural(v.visitors, "visitor")
        )?;
    }
    p.push_str("</div></div>");
    Ok(())
}

/// One stacked series of a bar chart: a value per day.
struct Series {
    label: String,
    color: &'static str,
    values: Vec<u64>,
}

/// A stacked bar per day, with a light grid and the first, middle and last days labelled.
fn bars(p: &mut String, days: &[Day], series: &[Series], height: u32) -> std::fmt::Result {
    const WIDTH: f64 = 1000.0;
    const LEFT: f64 = 52.0;
    const BOTTOM: f64 = 20.0;
    let plot_h = f64::from(height) - BOTTOM - 8.0;
    let totals: Vec<u64> = (0..days.len()).map(|d| series.iter().map(|s| s.values[d]).sum()).collect();
    let top = nice_max(totals.iter().copied().max().unwrap_or(0));
    let y = |v: f64| 8.0 + plot_h * (1.0 - v / top as f64);
    write!(p, "<svg viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" shape-rendering=\"crispEdges\">")?;
    for tick in [0, top / 2, top] {
        let ty = y(tick as f64);
        write!(
            p,
            "<line x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" stroke=\"#e2e8f0\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            ty + 4.0,
            thousands(tick)
        )?;
    }
    let slot = (WIDTH - LEFT) / days.len().max(1) as f64;
    let bar = (slot * 0.78).max(1.0);
    for (d, day) in days.iter().enumerate() {
        let x = LEFT + slot * d as f64 + (slot - bar) / 2.0;
        let mut base = 0.0;
        for s in series {
            let v = s.values[d] as f64;
            if v == 0.0 {
                continue;
            }
            let (y0, y1) = (y(base), y(base + v));
            write!(
                p,
                "<rect x=\"{x:.1}\" y=\"{y1:.1}\" width=\"{bar:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                (y0 - y1).max(0.5),
                s.color,
                day,
                esc(&s.label),
                thousands(s.values[d])
            )?;
            base += v;
        }
    }
    let last = days.len().saturating_sub(1);
    for (d, anchor) in [(0, "start"), (last / 2, "middle"), (last, "end")] {
        if let Some(day) = days.get(d).filter(|_| anchor != "middle" || last >= 4) {
            let x = match anchor {
                "start" => LEFT,
                "end" => WIDTH,
                _ => LEFT + slot * (d as f64 + 0.5),
            };
            write!(p, "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>", height - 4, day)?;
        }
    }
    if days.is_empty() {
        write!(p, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no redirects</text>", WIDTH / 2.0, height / 2)?;
    }
    p.push_str("</svg>");
    Ok(())
}

fn legend(p: &mut String, series: &[Series]) -> std::fmt::Result {
    p.push_str("<div class=\"legend\">");
    for s in series {
        let total: u64 = s.values.iter().sum();
        write!(
            p,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{} ({})</span>",
            s.color,
            esc(&s.label),
            thousands(total)
        )?;
    }
    p.push_str("</div>");
    Ok(())
}

/// Humans against bots, as one bar split in proportion.
fn split(p: &mut String, human: u64, bot: u64) -> std::fmt::Result {
    let total = (human + bot).max(1) as f64;
    let w = 1000.0 * human as f64 / total;
    write!(
        p,
        "<svg viewBox=\"0 0 1000 14\" role=\"img\" shape-rendering=\"crispEdges\">\
         <rect width=\"{w:.1}\" height=\"14\" fill=\"{HUMAN}\"><title>humans: {}</title></rect>\
         <rect x=\"{w:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{BOT}\"><title>bots: {}</title></rect></svg>\
         <div class=\"legend\"><span><span class=\"swatch\" style=\"background:{HUMAN}\"></span>humans {}</span>\
         <span><span class=\"swatch\" style=\"background:{BOT}\"></span>bots {}</span></div>",
        thousands(human),
        1000.0 - w,
        thousands(bot),
        thousands(human),
        thousands(bot)
    )
}

/// The smallest 1, 2 or 5 times a power of ten at or above `n` (at least 1).
fn nice_max(n: u64) -> u64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= n {
                return m * step;
            }
        }
        step *= 10;
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn plural(n: u64, what: &str) -> String {
    format!("{} {what}{}", thousands(n), if n == 1 { "" } else { "s" })
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".into();
    }
    format!("{:.0}%", 100.0 * part as f64 / whole as f64)
}

/// An ISO time (`2026-11-22T10:17:33.5Z`) to the minute, for people: `2026-11-22 10:17`.
fn minute(iso: &str) -> String {
    esc(&iso.get(..16).unwrap_or(iso).replacen('T', " ", 1))
}

/// Text made safe for HTML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_text_for_people() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(nice_max(0), 1);
        assert_eq!(nice_max(7), 10);
        assert_eq!(nice_max(1200), 2000);
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(percent(1, 3), "33%");
    }
}
