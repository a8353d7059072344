//! The report written out: a table for people at a terminal, CSV and JSON for programs, and
//! one self-contained HTML page with charts.

use std::io::{self, Write};

use rayon::iter::{IndexedParallelIterator, IntoParallelRefMutIterator, ParallelIterator};
use serde::Serialize;

use super::summary::{By, Counts, DayCount, FileRead, GeoIpRead, LinkReport, Totals};
use super::{Report, Schema};

mod csv;
mod html;
mod table;

pub use self::csv::csv;
pub use html::html;
pub use table::table;

/// The report as JSON on one line (schema `couchlink-report/2`, or `/1` without breakdowns
/// when the report was made for it): a month of a busy log is tens
/// of megabytes pretty-printed; `jq .` indents it when a person wants to read it.
///
/// The same bytes as `serde_json::to_writer(out, report)`, but the links, most of the bytes,
/// are serialised on all cores, a batch at a time into buffers used again for the next batch.
pub fn json(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let v2 = report.schema != Schema::V1.name();
    let head = Head {
        schema: report.schema,
        since: &report.since,
        until: &report.until,
        breakdowns: v2.then_some(&report.breakdowns),
        geoip: v2.then_some(&report.geoip),
        files: &report.files,
        totals: &report.totals,
    };
    let mut text = serde_json::to_vec(&head)?;
    text.pop(); // its closing brace: `links` follows
    text.extend_from_slice(b",\"links\":[");
    out.write_all(&text)?;
    let mut buffers: Vec<Vec<u8>> = vec![Vec::new(); JSON_BATCH];
    for (batch, links) in report.links.chunks(JSON_BATCH).enumerate() {
        buffers.par_iter_mut().zip(links).try_for_each(|(buf, link)| {
            buf.clear();
            link_json(buf, link, v2)
        })?;
        for (i, buf) in buffers[..links.len()].iter().enumerate() {
            if batch > 0 || i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(buf)?;
        }
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

/// Writes `link` as `serde_json::to_writer` does (the test below holds them to the same
/// bytes), but by hand: a link's days, half a million `{"day","human","bot"}` objects in a
/// month of a busy log, went through serde's machinery field by field, and the flattened
/// counts through a map.
fn link_json(out: &mut Vec<u8>, link: &LinkReport, breakdowns: bool) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"id\":");
    serde_json::to_writer(&mut *out, &link.id)?;
    counts_json(out, &link.counts);
    out.extend_from_slice(b",\"first_seen\":");
    serde_json::to_writer(&mut *out, &link.first_seen)?;
    out.extend_from_slice(b",\"last_seen\":");
    serde_json::to_writer(&mut *out, &link.last_seen)?;
    days_json(out, &link.days);
    if breakdowns {
        by_json(out, &link.by)?;
    }
    out.extend_from_slice(b",\"versions\":[");
    for (i, v) in link.versions.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"{\"version\":" } else { b",{\"version\":" });
        out.extend_from_slice(itoa::Buffer::new().format(v.version).as_bytes());
        out.extend_from_slice(b",\"location\":");
        serde_json::to_writer(&mut *out, &v.location)?;
        out.extend_from_slice(b",\"first_seen\":");
        serde_json::to_writer(&mut *out, &v.first_seen)?;
        out.extend_from_slice(b",\"last_seen\":");
        serde_json::to_writer(&mut *out, &v.last_seen)?;
        counts_json(out, &v.counts);
        days_json(out, &v.days);
        if breakdowns {
            by_json(out, &v.by)?;
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

/// [`Counts`]' fields, each after a comma, as `#[serde(flatten)]` writes them.
fn counts_json(out: &mut Vec<u8>, c: &Counts) {
    let Counts { redirects, human_redirects, bot_redirects, visitors, new_visitors, human_visitors, bot_visitors } = *c;
    for (name, n) in [
        (&b",\"redirects\":"[..], redirects),
        (b",\"human_redirects\":", human_redirects),
        (b",\"bot_redirects\":", bot_redirects),
        (b",\"visitors\":", visitors),
        (b",\"new_visitors\":", new_visitors),
        (b",\"human_visitors\":", human_visitors),
        (b",\"bot_visitors\":", bot_visitors),
    ] {
        out.extend_from_slice(name);
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
}

/// `,"days":[...]` of [`DayCount`]s.
fn days_json(out: &mut Vec<u8>, days: &[DayCount]) {
    out.extend_from_slice(b",\"days\":[");
    for (i, d) in days.iter().enumerate() {
        out.extend_from_slice(if i == 0 { b"{\"day\":\"" } else { b",{\"day\":\"" });
        out.extend_from_slice(&d.day.iso());
        out.extend_from_slice(b"\",\"human\":");
        out.extend_from_slice(itoa::Buffer::new().format(d.human).as_bytes());
        out.extend_from_slice(b",\"bot\":");
        out.extend_from_slice(itoa::Buffer::new().format(d.bot).as_bytes());
        out.push(b'}');
    }
    out.push(b']');
}

/// `,"by":{...}` as `serde_json::to_writer` writes [`By`], by hand as the days are: a month of a
/// busy log has millions of values.
fn by_json(out: &mut Vec<u8>, by: &By) -> serde_json::Result<()> {
    out.extend_from_slice(b",\"by\":{");
    for (i, (breakdown, values)) in by.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(breakdown.name().as_bytes());
        out.extend_from_slice(b"\":[");
        for (j, v) in values.iter().enumerate() {
            out.extend_from_slice(if j == 0 { b"{\"value\":" } else { b",{\"value\":" });
            serde_json::to_writer(&mut *out, &*v.value)?;
            out.extend_from_slice(b",\"redirects\":");
            out.extend_from_slice(itoa::Buffer::new().format(v.redirects).as_bytes());
            out.extend_from_slice(b",\"visitors\":");
            out.extend_from_slice(itoa::Buffer::new().format(v.visitors).as_bytes());
            out.push(b'}');
        }
        out.push(b']');
    }
    out.push(b'}');
    Ok(())
}

/// Links serialised side by side before they are written.
const JSON_BATCH: usize = 256;

/// Every field of [`Report`] before `links`, in its order.
#[derive(Serialize)]
struct Head<'a> {
    schema: &'a str,
    since: &'a Option<String>,
    until: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    breakdowns: Option<&'a Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    geoip: Option<&'a Option<GeoIpRead>>,
    files: &'a [FileRead],
    totals: &'a Totals,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_the_report_serialised_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.2026-11-22.log");
        std::fs::write(
            &path,
            "20261122100000.1 ::1 20261122100000aaaaaaaaaaaaaaaa - /H83if 302 https://e.x/one\n\
             20261122100001.1 ::1 - - /Ab3dE 302 https://e.x/two\n\
             20261122100002.1 ::1 - - /nope1 404\n\
             20261123100000.1 ::1 20261122100000aaaaaaaaaaaaaaaa Firefox /H83if 302 https://e.x/one\n\
             20261123100001.1 ::1 20261123100001bbbbbbbbbbbbbbbb - /H83if 302 https://e.x/\"three\\\n\
             garbage\n",
        )
        .unwrap();
        let report = crate::report::run(&[path], &crate::report::Options::default()).unwrap();
        assert_eq!(report.links.len(), 2);
        assert_eq!((report.links[0].versions.len(), report.links[0].days.len()), (2, 2), "versions and days written");
        let mut ours = Vec::new();
        json(&report, &mut ours).unwrap();
        let mut whole = serde_json::to_vec(&report).unwrap();
        whole.push(b'\n');
        assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(whole).unwrap());
    }

    #[test]
    fn schema_1_is_schema_2_without_breakdowns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.2026-11-22.log");
        std::fs::write(
            &path,
            "20261122100000.1 ::1 20261122100000aaaaaaaaaaaaaaaa - /H83if?utm_source=a 302 https://e.x/?utm_source=a\n",
        )
        .unwrap();
        let json_of = |options: &crate::report::Options| {
            let mut out = Vec::new();
            json(&crate::report::run(std::slice::from_ref(&path), options).unwrap(), &mut out).unwrap();
            serde_json::from_slice::<serde_json::Value>(&out).unwrap()
        };
        let breakdowns =
            crate::report::breakdown::Breakdowns::new(&[crate::report::breakdown::Dimension::Campaign], None).unwrap();
        let mut v2 = json_of(&crate::report::Options { breakdowns: breakdowns.into(), ..Default::default() });
        let v1 = json_of(&crate::report::Options { schema: crate::report::Schema::V1, ..Default::default() });
        assert_eq!(v2["links"][0]["by"]["utm_source"][0]["value"], "a");
        assert_eq!(v2["schema"], "couchlink-report/2");
        let object = v2.as_object_mut().unwrap();
        object.remove("breakdowns");
        object.remove("geoip");
        object["schema"] = "couchlink-report/1".into();
        let link = v2["links"][0].as_object_mut().unwrap();
        link.remove("by");
        link["versions"][0].as_object_mut().unwrap().remove("by");
        assert_eq!(v1, v2);
    }
}
