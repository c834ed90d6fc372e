//! NUBAN (CBN's 10-digit account number): 9-digit serial + a check digit computed over the
//! 3-digit bank code and the serial with weights 3,7,3 repeated.

const WEIGHTS: [u32; 12] = [3, 7, 3, 3, 7, 3, 3, 7, 3, 3, 7, 3];

/// The check digit for a 3-digit bank code and a 9-digit serial; None if either is malformed.
pub fn check_digit(bank_code: &str, serial: &str) -> Option<u8> {
    if bank_code.len() != 3 || serial.len() != 9 {
        return None;
    }
    let mut sum = 0;
    for (i, c) in bank_code.chars().chain(serial.chars()).enumerate() {
        sum += c.to_digit(10)? * WEIGHTS[i];
    }
    Some(((10 - sum % 10) % 10) as u8)
}

/// The full 10-digit account number for a serial.
pub fn account_number(bank_code: &str, serial: u32) -> Option<String> {
    let serial = format!("{serial:09}");
    let digit = check_digit(bank_code, &serial)?;
    Some(format!("{serial}{digit}"))
}

/// True when `number` has a NUBAN's shape, 10 digits, whatever its bank and check digit: all a
/// number money is sent to can be, and all a whole account number is.
pub fn has_shape(number: &str) -> bool {
    number.len() == 10 && number.bytes().all(|b| b.is_ascii_digit())
}

/// True when `number` is a well-formed NUBAN of the bank with this code.
pub fn is_valid(bank_code: &str, number: &str) -> bool {
    has_shape(number) && check_digit(bank_code, &number[..9]) == Some(number.as_bytes()[9] - b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_numbers_validate() {
        // Worked example from the CBN NUBAN circular: bank 011, serial 000001457 → check digit 9.
        assert_eq!(check_digit("011", "000001457"), Some(9));
        assert!(is_valid("011", "0000014579"));
        assert!(!is_valid("011", "0000014578"));
        // Another bank code gives another check digit (044 happens to give 9 too).
        assert!(!is_valid("058", "0000014579"));
    }

    #[test]
    fn generated_numbers_are_valid_for_their_bank_only() {
        for serial in [0, 1, 42, 123_456_789, 999_999_999] {
            let n = account_number("035", serial).unwrap();
            assert_eq!(n.len(), 10);
            assert!(is_valid("035", &n), "{n}");
        }
        assert!(account_number("35", 1).is_none());
        assert!(!is_valid("035", "12345"));
        assert!(!is_valid("035", "12345678a0"));
    }
}
