//! The values passed between the redirect listener's protocol ([`crate::http`]) and its policy
//! ([`crate::handler`]): a request as parsed, and the reply as decided. No bytes are written
//! here.

use bytes::Bytes;
use time::OffsetDateTime;

use crate::domain::{LinkId, TrackingId};

/// One request as the handler sees it: borrowed from the connection's read buffer.
#[derive(Debug)]
pub struct Request<'a> {
    /// The method, as sent (`GET`, `HEAD`, ...).
    pub method: &'a str,
    /// The request target as received, without a fragment (`/H83if?x=1`, or absolute-form).
    pub target: &'a str,
    /// The target's path (`/H83if`; `*` for asterisk-form).
    pub path: &'a str,
    /// The target's query, without its `?`.
    pub query: Option<&'a str>,
    /// The header fields.
    pub headers: Headers<'a>,
    /// Whether the request announces a body (`Content-Length` above 0, or `Transfer-Encoding`).
    pub has_body: bool,
    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub version: u8,
}

impl Request<'_> {
    /// Whether this is `HEAD` (the response has headers and no body).
    pub fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

/// A header field the proxy reads on the redirect path, found once when the head is parsed
/// ([`Headers::new`]) rather than searched for by name each time it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `Host`.
    Host,
    /// `Content-Length`.
    ContentLength,
    /// `Transfer-Encoding`.
    TransferEncoding,
    /// `Connection`.
    Connection,
    /// `User-Agent`.
    UserAgent,
    /// `Accept-Language`.
    AcceptLanguage,
    /// `Accept`.
    Accept,
    /// `Cookie`.
    Cookie,
    /// `Sec-GPC`.
    SecGpc,
    /// `DNT`.
    Dnt,
    /// `Referer`.
    Referer,
    /// `Authorization`: read for a password-protected link only, never logged or counted.
    Authorization,
}

impl Field {
    const COUNT: usize = 12;

    /// The field a header name is, if it is one of these (ASCII case-insensitive): by length
    /// first, so most names are told apart without a comparison.
    fn of(name: &str) -> Option<Field> {
        let is = |field: &str| name.eq_ignore_ascii_case(field);
        match name.len() {
            3 if is("dnt") => Some(Field::Dnt),
            4 if is("host") => Some(Field::Host),
            6 if is("accept") => Some(Field::Accept),
            6 if is("cookie") => Some(Field::Cookie),
            7 if is("sec-gpc") => Some(Field::SecGpc),
            7 if is("referer") => Some(Field::Referer),
            13 if is("authorization") => Some(Field::Authorization),
            10 if is("user-agent") => Some(Field::UserAgent),
            10 if is("connection") => Some(Field::Connection),
            14 if is("content-length") => Some(Field::ContentLength),
            15 if is("accept-language") => Some(Field::AcceptLanguage),
            17 if is("transfer-encoding") => Some(Field::TransferEncoding),
            _ => None,
        }
    }

    /// Its name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            Field::Host => "host",
            Field::ContentLength => "content-length",
            Field::TransferEncoding => "transfer-encoding",
            Field::Connection => "connection",
            Field::UserAgent => "user-agent",
            Field::AcceptLanguage => "accept-language",
            Field::Accept => "accept",
            Field::Cookie => "cookie",
            Field::SecGpc => "sec-gpc",
            Field::Dnt => "dnt",
            Field::Referer => "referer",
            Field::Authorization => "authorization",
        }
    }
}

/// A request's header fields, in the order received, with where each [`Field`] is.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    list: &'a [httparse::Header<'a>],
    /// For each [`Field`], the index of its first occurrence plus one (0: absent). A head has
    /// at most [`crate::http::limits::MAX_HEADERS`] fields, so a `u8` holds it.
    first: [u8; Field::COUNT],
    /// Bit `f` set: [`Field`] `f` occurs more than once (its values are then searched for).
    repeated: u16,
}

impl<'a> Headers<'a> {
    /// The fields of `list`, each [`Field`] found in one pass.
    pub fn new(list: &'a [httparse::Header<'a>]) -> Self {
        let mut first = [0u8; Field::COUNT];
        let mut repeated = 0u16;
        for (i, header) in list.iter().enumerate().take(usize::from(u8::MAX - 1)) {
            if let Some(field) = Field::of(header.name) {
                let slot = &mut first[field as usize];
                if *slot == 0 {
                    *slot = i as u8 + 1;
                } else {
                    repeated |= 1 << field as u16;
                }
            }
        }
        Headers { list, first, repeated }
    }

    /// Every field, in order.
    pub fn list(&self) -> &'a [httparse::Header<'a>] {
        self.list
    }

    /// The first value of `field`.
    pub fn field(&self, field: Field) -> Option<&'a [u8]> {
        match self.first[field as usize] {
            0 => None,
            i => Some(self.list[usize::from(i) - 1].value),
        }
    }

    /// Every value of `field`, in order.
    pub fn fields(&self, field: Field) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let repeated = self.repeated & (1 << field as u16) != 0;
        let (once, all) = if repeated { (None, Some(self.all(field.name()))) } else { (self.field(field), None) };
        once.into_iter().chain(all.into_iter().flatten())
    }

    /// The first value of header `name` (ASCII case-insensitive).
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.all(name).next()
    }

    /// Every value of header `name`, in order.
    pub fn all<'n>(&self, name: &'n str) -> impl DoubleEndedIterator<Item = &'a [u8]> + use<'a, 'n> {
        self.list.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// The bytes of every name and value together.
    pub fn total_bytes(&self) -> usize {
        self.list.iter().map(|h| h.name.len() + h.value.len()).sum()
    }

    /// Whether any `Connection` header lists `token`.
    pub fn connection_has(&self, token: &str) -> bool {
        self.fields(Field::Connection)
            .any(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes())))
    }
}

/// The statuses the redirect listener answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 200: an out-of-band invitation, as JSON.
    Ok,
    /// 302: the redirect.
    Found,
    /// 400: not understood.
    BadRequest,
    /// 401: this live link asks for its password (its ID names the realm).
    Unauthorized(LinkId),
    /// 404: no live link here (one body for every reason).
    NotFound,
    /// 414: the target is too long.
    UriTooLong,
    /// 429: this address has guessed too many wrong passwords; retry after so many seconds.
    TooManyRequests(u32),
    /// 431: the headers are too large.
    HeadersTooLarge,
    /// 501: a method other than GET and HEAD, or a request with a body.
    NotImplemented,
    /// 503: CouchDB cannot be asked about a link not in memory.
    Unavailable,
}

impl Status {
    /// The code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::Found => 302,
            Status::BadRequest => 400,
            Status::Unauthorized(_) => 401,
            Status::NotFound => 404,
            Status::UriTooLong => 414,
            Status::TooManyRequests(_) => 429,
            Status::HeadersTooLarge => 431,
            Status::NotImplemented => 501,
            Status::Unavailable => 503,
        }
    }
}

/// What a reply carries as its body.
#[derive(Debug, Clone)]
pub enum Body {
    /// The status's own short page.
    Page,
    /// A JSON document (an out-of-band invitation).
    Json(Bytes),
    /// The redirect page: a link to the `Location`.
    Redirect,
}

/// What of the request a response's target depended on, beyond its path and query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vary {
    /// Nothing: the same for everyone.
    #[default]
    Nothing,
    /// The visitor's `User-Agent` and `Accept-Language` (and address): a link's `targets`.
    Visitor,
    /// Those, and the tracking cookie: a split chose the variant by the visitor's tracking ID.
    VisitorAndCookie,
}

impl Vary {
    /// `Vary` as written, `None` for [`Vary::Nothing`]. The address a `country` condition reads
    /// has no header to name; `Cache-Control: no-store` keeps every such answer out of caches.
    pub fn header(self) -> Option<&'static [u8]> {
        match self {
            Vary::Nothing => None,
            Vary::Visitor => Some(b"\r\nvary: User-Agent, Accept-Language"),
            Vary::VisitorAndCookie => Some(b"\r\nvary: User-Agent, Accept-Language, Cookie"),
        }
    }
}

/// A response as the handler decided it; [`write`] turns it into bytes. `L` is the `Location`
/// (borrowed from a cached link, or built for the request).
#[derive(Debug, Clone)]
pub struct Reply<L> {
    /// The status.
    pub status: Status,
    /// The body.
    pub body: Body,
    /// `Location`, for a 302.
    pub location: Option<L>,
    /// The link named in `Link: <...>; rel="shortlink"`.
    pub shortlink: Option<LinkId>,
    /// The tracking cookie to set (`None`: no `Set-Cookie`).
    pub cookie: Option<TrackingId>,
    /// What the target depended on (a link's `targets`): said in `Vary`, so that no shared
    /// cache hands it to another visitor.
    pub vary: Vary,
    /// When it was decided (its `Date`).
    pub now: OffsetDateTime,
    /// Which of the responder's sites (short domains) it answers for: its public URL and
    /// cookie are written with that site's shape.
    pub site: usize,
}
