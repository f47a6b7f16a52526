"""The `personal_data` built-in over what tools really return and are sent: a CRM's customer records,
a payment, an HR export. Each value is found and confirmed by its checksum, masked with nothing
else changed, or refused per type; and what only looks like personal data — order numbers, prices,
dates, versions, ids, numbers that fail their checksum — is let be."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from apps.kernel.interceptors import personal_data
from apps.kernel.interceptors.base import PASS, Decision, Payload, Subject
from apps.kernel.interceptors.personal_data import iban_valid, luhn_valid, verhoeff_valid

EMAIL = "maria.garcia+billing@example-clinic.es"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"
IBAN = "DE89 3704 0044 0532 0130 00"
SSN = "536-22-8410"
NINO = "AB 12 34 56 C"
DNI = "12345678Z"
AADHAAR = "2345 6789 0124"

TYPES = {EMAIL: "email", PHONE: "phone", CARD: "card", IBAN: "iban", SSN: "us_ssn", NINO: "uk_nino", DNI: "es_dni",
         AADHAAR: "in_aadhaar"}


def _result(text: str, structured: Any = None) -> dict[str, Any]:
    """A tools/call JSON-RPC response as a backend sends it."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return {"jsonrpc": "2.0", "id": 11, "result": result}


CUSTOMER = _result(
    f"Customer 4471 (Maria Garcia), created 2023-11-02.\nEmail: {EMAIL}\nPhone: {PHONE}\n"
    f"Card on file: {CARD} (exp 09/27)\nRefunds go to {IBAN}.\n",
    {
        "customer": {
            "id": "cus_01HV6Z4X8Q3R2M9T",
            "name": "Maria Garcia",
            "email": EMAIL,
            "phone": PHONE,
            "created": "2023-11-02T10:15:00Z",
            "ids": {"us_ssn": SSN, "uk_nino": NINO, "es_dni": DNI, "in_aadhaar": AADHAAR},
            "payment": {"card": CARD, "iban": IBAN, "card_brand": "visa", "last4": "1111"},
            "lifetime_value": 12840.5,
            "orders": 37,
        },
    },
)


def _redacted(value: Any, types: Mapping[str, str]) -> Any:
    """`value` with each of `types`' values, wherever a string holds it, as the mask writes it."""
    if isinstance(value, str):
        for found, kind in types.items():
            value = value.replace(found, f"[REDACTED:{kind}]")
        return value
    if isinstance(value, list):
        return [_redacted(item, types) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, types) for key, item in value.items()}
    return value


def _inspect(inspector: personal_data.PersonalDataInspector, value: Any = None, *, text: str | None = None,
             phase: str = "result") -> Decision:
    payload = Payload(text=text) if text is not None else Payload(value=value)
    return inspector.inspect(Subject(phase, "tools/call", "crm.get_customer", payload))


def _text_of(decision: Decision) -> str:
    assert decision.payload is not None
    return decision.payload.value["result"]["content"][0]["text"]


def _found_in(text: str, **settings: Any) -> tuple[str, ...]:
    """The types found in `text` as a tool result's text content."""
    inspector = personal_data.build({"types": settings} if settings else personal_data.DEFAULTS)
    return _inspect(inspector, _result(text)).findings


MASK_ALL = personal_data.build(personal_data.DEFAULTS)


def test_every_type_of_a_customer_record_is_masked_and_nothing_else_changes() -> None:
    decision = _inspect(MASK_ALL, CUSTOMER)

    assert decision.action == "rewrite"
    assert decision.findings == ("card", "email", "es_dni", "iban", "in_aadhaar", "phone", "uk_nino", "us_ssn")
    assert decision.payload is not None
    expected = _redacted(CUSTOMER, TYPES)
    assert orjson.loads(decision.payload.text) == expected
    assert decision.payload.value == expected
    for value in TYPES:
        assert value not in decision.payload.text
        assert value not in decision.reason


def test_a_refuse_type_refuses_the_call_and_its_reason_names_types_not_values() -> None:
    inspector = personal_data.build({"types": {"card": "refuse", "iban": "refuse"}})

    decision = _inspect(inspector, CUSTOMER)

    assert decision.action == "refuse"
    assert decision.payload is None
    assert decision.reason == "card, iban found in the result"
    assert decision.findings == ("card", "email", "es_dni", "iban", "in_aadhaar", "phone", "uk_nino", "us_ssn")
    for value in TYPES:
        assert value not in decision.reason
        assert all(value not in finding for finding in decision.findings)


def test_a_partial_mapping_is_merged_over_the_defaults() -> None:
    inspector = personal_data.build({"types": {"email": "off", "phone": "off"}})

    decision = _inspect(inspector, CUSTOMER)

    assert decision.findings == ("card", "es_dni", "iban", "in_aadhaar", "uk_nino", "us_ssn")
    assert decision.payload is not None
    still_masked = {value: kind for value, kind in TYPES.items() if kind not in {"email", "phone"}}
    assert decision.payload.value == _redacted(CUSTOMER, still_masked)


def test_every_type_off_passes_everything() -> None:
    inspector = personal_data.build({"types": dict.fromkeys(personal_data.TYPES, "off")})

    assert _inspect(inspector, CUSTOMER) == PASS


def test_the_request_phase_inspects_the_call_s_arguments() -> None:
    params = {"name": "crm.create_contact",
              "arguments": {"name": "Maria Garcia", "email": EMAIL, "phone": PHONE, "notes": "VIP since 2019"}}

    masked_decision = _inspect(MASK_ALL, params, phase="request")
    refused = _inspect(personal_data.build({"types": {"email": "refuse"}}), params, phase="request")

    assert masked_decision.payload is not None
    assert masked_decision.payload.value == {
        "name": "crm.create_contact",
        "arguments": {"name": "Maria Garcia", "email": "[REDACTED:email]", "phone": "[REDACTED:phone]",
                      "notes": "VIP since 2019"}}
    assert refused.action == "refuse"
    assert refused.reason == "email found in the call's arguments"


def test_escapes_cannot_hide_an_email() -> None:
    text = ('{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text",'
            '"text":"reply to maria.garcia\\u0040example.com"}]}}')

    decision = _inspect(MASK_ALL, text=text)

    assert decision.findings == ("email",)
    assert _text_of(decision) == "reply to [REDACTED:email]"


def test_values_next_to_json_escapes_are_masked_cleanly() -> None:
    # Lines, tabs and quotes are escapes in JSON text: a value is masked without its neighbours.
    inner = orjson.dumps({"email": EMAIL, "phone": PHONE}).decode()
    text = f"name\temail\nMaria\t{EMAIL}\n{inner}"

    decision = _inspect(MASK_ALL, _result(text))

    assert _text_of(decision) == ('name\temail\nMaria\t[REDACTED:email]\n'
                                  '{"email":"[REDACTED:email]","phone":"[REDACTED:phone]"}')


INVOICE = _result(
    "Invoice INV-2024-000871 for order ORD-2024-118842 (placed 2024-05-01, due 05/31/2024).\n"
    "| SKU | Item | Qty | Unit | Total |\n"
    "|-----------|-------------------|-----|----------|-----------|\n"
    "| 4411-2093 | Standing desk | 2 | 1,299.00 | 2,598.00 |\n"
    "| 0100-2210 | Monitor arm | 4 | 89.50 | 358.00 |\n"
    "| 7731-5520 | Cable tray 120 cm | 10 | 12.99 | 129.90 |\n"
    "Subtotal 3,085.90; VAT 20% 617.18; total 3,703.08 EUR. Paid with card ending 1111 on 2024-05-02 10:31.\n"
    "Shipped with carrier build 4.12.0-beta.3 (release 2024.05), tracking 1Z999AA10123456784.\n"
    "Ref 4111 1111 1111 1112 failed Luhn and was retried; account DE88 3704 0044 0532 0130 00 was rejected.\n"
    "Test SSN 000-12-3456 is not valid; neither is 666-45-6789 nor 123-00-4567. NINO QQ 12 34 56 C is an example.",
    {
        "invoice": "INV-2024-000871",
        "order_id": "5f3a9c2e-1b7d-4e8a-9c6f-2d4b8e1a7c30",
        "commit": "9fceb02d0ae598e95dc970b74767f19372d61af8",
        "hex_id": "7c1e9a4b2f6d8e03a1b2c3d4e5f60718",
        "amount": 3703.08,
        "amount_minor": 370308,
        "created_ms": 1714557060000,
        "snowflake": 4111111111111111,  # a bare number: an id, not a card (it could not be masked in place)
        "order_number": "1000234567891234",
        "items": [{"sku": "4411-2093", "price": "1299.00"}, {"sku": "0100-2210", "price": "89.50"}],
        "version": "v10.0.19041.1234",
        "assets": ["logo@2x.png", "hero@3x.jpg"],
        "timezone": "+05:30",
        "score_change": "+1",
        "ip": "192.168.100.200",
    },
)


def test_what_only_looks_like_personal_data_passes() -> None:
    assert _inspect(MASK_ALL, INVOICE) == PASS


@pytest.mark.parametrize("phone", [
    "+44 20 7946 0958", "+14155552671", "+1 (415) 555-2671", "+33 1 23 45 67 89", "+49-30-1234567",
    "(415) 555-2671", "415-555-2671", "415.555.2671", "1-800-555-0199",
    "020 7946 0958", "030-12345678", "01 23 45 67 89", "07700 900123",
])
def test_a_phone_number_written_as_one_is_found(phone: str) -> None:
    assert _found_in(f"Call {phone} after 9am.") == ("phone",)


@pytest.mark.parametrize("not_a_phone", [
    "4155552671",  # digits alone: as often an id or a count
    "415 555 2671",  # spaces only, no trunk 0 or +: a row of numbers
    "+1234567.89",  # an amount
    "+1 2345",  # too few digits
    "+1234 5678 9012 3456",  # too many (16)
    "(415 555-2671",  # unbalanced parenthesis
    "05-01-2024",  # a date
    "v1.415-555-2671",  # inside a version
    "115-555-2671",  # a North American area code never starts with 0 or 1 (and 1 is no trunk prefix)
    "1.0.0+20130313144700",  # a version's build metadata
])
def test_what_is_not_written_as_a_phone_number_is_not_one(not_a_phone: str) -> None:
    assert _found_in(f"Value: {not_a_phone} here.") == ()


def test_a_number_that_follows_a_phone_number_is_not_masked_with_it() -> None:
    decision = _inspect(MASK_ALL, _result("Reception: 020 7946 0958 24 hours a day"))

    assert _text_of(decision) == "Reception: [REDACTED:phone] 24 hours a day"


@pytest.mark.parametrize("card", ["4111 1111 1111 1111", "5555-5555-5555-4444", "378282246310005", "3056 930902 5904",
                                  "6011000990139424", "4111111111111111", "4111 1111 1111 1111 12/27"])
def test_a_card_number_passing_luhn_is_found(card: str) -> None:
    assert _found_in(f"card {card} exp 09/27") == ("card",)


@pytest.mark.parametrize("not_a_card", [
    "4111 1111 1111 1112",  # fails Luhn
    "1714557060000",  # 13 digits starting with 1: a timestamp in milliseconds, no card network's range
    "4111-1111 1111-1111",  # separators mixed
    "79927398713",  # passes Luhn, too short
    "411111111111111111111",  # 21 digits
])
def test_what_fails_a_card_check_is_not_a_card(not_a_card: str) -> None:
    assert _found_in(f"ref {not_a_card} ok") == ()


def test_a_card_number_is_found_in_a_string_but_not_as_a_bare_json_number() -> None:
    decision = _inspect(MASK_ALL, {"payment_id": 4111111111111111, "card": "4111111111111111"})

    assert decision.payload is not None
    assert decision.payload.text == '{"payment_id":4111111111111111,"card":"[REDACTED:card]"}'


@pytest.mark.parametrize("iban", ["DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32", "NL91ABNA0417164300",
                                  "FR14 2004 1010 0505 0001 3M02 606", "BE71 0961 2345 6769"])
def test_an_iban_passing_mod_97_is_found(iban: str) -> None:
    assert _found_in(f"pay to {iban} by Friday") == ("iban",)


@pytest.mark.parametrize("not_an_iban", [
    "DE88 3704 0044 0532 0130 00",  # wrong check digits
    "DE89 3704 0044 0532 0130",  # too short for Germany
    "GB82 WEST 1234 5698 7654 3",  # too short for Britain
])
def test_an_iban_failing_its_checks_is_not_one(not_an_iban: str) -> None:
    assert _found_in(f"pay to {not_an_iban} by Friday") == ()


def test_an_iban_ends_where_its_country_s_length_does() -> None:
    decision = _inspect(MASK_ALL, _result("Account BE71 0961 2345 6769 CODE 7 and DE89 3704 0044 0532 0130 00 EUR"))

    assert _text_of(decision) == "Account [REDACTED:iban] CODE 7 and [REDACTED:iban] EUR"


@pytest.mark.parametrize(("value", "kind", "found"), [
    ("536-22-8410", "us_ssn", True),
    ("000-12-3456", "us_ssn", False),
    ("666-12-3456", "us_ssn", False),
    ("912-34-5678", "us_ssn", False),
    ("536-00-8410", "us_ssn", False),
    ("536-22-0000", "us_ssn", False),
    ("536228410", "us_ssn", False),  # without its dashes: any nine digits
    ("AB 12 34 56 C", "uk_nino", True),
    ("JG103759A", "uk_nino", True),
    ("QQ 12 34 56 C", "uk_nino", False),  # Q is never a prefix letter (HMRC's own example)
    ("BG 12 34 56 A", "uk_nino", False),  # a prefix never issued
    ("AO 12 34 56 A", "uk_nino", False),  # O is never the second letter
    ("DA 12 34 56 A", "uk_nino", False),  # D is never the first
    ("AB 12 34 56 E", "uk_nino", False),  # suffixes are A-D
    ("12345678Z", "es_dni", True),
    ("12345678-Z", "es_dni", True),
    ("X1234567L", "es_dni", True),  # an NIE
    ("12345678A", "es_dni", False),  # the wrong letter
    ("2345 6789 0124", "in_aadhaar", True),
    ("2345-6789-0124", "in_aadhaar", True),
    ("2345 6789 0123", "in_aadhaar", False),  # fails Verhoeff
    ("1345 6789 0124", "in_aadhaar", False),  # never starts with 0 or 1
    ("234567890124", "in_aadhaar", False),  # twelve digits alone: an AWS account id as often
])
def test_national_ids_are_confirmed_by_their_rules(value: str, kind: str, found: bool) -> None:
    assert _found_in(f"id: {value}.") == ((kind,) if found else ())


@pytest.mark.parametrize(("email", "found"), [
    ("maria.garcia@example.com", True), ("ops+alerts@mail.example.co.uk", True), ("icon@2x.png", False),
    ("user@localhost", False), ("@handle", False), ("@jane.doe", False),
])
def test_an_email_address_is_a_name_at_a_domain(email: str, found: bool) -> None:
    assert _found_in(f"from {email} today") == (("email",) if found else ())


def test_checksums_agree_with_their_published_examples() -> None:
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")  # Luhn's own example
    assert verhoeff_valid("2363") and verhoeff_valid("758722") and not verhoeff_valid("2364")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")
    # Verhoeff catches every single-digit error: one check digit only completes a number.
    assert [digit for digit in "0123456789" if verhoeff_valid("23456789012" + digit)] == ["4"]


@pytest.mark.parametrize(("settings", "field", "message"), [
    ("mask", "settings", "settings must be an object"),
    ({"kinds": {}}, "settings.kinds", "unknown setting 'kinds'; the settings are: types"),
    ({"types": ["email"]}, "settings.types",
     "types must be an object of type: action (the types: email, phone, card, iban, us_ssn, uk_nino, es_dni, "
     "in_aadhaar; the actions: mask, refuse, off)"),
    ({"types": {"passport": "mask"}}, "settings.types",
     "unknown type 'passport'; the types are: email, phone, card, iban, us_ssn, uk_nino, es_dni, in_aadhaar"),
    ({"types": {"email": "block"}}, "settings.types.email", "email must be mask, refuse or off"),
])
def test_settings_check_names_the_field_and_what_it_takes(settings: Any, field: str, message: str) -> None:
    problems = personal_data.settings_check(settings)

    assert [(problem.field, problem.message) for problem in problems] == [(field, message)]


@pytest.mark.parametrize("settings", [{}, {"types": {}}, {"types": {"card": "refuse", "email": "off"}},
                                      {"types": dict(personal_data.DEFAULTS["types"])}])
def test_settings_check_accepts_what_is_right(settings: Mapping[str, Any]) -> None:
    assert personal_data.settings_check(settings) == []
