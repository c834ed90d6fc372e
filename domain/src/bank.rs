use super::Mode;

use crate::text_enum::text_enum;

text_enum! {
    /// The provider bank (`test-bank` exists in test mode only).
    pub enum Bank {
        WemaBank = "wema-bank",
        AccessBank = "access-bank",
        TitanTrustBank = "titan-trust-bank",
        TestBank = "test-bank",
    }
}

impl Bank {
    /// The identifier callers send and see as `preferredBank`.
    pub const fn slug(self) -> &'static str {
        self.as_str()
    }

    pub fn name(self) -> &'static str {
        match self {
            Bank::WemaBank => "Wema Bank",
            Bank::AccessBank => "Access Bank",
            Bank::TitanTrustBank => "Titan Trust Bank",
            Bank::TestBank => "Test Bank",
        }
    }

    /// The CBN bank code that the NUBAN check digit is computed over.
    pub fn cbn_code(self) -> &'static str {
        match self {
            Bank::WemaBank => "035",
            Bank::AccessBank => "044",
            Bank::TitanTrustBank => "102",
            // Not a real bank: a code no real bank has, so test numbers can never collide with one.
            Bank::TestBank => "999",
        }
    }

    pub fn allowed_in(self, mode: Mode) -> bool {
        !(self == Bank::TestBank && mode == Mode::Live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_round_trip_and_test_bank_is_test_only() {
        for bank in Bank::ALL {
            assert_eq!(Bank::parse(bank.slug()), Some(bank));
            assert!(bank.allowed_in(Mode::Test));
        }
        assert!(!Bank::TestBank.allowed_in(Mode::Live));
        assert!(Bank::WemaBank.allowed_in(Mode::Live));
        assert_eq!(Bank::parse("gtbank"), None);
    }
}
