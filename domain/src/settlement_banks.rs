//! The banks a settlement account can be at (payouts go there; the provider banks that hold virtual
//! accounts are `bank.rs`): Nigeria's commercial (and non-interest) banks with
//! their 3-digit CBN codes, over which the NUBAN check digit is computed.

use crate::nuban;

/// A bank a business can be paid out to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SettlementBank {
    pub code: &'static str,
    pub name: &'static str,
}

/// Sorted by name, as `GET /banks` lists them.
pub const SETTLEMENT_BANKS: &[SettlementBank] = &[
    SettlementBank {
        code: "044",
        name: "Access Bank",
    },
    SettlementBank {
        code: "023",
        name: "Citibank Nigeria",
    },
    SettlementBank {
        code: "050",
        name: "Ecobank Nigeria",
    },
    SettlementBank {
        code: "070",
        name: "Fidelity Bank",
    },
    SettlementBank {
        code: "011",
        name: "First Bank of Nigeria",
    },
    SettlementBank {
        code: "214",
        name: "First City Monument Bank",
    },
    SettlementBank {
        code: "103",
        name: "Globus Bank",
    },
    SettlementBank {
        code: "058",
        name: "Guaranty Trust Bank",
    },
    SettlementBank {
        code: "301",
        name: "Jaiz Bank",
    },
    SettlementBank {
        code: "082",
        name: "Keystone Bank",
    },
    SettlementBank {
        code: "303",
        name: "Lotus Bank",
    },
    SettlementBank {
        code: "107",
        name: "Optimus Bank",
    },
    SettlementBank {
        code: "104",
        name: "Parallex Bank",
    },
    SettlementBank {
        code: "076",
        name: "Polaris Bank",
    },
    SettlementBank {
        code: "105",
        name: "PremiumTrust Bank",
    },
    SettlementBank {
        code: "101",
        name: "Providus Bank",
    },
    SettlementBank {
        code: "106",
        name: "Signature Bank",
    },
    SettlementBank {
        code: "221",
        name: "Stanbic IBTC Bank",
    },
    SettlementBank {
        code: "068",
        name: "Standard Chartered Bank",
    },
    SettlementBank {
        code: "232",
        name: "Sterling Bank",
    },
    SettlementBank {
        code: "100",
        name: "SunTrust Bank",
    },
    SettlementBank {
        code: "302",
        name: "TAJBank",
    },
    SettlementBank {
        code: "102",
        name: "Titan Trust Bank",
    },
    SettlementBank {
        code: "032",
        name: "Union Bank of Nigeria",
    },
    SettlementBank {
        code: "033",
        name: "United Bank for Africa",
    },
    SettlementBank {
        code: "215",
        name: "Unity Bank",
    },
    SettlementBank {
        code: "035",
        name: "Wema Bank",
    },
    SettlementBank {
        code: "057",
        name: "Zenith Bank",
    },
];

/// The bank with this CBN code, if a settlement account can be there.
pub fn settlement_bank(code: &str) -> Option<SettlementBank> {
    SETTLEMENT_BANKS.iter().copied().find(|b| b.code == code)
}

/// Why `account_number` cannot be a settlement account at the bank with `code`, if it cannot:
/// an unknown bank, or a number whose NUBAN check digit is not that bank's.
pub fn check_settlement_account(
    code: &str,
    account_number: &str,
) -> Result<SettlementBank, &'static str> {
    let bank = settlement_bank(code).ok_or("unknown_bank")?;
    if !nuban::is_valid(code, account_number) {
        return Err("invalid_account_number");
    }
    Ok(bank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_unique_and_has_three_digit_codes() {
        let mut codes: Vec<_> = SETTLEMENT_BANKS.iter().map(|b| b.code).collect();
        assert!(
            codes
                .iter()
                .all(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit()))
        );
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), SETTLEMENT_BANKS.len(), "codes are unique");
        let names: Vec<_> = SETTLEMENT_BANKS
            .iter()
            .map(|b| b.name.to_lowercase())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "sorted by name");
    }

    #[test]
    fn a_settlement_account_needs_a_known_bank_and_its_check_digit() {
        let number = nuban::account_number("058", 12_345_678).unwrap();
        assert_eq!(
            check_settlement_account("058", &number).unwrap().name,
            "Guaranty Trust Bank"
        );
        assert_eq!(
            check_settlement_account("999", &number),
            Err("unknown_bank")
        );
        let other_bank = nuban::account_number("057", 12_345_678).unwrap();
        if other_bank != number {
            assert_eq!(
                check_settlement_account("058", &other_bank),
                Err("invalid_account_number")
            );
        }
        assert_eq!(
            check_settlement_account("058", "12345"),
            Err("invalid_account_number")
        );
    }
}
