"""The Standard Webhooks verification recipe of docs/wire-contract.md, Python's standard library only.

Reads a JSON list of {"secret", "headers", "body"} on stdin and prints a JSON list of "ok" or the reason
each is refused: another language's HMAC, base64 and constant-time comparison checking our deliveries.
A case with "publicKey" (whpk_...) instead of "secret" checks the asymmetric `v1a,` signature (ed25519),
with the `cryptography` package.
"""
import base64
import hashlib
import hmac
import json
import sys
import time

TOLERANCE_SECONDS = 5 * 60


def verify(secret: str, headers: dict, body: bytes) -> str:
    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return "timestamp outside the tolerance"
    # A whsec_ secret is the base64 of the key; any other secret is the key's UTF-8 bytes.
    key = base64.b64decode(secret[len("whsec_"):]) if secret.startswith("whsec_") else secret.encode()
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    for entry in headers["webhook-signature"].split(" "):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return "ok"
    return "no matching signature"


def verify_asymmetric(public_key: str, headers: dict, body: bytes) -> str:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return "timestamp outside the tolerance"
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key[len("whpk_"):]))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    for entry in headers["webhook-signature"].split(" "):
        version, _, signature = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature), signed)
            return "ok"
        except InvalidSignature:
            pass
    return "no matching signature"


cases = json.load(sys.stdin)
print(
    json.dumps(
        [
            verify_asymmetric(c["publicKey"], c["headers"], c["body"].encode())
            if "publicKey" in c
            else verify(c["secret"], c["headers"], c["body"].encode())
            for c in cases
        ]
    )
)
