//! Writes a country database in MaxMind's format (`GeoLite2-Country`'s record shape) for
//! `bench/report.sh`: GoAccess and `couchlink report --geoip` read the same file. About 300,000
//! networks over a hundred IPv4 /8s (whole /16s, /18s, /20s and /24s, as real allocations come)
//! and the 2a00::/16 IPv6 block: lookups walk a tree as deep as a real database's.
//!
//!     cargo run --release --example bench-geoip -- OUT.mmdb

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

const COUNTRIES: [&str; 40] = [
    "US", "DE", "FR", "GB", "JP", "CN", "BR", "IN", "IT", "ES", "NL", "SE", "PL", "CA", "AU", "KR", "RU", "MX", "AR",
    "ZA", "NG", "EG", "TR", "IR", "ID", "VN", "TH", "PH", "IE", "BE", "CH", "AT", "NO", "DK", "FI", "PT", "CZ", "RO",
    "UA", "IL",
];

fn main() {
    let out = std::env::args().nth(1).expect("usage: bench-geoip OUT.mmdb");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut writer = mmdb_writer::Writer::new("GeoLite2-Country");
    let records: Vec<_> = COUNTRIES
        .iter()
        .map(|c| {
            // GoAccess reads the English names of the country and of its continent.
            let names: BTreeMap<&str, &str> = [("en", *c)].into();
            let continent: BTreeMap<&str, &str> = [("en", "Earth")].into();
            serde_json::json!({
                "continent": { "code": "EA", "names": continent },
                "country": { "iso_code": c, "names": names },
            })
        })
        .collect();
    let mut networks = 0;
    let mut insert = |net: String, country: usize| {
        writer.insert(net.parse::<ipnet::IpNet>().expect("a network"), &records[country]).expect("inserted");
        networks += 1;
    };
    // The /8s of bench/logs.py's addresses: every other one from 2 to 200, less 10 and 127.
    for a in (2..=200u32).step_by(2).filter(|a| *a != 10 && *a != 127) {
        let home = rng.random_range(0..COUNTRIES.len());
        for b in 0..256u32 {
            let country = if rng.random_bool(0.8) { home } else { rng.random_range(0..COUNTRIES.len()) };
            let roll: f64 = rng.random();
            let (prefix, pieces) = match roll {
                r if r < 0.5 => (16, 1),
                r if r < 0.8 => (18, 4),
                r if r < 0.97 => (20, 16),
                _ => (24, 256),
            };
            for piece in 0..pieces {
                let base = (a << 24) | (b << 16) | (piece << (32 - prefix));
                let c = if rng.random_bool(0.9) { country } else { rng.random_range(0..COUNTRIES.len()) };
                insert(format!("{}/{prefix}", std::net::Ipv4Addr::from(base)), c);
            }
        }
    }
    for block in 0..256u32 {
        let country = rng.random_range(0..COUNTRIES.len());
        if block % 16 == 0 {
            for sub in 0..256u32 {
                insert(format!("2a00:{block:02x}{sub:02x}::/32"), (country + sub as usize % 3) % COUNTRIES.len());
            }
        } else {
            insert(format!("2a00:{block:02x}00::/24"), country);
        }
    }
    std::fs::write(&out, writer.to_bytes().expect("the database")).expect("written");
    eprintln!("{out}: {networks} networks");
}
