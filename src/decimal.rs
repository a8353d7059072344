//! Numbers written as decimal digits straight into a byte buffer, for the redirect path's two
//! writers (the response's `Content-Length` and `Retry-After`, the access log's odd status):
//! no `fmt` machinery per request, and one copy that both layers may import, below them.

/// Appends `n` in decimal.
pub fn push_decimal(out: &mut Vec<u8>, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_is_written_as_std_writes_it() {
        let mut out = b"length: ".to_vec();
        push_decimal(&mut out, 0);
        assert_eq!(out, b"length: 0", "appended to what is there, zero as one digit");
        for n in [1, 9, 10, 99, 100, 65_535, 999_999_999, 1_000_000_000, u32::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    proptest::proptest! {
        #[test]
        fn any_number_is_written_as_std_writes_it(n in proptest::num::u32::ANY) {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            proptest::prop_assert_eq!(out, n.to_string().into_bytes());
        }
    }
}
