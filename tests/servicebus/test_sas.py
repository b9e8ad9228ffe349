"""SAS tokens: Microsoft's vectors (docs/protocol.md#sas-tokens), every refusal reason, round-trip properties.

Tokens for the refusal tests are minted here with hashlib/hmac, independently of
``amqplink.servicebus.sas``'s own minting.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqplink.servicebus import AzureNamedKeyCredential, AzureSasCredential
from amqplink.servicebus.sas import (
    MAX_SAS_TOKEN_CHARS,
    SasFailure,
    SasTokenError,
    audience_covers,
    generate_sas_token,
    mint_token,
    parse_sas_token,
    sign,
    verify_sas_token,
)

KEY_NAME = "RootManageSharedAccessKey"
KEY = "SAS_KEY_VALUE"
KEYS = {KEY_NAME: KEY}
URI = "sb://contoso.servicebus.windows.net/myqueue"
VECTOR = (
    "SharedAccessSignature sr=sb%3A%2F%2Fcontoso.servicebus.windows.net%2Fmyqueue"
    "&sig=n%2FhiRGr0zjuWIEfkCk5mDGrpGlnWFjbfqZbx8ZVobuk%3D&se=1700000000&skn=RootManageSharedAccessKey"
)


def independent_token(uri: str, key_name: str, key: str, se: int | str, *, encoded_sr: str | None = None) -> str:
    sr = quote_plus(uri) if encoded_sr is None else encoded_sr
    digest = hmac.new(key.encode(), f"{sr}\n{se}".encode(), hashlib.sha256).digest()
    return f"SharedAccessSignature sr={sr}&sig={quote_plus(base64.b64encode(digest).decode())}&se={se}&skn={key_name}"


def test_vector_keyval() -> None:
    assert sign("endpoint%2Fhub", "1", "keyVal") == "EGsjmHg/OKM5bYk5pU7ZpN5ExQRuT3VCwXuCftrmUZw="


def test_vector_contoso() -> None:
    assert generate_sas_token(URI, KEY_NAME, KEY, 1700000000) == VECTOR
    assert independent_token(URI, KEY_NAME, KEY, 1700000000) == VECTOR


def test_vector_verifies_before_expiry_and_claims() -> None:
    claims = verify_sas_token(VECTOR, keys=KEYS, audience=URI, now=1699999999.5)
    assert (claims.audience, claims.key_name, claims.expires_at) == (URI, KEY_NAME, 1700000000)


def test_keyval_vector_verifies_with_bare_sr() -> None:
    token = "SharedAccessSignature sr=endpoint%2Fhub&sig=EGsjmHg%2FOKM5bYk5pU7ZpN5ExQRuT3VCwXuCftrmUZw%3D&se=1&skn=k"
    assert verify_sas_token(token, keys={"k": "keyVal"}, audience="amqps://endpoint/hub/part", now=0).expires_at == 1


@pytest.mark.parametrize(
    "token",
    [
        "",
        "Bearer x",
        "SharedAccessSignature",
        "SharedAccessSignature sr=a&sig=b&se=1",
        "SharedAccessSignature sr=a&sig=b&se=1&skn=k&sr=a",
        "SharedAccessSignature sr=a&sig=b&se=1&skn=k&extra=1",
        "SharedAccessSignature sr=a&sig=b&se=soon&skn=k",
        "SharedAccessSignature sr=a&sig=b&se=-1&skn=k",
        "SharedAccessSignature sr=&sig=b&se=1&skn=k",
        "SharedAccessSignature sr=a&sig=b&se=1&skn=k&",
        "SharedAccessSignature " + "sr=a&" * MAX_SAS_TOKEN_CHARS,
    ],
)
def test_malformed(token: str) -> None:
    with pytest.raises(SasTokenError) as info:
        verify_sas_token(token, keys=KEYS, audience=URI, now=0)
    assert info.value.reason is SasFailure.MALFORMED


def test_unknown_key_name() -> None:
    token = independent_token(URI, "Other", KEY, 1700000000)
    with pytest.raises(SasTokenError) as info:
        verify_sas_token(token, keys=KEYS, audience=URI, now=0)
    assert info.value.reason is SasFailure.UNKNOWN_KEY_NAME
    assert "Other" in str(info.value)


def test_bad_signature_wrong_key_and_never_echoes_key_or_sig() -> None:
    token = independent_token(URI, KEY_NAME, "not-the-key", 1700000000)
    with pytest.raises(SasTokenError) as info:
        verify_sas_token(token, keys=KEYS, audience=URI, now=0)
    assert info.value.reason is SasFailure.BAD_SIGNATURE
    sig = parse_sas_token(token).signature
    for secret in (KEY, "not-the-key", sig, quote_plus(sig)):
        assert secret not in str(info.value)


def test_bad_signature_when_sr_reencoded() -> None:
    """The signature covers sr as transmitted: the same URI encoded differently does not verify."""
    signed = independent_token(URI, KEY_NAME, KEY, 1700000000)
    lowered = signed.replace("%3A%2F%2F", "%3a%2f%2f")
    with pytest.raises(SasTokenError) as info:
        verify_sas_token(lowered, keys=KEYS, audience=URI, now=0)
    assert info.value.reason is SasFailure.BAD_SIGNATURE


def test_expired_at_and_after_se() -> None:
    token = independent_token(URI, KEY_NAME, KEY, 1000)
    assert verify_sas_token(token, keys=KEYS, audience=URI, now=999.9).expires_at == 1000
    for now in (1000, 5000):
        with pytest.raises(SasTokenError) as info:
            verify_sas_token(token, keys=KEYS, audience=URI, now=now)
        assert info.value.reason is SasFailure.EXPIRED


@pytest.mark.parametrize(
    ("sr", "address", "covered"),
    [
        ("sb://h/q", "sb://h/q", True),
        ("sb://h/q", "sb://h/q/$management", True),
        ("sb://h/q/", "amqps://H/Q/Subscriptions/s", True),
        ("SB://H/", "amqp://h/any/thing", True),
        ("http://h/q", "sb://h/q", True),
        ("https://h/q", "sb://h/q", True),
        ("h/q", "sb://h/q", True),
        ("sb://h/q", "sb://h/queue2", False),
        ("sb://h/q", "sb://h/q2/x", False),
        ("sb://h/q/x", "sb://h/q", False),
        ("sb://h/q", "sb://g/q", False),
        ("ftp://h/q", "sb://h/q", False),
    ],
)
def test_audience_rule(sr: str, address: str, covered: bool) -> None:
    assert audience_covers(sr, address) is covered
    token = independent_token(sr, KEY_NAME, KEY, 1700000000)
    if covered:
        assert verify_sas_token(token, keys=KEYS, audience=address, now=0).audience == sr
    else:
        with pytest.raises(SasTokenError) as info:
            verify_sas_token(token, keys=KEYS, audience=address, now=0)
        assert info.value.reason is SasFailure.AUDIENCE_NOT_COVERED


def test_order_of_checks_signature_before_expiry() -> None:
    token = independent_token(URI, KEY_NAME, "wrong", 1)
    with pytest.raises(SasTokenError) as info:
        verify_sas_token(token, keys=KEYS, audience="sb://elsewhere/x", now=10)
    assert info.value.reason is SasFailure.BAD_SIGNATURE


def test_lowercase_percent_encoding_in_sig_is_accepted() -> None:
    token = VECTOR.replace("n%2FhiR", "n%2fhiR")
    assert verify_sas_token(token, keys=KEYS, audience=URI, now=0).key_name == KEY_NAME


def test_credentials_hide_secrets() -> None:
    cred = AzureNamedKeyCredential("name", "s3cret-key")
    assert "s3cret" not in repr(cred) and "s3cret" not in repr(cred.named_key)
    assert cred.named_key.name == "name" and cred.named_key.key == "s3cret-key"
    name, key = cred.named_key
    assert (name, key) == ("name", "s3cret-key")
    cred.update("n2", "k2")
    assert cred.named_key == ("n2", "k2")
    with pytest.raises(TypeError):
        AzureNamedKeyCredential("n", None)  # type: ignore[arg-type]
    sas = AzureSasCredential(VECTOR)
    assert "hiRGr0" not in repr(sas) and sas.signature == VECTOR
    with pytest.raises(ValueError):
        sas.update("")


def test_mint_token_from_each_credential() -> None:
    minted = mint_token(AzureNamedKeyCredential(KEY_NAME, KEY), URI, now=1699996400.7, ttl=3600)
    assert minted == (VECTOR, 1700000000)
    assert "hiRGr0" not in repr(minted)
    passed = mint_token(AzureSasCredential(VECTOR), "sb://other/x", now=0)
    assert passed == (VECTOR, 1700000000)
    opaque = mint_token(AzureSasCredential("opaque-token"), URI, now=100, ttl=60)
    assert opaque == ("opaque-token", 160)


_uris = st.builds(
    lambda host, path: f"sb://{host}/{path}",
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True),
    st.text(min_size=0, max_size=30),
)
_names = st.text(min_size=1, max_size=20)
_keys = st.text(min_size=1, max_size=60)


@given(_uris, _names, _keys, st.integers(min_value=1, max_value=2**40))
def test_mint_then_verify_round_trips(uri: str, name: str, key: str, se: int) -> None:
    token = generate_sas_token(uri, name, key, se)
    claims = verify_sas_token(token, keys={name: key}, audience=uri, now=se - 1)
    assert (claims.audience, claims.key_name, claims.expires_at) == (uri, name, se)
    assert token == independent_token(uri, quote_plus(name), key, se)


@given(_uris, _keys, st.data())
def test_random_mutations_never_verify(uri: str, key: str, data: st.DataObject) -> None:
    token = generate_sas_token(uri, KEY_NAME, key, 2**31)
    original = parse_sas_token(token)
    index = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    replacement = data.draw(st.characters(blacklist_categories=("Cs",)).filter(lambda c: c != token[index]))
    mode = data.draw(st.sampled_from(["replace", "insert", "delete"]))
    if mode == "replace":
        mutated = token[:index] + replacement + token[index + 1 :]
    elif mode == "insert":
        mutated = token[:index] + replacement + token[index:]
    else:
        mutated = token[:index] + token[index + 1 :]
    try:
        verify_sas_token(mutated, keys={KEY_NAME: key}, audience=uri, now=0)
    except SasTokenError:
        return
    # Only a mutation that changes no signed or decoded field may still verify (e.g. %2F -> %2f in sig).
    assert parse_sas_token(mutated) == original


@given(st.text(max_size=300))
def test_fuzz_only_sas_token_error(token: str) -> None:
    with pytest.raises(SasTokenError):
        verify_sas_token(token, keys=KEYS, audience=URI, now=0)
